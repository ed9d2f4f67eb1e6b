"""The workflow's parse-time logic: each job's options, the preset's checks, resources and GPU layout.

In that order: ``options`` (and the file per job that carries them); ``preset_files``, ``preset_rules``,
``command_options``, ``profile``; ``resources``. All are functions of a preset's config dict;
``workflow/rules/common.smk`` holds the paths and calls these, the rules stay thin. No torch, no TRL:
Snakemake imports this at every start (the training options are judged by TRL in the jobs' interpreter).
"""
