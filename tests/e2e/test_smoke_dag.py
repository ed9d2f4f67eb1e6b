"""The smoke preset end to end through Snakemake, in a scratch folder: every rule runs, a rerun does nothing.

The run is the `smoke_run` fixture of tests/conftest.py, built once per test run and shared with the Slurm
test (its local reference)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import run_smoke_dag

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[2]
FIGURES = ["table1.pdf", *(f"{n}.{ext}" for n in ("table1_avg", "entropy", "checkpoints", "covariance", "training_curves") for ext in ("pdf", "png"))]  # fmt: skip


def test_smoke_dag_writes_every_table_figure_and_claims(smoke_run):
    for name in FIGURES:
        data = (smoke_run / "figures" / "smoke" / name).read_bytes()
        assert data[:4] in (b"%PDF", b"\x89PNG") and len(data) > 1000, name
    results = smoke_run / "results" / "smoke"
    for name in (
        "table1.csv",
        "table1.tex",
        "table1.md",
        "reported_vs_ours.md",
        "metric_sensitivity.md",
        "claims.json",
        "claims.md",
    ):
        assert (results / name).stat().st_size > 0, name
    claims = json.loads((results / "claims.json").read_text())
    assert len(claims["claims"]) == 4


def test_smoke_dag_evaluates_every_saved_step_and_the_base_model(smoke_run):
    summaries = sorted((smoke_run / "results" / "smoke" / "eval").rglob("*.summary.json"))
    tags = {
        (s["tags"]["method"], s["tags"]["step"], s["benchmark"])
        for s in map(json.loads, map(Path.read_text, summaries))
    }
    methods = {"grpo", "cw_grpo", "clip_cov", "cw_grpo_described"}
    benchmarks = {"syn_aime24", "syn_math500", "syn_amc23", "syn_minerva", "syn_olympiad"}
    expected = {(m, s, b) for m in methods for s in (2, 4) for b in benchmarks} | {
        ("base", 0, b) for b in benchmarks
    }
    assert tags == expected


def test_smoke_dag_second_invocation_does_nothing(smoke_run):
    proc = run_smoke_dag(smoke_run, "-n")
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "Nothing to be done" in proc.stdout + proc.stderr


def test_a_training_job_stopped_by_ctrl_c_resumes_with_the_same_command(smoke_run, tmp_path):
    """Ctrl-C after a training job's first checkpoint, then the same command, no flag: Snakemake reruns the
    job it marked incomplete (profiles/default sets rerun-incomplete), training resumes from that checkpoint,
    and the run's metrics are byte-identical to the uninterrupted run's."""
    import os
    import shutil
    import signal
    import subprocess
    import sys
    import time

    work = tmp_path / "work"
    shutil.copytree(smoke_run, work, symlinks=True)  # mtimes kept: nothing else is out of date
    run = sorted((work / "results").glob("*/runs/*/grpo/seed0"))[0]
    uninterrupted = (run / "metrics.jsonl").read_bytes()
    shutil.rmtree(run)
    target = str((run / "run.json").relative_to(work))
    snakemake = shutil.which("snakemake", path=str(Path(sys.executable).parent))
    command = [snakemake, "-s", str(REPO / "Snakefile"), "-d", str(work), "--cores", "2", target,
               "--configfile", str(REPO / "config/smoke.yaml")]  # fmt: skip
    env = {k: v for k, v in os.environ.items() if not k.startswith("SLURM")}
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"
    # each checkpoint's save takes 5 s longer (same numbers): the stop lands between the two checkpoints
    slow = REPO / "tests" / "deepspeed" / "slow_rng_save"
    env |= {"CWGRPO_TEST_SLOW_RNG_RANK": "0", "CWGRPO_TEST_SLOW_RNG_S": "5"}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(slow), env.get("PYTHONPATH")]))
    first = subprocess.Popen(command, cwd=REPO, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                             start_new_session=True)  # fmt: skip
    deadline = time.monotonic() + 600
    while not (run / "steps" / "step2.json").exists():
        assert first.poll() is None and time.monotonic() < deadline, "no checkpoint before the job ended"
        time.sleep(0.05)
    os.killpg(first.pid, signal.SIGINT)  # Ctrl-C in the terminal: the whole process group
    first.wait(timeout=120)
    assert not (run / "steps" / "step4.json").exists(), "the job ended before the stop"
    again = subprocess.run(command, cwd=REPO, env=env, capture_output=True, text=True, timeout=1200)
    said = again.stdout + again.stderr
    assert again.returncode == 0, said[-4000:]
    assert "IncompleteFilesException" not in said
    assert (run / "metrics.jsonl").read_bytes() == uninterrupted
    logs = [path.read_text(errors="replace") for path in (work / "logs").rglob("*.log")]
    assert any("resuming from" in text and "checkpoint-2" in text for text in logs), (
        "the rerun did not resume"
    )
