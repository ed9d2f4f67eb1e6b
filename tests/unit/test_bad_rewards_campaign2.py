"""Rewards given by dotted path that cannot work (issue 25): each fails before any model loads, or stops the
run with an error, instead of a traceback after the model has loaded and generated, a hang, or a run that
trains with zero gradient to the end and is marked complete."""

from __future__ import annotations

import json
import math
import textwrap
from pathlib import Path

import pytest

from cwgrpo.configs import ConfigError
from tests.conftest import TWO_STEP_TRL

REWARDS = textwrap.dedent(
    """
    import time

    def raising(completions, **kwargs):
        raise KeyError("no such column")

    def returns_none(completions, **kwargs):
        return None

    def too_many(completions, **kwargs):
        return [1.0] * (len(completions) + 1)

    def text(completions, **kwargs):
        return ["1.0" for _ in completions]

    def sleeps(completions, **kwargs):
        time.sleep(30)
        return [1.0 for _ in completions]

    def all_nan(completions, **kwargs):
        return [float("nan") for _ in completions]

    def fine(completions, answer, **kwargs):
        return [1.0 if a in c[-1]["content"] else 0.0 for c, a in zip(completions, answer)]
    """
)


@pytest.fixture
def user_rewards(tmp_path, monkeypatch) -> str:
    (tmp_path / "my_rewards_c2.py").write_text(REWARDS)
    monkeypatch.syspath_prepend(str(tmp_path))
    return "my_rewards_c2"


@pytest.fixture
def no_model_load(monkeypatch):
    """Loading the policy fails the test: every check here must come first."""
    import transformers

    def loaded(*args, **kwargs):
        raise AssertionError("the model loaded before the reward was checked")

    monkeypatch.setattr(transformers.AutoModelForCausalLM, "from_pretrained", loaded)


def _train(tmp_path: Path, model_dir: Path, reward: str, **job) -> int:
    from cwgrpo.train import train
    from cwgrpo.train_config import build_train_config

    data = tmp_path / "train.jsonl"
    records = [{"id": f"p-{i}", "problem": "1+1", "answer": "2", "source": "test"} for i in range(2)]
    data.write_text("".join(json.dumps(r) + "\n" for r in records))
    run = tmp_path / "run"
    return train(
        model_dir, data, run, build_train_config({**TWO_STEP_TRL, "reward_funcs": [reward], **job}, run)
    )


@pytest.mark.parametrize(
    ("function", "message"),
    [
        ("raising", "raised KeyError: 'no such column'"),
        ("returns_none", "returned NoneType, not a list"),
        ("too_many", "returned 2 values for 1 completion"),
        ("text", "returned '1.0' \\(str\\)"),
    ],
)
def test_a_reward_that_cannot_work_fails_before_the_model_loads(
    tmp_path, tiny_model_dir, user_rewards, no_model_load, function, message
):
    """Weak spot: a reward that raised or returned None failed with a traceback after load and generation."""
    with pytest.raises(
        ConfigError, match=f"reward '{user_rewards}:{function}', called on the first training row.*{message}"
    ):
        _train(tmp_path, tiny_model_dir, f"{user_rewards}:{function}")
    assert not (tmp_path / "run").exists()


def test_a_reward_over_its_time_budget_stops_naming_it(tmp_path, tiny_model_dir, user_rewards, no_model_load):
    """Weak spot: a reward that sleeps blocked training for ever; reward_timeout_s is its budget per call."""
    with pytest.raises(ConfigError, match=f"reward '{user_rewards}:sleeps'.*took more than 0.5 s"):
        _train(tmp_path, tiny_model_dir, f"{user_rewards}:sleeps", reward_timeout_s=0.5)


def test_the_sample_call_is_bounded_without_a_budget_too(
    tmp_path, tiny_model_dir, user_rewards, no_model_load, monkeypatch
):
    from cwgrpo import reward_guard

    monkeypatch.setattr(reward_guard, "SAMPLE_BUDGET_S", 0.5)
    with pytest.raises(ConfigError, match=r"took more than 0.5 s.*set reward_timeout_s"):
        _train(tmp_path, tiny_model_dir, f"{user_rewards}:sleeps")


@pytest.mark.parametrize("budget", [0, -1, math.nan, math.inf])
def test_a_bad_time_budget_is_refused(tmp_path, budget):
    from cwgrpo.train_config import build_train_config

    with pytest.raises(ConfigError, match=r"reward_timeout_s=.*: must be a number of seconds > 0"):
        build_train_config({**TWO_STEP_TRL, "reward_timeout_s": budget}, tmp_path / "run")


def test_the_budget_bounds_every_call_and_keeps_the_name(user_rewards):
    from cwgrpo import reward_guard
    from cwgrpo.rewards import get_reward

    bounded = reward_guard.with_budget("x", get_reward(f"{user_rewards}:sleeps"), 0.2)
    assert bounded.__name__ == "sleeps"  # TRL names the reward's metrics by it
    with pytest.raises(reward_guard.RewardTimeout, match=r"one call of reward 'x' took more than 0.2 s"):
        bounded(completions=["a"])


def test_a_step_with_every_reward_missing_warns_and_a_run_of_them_is_an_error():
    from cwgrpo import reward_guard

    warnings = []
    count = reward_guard.MissingRewards(limit=3, warn=lambda *a: warnings.append(a[0] % a[1:]))
    nan = {"rewards/a/mean": math.nan, "rewards/b/mean": None, "reward": 0.0}
    count.step(1, {"rewards/a/mean": 1.0, "rewards/b/mean": math.nan})  # one reward present: a signal
    count.step(2, nan)
    count.step(3, {"loss": 0.1})  # not a step with rewards
    assert len(warnings) == 1 and "EVERY REWARD IS MISSING" in warnings[0]
    count.step(4, nan)
    with pytest.raises(ConfigError, match="3 logged steps in a row had every reward missing"):
        count.step(5, nan)
    short = reward_guard.MissingRewards(limit=3, warn=lambda *a: None)
    short.step(1, nan)
    with pytest.raises(ConfigError, match=r"every logged step \(2\).*not complete"):
        short.step(2, nan, last=True)
    fine = reward_guard.MissingRewards(limit=3, warn=lambda *a: None)
    fine.step(1, nan)
    fine.step(2, {"rewards/a/mean": 0.0}, last=True)  # one step had a signal: a complete run


def test_a_run_whose_rewards_are_all_nan_is_an_error_not_a_complete_run(
    tmp_path, tiny_model_dir, user_rewards
):
    """Weak spot: a reward returning NaN for everything trained with zero gradient to the end, marked complete."""
    for _ in range(2):  # a rerun resumes from checkpoint-1 and stops again
        with pytest.raises(ConfigError, match=r"every logged step \(\d\) had every reward missing"):
            _train(tmp_path, tiny_model_dir, f"{user_rewards}:all_nan")
        assert not (tmp_path / "run" / "run.json").exists()
        assert not (tmp_path / "run" / "checkpoint-2").exists()


def test_a_reward_that_works_passes_the_sample_call(user_rewards):
    from cwgrpo import reward_guard

    row = {"prompt": [{"role": "user", "content": "1+1"}], "answer": "2"}
    funcs = reward_guard.prepared_rewards([f"{user_rewards}:fine", "format"], row, budget=5)
    assert [f.__name__ for f in funcs] == ["fine", "format_reward"]
