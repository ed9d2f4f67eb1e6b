"""A reward with spread on a random tiny model (whose accuracy is always 0): the share of digits in a
completion. It gives the groups nonzero advantages, so the weights and the optimiser state change at
every step, and a resume that restored either wrongly shows in the logs."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from cwgrpo.grading.rewards import completion_text


def digits(completions: Sequence, **kwargs: Any) -> list[float]:
    texts = [completion_text(c) for c in completions]
    return [sum(ch.isdigit() for ch in text) / max(len(text), 1) for text in texts]
