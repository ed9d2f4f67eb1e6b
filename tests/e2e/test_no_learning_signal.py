"""A real training run that cannot learn (a constant reward) warns once with its numbers, records it in
run.json, and ``cwgrpo claims`` on its folder says "not testable" instead of failing."""

from __future__ import annotations

import json
import shutil

import pytest

from tests.e2e.conftest import cwgrpo

pytestmark = pytest.mark.slow

WARNING = (
    "no learning signal: every group had zero reward spread (all completions of a prompt scored the same) "
    "at steps 1-3 (reward 0.5, reward_std 0, frac_reward_zero_std 1"
)


def test_a_constant_reward_warns_once_and_claims_say_not_testable(e2e_inputs, tmp_path):
    for name in ("model", "data"):
        shutil.copytree(e2e_inputs / name, tmp_path / name)
    (tmp_path / "constant_reward.py").write_text(
        "def half(completions, **kwargs):\n    return [0.5] * len(completions)\n"
    )
    runs = []
    for method in ("grpo", "cw_grpo"):
        run = f"runs/{method}"
        proc = cwgrpo(
            "train", "--model-dir", "model", "--train-data", "data/syn_train.jsonl", "--run-dir", run,
            "--tag", "size=small", "--tag", f"method={method}", "--tag", "seed=0",
            "--set", "use_cpu=true", "--set", "bf16=false", "--set", "gradient_checkpointing=false",
            "--set", "loss_type=grpo", "--set", "beta=0.0", "--set", "learning_rate=1e-4",
            "--set", "num_generations=4", "--set", "per_device_train_batch_size=8",
            "--set", "max_completion_length=8", "--set", "max_steps=3", "--set", "save_steps=3",
            "--set", "reward_funcs=[constant_reward:half]", "--set", f"cw_method={method}",
            cwd=tmp_path,
        )  # fmt: skip
        assert proc.stderr.count(WARNING) == 1, proc.stderr[-3000:]
        signal = json.loads((tmp_path / run / "run.json").read_text())["learning_signal"]
        assert signal[0]["cause"] == "zero_reward_spread"
        assert (signal[0]["from_step"], signal[0]["to_step"]) == (1, 3)
        assert signal[0]["means"]["frac_reward_zero_std"] == 1.0 and signal[0]["means"]["grad_norm"] == 0.0
        runs.append(run)
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
