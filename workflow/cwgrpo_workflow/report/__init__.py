"""Reporting: Table 1, figures, claims, the study and the sample browser, built only from result files.

One module per command (``table``, ``figures``, ``claims``, ``study``, ``samples``) and what they share:
``load`` (result files into frames, grouped by their ``tags``), ``options``, ``provenance`` and ``style``.
Its libraries are the ``workflow`` extra's, checked before a report command starts.
"""
