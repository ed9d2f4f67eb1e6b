"""A real training run that cannot learn (a constant reward) warns once with its numbers, records it in
run.json, ``cwgrpo claims`` on its folder says "not testable" instead of failing, and the end-of-run block
names it. A run whose every completion is clipped but whose rewards differ learns: a notice, not "no
learning signal"."""

from __future__ import annotations

import json
import shutil

import pytest

from cwgrpo.trainer.learning_signal import read_recorded, runs_without_signal
from cwgrpo_workflow.dag.commands import finished_message
from tests.e2e.conftest import cwgrpo

pytestmark = pytest.mark.slow

CLIPPED = "every completion was clipped at the completion budget (max_completion_length=8) at steps 1-3"
WARNING = (
    "no learning signal: every group had zero reward spread (all completions of a prompt scored the same) "
    "at steps 1-3 (reward 0.5, reward_std 0, frac_reward_zero_std 1"
)


def test_a_constant_reward_warns_once_and_claims_say_not_testable(e2e_inputs, tmp_path):
    for name in ("model", "data"):
        shutil.copytree(e2e_inputs / name, tmp_path / name)
    (tmp_path / "constant_reward.py").write_text(
        "def half(completions, **kwargs):\n    return [0.5] * len(completions)\n\n\n"
        "def by_length(completions, **kwargs):\n    return [len(str(c)) % 3 / 2 for c in completions]\n"
    )
    runs = []
    for method, reward in (("grpo", "half"), ("cw_grpo", "by_length")):
        run = f"runs/{method}"
        proc = cwgrpo(
            "train", "--model-dir", "model", "--train-data", "data/syn_train.jsonl", "--run-dir", run,
            "--tag", "size=small", "--tag", f"method={method}", "--tag", "seed=0",
            "--set", "use_cpu=true", "--set", "bf16=false", "--set", "gradient_checkpointing=false",
            "--set", "loss_type=grpo", "--set", "beta=0.0", "--set", "learning_rate=1e-4",
            "--set", "num_generations=4", "--set", "per_device_train_batch_size=8",
            "--set", "max_completion_length=8", "--set", "max_steps=3", "--set", "save_steps=3",
            "--set", f"reward_funcs=[constant_reward:{reward}]", "--set", f"cw_method={method}",
            cwd=tmp_path,
        )  # fmt: skip
        signal = json.loads((tmp_path / run / "run.json").read_text())["learning_signal"]
        runs.append(run)
        if reward == "by_length":  # every completion clipped at 8 tokens, rewards differ: it learns
            assert "no learning signal" not in proc.stderr, proc.stderr[-3000:]
            assert proc.stderr.count(CLIPPED) == 1, proc.stderr[-3000:]
            assert [f["cause"] for f in signal] == ["all_clipped"] and signal[0]["means"]["grad_norm"] > 0
            continue
        assert proc.stderr.count(WARNING) == 1, proc.stderr[-3000:]
        assert signal[0]["cause"] == "zero_reward_spread"
        assert (signal[0]["from_step"], signal[0]["to_step"]) == (1, 3)
        assert signal[0]["means"]["frac_reward_zero_std"] == 1.0 and signal[0]["means"]["grad_norm"] == 0.0
    summaries = []
    for method in ("grpo", "cw_grpo"):  # the claims need evaluations too: hand-made, as in test_claims
        path = tmp_path / f"eval/{method}/b1.summary.json"
        path.parent.mkdir(parents=True)
        tags = {"size": "small", "method": method, "seed": 0, "step": 3}
        path.write_text(json.dumps({"benchmark": "b1", "tags": tags, "k": 1, "pass1": 0.1, "n_problems": 5}))
        summaries.append(str(path.relative_to(tmp_path)))
    cwgrpo(
        "claims", "--summaries", *summaries, "--runs", *runs, "--out-json", "claims.json",
        "--out-md", "claims.md", "--set", "kind=tiny", "--set", "step=3", cwd=tmp_path,
    )  # fmt: skip
    claims = json.loads((tmp_path / "claims.json").read_text())["claims"]
    assert [c["verdict"] for c in claims] == ["not testable"] * 4
    assert "no learning signal" in (tmp_path / "claims.md").read_text()
    silent = runs_without_signal(read_recorded(tmp_path / run for run in runs))
    assert silent == [f"{tmp_path / 'runs/grpo'}: zero reward spread, steps 1-3"]
    block = finished_message(
        [("claims", "claims.md")], "# Table 1: accuracy (%) at step 3", silent, "", "figures/t/report.html"
    )
    assert "No learning signal in 1 run (Table 1 marks their rows †" in block and "runs/cw_grpo" not in block
