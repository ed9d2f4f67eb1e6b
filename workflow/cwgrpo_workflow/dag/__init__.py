"""The workflow's parse-time logic, as functions of a preset's config dict that ``common.smk`` calls.

Each job's options, the preset's checks, resources and GPU layout. No torch, no TRL: Snakemake imports this
at every start.
"""
