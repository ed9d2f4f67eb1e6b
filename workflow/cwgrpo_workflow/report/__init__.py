"""Reporting: Table 1, figures, claims, the study and the sample browser, built only from result files.

One module family per command, each named for it: ``table*`` (``cwgrpo table``), ``figures`` (``cwgrpo
figure``), ``claim*`` + ``cov_quantiles`` (``cwgrpo claims``), ``study*`` (``cwgrpo study``), ``samples*``
(``cwgrpo samples``). What they share: :mod:`cwgrpo_workflow.report.load` (result files into pandas frames, grouped
by the ``tags`` stored in them, never by their paths), :mod:`cwgrpo_workflow.report.options` (options, display
names, how a number is written), :mod:`cwgrpo_workflow.report.provenance` (who produced the inputs) and
:mod:`cwgrpo_workflow.report.style` (every figure's look). ``readme_tables`` and ``study_pair`` rewrite the
generated tables of two docs pages (``python -m``). Intervals are :mod:`cwgrpo.stats`'s (outside this
package because ``cwgrpo evaluate`` uses it too).

Its libraries (pandas, scipy, matplotlib, seaborn) are the ``workflow`` extra's, not the core install's:
the CLI checks for them before a report command starts (:func:`cwgrpo.extras.require_extra`).
"""
