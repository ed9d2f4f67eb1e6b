"""A run killed while it prunes the optimiser state of an older checkpoint resumes from the newest one.

The kill is placed exactly: the training process runs with cwgrpo.train.checkpoints' file removal replaced by one
that removes its first file and then exits at once (os._exit: no handler, no cleanup, as SIGKILL).
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys

import pytest

from tests.e2e.test_resume import TRAIN

pytestmark = pytest.mark.slow

STEPS = ["--set", "max_steps=6"]  # checkpoints 2, 4, 6 (TRAIN saves every 2 steps)
DIE_WHILE_PRUNING = """
import os, sys
import cwgrpo.train.checkpoints as checkpoints
real_remove = checkpoints._remove
def remove_one_then_die(path):
    real_remove(path)
    os._exit(137)
checkpoints._remove = remove_one_then_die
from cwgrpo.cli import main
sys.exit(main(sys.argv[1:]))
"""
WEIGHTS = ("model.safetensors", "config.json", "tokenizer.json")


def test_killed_while_pruning_resumes_and_ends_with_one_optimiser_state(e2e_inputs, tmp_path):
    for name in ("model", "data"):
        shutil.copytree(e2e_inputs / name, tmp_path / name)
    run = tmp_path / "run"
    args = [*TRAIN, *STEPS]
    first = subprocess.run(
        [sys.executable, "-c", DIE_WHILE_PRUNING, *args],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert first.returncode == 137, first.stderr[-3000:]
    # Killed in checkpoint-4's save callback, after it was complete, inside the pruning of checkpoint-2.
    assert (run / "checkpoint-4" / "cwgrpo_complete.json").is_file()
    assert (run / "checkpoint-4" / "optimizer.pt").is_file()
    assert (run / "checkpoint-2" / "cwgrpo_pruned.json").is_file()
    assert not (run / "checkpoint-2" / "optimizer.pt").exists()
    assert not (run / "checkpoint-6").exists()

    second = subprocess.run(
        [sys.executable, "-m", "cwgrpo.cli", *args], cwd=tmp_path, capture_output=True, text=True, timeout=600
    )
    assert second.returncode == 0, second.stderr[-3000:]
    assert json.loads((run / "run.json").read_text())["resumed_from"].endswith("checkpoint-4")
    steps = [json.loads(line)["step"] for line in (run / "metrics.jsonl").read_text().splitlines()]
    assert steps == list(range(1, 7)), "metrics.jsonl must hold each optimiser step exactly once"
    for step in (2, 4, 6):
        ckpt = run / f"checkpoint-{step}"
        assert all((ckpt / name).is_file() for name in WEIGHTS), (
            f"{ckpt.name} lost weights an evaluation reads"
        )
        assert (ckpt / "optimizer.pt").is_file() == (step == 6), f"{ckpt.name}: optimiser state"
        assert not (ckpt / "rng_state.pth").exists() or step == 6
        assert json.loads((run / "steps" / f"step{step}.json").read_text())["step"] == step
