"""Same seed, same CPU machine: training metrics and evaluation outputs are byte-identical; another seed differs.

Timing fields are kept out of the compared files by design (``timings.jsonl``); provenance is part of
the compared files, since the runs share one checkout and relative paths.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tests.e2e.conftest import cwgrpo

pytestmark = pytest.mark.slow

COMPARED = [
    "run/metrics.jsonl",
    "run/cov_samples.jsonl",
    "eval/syn_math500.jsonl",
    "eval/syn_math500.summary.json",
]


def _train_and_evaluate(inputs: Path, where: Path, seed: int) -> dict[str, bytes]:
    for name in ("model", "data"):
        shutil.copytree(inputs / name, where / name)
    cwgrpo(
        "train", "--model-dir", "model", "--train-data", "data/syn_train.jsonl", "--run-dir", "run",
        "--tag", "size=small", "--tag", "method=clip_cov", "--tag", f"seed={seed}",
        "--set", "use_cpu=true", "--set", "bf16=false", "--set", "gradient_checkpointing=false",
        "--set", "loss_type=grpo", "--set", "beta=0.0", "--set", "learning_rate=1e-3",
        "--set", "num_generations=4", "--set", "per_device_train_batch_size=8", "--set", "max_completion_length=8",
        "--set", "max_steps=3", "--set", "save_steps=3", "--set", "cw_method=clip_cov", "--set", "clip_cov_ratio=0.2",
        "--set", "clip_cov_lb=-10", "--set", "clip_cov_ub=10", "--set", f"seed={seed}",
        "--set", "reward_funcs=[accuracy,format]",
        cwd=where,
    )  # fmt: skip
    cwgrpo(
        "evaluate", "--model-dir", "run/checkpoint-3", "--benchmark-file", "data/syn_math500.jsonl",
        "--out", "eval/syn_math500.jsonl", "--summary", "eval/syn_math500.summary.json",
        "--tag", f"seed={seed}", "--tag", "step=3", "--set", "k=2", "--set", "limit=16", "--set", f"seed={seed}",
        "--set", "temperature=1.0", "--set", "max_new_tokens=8", "--set", "prompt_set=tiny",
        cwd=where,
    )  # fmt: skip
    return {name: (where / name).read_bytes() for name in COMPARED}


def test_same_seed_gives_identical_bytes_and_another_seed_differs(e2e_inputs, tmp_path):
    runs = {}
    for label, seed in (("a", 0), ("b", 0), ("c", 1)):
        (tmp_path / label).mkdir()
        runs[label] = _train_and_evaluate(e2e_inputs, tmp_path / label, seed)
    for name in COMPARED:
        assert runs["a"][name] == runs["b"][name], f"{name} differs between two runs with the same seed"
    assert runs["a"]["run/metrics.jsonl"] != runs["c"]["run/metrics.jsonl"]
    assert runs["a"]["eval/syn_math500.jsonl"] != runs["c"]["eval/syn_math500.jsonl"]
