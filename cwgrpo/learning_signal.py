"""Whether a GRPO run can learn: a stretch of steps with no reward spread, or every completion clipped.

GRPO's advantage of a completion is its reward minus its group's mean: when every group's rewards are
equal (TRL logs ``frac_reward_zero_std`` = 1) every advantage is 0 and the policy does not move; when every
completion hits the completion budget (``completions/clipped_ratio`` = 1) no answer is ever finished. TRL
averages each metric over the steps of one log line, so a logged value of 1 means it held at every one of
them. Both make a run that trains nothing and is marked complete; :func:`findings` names such a stretch
from the logged records (pure), :class:`SignalOptions` holds its length, and :func:`monitor` is the
callback that warns once per cause while the run trains. ``cwgrpo train`` records the findings of the
whole log in ``run.json`` (``learning_signal``), where the report reads them.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

DEFAULT_STEPS = 20
ZERO_SPREAD, ALL_CLIPPED = "zero_reward_spread", "all_clipped"
_KEYS = {ZERO_SPREAD: "frac_reward_zero_std", ALL_CLIPPED: "completions/clipped_ratio"}
_SHOWN = ("reward", "reward_std", "frac_reward_zero_std", "completions/clipped_ratio", "grad_norm")


@dataclass
class SignalOptions:
    """The stretch after which a run without learning signal is reported (a ``CWGRPOConfig`` field)."""

    cw_no_signal_steps: int = field(
        default=DEFAULT_STEPS,
        metadata={
            "help": "Warn (and record in run.json) once every group had zero reward spread, or every completion "
            "was clipped at max_completion_length, for this many consecutive optimiser steps (a shorter run: "
            "all of its steps); 0 switches the check off."
        },
    )

    def check_signal_options(self) -> None:
        check_no_signal_steps(self.cw_no_signal_steps)


def check_no_signal_steps(steps: Any) -> None:
    """Raise ``ValueError`` (a ``ConfigError`` where options are parsed) on a stretch that is not an integer
    >= 0: checked where the options are parsed too, so a bad value stops no job after its model loaded."""
    if isinstance(steps, bool) or not isinstance(steps, int) or steps < 0:
        raise ValueError(f"cw_no_signal_steps={steps!r}: must be an integer >= 0 (0: no check)")


def stretch(no_signal_steps: int, max_steps: int | None) -> int:
    """The steps a stretch must cover: ``no_signal_steps``, or the whole run if it is shorter (0: off)."""
    if no_signal_steps <= 0:
        return 0
    return min(no_signal_steps, max_steps) if max_steps and max_steps > 0 else no_signal_steps


def _at_one(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and value >= 1 - 1e-9


def _mean(records: list[Mapping[str, Any]], key: str) -> float | None:
    values = [r[key] for r in records if isinstance(r.get(key), (int, float))]
    return round(sum(values) / len(values), 6) if values else None


def findings(
    records: Iterable[Mapping[str, Any]], steps: int, completion_budget: int | None = None
) -> list[dict[str, Any]]:
    """The first stretch of each cause that covers at least ``steps`` optimiser steps (0: none looked for).

    ``records`` are training log lines (``step`` plus TRL's metrics), in any order; a line covers the steps
    since the previous line. A line without the metric (an evaluation line, a NaN logged as null) breaks
    a stretch. Each finding: its cause, its first and last step, and the means of the shown metrics over
    it (``message`` says the same in words).
    """
    lines = sorted((r for r in records if isinstance(r.get("step"), int)), key=lambda r: r["step"])
    out = []
    for cause, key in _KEYS.items():
        start, held = 0, []
        for r in lines:
            if not _at_one(r.get(key)):
                start, held = r["step"], []
                continue
            held.append(r)
            if steps > 0 and r["step"] - start >= steps:
                found = {"cause": cause, "from_step": start + 1, "to_step": r["step"]}
                found["means"] = {k: m for k in _SHOWN if (m := _mean(held, k)) is not None}
                out.append({**found, "message": message(found, completion_budget)})
                break
    return out


def findings_of_log(metrics: Path, trl_kwargs: Mapping[str, Any]) -> list[dict[str, Any]]:
    """:func:`findings` of a run's whole metrics log (a resumed run's too) under its TRL options."""
    from cwgrpo.io import read_jsonl

    steps = stretch(trl_kwargs.get("cw_no_signal_steps", DEFAULT_STEPS), trl_kwargs.get("max_steps"))
    return findings(read_jsonl(metrics), steps, trl_kwargs.get("max_completion_length"))


def message(found: Mapping[str, Any], completion_budget: int | None = None) -> str:
    """The warning, with the numbers, for one finding of :func:`findings`."""
    first, last = found["from_step"], found["to_step"]
    numbers = ", ".join(f"{k} {v:g}" for k, v in found["means"].items())
    if found["cause"] == ZERO_SPREAD:
        what = "every group had zero reward spread (all completions of a prompt scored the same)"
        why = (
            "every advantage is 0 and the policy does not change; check the reward functions against the "
            "data and the prompts (a reward that is constant, or 0 for every completion)"
        )
    else:
        budget = "" if completion_budget is None else f"={completion_budget}"
        what = f"every completion was clipped at the completion budget (max_completion_length{budget})"
        why = "no completion ends with an answer; raise max_completion_length or shorten the prompt's task"
    return f"no learning signal: {what} at steps {first}-{last} ({numbers}): {why}"


def monitor(no_signal_steps: int):
    """A ``TrainerCallback`` that logs each finding of the run's log lines once, as a warning."""
    import logging

    from transformers import TrainerCallback

    log = logging.getLogger("cwgrpo.train")

    class LearningSignalMonitor(TrainerCallback):
        def __init__(self) -> None:
            self.records: list[dict[str, Any]] = []
            self.warned: set[str] = set()

        def on_log(self, args, state, control, logs=None, **kwargs):
            if not state.is_world_process_zero or not logs or "train_runtime" in logs:
                return
            self.records.append({"step": state.global_step, **logs})
            steps = stretch(no_signal_steps, state.max_steps)
            for found in findings(self.records, steps, getattr(args, "max_completion_length", None)):
                if found["cause"] not in self.warned:
                    self.warned.add(found["cause"])
                    log.warning(found["message"])

    return LearningSignalMonitor()
