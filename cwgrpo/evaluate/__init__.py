"""Evaluation stage: ``cwgrpo evaluate`` and what it writes of one benchmark.

In that order: ``options`` (the one validator, also run at parse time), ``run`` (sample, grade,
summarise), ``summary``."""
