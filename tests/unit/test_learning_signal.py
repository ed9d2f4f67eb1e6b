"""The detector of runs that cannot learn (cwgrpo.trainer.learning_signal), on hand-made log records."""

from __future__ import annotations

import pytest

from cwgrpo.trainer.learning_signal import (
    ALL_CLIPPED,
    ZERO_GRADIENT,
    ZERO_SPREAD,
    check_no_signal_steps,
    findings,
    no_signal,
    runs_without_signal,
    stretch,
)
from cwgrpo_workflow.dag.commands import finished_message


def line(step, zero=1.0, clipped=0.25, reward=0.0, **extra):
    """A log line; its gradient is 0 where every group had zero spread, else 0.5."""
    return {"step": step, "frac_reward_zero_std": zero, "completions/clipped_ratio": clipped,
            "reward": reward, "reward_std": 0.0, "grad_norm": 0.0 if zero == 1.0 else 0.5, **extra}  # fmt: skip


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


def test_every_completion_clipped_is_a_notice_not_a_lack_of_signal():
    """All clipped, but rewards differ and the gradient is 7.1: the run learns, so the message does not
    say "no learning signal" and the finding is no reason to call the run silent."""
    records = [line(s, zero=0.5, clipped=1.0, grad_norm=7.1) for s in (1, 2, 3)]
    (found,) = findings(records, 3)
    assert found["cause"] == ALL_CLIPPED and "max_completion_length)" in found["message"]
    assert not no_signal(found) and "no learning signal" not in found["message"]
    (found,) = findings(records, 3, completion_budget=16)
    assert found["message"].startswith(
        "every completion was clipped at the completion budget (max_completion_length=16) at steps 1-3 "
        "(reward 0, reward_std 0, frac_reward_zero_std 0.5, completions/clipped_ratio 1, grad_norm 7.1): "
    )
    both = findings([line(s, clipped=1.0) for s in (1, 2)], 2)
    assert [f["cause"] for f in both] == [ZERO_SPREAD, ALL_CLIPPED]
    assert [no_signal(f) for f in both] == [True, False]


def test_a_zero_gradient_with_reward_spread_is_no_learning_signal():
    records = [line(s, zero=0.5, grad_norm=0.0) for s in (1, 2, 3)]
    (found,) = findings(records, 3)
    assert (found["cause"], no_signal(found)) == (ZERO_GRADIENT, True)
    assert found["message"].startswith("no learning signal: the gradient norm was 0 at steps 1-3 (")
    assert findings([line(s, zero=0.5, grad_norm=0.1) for s in (1, 2, 3)], 3) == []
    # zero spread explains a zero gradient: one finding, not two
    assert [f["cause"] for f in findings([line(s) for s in (1, 2, 3)], 3)] == [ZERO_SPREAD]


@pytest.mark.parametrize(
    ("cause", "silent"), [(ZERO_SPREAD, True), (ZERO_GRADIENT, True), (ALL_CLIPPED, False), ("other", False)]
)
def test_no_signal_classifies_a_recorded_finding(cause, silent):
    assert no_signal({"cause": cause, "from_step": 1, "to_step": 20}) is silent


def test_the_end_of_run_block_names_the_runs_without_signal_and_prints_table_1():
    recorded = {
        "runs/s/grpo/seed0": [{"cause": ZERO_SPREAD, "from_step": 1, "to_step": 20}],
        "runs/s/cw_grpo/seed0": [{"cause": ALL_CLIPPED, "from_step": 1, "to_step": 20}],
        "runs/s/clip_cov/seed0": [],
    }
    silent = runs_without_signal(recorded)
    assert silent == ["runs/s/grpo/seed0: zero reward spread, steps 1-20"]
    block = finished_message(
        [("claims", "c.md")], "# Table 1\n\n| a |\n", silent, " --configfile x.yaml", "figures/s/report.html"
    )
    assert block.splitlines() == [
        "# Table 1", "", "| a |", "",
        "No learning signal in 1 run (Table 1 marks their rows †, the claims they feed are 'not testable'; "
        "each job's log has the numbers):",
        "  runs/s/grpo/seed0: zero reward spread, steps 1-20", "",
        "Results of this run:", "claims: c.md", "report: snakemake --report figures/s/report.html --configfile x.yaml",
    ]  # fmt: skip
    quiet = finished_message([], None, [], "", "figures/s/report.html")
    assert quiet == "Results of this run:\nreport: snakemake --report figures/s/report.html"


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
        check_no_signal_steps(bad)
