"""TRL reward functions: ``f(completions, **kwargs) -> list[float | None]``.

``completions`` are strings, or conversations ``[{"role": "assistant", "content": ...}]`` when the
prompts are chat messages; the gold answer arrives as the dataset column ``answer`` in ``kwargs``
(TRL passes every dataset column except ``prompt``). ``None`` means "no reward for this sample":
TRL turns it into NaN and leaves it out of the means.

- ``accuracy``: 1.0 if the completion's final answer is equivalent to the gold answer (the one grader,
  ``cwgrpo.grading.scoring``), else 0.0; None when the gold answer cannot be parsed (unscorable).
- ``number_accuracy``: ``accuracy`` where the extracted answer is also a plain number (``22``, ``-3``,
  ``4.5``): an echoed expression such as ``75-51`` scores 0 (``cwgrpo.grading.scoring.answer_in_form``).
- ``accuracy_released``: the released run's accuracy reward (``src/open_r1/rewards.py`` of the authors'
  repository, ``accuracy_reward``), for the paper preset: the gold is parsed from the worked ``solution``
  column (math-verify's default extraction, first match), the prediction from the *whole* completion with
  LaTeX extraction only (boxed first, no unanchored fallback, the released normalisation), and an
  unparseable gold gives None. It differs from ``accuracy`` where ours reads the gold ``answer`` column,
  only the text after ``</think>``, or an unanchored expression (``tests/unit/test_rewards.py`` has the
  cases). Deviations: math-verify 0.9.0 here, 0.5.2 in the released run; its 5-second limits count CPU
  time here, wall-clock time there (the same reward on an idle and a busy machine).
- ``format``: 1.0 if the completion contains exactly one ``"\\n</think>\\n"``, else 0.0.
"""

from __future__ import annotations

import functools
import logging
import threading
from collections.abc import Callable, Sequence
from typing import Any

from cwgrpo.configs import ConfigError
from cwgrpo.grading.scoring import answer_in_form, grade_detailed, in_helper_process, math_verify_once
from cwgrpo.grading.time_budget import TimeBudget

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
    return _graded("accuracy", "any", completions, answer, kwargs)


def number_accuracy_reward(
    completions: Sequence, answer: Sequence[str] | None = None, **kwargs: Any
) -> list[float | None]:
    """``accuracy``, and the extracted answer is a plain number; None where the gold is unscorable."""
    return _graded("number_accuracy", "number", completions, answer, kwargs)


def _graded(
    name: str, answer_form: str, completions: Sequence, answer: Sequence[str] | None, kwargs: dict
) -> list[float | None]:
    if answer is None:
        raise ValueError(f"{name} reward needs the dataset column 'answer'; got columns {sorted(kwargs)}")
    if len(answer) != len(completions):
        raise ValueError(f"{name} reward: {len(completions)} completions but {len(answer)} answers")
    rewards: list[float | None] = []
    for completion, gold in zip(completions, answer, strict=True):
        result = answer_in_form(grade_detailed(completion_text(completion), str(gold)), answer_form)
        rewards.append(None if result.unscorable else float(result.correct))
    return rewards


@functools.cache
def _released_configs() -> tuple[Any, Any]:
    """math-verify and the released reward's prediction extraction (imported once, on first use)."""
    from latex2sympy2_extended import NormalizationConfig

    math_verify, _, _ = math_verify_once()

    # latex2sympy2_extended 1.x logs a deprecation line for `equations=True` at every parse; the released
    # configuration sets it, so that one line would flood training logs.
    logging.getLogger("latex2sympy2_extended.math_normalization").addFilter(
        lambda record: not record.getMessage().startswith("equations=True in NormalizationConfig")
    )
    prediction = [
        math_verify.LatexExtractionConfig(
            normalization_config=NormalizationConfig(
                nits=False,
                malformed_operators=False,
                basic_latex=True,
                equations=True,
                boxed="all",
                units=True,
            ),
            boxed_match_priority=0,  # boxed first
            try_extract_without_anchor=False,
        )
    ]
    return math_verify, prediction


RELEASED_LIMIT_S = 5.0  # math-verify's own limit per parse and comparison in the released run


def _within_released_limit(timed_out: Any, func: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Any:
    """``func(*args, **kwargs)`` within the released limit's seconds of CPU time, or ``timed_out`` (what
    math-verify returns when its limit fires): math-verify counts wall-clock seconds, so a busy machine
    would change the reward. Main thread only (``released_accuracy`` sees to it)."""
    out = timed_out
    with TimeBudget(RELEASED_LIMIT_S, "cpu") as budget:
        out = func(*args, **kwargs)
    return timed_out if budget.expired else out


def released_accuracy(completion: str, solution: str) -> float | None:
    """The released accuracy reward of one completion: 1.0/0.0, or None when the gold cannot be parsed.

    Step by step as released: gold ``parse(solution, extraction_mode="first_match")`` with math-verify's
    default extraction (LaTeX, then expressions); if nothing parses, None. Prediction ``parse`` of the whole
    completion with the LaTeX-only configuration above, first match; ``verify(gold, prediction)``, where an
    exception inside ``verify`` gives None. math-verify's limit of 5 s bounds each parse and the comparison,
    counted in CPU time (one limit for the whole comparison: math-verify has one per pair compared).
    """
    if threading.current_thread() is not threading.main_thread():  # budgets need a main thread's signals
        return in_helper_process(released_accuracy, completion, solution)
    mv, prediction = _released_configs()
    gold = _within_released_limit([], mv.parse, solution, extraction_mode="first_match", parsing_timeout=None)
    if not gold:
        return None
    answer = _within_released_limit(
        [],
        mv.parse,
        completion,
        extraction_config=prediction,
        extraction_mode="first_match",
        parsing_timeout=None,
    )
    try:
        return float(_within_released_limit(False, mv.verify, gold, answer, timeout_seconds=None))
    except Exception:  # the released reward catches everything verify raises and skips the sample
        return None


def released_accuracy_reward(
    completions: Sequence, solution: Sequence[str] | None = None, **kwargs: Any
) -> list[float | None]:
    """``accuracy_released`` for a batch: the gold comes from the dataset column ``solution``."""
    if solution is None:
        raise ValueError(
            "accuracy_released needs the dataset column 'solution' (a worked solution, as in knoveleng/open-rs); "
            f"got columns {sorted(kwargs)}"
        )
    if len(solution) != len(completions):
        raise ValueError(f"accuracy_released: {len(completions)} completions but {len(solution)} solutions")
    return [released_accuracy(completion_text(c), str(s)) for c, s in zip(completions, solution, strict=True)]


def format_reward(completions: Sequence, **kwargs: Any) -> list[float | None]:
    """1.0 iff the completion contains exactly one ``"\\n</think>\\n"``."""
    return [float(completion_text(c).count(THINK_CLOSE) == 1) for c in completions]


REWARDS: dict[str, RewardFunc] = {
    "accuracy": accuracy_reward,
    "accuracy_released": released_accuracy_reward,
    "format": format_reward,
    "number_accuracy": number_accuracy_reward,
}


def get_reward(name: str) -> RewardFunc:
    """A registered reward by name, or a user's own by dotted path ``package.module:function``.

    An unknown name lists the known ones; a path that does not import, or a function TRL could not call
    as a reward (``f(completions, **kwargs)``: TRL passes prompts, completions and every dataset column by
    keyword), is a ``ConfigError`` naming the path, before any model or data is loaded.
    """
    check_reward_name(name)
    return _import_reward(name) if ":" in name else REWARDS[name]


def check_reward_name(name: str) -> None:
    """A registered name or a well-formed ``package.module:function``, checked without importing anything
    (the workflow's parse imports a user's module only where the jobs would: ``cwgrpo_workflow.dag.user_rewards``)."""
    if ":" in name:
        module_name, _, attr = name.partition(":")
        if not module_name or not attr:
            raise ConfigError(f"reward {name!r}: expected package.module:function")
    elif name not in REWARDS:
        raise ConfigError(
            f"unknown reward {name!r}; known: {sorted(REWARDS)}, or a dotted path package.module:function"
        )


def _import_reward(path: str) -> RewardFunc:
    import importlib
    import inspect

    module_name, _, attr = path.partition(":")
    try:
        module = importlib.import_module(module_name)
    except Exception as err:  # ImportError, or the module's own error at import time
        raise ConfigError(
            f"reward {path!r}: module {module_name!r} does not import ({type(err).__name__}: {err}); the "
            "training jobs run `cwgrpo train` in processes of their own, so it must be importable there: "
            "put its folder on PYTHONPATH (export PYTHONPATH=FOLDER before snakemake) or install it "
            "(pip install -e FOLDER)"
        ) from err
    func = module
    for part in attr.split("."):
        func = getattr(func, part, None)
        if func is None:
            raise ConfigError(f"reward {path!r}: module {module_name!r} has no {attr!r}")
    if not callable(func):
        raise ConfigError(f"reward {path!r}: {attr!r} is not a function")
    try:
        params = inspect.signature(func).parameters.values()
    except (TypeError, ValueError) as err:
        raise ConfigError(f"reward {path!r}: cannot read its signature: {err}") from err
    takes_kwargs = any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params)
    names = {p.name for p in params if p.kind is not inspect.Parameter.VAR_KEYWORD}
    if "completions" not in names or not takes_kwargs:
        raise ConfigError(
            f"reward {path!r}: signature {inspect.signature(func)} is not a reward's: it must be "
            "f(completions, **kwargs) (TRL passes completions, prompts and every dataset column by keyword) "
            "and return one float or None per completion"
        )
    return func
