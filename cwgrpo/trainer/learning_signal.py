"""Whether a GRPO run can learn: stretches with no reward spread, no gradient, or every completion clipped.

Equal rewards in every group (``frac_reward_zero_std`` = 1) or a ``grad_norm`` of 0 mean a run that
trains nothing yet completes: *no learning signal*. Every completion clipped (``completions/clipped_ratio``
= 1) only earns a notice, since differing rewards still give a gradient. :func:`findings` names such
stretches in the log, :func:`monitor` warns once per cause while training, and ``run.json`` records them.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

DEFAULT_STEPS = 20
ZERO_SPREAD, ZERO_GRADIENT, ALL_CLIPPED = "zero_reward_spread", "zero_gradient", "all_clipped"
NO_SIGNAL = (ZERO_SPREAD, ZERO_GRADIENT)  # the causes after which a run cannot learn
_SHOWN = ("reward", "reward_std", "frac_reward_zero_std", "completions/clipped_ratio", "grad_norm")


@dataclass
class SignalOptions:
    """The stretch after which a run without learning signal is reported (a ``CWGRPOConfig`` field)."""

    cw_no_signal_steps: int = field(
        default=DEFAULT_STEPS,
        metadata={
            "help": "Warn (and record in run.json) once every group had zero reward spread, the gradient "
            "norm was 0, or every completion was clipped at max_completion_length (a notice: the run may "
            "still learn), for this many consecutive optimiser steps (a shorter run: all of its steps); 0 "
            "switches the check off."
        },
    )


def check_no_signal_steps(steps: Any) -> None:
    """Raise ``ValueError`` on a stretch that is not an integer >= 0."""
    if isinstance(steps, bool) or not isinstance(steps, int) or steps < 0:
        raise ValueError(f"cw_no_signal_steps={steps!r}: must be an integer >= 0 (0: no check)")


def stretch(no_signal_steps: int, max_steps: int | None) -> int:
    """The steps a stretch must cover: ``no_signal_steps``, or the whole run if it is shorter (0: off)."""
    if no_signal_steps <= 0:
        return 0
    return min(no_signal_steps, max_steps) if max_steps and max_steps > 0 else no_signal_steps


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


_HOLDS: dict[str, tuple[str, Callable[[float], bool]]] = {  # cause -> (metric, when it holds)
    ZERO_SPREAD: ("frac_reward_zero_std", lambda v: v >= 1 - 1e-9),
    ZERO_GRADIENT: ("grad_norm", lambda v: v == 0),
    ALL_CLIPPED: ("completions/clipped_ratio", lambda v: v >= 1 - 1e-9),
}


def no_signal(found: Mapping[str, Any]) -> bool:
    """Whether a finding means the run cannot learn (zero reward spread or zero gradient)."""
    return found.get("cause") in NO_SIGNAL


def _mean(records: list[Mapping[str, Any]], key: str) -> float | None:
    values = [r[key] for r in records if isinstance(r.get(key), (int, float))]
    return round(sum(values) / len(values), 6) if values else None


def findings(
    records: Iterable[Mapping[str, Any]], steps: int, completion_budget: int | None = None
) -> list[dict[str, Any]]:
    """The first stretch of each cause covering at least ``steps`` optimiser steps (0: none looked for);
    zero gradient is looked for only without zero reward spread, which explains it."""
    lines = sorted((r for r in records if isinstance(r.get("step"), int)), key=lambda r: r["step"])
    out: list[dict[str, Any]] = []
    for cause, (key, holds) in _HOLDS.items():
        if cause == ZERO_GRADIENT and any(f["cause"] == ZERO_SPREAD for f in out):
            continue
        start, held = 0, []
        for r in lines:
            if not (_number(r.get(key)) and holds(r[key])):
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
    if found["cause"] == ALL_CLIPPED:
        budget = "" if completion_budget is None else f"={completion_budget}"
        return (
            f"every completion was clipped at the completion budget (max_completion_length{budget}) at steps "
            f"{first}-{last} ({numbers}): no completion ends with an answer, so where rewards still differ "
            "the run learns from unfinished ones; raise max_completion_length or shorten the prompt's task"
        )
    if found["cause"] == ZERO_SPREAD:
        what = "every group had zero reward spread (all completions of a prompt scored the same)"
        why = (
            "every advantage is 0 and the policy does not change; check the reward functions against the "
            "data and the prompts (a reward that is constant, or 0 for every completion)"
        )
    else:
        what = "the gradient norm was 0"
        why = "the policy does not change; check the loss options (a zero learning signal or a masked loss)"
    return f"no learning signal: {what} at steps {first}-{last} ({numbers}): {why}"


def describe(found: Mapping[str, Any]) -> str:
    """One finding as run.json records it, in a few words: ``zero reward spread, steps 1-20``."""
    return f"{str(found['cause']).replace('_', ' ')}, steps {found['from_step']}-{found['to_step']}"


def runs_without_signal(recorded: Mapping[str, Sequence[Mapping[str, Any]]]) -> list[str]:
    """``RUN: CAUSE, steps A-B`` for each run that recorded no learning signal, for the end-of-run block."""
    return [
        f"{run}: " + "; ".join(describe(f) for f in found if no_signal(f))
        for run, found in recorded.items()
        if any(no_signal(f) for f in found)
    ]


def monitor(no_signal_steps: int):
    """A ``TrainerCallback`` that logs each finding of the run's log lines once, as a warning."""
    import logging

    from transformers import TrainerCallback

    log = logging.getLogger("cwgrpo.train.run")

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


def read_recorded(run_dirs: Iterable[str | Path]) -> dict[str, list[dict[str, Any]]]:
    """Each run folder -> its run.json's ``learning_signal``; one without run.json is left out."""
    import json

    out = {}
    for run in run_dirs:
        path = Path(run) / "run.json"
        if path.is_file():
            recorded = json.loads(path.read_text(encoding="utf-8")).get("learning_signal")
            out[str(run)] = [f for f in recorded or [] if isinstance(f, dict)]
    return out
