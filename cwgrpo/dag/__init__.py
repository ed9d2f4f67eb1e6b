"""The workflow's parse-time logic: each job's options, the preset's checks, resources and GPU layout.

Functions of a preset's config dict: each job's merged options and the file that carries them
(``options``), the parse-time checks (``preset_files``, ``preset_rules``, ``command_options``, ``profile``)
and the jobs' resources and GPU layouts (``resources``). ``workflow/rules/common.smk`` holds the paths and calls these; the rules
stay thin. No torch, no TRL: Snakemake imports this at every start.
"""
