"""Reporting: Table 1, the figures and the reported-vs-ours comparison, built only from result files.

- :mod:`cwgrpo.report.results` loads evaluation summaries and run folders into tidy pandas frames,
  grouped by the ``tags`` stored in the files (paths are never parsed), and holds the shared report
  options, the seed statistics and the paper's reported numbers.
- :mod:`cwgrpo.report.style` is the one plotting style: a fixed colour per method label, a provenance
  footer, and saving as PDF + PNG.
- :mod:`cwgrpo.report.table` is ``cwgrpo table``; :mod:`cwgrpo.report.figures` is ``cwgrpo figure``.

The claims (``cwgrpo claims``) live in :mod:`cwgrpo.claims` and use the same loaders.
"""
