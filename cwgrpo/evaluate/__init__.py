"""Evaluation stage: ``cwgrpo evaluate`` (``run``: sample, grade, summarise) and what it writes of one
benchmark (``summary``)."""
