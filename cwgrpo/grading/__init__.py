"""Grading: the one grader, the training rewards, ``cwgrpo grade`` and the paper's lighteval metric.

Grading: the one grader (``scoring``, run in pools bounded by ``time_budget`` and ``lifetime``), the
training rewards built on it (``rewards``, checked early by ``reward_guard``), the ``cwgrpo grade`` command
(``grade``) and the paper's lighteval metric in its own environment (``paper_metric``)."""
