"""Wall seconds per job kind of one Snakemake run, read from its log: for comparing two commits.

bench_tiny_jobs.py reads the CPU seconds each `cwgrpo` command logs, which older commits did not log.
Snakemake's own log (``.snakemake/log/<time>.snakemake.log``) has, at every commit, a time stamp before
each job starts and before each ``Finished jobid``, so the wall seconds of every job, the number of jobs
of each kind and the run's makespan can be compared before and after a change:

    python benchmarks/dag_job_walls.py .snakemake/log/<time>.snakemake.log --out walls.json

Time stamps have a resolution of one second. Wall seconds of jobs that ran at the same time add up to
more than the makespan (two cores: up to twice). A job's kind is its rule's name with a model size or a
benchmark split after it taken off (``train_small`` -> ``train``, ``evaluate_run_large`` ->
``evaluate_run``).
"""

from __future__ import annotations

import argparse
import re
import sys
from collections import defaultdict
from datetime import datetime
from pathlib import Path

from cwgrpo.io import write_json

STAMP = re.compile(r"^\[(\w{3} \w{3} +\d+ \d\d:\d\d:\d\d \d{4})\]$")
START = re.compile(r"^(?:local)?rule (\S+):$")
JOBID = re.compile(r"^\s+jobid: (\d+)$")
LOGFILE = re.compile(r"^\s+log: ([^,\s]+)")
FINISHED = re.compile(r"^Finished jobid: (\d+)")
FAILED = re.compile(r"^Error in rule (\S+):$")
SUFFIXES = re.compile(r"_(small|large|135m|1_5b|7b)$")


def all_jobs(log: str) -> list[dict]:
    """Every job the log started, in order: {'jobid', 'rule', 'log', 'start', 'end', 'failed'} (its first log
    file or None; datetimes, 'end' None for a job that never finished, 'failed' the time Snakemake reported
    its error, else None). Job ids restart with each invocation
    ("Building DAG of jobs..."), so a log that several invocations appended to (a study resumed across
    sessions) reads right."""
    out: list[dict] = []
    jobs: dict[str, dict] = {}
    stamp: datetime | None = None
    rule: str | None = None
    logfile: str | None = None
    failing = False
    for line in log.splitlines():
        if line == "Building DAG of jobs...":
            jobs = {}
        elif m := STAMP.match(line):
            stamp = datetime.strptime(" ".join(m[1].split()), "%a %b %d %H:%M:%S %Y")
        elif m := START.match(line):
            rule, logfile = m[1], None
        elif FAILED.match(line):
            failing = True
        elif m := LOGFILE.match(line):
            logfile = m[1]
        elif m := JOBID.match(line):
            if failing:  # the id of the job an "Error in rule" block reports
                if m[1] in jobs:
                    jobs[m[1]]["failed"] = stamp
                failing = False
            elif rule is not None:
                job = {
                    "jobid": m[1],
                    "rule": rule,
                    "log": logfile,
                    "start": stamp,
                    "end": None,
                    "failed": None,
                }
                jobs[m[1]] = job
                out.append(job)
                rule = None
        elif (m := FINISHED.match(line)) and m[1] in jobs:
            jobs[m[1]]["end"] = stamp
    return out


def job_walls(log: str) -> dict[str, dict]:
    """jobid -> {'rule', 'start', 'end'} of every job that finished in one invocation's log."""
    return {job["jobid"]: job for job in all_jobs(log) if job["end"] and job["start"]}


def kind_of(rule: str) -> str:
    return SUFFIXES.sub("", rule)


def summary(jobs: dict[str, dict]) -> dict:
    kinds: dict[str, list[float]] = defaultdict(list)
    for job in jobs.values():
        kinds[kind_of(job["rule"])].append((job["end"] - job["start"]).total_seconds())
    start = min(job["start"] for job in jobs.values())
    end = max(job["end"] for job in jobs.values())
    ordered = sorted(kinds.items(), key=lambda kv: -sum(kv[1]))
    return {
        "makespan_s": (end - start).total_seconds(),
        "jobs": len(jobs),
        "job_seconds": sum(map(sum, kinds.values())),
        "kinds": {k: {"jobs": len(v), "job_seconds": sum(v), "per_job": sum(v) / len(v)} for k, v in ordered},
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("log", type=Path, help="a Snakemake run's log (.snakemake/log/*.snakemake.log)")
    parser.add_argument("--out", type=Path, help="JSON report to write")
    args = parser.parse_args(argv)
    jobs = job_walls(args.log.read_text(errors="replace"))
    if not jobs:
        parser.error(f"no finished jobs in {args.log}")
    report = summary(jobs)
    print(f"{'kind':<22} {'jobs':>4} {'job-s':>7} {'per job':>8}")
    for kind, row in report["kinds"].items():
        print(f"{kind:<22} {row['jobs']:>4} {row['job_seconds']:>7.0f} {row['per_job']:>8.1f}")
    print(
        f"{'all':<22} {report['jobs']:>4} {report['job_seconds']:>7.0f}   makespan {report['makespan_s']:.0f} s"
    )
    if args.out:
        write_json(args.out, report)
    return 0


if __name__ == "__main__":
    sys.exit(main())
