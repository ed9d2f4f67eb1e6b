"""The workflow's own code, beside the rules that call it.

The parse-time logic of the Snakemake rules (``dag``); Table 1, the figures, the claims, the studies' analysis and
the sample browser (``report``); ``plan`` and ``doctor``.

It sits beside the rules that call it and builds on the library (``cwgrpo``), which imports nothing of it: the
``cwgrpo`` command finds this package's commands through the ``cwgrpo.commands`` entry point
(:mod:`cwgrpo_workflow.commands`).
"""
