"""benchmarks/dag_job_walls.py: wall seconds per job kind from a Snakemake log (hand-made log, hand sums)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
_spec = importlib.util.spec_from_file_location("dag_job_walls", REPO / "benchmarks" / "dag_job_walls.py")
walls = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(walls)

LOG = """\
Building DAG of jobs...
[Tue Dec  1 09:00:00 2026]
localrule build_tiny:
    output: results/tiny/models/small/init.json
    jobid: 3
    wildcards: size=small

[Tue Dec  1 09:00:00 2026]
rule train_small:
    input: results/tiny/models/small/base.json
    log: logs/tiny/train/small/grpo/seed0.log, results/tiny/runs/small/grpo/seed0/timings.jsonl
    jobid: 7

[Tue Dec  1 09:00:09 2026]
Finished jobid: 3 (Rule: build_tiny)
1 of 4 steps (25%) done
[Tue Dec  1 09:01:10 2026]
Finished jobid: 7 (Rule: train_small)
[Tue Dec  1 09:01:10 2026]
localrule train_large:
    jobid: 8
[Tue Dec  1 09:02:40 2026]
Finished jobid: 8 (Rule: train_large)
[Tue Dec  1 09:02:41 2026]
localrule evaluate_run_small:
    jobid: 9
"""


def test_each_finished_job_is_timed_from_its_start_stamp_to_its_finish_stamp():
    jobs = walls.job_walls(LOG)
    assert sorted(jobs) == ["3", "7", "8"]  # job 9 never finished: left out
    assert {j["rule"] for j in jobs.values()} == {"build_tiny", "train_small", "train_large"}


def test_kinds_drop_the_size_and_the_makespan_spans_first_start_to_last_finish():
    report = walls.summary(walls.job_walls(LOG))
    assert report["kinds"]["train"] == {"jobs": 2, "job_seconds": 70.0 + 90.0, "per_job": 80.0}
    assert report["kinds"]["build_tiny"]["job_seconds"] == 9.0
    assert report["makespan_s"] == 160.0 and report["jobs"] == 3 and report["job_seconds"] == 169.0
    assert walls.kind_of("evaluate_run_large") == "evaluate_run"


def test_a_log_appended_by_two_invocations_keeps_their_jobs_apart_and_names_the_unfinished():
    """A resumed study appends to one log and job ids restart: job 7 of the second run is another job."""
    resumed = LOG + "Building DAG of jobs...\n[Tue Dec  1 10:00:00 2026]\nrule train_small:\n    jobid: 7\n"
    jobs = walls.all_jobs(resumed)
    assert [(j["jobid"], j["rule"], j["end"] is None) for j in jobs] == [
        ("3", "build_tiny", False),
        ("7", "train_small", False),
        ("8", "train_large", False),
        ("9", "evaluate_run_small", True),
        ("7", "train_small", True),
    ]


def test_a_killed_job_is_charged_the_cpu_its_rerun_wrote_to_the_same_log(tmp_path):
    """The third study's account (benchmarks/study_smollm2/account.py): job 9 never finished, so it is
    charged what its log file records (the rerun's CPU); a killed job with no finished rerun is refused."""
    _account = importlib.util.spec_from_file_location(
        "account", REPO / "benchmarks" / "study_smollm2" / "account.py"
    )
    account = importlib.util.module_from_spec(_account)
    _account.loader.exec_module(account)
    killed_twice = LOG.replace("localrule evaluate_run_small:", "localrule train_small:\n    log: t.log")
    killed_twice += "Building DAG of jobs...\n[Tue Dec  1 10:00:00 2026]\nrule train_small:\n    log: t.log\n    jobid: 2\n"
    killed = account.killed_jobs(walls.all_jobs(killed_twice))
    assert [(j["rule"], j["log"]) for j in killed] == [("train_small", "t.log")] * 2
    with pytest.raises(
        SystemExit, match=r"a killed train_small job whose log t\.log records no finished rerun"
    ):
        account.killed_cpu(killed, tmp_path)
    (tmp_path / "t.log").write_text("step 16\nresource use: cwgrpo train: 812.50 s CPU (user+sys)\n")
    assert account.killed_cpu(killed, tmp_path) == {"train_small": 2 * 812.5}
    # a job Snakemake reports failed is not a killed one: it is charged its wall time on one thread
    failed = (
        killed_twice
        + "[Tue Dec  1 10:00:22 2026]\nError in rule train_small:\n    message: None\n    jobid: 2\n"
    )
    assert len(account.killed_jobs(walls.all_jobs(failed))) == 1
    assert account.failed_cpu(walls.all_jobs(failed)) == {"train_small": 22.0}
