"""The third study's accounts: every run's recorded commit against the registration, CPU against the budget.

Issue 35 asks for the pilot criterion's and the registration's commits as ancestors of every CW-GRPO run
(``git merge-base --is-ancestor``) and for CPU-hours against the registered budget. Each run records the
commit it ran at (``run.json``: ``provenance.git``); each ``cwgrpo`` job logs its CPU
(``resource use: cwgrpo <command>: <s> s CPU``). A job killed with its session logs none and is rerun
from its start, so its CPU is charged from Snakemake's own log: every job an invocation started and never
finished counts as much as the rerun that finished it, read from the log file both wrote (an upper bound:
the killed attempt did at most the same work); a job that failed is charged its wall time on its one
thread. Run from the checkout that ran the study, after its last job:

    python benchmarks/study_smollm2/account.py --out benchmarks/results/study_smollm2_account.json
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parents[1]))
from bench_tiny_jobs import LINE, job_cpu  # the "resource use" lines of the job logs
from dag_job_walls import all_jobs  # Snakemake's own log: each job's start, log file and finish

PILOT_CRITERION = "3a778a5"  # docs/study/pilot-smollm2.md, before any pilot run
REGISTRATION = "6e24205"  # docs/study/preregistration-smollm2.md, before any CW-GRPO run
BUDGET_CPU_H = 12.0


def is_ancestor(older: str, newer: str) -> bool:
    """``git merge-base --is-ancestor``: True when ``older`` is ``newer`` or one of its ancestors."""
    done = subprocess.run(
        ["git", "merge-base", "--is-ancestor", older, newer], capture_output=True, check=False
    )
    if done.returncode not in (0, 1):
        raise SystemExit(f"git merge-base failed for {older} {newer}: {done.stderr.decode().strip()}")
    return done.returncode == 0


def run_commits(runs: Path) -> dict[str, dict]:
    """run folder -> its recorded commit, whether the tree was clean, and both ancestry checks."""
    out = {}
    for record in sorted(runs.glob("*/*/*/run.json")):
        git = json.loads(record.read_text())["provenance"]["git"]
        commit = git["commit"]
        out[str(record.parent.relative_to(runs))] = {
            "commit": commit,
            "dirty": git["dirty"],
            "pilot_criterion_is_ancestor": is_ancestor(PILOT_CRITERION, commit),
            "registration_is_ancestor": is_ancestor(REGISTRATION, commit),
        }
    return out


def killed_jobs(jobs: list[dict]) -> list[dict]:
    """The jobs (``dag_job_walls.all_jobs``) that Snakemake started and neither finished nor reported failed
    (run after the study's last job: a running job counts too)."""
    return [job for job in jobs if job["end"] is None and job["failed"] is None]


def failed_cpu(jobs: list[dict]) -> dict[str, float]:
    """Rule -> seconds from start to reported failure of its failed jobs (one thread each: an upper bound
    of their CPU, which a failed job does not log)."""
    charged: dict[str, float] = {}
    for job in jobs:
        if job["failed"] is not None:
            wall = (job["failed"] - job["start"]).total_seconds()
            charged[job["rule"]] = charged.get(job["rule"], 0.0) + wall
    return charged


def killed_cpu(killed: list[dict], root: Path) -> dict[str, float]:
    """Rule -> CPU seconds charged to its killed jobs: each the CPU its log file (under ``root``) records,
    which the rerun that finished the job wrote over the killed attempt's."""
    charged: dict[str, float] = {}
    for job in killed:
        log = root / (job["log"] or "")
        found = LINE.findall(log.read_text(errors="replace")) if job["log"] and log.is_file() else []
        if not found:
            raise SystemExit(f"a killed {job['rule']} job whose log {job['log']} records no finished rerun")
        charged[job["rule"]] = charged.get(job["rule"], 0.0) + sum(float(cpu) for _, cpu in found)
    return charged


def cpu_seconds(logs: Path) -> dict[str, float]:
    """CPU seconds per ``cwgrpo`` command over every job log of the study."""
    return {command: round(sum(s), 1) for command, s in sorted(job_cpu(logs).items())}


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--runs", type=Path, default=Path("results/study-smollm2/runs"))
    p.add_argument("--logs", type=Path, default=Path("logs/study-smollm2"))
    p.add_argument("--greedy", type=Path, default=Path("results/study-smollm2/greedy"))
    p.add_argument("--snakemake-log", type=Path, default=Path("results/study-smollm2.log"))
    p.add_argument("--out", type=Path, required=True)
    args = p.parse_args(argv)
    commits = run_commits(args.runs)
    jobs = all_jobs(args.snakemake_log.read_text())
    killed = killed_jobs(jobs)
    charged = {f"killed {rule} (upper bound)": round(s, 1) for rule, s in killed_cpu(killed, Path()).items()}
    charged |= {f"failed {rule} (wall, upper bound)": round(s, 1) for rule, s in failed_cpu(jobs).items()}
    cpu = (
        cpu_seconds(args.logs) | {"greedy evaluate": cpu_seconds(args.greedy).get("evaluate", 0.0)} | charged
    )
    hours = round(sum(cpu.values()) / 3600, 2)
    out = {
        "runs": len(commits),
        "every_run_after_both": all(
            c["pilot_criterion_is_ancestor"] and c["registration_is_ancestor"] and not c["dirty"]
            for c in commits.values()
        ),
        "commits": sorted({c["commit"] for c in commits.values()}),
        "killed_jobs": [job["log"] for job in killed],
        "cpu_s": cpu,
        "cpu_hours": hours,
        "budget_cpu_hours": BUDGET_CPU_H,
        "per_run": commits,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(out, indent=1) + "\n")
    print(f"{out['runs']} runs at {out['commits']}; after the pilot criterion and the registration, clean: "
          f"{out['every_run_after_both']}; {hours} CPU-hours of {BUDGET_CPU_H}")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
