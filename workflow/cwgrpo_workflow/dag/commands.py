"""Command-line pieces of the workflow's `cwgrpo` calls, shell-quoted, from a job's wildcards and files."""

from __future__ import annotations

import shlex
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

TAGGED = ("size", "method", "seed", "step")  # the wildcards a job's results are tagged with


def tags(**values: Any) -> str:
    return " ".join(f"--tag {shlex.quote(f'{k}={v}')}" for k, v in values.items())


def job_tags(wildcards: Any) -> str:
    return tags(**{k: getattr(wildcards, k) for k in TAGGED if hasattr(wildcards, k)})


def file_args(*columns: tuple[str, Sequence[str]]) -> str:
    """`FLAG FILE ...` for each row of parallel file lists, given as (flag, files) columns."""
    flags = [flag for flag, _ in columns]
    rows = zip(*(files for _, files in columns), strict=True)
    return " ".join(
        " ".join(f"{flag} {shlex.quote(f)}" for flag, f in zip(flags, row, strict=True)) for row in rows
    )


def eval_files(wildcards: Any, input: Any, output: Any, rows: slice = slice(None)) -> str:
    """`--benchmark-file F --out O --summary S` per benchmark, for the outputs in ``rows``."""
    outs = [("--out", output.samples[rows]), ("--summary", output.summaries[rows])]
    return file_args(("--benchmark-file", input.benchmarks), *outs)


def eval_run_models(wildcards: Any, input: Any, output: Any, checkpoints: Mapping[int, str]) -> str:
    """`--model-dir D --tag ... --benchmark-file F ...` for every checkpoint (step -> folder) of a run."""
    n, parts = len(input.benchmarks), []
    for i, (step, folder) in enumerate(checkpoints.items()):
        tag = tags(size=wildcards.size, method=wildcards.method, seed=wildcards.seed, step=step)
        files = eval_files(wildcards, input, output, slice(i * n, (i + 1) * n))
        parts.append(f"--model-dir {shlex.quote(folder)} {tag} {files}")
    return " ".join(parts)


def grade_files(wildcards: Any, input: Any, output: Any) -> str:
    return file_args(
        ("--in", input.samples),
        ("--out", output.samples),
        ("--summary-in", input.summaries),
        ("--summary-out", output.summaries),
    )


def grade_args(config: Mapping[str, Any]) -> str:
    evaluate = config["evaluate"]
    return (
        f"--primary {shlex.quote(evaluate['primary_metric'])} --processes {int(evaluate['grade_processes'])}"
    )


def fetch_args(config: Mapping[str, Any], wildcards: Any) -> str:
    spec = config["sizes"][wildcards.size]
    source, revision = spec.get("model") or spec["model_id"], spec.get("revision")
    return f"--source {shlex.quote(source)}" + (f" --revision {shlex.quote(revision)}" if revision else "")


def runs_arg(wildcards: Any, input: Sequence[str]) -> str:
    dirs = [shlex.quote(str(Path(f).parent)) for f in input if Path(f).name == "run.json"]
    return f"--runs {' '.join(dirs)}" if dirs else ""


def summaries_arg(wildcards: Any, input: Sequence[str]) -> str:
    files = [shlex.quote(f) for f in input if f.endswith(".summary.json")]
    return f"--summaries {' '.join(files)}" if files else ""


def configfile_args(files: Sequence[str | Path]) -> str:
    return "".join(f" --configfile {shlex.quote(str(f))}" for f in files)


def finished_message(
    shown: Sequence[tuple[str, str]], table1: str | None, silent: Sequence[str], configfiles: str, report: str
) -> str:
    """The block a finished run ends with: Table 1, the runs without learning signal, where the outputs are,
    and the report command."""
    lines = [table1.rstrip(), ""] if table1 else []
    if silent:
        lines += [
            f"No learning signal in {len(silent)} run{'s' if len(silent) > 1 else ''} (Table 1 marks their "
            "rows †, the claims they feed are 'not testable'; each job's log has the numbers):",
            *(f"  {s}" for s in silent),
            "",
        ]
    lines += ["Results of this run:", *(f"{what}: {path}" for what, path in shown)]
    return "\n".join([*lines, f"report: snakemake --report {report}{configfiles}"])
