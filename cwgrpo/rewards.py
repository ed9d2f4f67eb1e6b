"""TRL reward functions: ``f(completions, **kwargs) -> list[float | None]``.

``completions`` are strings, or conversations ``[{"role": "assistant", "content": ...}]`` when the
prompts are chat messages; the gold answer arrives as the dataset column ``answer`` in ``kwargs``
(TRL passes every dataset column except ``prompt``). ``None`` means "no reward for this sample":
TRL turns it into NaN and leaves it out of the means.

- ``accuracy``: 1.0 if the completion's final answer is equivalent to the gold answer (the one grader,
  ``cwgrpo.scoring``), else 0.0; None when the gold answer cannot be parsed (unscorable).
- ``format``: 1.0 if the completion contains exactly one ``"\\n</think>\\n"``, else 0.0.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from cwgrpo.configs import ConfigError
from cwgrpo.scoring import grade_detailed

RewardFunc = Callable[..., list[float | None]]

THINK_CLOSE = "\n</think>\n"


def completion_text(completion: str | Sequence[dict[str, Any]]) -> str:
    """The text of a completion: the string itself, or the content of a conversation's last message."""
    if isinstance(completion, str):
        return completion
    if not completion:
        return ""
    content = completion[-1].get("content", "")
    if isinstance(content, list):  # content blocks: [{"type": "text", "text": ...}, ...]
        return "".join(part.get("text", "") for part in content if isinstance(part, dict))
    return str(content or "")


def accuracy_reward(
    completions: Sequence, answer: Sequence[str] | None = None, **kwargs: Any
) -> list[float | None]:
    """1.0 / 0.0 by equivalence with the gold ``answer`` column; None where the gold is unscorable."""
    if answer is None:
        raise ValueError(f"accuracy reward needs the dataset column 'answer'; got columns {sorted(kwargs)}")
    if len(answer) != len(completions):
        raise ValueError(f"accuracy reward: {len(completions)} completions but {len(answer)} answers")
    rewards: list[float | None] = []
    for completion, gold in zip(completions, answer, strict=True):
        result = grade_detailed(completion_text(completion), str(gold))
        rewards.append(None if result.unscorable else float(result.correct))
    return rewards


def format_reward(completions: Sequence, **kwargs: Any) -> list[float | None]:
    """1.0 iff the completion contains exactly one ``"\\n</think>\\n"``."""
    return [float(completion_text(c).count(THINK_CLOSE) == 1) for c in completions]


REWARDS: dict[str, RewardFunc] = {"accuracy": accuracy_reward, "format": format_reward}


def get_reward(name: str) -> RewardFunc:
    """Registry lookup; an unknown name is an error listing the known ones."""
    try:
        return REWARDS[name]
    except KeyError:
        raise ConfigError(f"unknown reward {name!r}; known: {sorted(REWARDS)}") from None
