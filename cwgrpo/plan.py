"""``cwgrpo plan``: what a preset will cost before anything runs: its jobs by kind, size and GPUs, with
GPU-hours, disk and the wall time on N GPUs from the budgets in ``resources/budgets.yaml``.

The jobs are Snakemake's own: a dry run (``snakemake -n --forceall``) of the workflow in the folder it
would run in (the preset's relative paths are that folder's), so every job of the preset is listed
whatever is already built, with the GPUs the preset gives it. The
wall time is a greedy schedule on N GPUs: trainings first, each evaluation once its checkpoint exists
(step / last step of its run's training), a job starting as soon as its GPUs are free.
"""

from __future__ import annotations

import argparse
import heapq
import re
import shutil
import subprocess
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from cwgrpo.configs import ConfigError

BUDGETS = Path(__file__).resolve().parent / "resources" / "budgets.yaml"
_RULE = re.compile(r"^(?:local)?rule (\w+):$")
_ERROR_LINE = re.compile(r"^\w*(Error|Exception)\b")


@dataclass(frozen=True)
class Job:
    rule: str
    wildcards: Mapping[str, str] = field(default_factory=dict)
    gpus: int = 0

    @property
    def kind(self) -> str:
        return (
            "train"
            if self.rule.startswith("train_")
            else "evaluate"
            if self.rule.startswith("evaluate")
            else self.rule
        )


def parse_dry_run(text: str) -> list[Job]:
    """The jobs of ``snakemake -n`` output: each ``rule NAME:`` block's wildcards and ``gpu`` resource."""
    jobs: list[Job] = []
    rule, wildcards, gpus = None, {}, 0
    for line in [*text.splitlines(), "rule end:"]:
        match = _RULE.match(line.strip()) if not line.startswith(" ") else None
        if match or (rule and not line.startswith("    ")):
            if rule:
                jobs.append(Job(rule, wildcards, gpus))
            rule, wildcards, gpus = (match.group(1), {}, 0) if match else (None, {}, 0)
            continue
        key, _, value = line.strip().partition(": ")
        if rule and key == "wildcards":
            wildcards = dict(item.split("=", 1) for item in value.split(", "))
        elif rule and key == "resources":
            gpus = int(next((v for k, v in (i.split("=", 1) for i in value.split(", ")) if k == "gpu"), 0))
    return [j for j in jobs if j.rule != "end"]


def dry_run_jobs(configfile: Path, snakefile: Path, workdir: Path | None = None) -> list[Job]:
    """Snakemake's jobs of the preset, every one (``--forceall``: done or not), from a dry run in
    ``workdir`` (default: this folder), the folder whose relative paths the preset's are, as for its run.
    It writes there only what ``snakemake -n`` writes: Snakemake's own ``.snakemake/`` and each job's
    options file, added beside the others, never changed (cwgrpo.dag.options)."""
    exe = Path(sys.executable).with_name("snakemake")
    exe = str(exe) if exe.exists() else shutil.which("snakemake")
    if exe is None:
        raise ConfigError("cwgrpo plan needs snakemake (pip install 'cwgrpo[workflow]')")
    for path, flag in ((configfile, "--configfile"), (snakefile, "--snakefile")):
        if path.is_dir():
            raise ConfigError(f"{flag} {path}: a folder, not a file; name the file itself")
        if not path.is_file():
            raise ConfigError(f"{flag} {path}: no such file")
    workdir = Path.cwd() if workdir is None else workdir
    cmd = [exe, "-n", "--forceall", "-s", str(snakefile.resolve()), "-d", str(workdir)]
    cmd += ["--configfile", str(configfile.resolve())]
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=workdir)
    if proc.returncode != 0:
        raise ConfigError(f"the dry run of {configfile} failed: {dry_run_error(proc.stdout + proc.stderr)}")
    return parse_dry_run(proc.stdout + proc.stderr)


def dry_run_error(output: str) -> str:
    """The lines of a failed dry run that say what is wrong (Snakemake's ``...Error: ...`` lines: a schema
    error's own line comes before its long dump of the schema), else its last lines."""
    raw = [line.rstrip() for line in output.strip().splitlines() if line.strip()]
    lines = [line.strip() for line in raw]
    named: dict[int, str] = {}
    for i, line in enumerate(lines):
        if not _ERROR_LINE.match(line):
            continue
        named[i] = line
        j = i + 1
        if line.endswith(":") and j < len(lines):  # its message on the next line
            named[j] = lines[j]
            j += 1
            # a message ending in ':' ("4 config errors:") lists its items indented below it
            listed = lines[j - 1].endswith(":")
            while listed and j < len(lines) and raw[j].startswith("  ") and not lines[j].startswith("File "):
                named[j] = lines[j]
                j += 1
    return " ".join(list(named.values())[:24] or lines[-5:])


def load_budgets(path: Path = BUDGETS) -> dict[str, dict[str, dict[str, float]]]:
    return yaml.safe_load(path.read_text(encoding="utf-8"))


def budget(job: Job, budgets: Mapping[str, Any], key: str) -> float:
    """``key`` (gpu_hours, disk_gb) of one job; a GPU job of a size without a budget is an error."""
    size = job.wildcards.get("size")
    value = budgets.get(size, {}).get(job.kind, {}).get(key)
    if value is None and key == "gpu_hours" and job.gpus:
        raise ConfigError(
            f"no budget for {job.kind} jobs of size {size!r} in {BUDGETS.name} (sizes: {sorted(budgets)}): "
            "add its gpu_hours there"
        )
    return float(value or 0.0)


def wall_hours(jobs: Sequence[Job], budgets: Mapping[str, Any], gpus: int) -> float:
    """Hours until every GPU job has finished on ``gpus`` GPUs (greedy; CPU jobs take no time)."""
    work = [j for j in jobs if j.gpus]
    if work and max(j.gpus for j in work) > gpus:
        widest = max(j.gpus for j in work)
        raise ConfigError(f"a job needs {widest} GPUs, more than {gpus}: plan for {widest} or more (--gpus)")
    hours = {id(j): budget(j, budgets, "gpu_hours") / j.gpus for j in work}
    run_of = lambda j: tuple(j.wildcards.get(k) for k in ("size", "method", "seed"))  # noqa: E731
    trains = [j for j in work if j.kind == "train"]
    last_step = {}
    for j in work:
        if j.kind == "evaluate":
            last_step[run_of(j)] = max(last_step.get(run_of(j), 0), int(j.wildcards.get("step", 0)))
    waiting = [j for j in work if j.kind != "train"]
    ready: dict[int, float] = {id(j): 0.0 for j in waiting if run_of(j) not in {run_of(t) for t in trains}}
    now, free, running, queue = 0.0, gpus, [], list(trains)
    while queue or waiting or running:
        startable = [j for j in queue if j.gpus <= free] + sorted(
            (j for j in waiting if ready.get(id(j), float("inf")) <= now and j.gpus <= free),
            key=lambda j: ready[id(j)],
        )
        if startable:
            job = startable[0]
            (queue if job in queue else waiting).remove(job)
            free -= job.gpus
            heapq.heappush(running, (now + hours[id(job)], id(job), job))
            if job.kind == "train":
                for e in waiting:
                    if run_of(e) == run_of(job):
                        step = int(e.wildcards.get("step", 0))
                        ready[id(e)] = now + hours[id(job)] * step / max(last_step[run_of(job)], 1)
            continue
        later = [t for t in (ready.get(id(j)) for j in waiting) if t is not None and t > now]
        if running and (not later or running[0][0] <= min(later)):
            now, _, done = heapq.heappop(running)
            free += done.gpus
        elif later:
            now = min(later)
        else:
            raise ConfigError(f"{len(waiting)} evaluation(s) wait for a training the preset does not run")
    return now


def plan_markdown(
    configfile: str, jobs: Sequence[Job], budgets: Mapping[str, Any], gpus: Sequence[int]
) -> str:
    """The plan as Markdown: a row per GPU job kind (kind, size, GPUs each), one for the CPU jobs, the
    totals, and the wall time on each of ``gpus`` GPUs."""
    rows: dict[tuple[str, str, int], list[Job]] = {}
    for j in jobs:
        if j.rule != "all":
            key = (j.kind, j.wildcards.get("size", ""), j.gpus) if j.gpus else ("CPU jobs", "", 0)
            rows.setdefault(key, []).append(j)
    lines = [
        f"Plan of `{configfile}` (budgets: `cwgrpo/resources/budgets.yaml`, estimates from docs/hardware.md)",
        "",
        "| jobs | size | GPUs each | count | GPU-hours | disk (GB) |",
        "|---|---|---:|---:|---:|---:|",
    ]
    total_h = total_disk = 0.0
    for kind, size, g in sorted(rows, key=lambda k: (k[2] == 0, k[1], k[0])):
        group = rows[(kind, size, g)]
        h = sum(budget(j, budgets, "gpu_hours") for j in group if j.gpus)
        disk = sum(budget(j, budgets, "disk_gb") for j in group)
        total_h, total_disk = total_h + h, total_disk + disk
        lines.append(f"| {kind} | {size or '—'} | {g} | {len(group)} | {h:,.0f} | {disk:,.0f} |")
    count = sum(len(v) for v in rows.values())
    lines.append(f"| **total** | | | **{count}** | **{total_h:,.0f}** | **{total_disk:,.0f}** |")
    if not total_h:
        return "\n".join([*lines, "", "No job needs a GPU."]) + "\n"
    walls = ", ".join(f"{wall_hours(jobs, budgets, n) / 24:.1f} days on {n} GPU{'s' * (n > 1)}" for n in gpus)
    lines += ["", f"Wall time of the GPU jobs (greedy schedule, CPU jobs not counted): {walls}."]
    return "\n".join(lines) + "\n"


def configure_parser(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--configfile", required=True, type=Path, help="the preset, e.g. config/paper.yaml")
    parser.add_argument(
        "--snakefile", type=Path, default=Path("Snakefile"), help="the workflow (default: ./Snakefile)"
    )
    parser.add_argument(
        "--gpus", type=int, nargs="+", default=None, metavar="N",
        help="GPU counts to give the wall time for (default: the largest job's GPUs, x2, x4)",
    )  # fmt: skip


def run(args: argparse.Namespace) -> int:
    jobs = dry_run_jobs(args.configfile, args.snakefile)
    widest = max((j.gpus for j in jobs), default=0) or 1
    gpus = args.gpus or [widest, 2 * widest, 4 * widest]
    if any(n < 1 for n in gpus):
        raise ConfigError(f"--gpus {' '.join(map(str, gpus))}: each must be >= 1")
    sys.stdout.write(plan_markdown(str(args.configfile), jobs, load_budgets(), gpus))
    return 0
