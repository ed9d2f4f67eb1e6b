"""The detector of runs that cannot learn (cwgrpo.learning_signal), on hand-made log records."""

from __future__ import annotations

import pytest

from cwgrpo.learning_signal import ALL_CLIPPED, ZERO_SPREAD, SignalOptions, findings, stretch


def line(step, zero=1.0, clipped=0.25, reward=0.0, **extra):
    return {"step": step, "frac_reward_zero_std": zero, "completions/clipped_ratio": clipped,
            "reward": reward, "reward_std": 0.0, "grad_norm": 0.0, **extra}  # fmt: skip


def test_a_stretch_of_zero_spread_is_found_with_its_numbers():
    records = [line(1, zero=0.5, reward=0.2), *(line(s) for s in range(2, 8))]
    (found,) = findings(records, 5)
    assert (found["cause"], found["from_step"], found["to_step"]) == (ZERO_SPREAD, 2, 6)
    assert found["means"] == {
        "reward": 0.0, "reward_std": 0.0, "frac_reward_zero_std": 1.0,
        "completions/clipped_ratio": 0.25, "grad_norm": 0.0,
    }  # fmt: skip
    assert found["message"].startswith(
        "no learning signal: every group had zero reward spread (all completions of a prompt scored the "
        "same) at steps 2-6 (reward 0, reward_std 0, frac_reward_zero_std 1, completions/clipped_ratio 0.25, "
        "grad_norm 0): every advantage is 0"
    )


def test_one_step_with_spread_restarts_the_stretch():
    records = [line(s, zero=0.9 if s in (4, 8) else 1.0) for s in range(1, 12)]
    assert findings(records, 4) == []  # 1-3, 5-7, 9-11: never 4 in a row
    assert [f["from_step"] for f in findings(records, 3)] == [1]


def test_a_logged_line_covers_the_steps_since_the_previous_one():
    """logging_steps 5: TRL's value of 1 is a mean over 5 steps, so two lines are a stretch of 10."""
    assert [(f["from_step"], f["to_step"]) for f in findings([line(5), line(10)], 10)] == [(1, 10)]
    assert findings([line(5), line(10)], 11) == []


def test_every_completion_clipped_is_its_own_cause():
    records = [line(s, zero=0.5, clipped=1.0) for s in (1, 2, 3)]
    (found,) = findings(records, 3)
    assert found["cause"] == ALL_CLIPPED and "max_completion_length)" in found["message"]
    (found,) = findings(records, 3, completion_budget=16)
    assert "clipped at the completion budget (max_completion_length=16) at steps 1-3" in found["message"]
    both = findings([line(s, clipped=1.0) for s in (1, 2)], 2)
    assert [f["cause"] for f in both] == [ZERO_SPREAD, ALL_CLIPPED]


def test_missing_or_null_metrics_break_a_stretch_and_order_does_not_matter():
    records = [line(3), line(1), {"step": 2, "frac_reward_zero_std": None}, line(4)]
    assert [(f["from_step"], f["to_step"]) for f in findings(records, 2)] == [(3, 4)]
    assert findings([{"step": 1, "loss": 0.0}], 1) == []


def test_stretch_is_the_whole_run_when_the_run_is_shorter_and_0_switches_it_off():
    assert stretch(20, 2) == 2 and stretch(20, 300) == 20 and stretch(20, None) == 20
    assert stretch(0, 300) == 0 and findings([line(1)], 0) == []


@pytest.mark.parametrize("bad", [-1, 1.5, True, "20"])
def test_a_bad_stretch_is_refused(bad):
    with pytest.raises(ValueError, match=r"cw_no_signal_steps=.*must be an integer >= 0"):
        SignalOptions(cw_no_signal_steps=bad).check_signal_options()
