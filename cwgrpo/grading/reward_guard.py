"""Rewards checked before and while a run trains: a reward that cannot work fails in seconds, not hours.

- Before any model loads, each reward is called once on the first training rows (``cwgrpo.train.rows``), as
  TRL calls it (prompts, completions, completion ids and every dataset column by keyword), with each row's
  gold answer as its completion: a reward that raises (named with the keywords it got), or does not return
  one number or None per completion, is a ``ConfigError``. The dry run does the same where the training
  data is a local file (``cwgrpo_workflow.dag.user_rewards``).
- ``reward_timeout_s`` (``TrainJob``): a wall-clock budget of one call of each reward; a call over it stops
  the run naming the reward (without it, a reward that hangs blocks training for ever). The sample call
  has the same budget, or ``SAMPLE_BUDGET_S`` without one.
- While training: a logged step where every reward is missing (None or NaN for every completion, so no
  completion has a reward and the step has no learning signal) is a warning; ``MISSING_STEPS`` such steps
  in a row, or a run whose every logged step was so, stop the run with an error at that step's log, which
  comes before its checkpoint is saved: the run never counts as complete, and a rerun stops again.
"""

from __future__ import annotations

import asyncio
import concurrent.futures.thread  # noqa: F401  (registers its exit joins before ours: see _hard_stop_at_exit)
import faulthandler
import functools
import inspect
import logging
import math
import numbers
import threading
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from cwgrpo.configs import ConfigError
from cwgrpo.grading.rewards import RewardFunc, get_reward
from cwgrpo.grading.time_budget import TimeBudget

logger = logging.getLogger(__name__)

SAMPLE_BUDGET_S = 60.0
HARD_STOP_S = 30.0  # a reward stuck in C code: the process stops this long after twice its budget
MISSING_STEPS = 3


class RewardTimeout(ConfigError):
    """A reward call ran past its budget (raised after the call has unwound, outside the reward's code)."""


def _timed_out(what: str, seconds: float) -> RewardTimeout:
    return RewardTimeout(f"{what} took more than {seconds:g} s (reward_timeout_s)")


def call_within(seconds: float | None, what: str, func: Callable[..., Any], /, **kwargs: Any) -> Any:
    """``func(**kwargs)`` under one ``cwgrpo.grading.time_budget`` of ``seconds``; a call that runs out raises
    ``RewardTimeout`` naming ``what``, whatever the reward did with the budget's exception. Without
    ``seconds``, or off the main thread (no signal reaches it), the call has no budget.

    A call stuck in C code that holds the GIL cannot be interrupted at all: ``2 x budget + HARD_STOP_S``
    after it began, the process prints every thread's stack, the reward's line among them, and exits with
    status 1 (``faulthandler``'s own thread needs no GIL), rather than hang for ever. A call that ran out
    may leave threads behind (a pool's task that never ends), which the interpreter would wait for at exit:
    the process then gets ``HARD_STOP_S`` to end once it exits (``_hard_stop_at_exit``)."""
    if seconds is None or threading.current_thread() is not threading.main_thread():
        return func(**kwargs)
    budget = TimeBudget(seconds, "wall")
    faulthandler.dump_traceback_later(2 * seconds + HARD_STOP_S, exit=True)
    try:
        with budget:
            out = func(**kwargs)
    except BaseException as err:
        if budget.expired:
            raise _timed_out(what, seconds) from err
        raise
    finally:
        faulthandler.cancel_dump_traceback_later()
        if budget.expired:
            _hard_stop_at_exit()
    if budget.expired:  # the reward caught every OutOfTime and returned late
        raise _timed_out(what, seconds)
    return out


@functools.cache
def _hard_stop_at_exit() -> None:
    """At exit, before the interpreter joins the threads a reward left (``concurrent.futures`` joins its
    pools' threads there too, registered earlier, so run later), the hard stop is armed: the process ends
    within ``HARD_STOP_S`` whatever the reward started. ``threading._register_atexit`` is the one hook that
    runs before those joins (``atexit`` runs after them)."""
    register = getattr(threading, "_register_atexit", None)
    if register is not None:
        register(lambda: faulthandler.dump_traceback_later(HARD_STOP_S, exit=True))


async def _await_within(seconds: float | None, what: str, func: Callable[..., Any], /, **kwargs: Any) -> Any:
    """``await func(**kwargs)`` (an async reward, run on TRL's event loop) under ``seconds``."""
    try:
        return await asyncio.wait_for(func(**kwargs), seconds)
    except TimeoutError as err:
        raise _timed_out(what, seconds or 0) from err


def with_budget(name: str, func: RewardFunc, seconds: float | None) -> RewardFunc:
    """``func`` with a time budget per call (an async reward stays async); the same function without one."""
    if seconds is None:
        return func
    what = f"one call of reward {name!r}"
    if is_async(func):

        @functools.wraps(func)
        async def bounded_async(*args: Any, **kwargs: Any) -> list[float | None]:
            return await _await_within(seconds, what, functools.partial(func, *args), **kwargs)

        return bounded_async

    @functools.wraps(func)
    def bounded(*args: Any, **kwargs: Any) -> list[float | None]:
        return call_within(seconds, what, functools.partial(func, *args), **kwargs)

    return bounded


def is_async(func: Callable[..., Any]) -> bool:
    """Whether calling ``func`` gives a coroutine (a function, a partial of one, or an async ``__call__``),
    as TRL decides whether to await a reward."""
    target = func.func if isinstance(func, functools.partial) else func
    if inspect.iscoroutinefunction(target):
        return True
    return not inspect.isroutine(target) and inspect.iscoroutinefunction(type(target).__call__)


SAMPLE_GENERATIONS = 2  # completions per prompt in the sample call, as TRL lays out a group


def sample_call(rows: Mapping[str, Any] | Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """The keyword arguments of one TRL reward call on ``rows`` (one row, or several), each row repeated
    ``SAMPLE_GENERATIONS`` times in a row as TRL repeats a prompt for its group, the row's gold answer as
    each completion: a reward that returns one value per prompt instead of per completion shows."""
    rows = [rows] if isinstance(rows, Mapping) else list(rows)
    rows = [row for row in rows for _ in range(SAMPLE_GENERATIONS)]
    prompts, completions = [], []
    for row in rows:
        text = f"The answer is \\boxed{{{row.get('answer', '')}}}."
        prompts.append(row["prompt"])
        completions.append(
            [{"role": "assistant", "content": text}] if isinstance(row["prompt"], list) else text
        )
    columns = {key: [row.get(key) for row in rows] for key in rows[0] if key != "prompt"}
    return {
        "prompts": prompts,
        "completions": completions,
        "completion_ids": [[0] for _ in rows],
        **columns,
        "trainer_state": None,
        "log_extra": lambda *a, **k: None,
        "log_metric": lambda *a, **k: None,
    }


def check_on_sample(
    name: str, func: RewardFunc, rows: Mapping[str, Any] | Sequence[Mapping[str, Any]], budget: float | None
) -> None:
    """Call ``func`` once on ``rows`` (the first training rows) as TRL calls it; a reward that raises or does
    not return one float (or None) per completion is a ``ConfigError`` naming it (and, if it raised, the
    keywords it was called with)."""
    kwargs = sample_call(rows)
    n = len(kwargs["completions"])
    where = (
        f"reward {name!r}, called as TRL calls it on the first {n // SAMPLE_GENERATIONS} training row(s) "
        f"({SAMPLE_GENERATIONS} completions each) before training"
    )
    seconds = budget or SAMPLE_BUDGET_S
    try:
        if is_async(
            func
        ):  # the signal budget too: a reward that blocks its event loop never yields to wait_for
            out = call_within(
                seconds, where, lambda: asyncio.run(_await_within(seconds, where, func, **kwargs))
            )
        else:
            out = call_within(seconds, where, func, **kwargs)
    except RewardTimeout as err:
        raise ConfigError(f"{err}: a reward must return within its budget; set reward_timeout_s") from err
    except SystemExit as err:  # sys.exit in a reward would end the check without a word
        raise ConfigError(f"{where}, called sys.exit({err.code!r}): a reward must return its values") from err
    except Exception as err:  # a user's function may raise anything; it is named, not hidden
        raise ConfigError(
            f"{where}, raised {type(err).__name__}: {err}; it was called with the keywords "
            f"{', '.join(kwargs)} (each column of the training data under its own name, and `answer`)"
        ) from err
    if isinstance(out, (str, bytes, Mapping)) or not (
        hasattr(out, "__len__") and hasattr(out, "__getitem__")
    ):
        raise ConfigError(
            f"{where}, returned {type(out).__name__}, not a list of one float or None per completion"
        )
    if len(out) != n:
        raise ConfigError(
            f"{where}, returned {len(out)} values for {n} completions: return one per completion"
        )
    for value in out:
        if value is not None and (isinstance(value, bool) or not isinstance(value, numbers.Real)):
            raise ConfigError(
                f"{where}, returned {value!r} ({type(value).__name__}): a reward is a float or None"
            )
        try:
            too_large = value is not None and abs(float(value)) == math.inf
        except OverflowError:  # an integer past float's range
            too_large = True
        if too_large:  # TRL would subtract inf from inf: NaN advantages
            raise ConfigError(
                f"{where}, returned {value!r:.40}: a reward is a finite float (None or NaN: no reward)"
            )


def prepared_rewards(
    names: Sequence[str], rows: Mapping[str, Any] | Sequence[Mapping[str, Any]], budget: float | None = None
) -> list[RewardFunc]:
    """The reward functions of ``names``, each checked on ``rows`` and given the per-call ``budget``."""
    funcs = []
    for name in names:
        func = get_reward(name)
        check_on_sample(name, func, rows, budget)
        funcs.append(with_budget(name, func, budget))
    return funcs


def every_reward_missing(logs: Mapping[str, Any]) -> bool:
    """Whether a logged step has reward means (``rewards/NAME/mean``) and every one is NaN (or None, as the
    trainer logs a NaN)."""
    means = [v for k, v in logs.items() if k.startswith("rewards/") and k.endswith("/mean")]
    return bool(means) and all(v is None or (isinstance(v, float) and math.isnan(v)) for v in means)


class MissingRewards:
    """Counts logged steps where every reward is missing; warns on each, and raises at ``MISSING_STEPS``
    in a row or at the last step of a run whose every logged step was so."""

    def __init__(self, limit: int = MISSING_STEPS, warn: Callable[..., None] = logger.warning) -> None:
        self.limit, self.warn = limit, warn
        self.in_a_row = self.logged = self.missing = 0

    def step(self, step: int, logs: Mapping[str, Any], last: bool = False) -> None:
        """Count the logs of ``step``; ``last``: the run's last step."""
        if not any(k.startswith("rewards/") for k in logs):
            return
        self.logged += 1
        if not every_reward_missing(logs):
            self.in_a_row = 0
            return
        self.in_a_row += 1
        self.missing += 1
        self.warn(
            "step %d: EVERY REWARD IS MISSING (None or NaN for every completion): this step has no learning "
            "signal; check the reward functions (%d such steps in a row)",
            step,
            self.in_a_row,
        )
        if self.in_a_row >= self.limit:
            raise self.error(f"{self.in_a_row} logged steps in a row")
        if last and self.missing == self.logged:
            raise self.error(f"every logged step ({self.logged})")

    @staticmethod
    def error(which: str) -> ConfigError:
        return ConfigError(
            f"{which} had every reward missing (None or NaN for every completion): the run learns nothing, "
            "so it stops and is not complete; fix the reward functions (or the data they read) and rerun"
        )


def missing_rewards_callback() -> Any:
    """A ``TrainerCallback`` running ``MissingRewards`` on the main process's logs."""
    from transformers import TrainerCallback

    class StopOnMissingRewards(TrainerCallback):
        def __init__(self) -> None:
            self.count = MissingRewards()

        def on_log(self, args, state, control, logs=None, **kwargs):
            if state.is_world_process_zero and logs:
                self.count.step(state.global_step, logs, last=state.global_step >= state.max_steps)

    return StopOnMissingRewards()
