"""The Makefile's checks of its variables, run with `make -n` (nothing is built)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("variable", ["VLLM_VENV", "LIGHTEVAL_VENV", "VENV"])
def test_make_refuses_an_environment_folder_with_a_space_before_any_recipe(tmp_path, variable):
    if shutil.which("make") is None:
        pytest.skip("no make here")
    folder = tmp_path / "my envs" / "vllm"
    done = subprocess.run(
        ["make", "-C", str(REPO), "-n", "vllm", f"{variable}={folder}"], capture_output=True, text=True
    )
    assert done.returncode != 0
    assert f"{variable}='{folder}': give one folder path without spaces" in done.stderr
    assert "venv" not in done.stdout  # no recipe line printed: `python -m venv` would make two folders


def test_make_tiny_first_prints_its_jobs_and_expected_time_then_runs_the_dag():
    if shutil.which("make") is None:
        pytest.skip("no make here")
    done = subprocess.run(["make", "-C", str(REPO), "-n", "tiny"], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    lines = [line.strip() for line in done.stdout.splitlines()]
    plan = next(
        i for i, line in enumerate(lines) if "cwgrpo plan --brief --configfile config/config.yaml" in line
    )
    assert lines[plan + 1].endswith("snakemake --cores all"), lines  # the DAG right after, as planned


def test_the_tiny_dags_expected_time_is_the_measured_one(tmp_path):
    """The estimate `make tiny` prints, from the per-job estimates (workflow/cwgrpo_workflow/resources/budgets.yaml), against
    docs/performance.md's measured run on 2 idle cores: 37 jobs, a DAG makespan of 397 s."""
    from cwgrpo_workflow.dag.plan import brief, dry_run_jobs, load_budgets, makespan_hours

    jobs = dry_run_jobs([REPO / "config" / "config.yaml"], REPO / "Snakefile", tmp_path, forceall=False)
    page = (REPO / "docs" / "performance.md").read_text()
    assert "a DAG makespan of 397 s" in page and f"{len(jobs)} jobs" in page
    assert 0.85 * 397 <= makespan_hours(jobs, load_budgets("tiny"), 2) * 3600 <= 1.15 * 397
    assert brief(jobs, load_budgets("tiny"), 2, load=0.3).startswith(
        "37 jobs to run: about 7 min on 2 idle cores"
    )
    busy = brief(jobs, load_budgets("tiny"), 2, load=10.0).splitlines()[1]
    assert (
        busy
        == "This machine is busy (load average 10.0 on 2 cores): expect about 6x as long, 40 min or more."
    )
