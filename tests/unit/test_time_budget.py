"""The time budget (``cwgrpo.grading.time_budget``) on both its clocks, and the reward budget built on it
(``cwgrpo.grading.reward_guard``): it survives math-verify's own ``signal.alarm`` timeouts, an ``except Exception``
in the reward, and nesting; a CPU budget counts CPU time, not waiting."""

from __future__ import annotations

import textwrap
import time

import pytest

from cwgrpo.grading import reward_guard
from cwgrpo.grading.rewards import get_reward
from cwgrpo.grading.time_budget import OutOfTime, TimeBudget

TOLERANCE_S = 1.5  # a loaded 2-core machine: the budget fires within this much after its deadline

REWARDS = textwrap.dedent(
    r"""
    import time

    import math_verify

    from cwgrpo.grading.rewards import released_accuracy


    def verifies_then_sleeps(completions, **kwargs):
        gold = math_verify.parse("$\\frac{1}{2}$")  # math-verify's own alarm(5), then alarm(0)
        math_verify.verify(gold, math_verify.parse("$0.5$"))
        time.sleep(8)
        return [1.0 for _ in completions]


    def released_then_loops(completions, **kwargs):
        released_accuracy("The answer is $\\boxed{2}$.", "$2$")
        end = time.monotonic() + 8
        while time.monotonic() < end:
            pass
        return [1.0 for _ in completions]


    def catches_exception(completions, **kwargs):
        end = time.monotonic() + 8
        while time.monotonic() < end:
            try:
                time.sleep(0.05)
            except Exception:
                pass
        return [1.0 for _ in completions]


    def catches_everything(completions, **kwargs):
        end = time.monotonic() + 2
        while time.monotonic() < end:
            try:
                time.sleep(0.05)
            except BaseException:
                pass
        return [1.0 for _ in completions]
    """
)


@pytest.fixture
def user_rewards(tmp_path, monkeypatch) -> str:
    (tmp_path / "budget_rewards.py").write_text(REWARDS)
    monkeypatch.syspath_prepend(str(tmp_path))
    return "budget_rewards"


def _timed_call(func, budget_s: float) -> tuple[BaseException | None, float]:
    bounded = reward_guard.with_budget("r", func, budget_s)
    start = time.monotonic()
    try:
        bounded(completions=["x"], prompts=["p"])
    except BaseException as err:
        return err, time.monotonic() - start
    return None, time.monotonic() - start


@pytest.mark.parametrize("name", ["verifies_then_sleeps", "released_then_loops", "catches_exception"])
def test_a_reward_budget_fires_after_math_verify_and_except_exception(user_rewards, name):
    err, took = _timed_call(get_reward(f"{user_rewards}:{name}"), 1.0)
    assert isinstance(err, reward_guard.RewardTimeout), err
    assert "one call of reward 'r' took more than 1 s" in str(err)
    assert took < 1.0 + TOLERANCE_S, f"{name}: a 1 s budget let the call run {took:.1f} s"


def test_a_reward_that_swallows_every_timeout_still_counts_as_over_budget(user_rewards):
    err, took = _timed_call(get_reward(f"{user_rewards}:catches_everything"), 0.5)
    assert isinstance(err, reward_guard.RewardTimeout), err
    assert took < 2 + TOLERANCE_S


def test_the_sample_call_has_the_budget_after_math_verify(user_rewards):
    row = {"prompt": "1+1=", "answer": "2"}
    start = time.monotonic()
    with pytest.raises(reward_guard.ConfigError, match="took more than 1 s"):
        reward_guard.check_on_sample("x", get_reward(f"{user_rewards}:verifies_then_sleeps"), row, 1.0)
    assert time.monotonic() - start < 1.0 + TOLERANCE_S


def test_an_outer_budget_unwinds_through_an_inner_one():
    outer, inner = TimeBudget(0.3, "wall"), TimeBudget(30, "wall")
    start = time.monotonic()
    with outer, inner:
        time.sleep(10)
    assert outer.expired and not inner.expired
    assert time.monotonic() - start < 0.3 + TOLERANCE_S


def test_an_inner_budget_that_runs_out_leaves_the_outer_one_armed():
    outer, inner = TimeBudget(0.8, "wall"), TimeBudget(0.2, "wall")
    with outer:
        with inner:
            time.sleep(10)
        assert inner.expired and not outer.expired
        time.sleep(10)
    assert outer.expired


def test_a_budget_that_does_not_run_out_leaves_no_alarm_behind():
    with TimeBudget(0.2, "wall") as budget:
        pass
    time.sleep(0.5)  # a late signal would raise OutOfTime here
    assert not budget.expired


def test_out_of_time_is_not_an_exception():
    assert not issubclass(OutOfTime, Exception)


@pytest.mark.parametrize("seconds", [0, -1, float("nan"), float("inf"), True, "3"])
def test_a_bad_budget_is_refused(seconds):
    with pytest.raises(ValueError, match="time budget"):
        TimeBudget(seconds, "cpu")


def test_a_budget_names_its_clock():
    with pytest.raises(ValueError, match=r"clock is one of \['cpu', 'wall'\], got 'process'"):
        TimeBudget(1, "process")


def test_a_cpu_budget_counts_cpu_time_not_waiting():
    with TimeBudget(0.3, "cpu") as waiting:
        time.sleep(1.0)
    assert not waiting.expired
    start = time.thread_time()
    with TimeBudget(0.3, "cpu") as busy:
        while True:
            pass
    assert busy.expired
    assert 0.3 <= time.thread_time() - start < 0.3 + TOLERANCE_S


def test_a_wall_budget_unwinds_through_a_cpu_budget_that_waits():
    outer, inner = TimeBudget(0.3, "wall"), TimeBudget(0.3, "cpu")
    start = time.monotonic()
    with outer, inner:
        time.sleep(10)
    assert outer.expired and not inner.expired
    assert time.monotonic() - start < 0.3 + TOLERANCE_S


def test_a_cpu_budget_stops_a_loop_inside_a_wall_budget():
    outer, inner = TimeBudget(30, "wall"), TimeBudget(0.3, "cpu")
    with outer, inner:
        while True:
            pass
    assert inner.expired and not outer.expired
