"""The third study's accuracy: the package's verdict, and the extracted answer is a plain number.

The package's grader (math-verify) evaluates an extracted *expression*: SmolLM2 often restates the problem
("The answer is 75-51.", "51-11 is a classic example ..."), and ``75-51`` is graded equal to the gold 24.
On the base model that is about half of the answers graded correct at level 1 (measured on 64 ``syn_dev``
problems: 4 of 8 greedy, 5 of 12 sampled), and GRPO would be rewarded for echoing the problem. Here an
answer counts only if the package grades it correct *and* what it extracted is a number without an
operator. Used as the pilot's training reward (``number_reward:number_accuracy``; this folder on
PYTHONPATH) and, on evaluation rows, as its held-out accuracy (:func:`row_correct`).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from cwgrpo.grading.rewards import completion_text
from cwgrpo.grading.scoring import grade_detailed

PLAIN_NUMBER = re.compile(r"^\s*[-+]?\d+(?:\.\d*)?\s*\.?\s*$")


def plain_number(extracted: str | None) -> bool:
    """The extracted answer is one number (``22``, ``22.``, ``-3``), not an expression like ``75-51``."""
    return extracted is not None and PLAIN_NUMBER.match(extracted) is not None


def number_accuracy(
    completions: Sequence, answer: Sequence[str] | None = None, **kwargs: Any
) -> list[float | None]:
    """1.0 where the package grades the completion correct and its extracted answer is a plain number."""
    if answer is None:
        raise ValueError(f"number_accuracy needs the dataset column 'answer'; got columns {sorted(kwargs)}")
    rewards: list[float | None] = []
    for completion, gold in zip(completions, answer, strict=True):
        result = grade_detailed(completion_text(completion), str(gold))
        rewards.append(
            None if result.unscorable else float(result.correct and plain_number(result.extracted))
        )
    return rewards


def row_correct(row: Mapping[str, Any]) -> float:
    """The same rule on one row of ``cwgrpo evaluate``'s per-sample JSONL."""
    return float(bool(row["correct"]) and plain_number(row.get("extracted")))
