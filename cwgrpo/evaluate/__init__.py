"""Evaluation stage: ``cwgrpo evaluate`` and what it writes of one benchmark.

Evaluation stage: ``cwgrpo evaluate`` (``run``: sample, grade, summarise) and what it writes of one
benchmark (``summary``)."""
