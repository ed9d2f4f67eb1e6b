"""Adding a method is one function and its registration: a method defined and registered here trains one
step through ``cwgrpo train`` (in this process, so the registration is seen), with no other file edited."""

from __future__ import annotations

import json
import shutil

import pytest
import torch

from cwgrpo import cli, weighting
from cwgrpo.weighting import MethodInputs, MethodOptions, MethodOutput

pytestmark = pytest.mark.slow


def sign_flip(batch: MethodInputs, opts: MethodOptions) -> MethodOutput:
    """A toy method: every token's advantage with its sign flipped, and a metric saying it ran."""
    flipped = torch.full(batch.logps.shape, -1.0, dtype=torch.float32, device=batch.logps.device)
    return MethodOutput(flipped, None, {"cw/sign_flip_calls": torch.ones(())})


@pytest.fixture
def registered():
    """``sign_flip`` registered for one test only, so that no other test sees a fifth method."""
    weighting.register_method("sign_flip")(sign_flip)
    yield "sign_flip"
    del weighting.METHODS["sign_flip"]


TRAIN = [
    "--set", "use_cpu=true", "--set", "bf16=false", "--set", "gradient_checkpointing=false",
    "--set", "loss_type=grpo", "--set", "beta=0.0", "--set", "learning_rate=1e-4",
    "--set", "num_generations=4", "--set", "per_device_train_batch_size=4",
    "--set", "max_completion_length=8", "--set", "max_steps=1", "--set", "save_steps=1",
    "--set", "logging_steps=1", "--set", "reward_funcs=[accuracy,format]", "--set", "seed=0",
]  # fmt: skip


def test_a_method_registered_in_a_test_module_trains_one_step_through_the_cli(
    registered, e2e_inputs, tmp_path, monkeypatch
):
    for name in ("model", "data"):
        shutil.copytree(e2e_inputs / name, tmp_path / name)
    monkeypatch.chdir(tmp_path)
    argv = ["train", "--model-dir", "model", "--train-data", "data/syn_train.jsonl", "--run-dir", "run"]
    assert cli.main([*argv, "--set", f"cw_method={registered}", *TRAIN]) == 0
    logged = [json.loads(line) for line in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    steps = [row for row in logged if "cw/sign_flip_calls" in row]
    assert [row["step"] for row in steps] == [1]
    assert steps[0]["cw/sign_flip_calls"] == 1.0  # the method ran on every loss micro-batch of the step
    assert "cw/weight_mean" in steps[0]  # and the trainer's diagnostics ran beside it
