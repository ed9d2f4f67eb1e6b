"""Grading: the one grader, the training rewards, ``cwgrpo grade`` and the paper's lighteval metric.

In that order: ``scoring`` (in pools bounded by ``time_budget`` and ``lifetime``), ``rewards`` (checked
early by ``reward_guard``), ``grade``, and ``paper_metric`` (lighteval, in its own environment)."""
