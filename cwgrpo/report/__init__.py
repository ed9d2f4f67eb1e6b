"""Reporting: Table 1, the figures, the reported-vs-ours comparison and the claims, built only from result files.

Split by job:

- loading: :mod:`cwgrpo.report.load` reads evaluation summaries, run folders and the paper's reported
  numbers into tidy pandas frames, grouped by the ``tags`` stored in the files (paths are never parsed);
  :mod:`cwgrpo.report.provenance` states who produced the inputs;
- options and names: :mod:`cwgrpo.report.options` (:class:`~cwgrpo.report.options.ReportConfig`, the
  paper's benchmark and size names, display names and mirrors);
- statistics: :mod:`cwgrpo.stats` (outside this package because ``cwgrpo evaluate`` uses it too) is the
  only module that computes intervals;
- claims: :mod:`cwgrpo.report.claim_checks` measures the four claims, :mod:`cwgrpo.report.claims` is
  ``cwgrpo claims`` (verdicts in JSON and Markdown);
- rendering: :mod:`cwgrpo.report.numbers` (how every page writes a number),
  :mod:`cwgrpo.report.render` (Table 1 as Markdown, LaTeX and PDF),
  :mod:`cwgrpo.report.style` (the one plotting style), :mod:`cwgrpo.report.sensitivity` (strict vs
  paper metric);
- commands: :mod:`cwgrpo.report.table` is ``cwgrpo table``, :mod:`cwgrpo.report.figures` is
  ``cwgrpo figure``, :mod:`cwgrpo.report.claims` is ``cwgrpo claims``, :mod:`cwgrpo.report.study` is
  ``cwgrpo study`` (the pre-registered study's analysis; its Markdown and figures in
  :mod:`cwgrpo.report.study_render`).

Its libraries (pandas, scipy, matplotlib, seaborn) are the ``workflow`` extra's, not the core install's:
the CLI checks for them before a report command starts (:func:`cwgrpo.extras.require_extra`).
"""
