"""Evaluation stage: ``cwgrpo evaluate`` and what it writes of one benchmark."""
