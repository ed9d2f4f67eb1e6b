"""The workflow's parse-time logic (each job's options, the preset's checks, resources and GPU layout), as
functions of a preset's config dict that ``workflow/rules/common.smk`` calls. No torch, no TRL: Snakemake
imports this at every start.
"""
