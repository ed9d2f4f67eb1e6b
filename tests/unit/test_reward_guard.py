"""Rewards TRL accepts are accepted and bounded (``cwgrpo.grading.reward_guard``): async rewards, NumPy values, and a
reward stuck in C code, which no in-process timer can interrupt, stops the process instead of hanging."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import textwrap
import time

import numpy as np
import pytest

from cwgrpo.grading import reward_guard

ROW = {"prompt": "1+1=", "answer": "2"}


async def async_reward(completions, **kwargs):
    await asyncio.sleep(0)
    return [1.0 for _ in completions]


async def async_sleeper(completions, **kwargs):
    await asyncio.sleep(10)
    return [1.0 for _ in completions]


def numpy_scalars(completions, **kwargs):
    return [np.float32(0.5) for _ in completions]


def numpy_array(completions, **kwargs):
    return np.ones(len(completions))


@pytest.mark.parametrize("func", [async_reward, numpy_scalars, numpy_array])
def test_a_reward_trl_accepts_passes_the_sample_check(func):
    reward_guard.check_on_sample(func.__name__, func, ROW, 5.0)


def test_an_async_reward_stays_async_under_its_budget():
    bounded = reward_guard.with_budget("a", async_reward, 5.0)
    assert reward_guard.is_async(bounded)
    assert asyncio.run(bounded(completions=["x", "y"])) == [1.0, 1.0]
    slow = reward_guard.with_budget("s", async_sleeper, 0.3)
    start = time.monotonic()
    with pytest.raises(reward_guard.RewardTimeout, match=r"one call of reward .s. took more than 0\.3 s"):
        asyncio.run(slow(completions=["x"]))
    assert time.monotonic() - start < 3


def test_an_async_reward_over_budget_fails_the_sample_check():
    with pytest.raises(reward_guard.ConfigError, match=r"took more than 0\.3 s"):
        reward_guard.check_on_sample("s", async_sleeper, ROW, 0.3)


def test_a_reward_stuck_in_c_code_stops_the_process_naming_its_line(tmp_path):
    (tmp_path / "c_rewards.py").write_text(
        textwrap.dedent(
            """
            def sums(completions, **kwargs):
                sum(range(10**11))  # minutes in one C call that never checks for signals
                return [1.0 for _ in completions]
            """
        )
    )
    script = textwrap.dedent(
        """
        from cwgrpo.grading import reward_guard
        from c_rewards import sums

        reward_guard.HARD_STOP_S = 1.0
        reward_guard.with_budget("b", sums, 0.5)(completions=["x"])
        """
    )
    start = time.monotonic()
    try:
        done = subprocess.run(
            [sys.executable, "-c", script], cwd=tmp_path, capture_output=True, text=True, timeout=60
        )
    except subprocess.TimeoutExpired:
        pytest.fail("a reward stuck in C code hung the process past its budget")
    assert time.monotonic() - start < 30
    assert done.returncode == 1
    assert "Timeout (" in done.stderr and "c_rewards.py" in done.stderr and "in sums" in done.stderr, (
        done.stderr
    )


def test_a_reward_that_ran_out_cannot_keep_the_process_alive_at_exit(tmp_path):
    """A reward whose pool task never ends raises ``RewardTimeout`` at its budget; the interpreter would then
    wait for that thread at exit for ever. The process ends within ``HARD_STOP_S`` of its exit instead."""
    (tmp_path / "pool_rewards.py").write_text(
        textwrap.dedent(
            """
            import threading
            from concurrent.futures import ThreadPoolExecutor

            POOL = ThreadPoolExecutor(1)

            def waits_on_a_pool(completions, **kwargs):
                return POOL.submit(threading.Event().wait).result()
            """
        )
    )
    script = textwrap.dedent(
        """
        from cwgrpo.grading import reward_guard
        from pool_rewards import waits_on_a_pool

        reward_guard.HARD_STOP_S = 2.0
        try:
            reward_guard.with_budget("p", waits_on_a_pool, 0.5)(completions=["x"])
        except reward_guard.RewardTimeout as err:
            print(err, flush=True)
        """
    )
    start = time.monotonic()
    try:
        done = subprocess.run(
            [sys.executable, "-c", script], cwd=tmp_path, capture_output=True, text=True, timeout=60
        )
    except subprocess.TimeoutExpired:
        pytest.fail("a thread left by a reward that ran out kept the process alive")
    assert time.monotonic() - start < 30
    assert done.stdout == "one call of reward 'p' took more than 0.5 s (reward_timeout_s)\n"
    assert done.returncode == 1 and "Timeout (" in done.stderr and "pool_rewards.py" not in done.stdout


def per_prompt(prompts, completions, **kwargs):
    return [1.0 for _ in dict.fromkeys(prompts)]


def infinite(completions, **kwargs):
    return [float("inf") for _ in completions]


def huge(completions, **kwargs):
    return [10**400 for _ in completions]


async def blocks_its_loop(completions, **kwargs):
    time.sleep(4)  # never yields to the event loop: asyncio's own timeout cannot fire
    return [1.0 for _ in completions]


def exits(completions, **kwargs):
    raise SystemExit(3)


@pytest.mark.parametrize(
    ("func", "message"),
    [
        (per_prompt, r"returned 1 values for 2 completions: return one per completion"),
        (infinite, r"returned inf: a reward is a finite float \(None or NaN: no reward\)"),
        (huge, r"returned 1000000000000000000000000000000000000000: a reward is a finite float"),
        (blocks_its_loop, r"took more than 1 s"),
        (exits, r"called sys.exit\(3\): a reward must return its values"),
    ],
)
def test_the_sample_check_refuses_what_trl_would_choke_on_naming_it(func, message):
    """One value per prompt (TRL gives a reward every completion of a group), an infinite or too large reward
    (TRL takes inf - inf), an async reward that blocks its event loop past its budget and a reward that
    exits are refused before training, in one line naming the reward."""
    with pytest.raises(reward_guard.ConfigError, match=f"reward '{func.__name__}'.*{message}"):
        reward_guard.check_on_sample(func.__name__, func, ROW, 1.0)
