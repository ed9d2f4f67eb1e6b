"""``cwgrpo plan``: a preset's jobs, resources, estimates and wall time, before anything runs.

Jobs and resources are Snakemake's own (a dry run with the same config files, in the folder the workflow
would run in); estimates per job: ``resources/budgets.yaml``. ``--brief`` (``make tiny``): the jobs still
to run and their expected time on this machine's cores.
"""

from __future__ import annotations

import argparse
import heapq
import math
import os
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
from cwgrpo_workflow.report.options import markdown_table

BUDGETS = Path(__file__).resolve().parents[1] / "resources" / "budgets.yaml"
_RULE = re.compile(r"^(?:local)?rule (\w+):$")
_ERROR_LINE = re.compile(r"^\w*(Error|Exception)\b")
REPORT_RULES = ("table", "claims", "samples", "study")  # and figure_*: the `report` resources kind


@dataclass(frozen=True)
class Job:
    rule: str
    wildcards: Mapping[str, str] = field(default_factory=dict)
    resources: Mapping[str, str] = field(default_factory=dict)
    inputs: tuple[str, ...] = ()
    outputs: tuple[str, ...] = ()

    @property
    def kind(self) -> str:
        """The job's kind in the preset's `resources:` (train, evaluate, grade, report, ...)."""
        prefix = next((k for k in ("train_", "evaluate", "grade") if self.rule.startswith(k)), None)
        if prefix:
            return prefix.rstrip("_")
        return "report" if self.rule in REPORT_RULES or self.rule.startswith("figure_") else self.rule

    @property
    def nodes(self) -> int:
        return int(self.resources.get("nodes", 1))

    @property
    def gpus(self) -> int:
        """GPUs of the whole job: `gpu`, or a multi-node job's GPUs per node (`gres`) x its nodes."""
        if "gpu" in self.resources:
            return int(self.resources["gpu"])
        gres = self.resources.get("gres", "")
        return int(gres.rsplit(":", 1)[1]) * self.nodes if gres.startswith("gpu") else 0

    @property
    def cpus(self) -> int:
        """CPUs of each node (Slurm's cpus-per-task; Snakemake gives a rule without threads one)."""
        return int(self.resources.get("cpus_per_task", 1))

    @property
    def runtime_h(self) -> float | None:
        runtime = self.resources.get("runtime")
        return int(runtime) / 60 if runtime is not None else None


def _items(value: str) -> list[str]:
    return [item for item in value.split(", ") if item]


def parse_dry_run(text: str) -> list[Job]:
    """The jobs of ``snakemake -n`` output."""
    jobs: list[Job] = []
    rule: str | None = None
    fields: dict[str, Any] = {}
    for line in [*text.splitlines(), "rule end:"]:
        match = _RULE.match(line.strip()) if not line.startswith(" ") else None
        if match or (rule and not line.startswith("    ")):
            if rule:
                jobs.append(Job(rule, **fields))
            rule, fields = (match.group(1) if match else None), {}
            continue
        key, _, value = line.strip().partition(": ")
        if rule and key in ("wildcards", "resources"):
            fields[key] = dict(item.split("=", 1) for item in _items(value) if "=" in item)
        elif rule and key in ("input", "output"):
            fields[f"{key}s"] = tuple(_items(value))
    return [j for j in jobs if j.rule != "end"]


def preset_kind(configfiles: Sequence[Path]) -> Any:
    """The ``kind`` of the config files merged as ``snakemake --configfile A B`` merges them."""
    from snakemake.utils import update_config

    config: dict = {}
    for path in configfiles:
        update_config(config, yaml.safe_load(path.read_text(encoding="utf-8")) or {})
    return config.get("kind", "tiny")


def dry_run_jobs(
    configfiles: Sequence[Path], snakefile: Path, workdir: Path | None = None, forceall: bool = True
) -> list[Job]:
    """Snakemake's jobs of the preset (every one with ``forceall``), from a dry run in ``workdir`` (default:
    this folder), whose relative paths the preset's are."""
    exe = Path(sys.executable).with_name("snakemake")
    exe = str(exe) if exe.exists() else shutil.which("snakemake")
    if exe is None:
        raise ConfigError("cwgrpo plan needs snakemake (pip install 'cwgrpo[workflow]')")
    for path, flag in (*((c, "--configfile") for c in configfiles), (snakefile, "--snakefile")):
        if path.is_dir():
            raise ConfigError(f"{flag} {path}: a folder, not a file; name the file itself")
        if not path.is_file():
            raise ConfigError(f"{flag} {path}: no such file")
    workdir = Path.cwd() if workdir is None else workdir
    cmd = [exe, "-n", "-s", str(snakefile.resolve()), "-d", str(workdir), *(["--forceall"] * forceall)]
    cmd += ["--configfile", *(str(c.resolve()) for c in configfiles)]
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=workdir)
    if proc.returncode != 0:
        names = " ".join(map(str, configfiles))
        raise ConfigError(f"the dry run of {names} failed: {dry_run_error(proc.stdout + proc.stderr)}")
    return parse_dry_run(proc.stdout + proc.stderr)


def dry_run_error(output: str) -> str:
    """The ``...Error: ...`` lines of a failed dry run (with the message that follows), else its last lines."""
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


def load_budgets(kind: Any = "paper", path: Path = BUDGETS) -> dict[str, dict[str, dict[str, float]]]:
    return (yaml.safe_load(path.read_text(encoding="utf-8")) or {}).get(kind) or {}


def budget(job: Job, budgets: Mapping[str, Any], key: str) -> float:
    value = _estimate(job, budgets, key)
    if value is None and key == "gpu_hours" and job.gpus:
        raise ConfigError(
            f"no budget for {job.kind} jobs of size {job.wildcards.get('size')!r} in {BUDGETS.name} "
            f"(sizes: {sorted(budgets)}): add its gpu_hours there"
        )
    return float(value or 0.0)


def _estimate(job: Job, budgets: Mapping[str, Any], key: str) -> Any:
    size = budgets.get(job.wildcards.get("size"), {})
    own = {**size.get(job.kind, {}), **size.get(f"{job.kind}@{job.nodes}nodes", {})}
    return own.get(key, budgets.get("any", {}).get(job.kind, {}).get(key))


def job_hours(job: Job, budgets: Mapping[str, Any]) -> float | None:
    gpu_hours = _estimate(job, budgets, "gpu_hours")
    if gpu_hours is not None and job.gpus:
        return float(gpu_hours) / job.gpus
    hours = _estimate(job, budgets, "hours")
    return None if hours is None else float(hours)


def wall_hours(jobs: Sequence[Job], budgets: Mapping[str, Any], gpus: int) -> float:
    """Hours until every GPU job has finished on ``gpus`` GPUs (greedy; CPU jobs take no time)."""
    # In the jobs' names' order, not the dry run's (which follows the options files' hashes): ties stable.
    work = sorted((j for j in jobs if j.gpus), key=lambda j: (j.rule, sorted(j.wildcards.items())))
    if work and max(j.gpus for j in work) > gpus:
        widest = max(j.gpus for j in work)
        raise ConfigError(f"a job needs {widest} GPUs, more than {gpus}: plan for {widest} or more (--gpus)")
    hours = {id(j): budget(j, budgets, "gpu_hours") / j.gpus for j in work}
    order = {id(j): i for i, j in enumerate(work)}
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
            heapq.heappush(running, (now + hours[id(job)], order[id(job)], job))
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


def makespan_hours(jobs: Sequence[Job], budgets: Mapping[str, Any], cores: int) -> float:
    """Hours until every job has finished on ``cores`` cores (greedy, each after the jobs making its inputs)."""
    made_by = {path: i for i, job in enumerate(jobs) for path in job.outputs}
    deps = [{made_by[f] for f in job.inputs if f in made_by} - {i} for i, job in enumerate(jobs)]
    hours = [job_hours(job, budgets) or 0.0 for job in jobs]
    need = [min(job.cpus, cores) for job in jobs]
    now, free, waiting, done, running = 0.0, cores, list(range(len(jobs))), set(), []
    while waiting or running:
        for i in list(waiting):
            if need[i] <= free and deps[i] <= done:
                waiting.remove(i)
                free -= need[i]
                heapq.heappush(running, (now + hours[i], i))
        if not running:
            raise ConfigError(f"{len(waiting)} job(s) wait for inputs no job of the dry run makes")
        now, i = heapq.heappop(running)
        free += need[i]
        done.add(i)
    return now


def duration(hours: float | None) -> str:
    if hours is None:
        return "—"
    if hours >= 1:
        return f"{hours:.0f} h" if hours >= 10 or hours == round(hours) else f"{hours:.1f} h"
    return f"{hours * 60:.0f} min" if hours * 60 >= 1 else f"{hours * 3600:.0f} s"


def plan_rows(jobs: Sequence[Job]) -> dict[tuple, list[Job]]:
    rows: dict[tuple, list[Job]] = {}
    for job in jobs:
        if job.rule != "all":
            asks = tuple(sorted((k, v) for k, v in job.resources.items() if k != "tmpdir"))
            size = job.wildcards.get("size", "")
            rows.setdefault((job.gpus == 0, not size, size, job.kind, asks), []).append(job)
    return dict(sorted(rows.items()))


def limit_warnings(rows: Mapping[tuple, list[Job]], budgets: Mapping[str, Any]) -> list[str]:
    lines = []
    for (*_, size, kind, _), group in rows.items():
        job = group[0]
        hours, limit = job_hours(job, budgets), job.runtime_h
        if hours is None or limit is None or hours <= limit:
            continue
        where = f"sizes.{size}.resources.{kind}" if size else f"resources.{kind}"
        lines.append(
            f"warning: {kind} {size or ''} jobs take about {duration(hours)} each, more than the "
            f"{duration(limit)} they ask for (runtime {limit * 60:.0f} min): Slurm stops them part-way. "
            f"Set {where}.runtime: {math.ceil(hours) * 60} or more (in an extra --configfile after the preset)"
            + (
                ", or give them more GPUs; a stopped training resumes from its newest checkpoint when rerun"
                if job.gpus
                else ""
            )
        )
    return [" ".join(line.split()) + "." for line in lines]


def plan_markdown(
    configfile: str, jobs: Sequence[Job], budgets: Mapping[str, Any], gpus: Sequence[int]
) -> str:
    """The plan as Markdown: a row per kind of job, size and request, the totals, a warning per estimate
    above its limit, and the wall time of the GPU jobs on each of ``gpus``."""
    rows = plan_rows(jobs)
    lines = [
        f"Plan of `{configfile}` (estimates: `workflow/cwgrpo_workflow/resources/budgets.yaml`, from docs/hardware.md)",
        "",
    ]
    header = ["jobs", "size", "count", "GPUs each", "GPU memory (GB, est.)", "CPUs", "RAM (GB)",
              "runtime asked", "estimate per job", "GPU-hours", "disk (GB)"]  # fmt: skip
    table = []
    total_h = total_disk = 0.0
    for (*_, size, kind, _), group in rows.items():
        job = group[0]
        h = sum(budget(j, budgets, "gpu_hours") for j in group if j.gpus)
        disk = sum(budget(j, budgets, "disk_gb") for j in group)
        total_h, total_disk = total_h + h, total_disk + disk
        each = " per node" if job.nodes > 1 else ""  # Slurm's --cpus-per-task and --mem
        gpus_each = f"{job.gpus} ({job.nodes} nodes)" if job.nodes > 1 else str(job.gpus)
        mem = job.resources.get("mem_mb")
        gpu_mem = _estimate(job, budgets, "gpu_mem_gb") if job.gpus else None
        cells = [
            kind, size or "—", str(len(group)), gpus_each, "—" if gpu_mem is None else f"{gpu_mem:g}",
            f"{job.cpus}{each}", "—" if mem is None else f"{int(mem) / 1000:g}{each}",
            duration(job.runtime_h), duration(job_hours(job, budgets)), f"{h:,.0f}", f"{disk:,.0f}",
        ]  # fmt: skip
        table.append(cells)
    lines += markdown_table(header, table, "ll" + "r" * 9)
    count = sum(len(v) for v in rows.values())
    lines.append(f"| **total** | | **{count}** | | | | | | | **{total_h:,.0f}** | **{total_disk:,.0f}** |")
    warnings = limit_warnings(rows, budgets)
    lines += ["", *warnings] if warnings else []
    if not total_h:
        return "\n".join([*lines, "", "No job needs a GPU."]) + "\n"
    walls = ", ".join(f"{wall_hours(jobs, budgets, n) / 24:.1f} days on {n} GPU{'s' * (n > 1)}" for n in gpus)
    lines += ["", f"Wall time of the GPU jobs (greedy schedule, CPU jobs not counted): {walls}."]
    return "\n".join(lines) + "\n"


def brief(jobs: Sequence[Job], budgets: Mapping[str, Any], cores: int, load: float) -> str:
    """One line (two on a busy machine): the jobs to run and their expected time on ``cores`` idle cores."""
    if not jobs:
        return "Nothing to run: every output is up to date.\n"
    hours = makespan_hours(jobs, budgets, cores)
    unknown = sorted({j.kind for j in jobs if j.rule != "all" and job_hours(j, budgets) is None})
    line = (
        f"{len(jobs)} jobs to run: about {duration(hours)} on {cores} idle core{'s' * (cores > 1)} "
        "(per-job estimates: workflow/cwgrpo_workflow/resources/budgets.yaml, measured in docs/performance.md"
        + (f"; none for {', '.join(unknown)}" if unknown else "")
        + ")."
    )
    if load > cores:
        slower = (load + cores) / cores
        line += (
            f"\nThis machine is busy (load average {load:.1f} on {cores} cores): expect about {slower:.0f}x "
            f"as long, {duration(hours * slower)} or more."
        )
    return line + "\n"


def configure_parser(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--configfile", required=True, type=Path, nargs="+", metavar="FILE",
        help="the preset, then any overlays, merged as Snakemake merges them, e.g. config/paper.yaml "
        "config/paper-7b-2nodes.yaml",
    )  # fmt: skip
    parser.add_argument(
        "--snakefile", type=Path, default=Path("Snakefile"), help="the workflow (default: ./Snakefile)"
    )
    parser.add_argument(
        "--gpus", type=int, nargs="+", default=None, metavar="N",
        help="GPU counts to give the wall time for (default: the largest job's GPUs, x2, x4)",
    )  # fmt: skip
    parser.add_argument(
        "--brief", action="store_true",
        help="one line: the jobs still to run and their expected time on this machine's idle cores "
        "(what `make tiny` prints first)",
    )  # fmt: skip


def run(args: argparse.Namespace) -> int:
    jobs = dry_run_jobs(args.configfile, args.snakefile, forceall=not args.brief)
    budgets = load_budgets(preset_kind(args.configfile))
    if args.brief:
        from cwgrpo.seeding import numerics_note

        cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
        sys.stdout.write(brief(jobs, budgets, cores, os.getloadavg()[0]))
        if preset_kind(args.configfile) == "tiny" and (note := numerics_note()):
            sys.stdout.write(f"Note: {note}.\n")
        return 0
    widest = max((j.gpus for j in jobs), default=0) or 1
    gpus = args.gpus or [widest, 2 * widest, 4 * widest]
    if any(n < 1 for n in gpus):
        raise ConfigError(f"--gpus {' '.join(map(str, gpus))}: each must be >= 1")
    names = " ".join(map(str, args.configfile))
    sys.stdout.write(plan_markdown(names, jobs, budgets, gpus))
    return 0
