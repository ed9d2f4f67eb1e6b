"""Load result files into tidy pandas frames, grouped by the ``tags`` they carry (never by their paths).

Evaluation summaries (:func:`summaries_frame`, one row per file), run folders (:func:`metrics_frame`, one
row per logged step), ``cov_samples.jsonl`` (:func:`cov_samples`) and the paper's reported numbers, in the
formats of ``docs/architecture.md``. Accuracies stay fractions in [0, 1], as the summaries store them.
"""

from __future__ import annotations

import argparse
import itertools
import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, TypeVar

import numpy as np
import pandas as pd

from cwgrpo.configs import config_from_args
from cwgrpo.io import (
    ResultFileError,
    check_arguments_not_overwritten,
    read_json,
    read_jsonl,
)
from cwgrpo_workflow.report.options import AVG, PAPER_BENCHMARKS, ReportConfig

T = TypeVar("T")
REPORTED_PATH = Path(__file__).resolve().parent.parent / "resources" / "reported.json"


# -- the inputs of a report command ------------------------------------------------------------------
def add_input_arguments(parser: Any, *, runs: bool = True, required: bool = True) -> None:
    """``--summaries`` (and ``--runs``) as every report command takes them: repeatable lists of files.

    ``required=False`` (``cwgrpo figure``, whose kinds need one or the other): both default to empty.
    """
    multi: dict[str, Any] = {"action": "extend", "type": Path}
    multi |= {"nargs": "+", "required": True} if required else {"nargs": "*", "default": []}
    parser.add_argument("--summaries", help="evaluation *.summary.json files; repeatable", **multi)
    if runs:
        parser.add_argument(
            "--runs", help="run folders (run.json, metrics.jsonl, cov_samples.jsonl); repeatable", **multi
        )


def command_options(cls: type[T], args: argparse.Namespace, outputs: Sequence[str]) -> T:
    """A report command's options (``cls`` from ``--set``/``--config``), once no output of ``args`` (the
    ``dests`` in ``outputs``) is one of its inputs: each command's ``run()`` starts with it."""
    cfg = config_from_args(cls, args)
    check_arguments_not_overwritten(args, outputs)
    return cfg


# -- the paper's numbers ----------------------------------------------------------------------------
def load_reported(path: str | Path | None = None) -> dict[str, Any]:
    """The paper's reported numbers (``workflow/cwgrpo_workflow/resources/reported.json`` unless ``path`` is given)."""
    return read_json(path or REPORTED_PATH)


def _long_frame(
    rows: Sequence[Mapping[str, Any]], benchmarks: Sequence[str], size: str | None = None
) -> pd.DataFrame:
    """One row per (row, benchmark): size (``size``, else the row's), method, step, benchmark, value."""
    wide = pd.DataFrame(list(rows))
    if size:
        wide["size"] = size
    return wide.melt(["size", "method", "step"], list(benchmarks), "benchmark")


def reported_table1(reported: Mapping[str, Any]) -> pd.DataFrame:
    """Reported Table 1 as a long frame: size, method, step, benchmark (incl. ``avg``), value (percent)."""
    return _long_frame(reported["table1"]["rows"], (*PAPER_BENCHMARKS, AVG))


def reported_checkpoints(reported: Mapping[str, Any]) -> pd.DataFrame:
    """Reported checkpoint study: size, method, step, benchmark, value (percent)."""
    block = reported["checkpoints"]
    return _long_frame(block["rows"], block["benchmarks"], block["size"])


# -- evaluation summaries ---------------------------------------------------------------------------
SUMMARY_COLUMNS = [
    "size", "method", "seed", "step", "benchmark", "accuracy", "accuracy_se", "accuracy_ci_lo",
    "accuracy_ci_hi", "metric", "k", "n_problems", "n_samples", "n_truncated", "n_timed_out", "limit", "pass1", "avg_k", "benchmark_display",
    "benchmark_mirror", "path",
]  # fmt: skip


def _tag(tags: Mapping[str, Any], key: str, path: Path, kind: type) -> Any:
    if key not in tags:
        raise ResultFileError(f"{path}: tags lack {key!r} (have {sorted(tags)})")
    try:
        return kind(tags[key])
    except (TypeError, ValueError) as err:
        raise ResultFileError(f"{path}: tag {key}={tags[key]!r} is not {kind.__name__}") from err


def _check_fraction(path: Path, key: str, value: Any, upper: float = 1.0) -> None:
    """An accuracy-like field, when present, is a finite number in [0, ``upper``]."""
    if value is None:
        return
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise ResultFileError(f"{path}: {key} must be a finite number, got {value!r}")
    if not 0 <= value <= upper:
        raise ResultFileError(f"{path}: {key}={value} is outside [0, {upper:g}] (a fraction, not a percent)")


def _check_summary_values(path: Path, s: Mapping[str, Any]) -> None:
    k = s.get("k", 1)
    if k is not None and (isinstance(k, bool) or not isinstance(k, int) or k < 1):
        raise ResultFileError(f"{path}: k must be an integer >= 1, got {k!r}")
    for key in ("pass1", "avg_k"):
        _check_fraction(path, key, s.get(key))
    _check_fraction(path, "avg_k_se", s.get("avg_k_se"), upper=0.5)
    ci = s.get("avg_k_ci95")
    if isinstance(ci, list):
        for i, x in enumerate(ci):
            _check_fraction(path, f"avg_k_ci95[{i}]", x)
    for key in ("n_samples", "n_truncated", "n_timed_out"):  # counts Table 1 reads
        n = s.get(key)
        if n is not None and (isinstance(n, bool) or not isinstance(n, int) or n < 0):
            raise ResultFileError(f"{path}: {key} must be an integer >= 0, got {n!r}")


def _summary_row(path: Path, s: Mapping[str, Any]) -> dict[str, Any]:
    if not isinstance(s, Mapping) or "benchmark" not in s or not isinstance(s.get("tags"), Mapping):
        raise ResultFileError(f"{path}: not an evaluation summary (needs 'benchmark' and a 'tags' mapping)")
    _check_summary_values(path, s)
    tags = s["tags"]
    k = int(s.get("k") or 1)
    # avg@k is the metric; with k == 1 it is pass@1. Fall back to whichever the file has.
    use_avg = k > 1 and s.get("avg_k") is not None
    acc = s.get("avg_k") if use_avg else s.get("pass1", s.get("avg_k"))
    if acc is None:
        raise ResultFileError(f"{path}: summary has neither 'pass1' nor 'avg_k'")
    ci = s.get("avg_k_ci95") if use_avg else None
    if not ci or len(ci) != 2 or any(x is None for x in ci):  # evaluate writes None for a NaN bound
        ci = (None, None)
    return {
        "size": _tag(tags, "size", path, str),
        "method": _tag(tags, "method", path, str),
        "seed": _tag(tags, "seed", path, int),
        "step": _tag(tags, "step", path, int),
        "benchmark": str(s["benchmark"]),
        "accuracy": float(acc),
        "accuracy_se": _float(s.get("avg_k_se")) if use_avg else math.nan,
        "accuracy_ci_lo": _float(ci[0]),
        "accuracy_ci_hi": _float(ci[1]),
        "metric": f"avg@{k}" if use_avg else "pass@1",
        "k": k,
        "n_problems": int(s.get("n_problems") or 0),
        "n_samples": int(s.get("n_samples") or 0),
        "n_truncated": int(s.get("n_truncated") or 0),
        "n_timed_out": int(s.get("n_timed_out") or 0),
        "limit": (s.get("settings") or {}).get("limit"),  # evaluate's `limit`: only the first N problems
        "pass1": _float(s.get("pass1")),
        "avg_k": _float(s.get("avg_k")),
        "benchmark_display": _optional_text(s, "benchmark_display", path),
        "benchmark_mirror": _optional_text(s, "benchmark_mirror", path),
        "path": str(path),
    }


def _float(value: Any) -> float:
    return math.nan if value is None else float(value)


def _optional_text(s: Mapping[str, Any], key: str, path: Path) -> str | None:
    value = s.get(key)
    if value is not None and not isinstance(value, str):
        raise ResultFileError(f"{path}: {key} must be a string or null, got {value!r}")
    return value or None


def summaries_frame(paths: Sequence[str | Path]) -> pd.DataFrame:
    """One row per summary file (columns :data:`SUMMARY_COLUMNS`); duplicates of one tag set are errors."""
    if not paths:
        raise ResultFileError("no evaluation summaries given (--summaries)")
    rows = [_summary_row(Path(p), read_json(p)) for p in paths]
    frame = pd.DataFrame(rows, columns=SUMMARY_COLUMNS)
    key = ["size", "method", "seed", "step", "benchmark"]
    dup = frame[frame.duplicated(key, keep=False)]
    if not dup.empty:
        first = dup.iloc[0]
        same = dup[(dup[key] == first[key]).all(axis=1)]["path"].tolist()
        raise ResultFileError(f"several summaries share the tags {dict(first[key])}: {same}")
    return frame


def carried_benchmark_names(frame: pd.DataFrame) -> tuple[dict[str, str], dict[str, str]]:
    """The display name and paper mirror that each benchmark's summaries carry (from the data manifests).

    Summaries of one benchmark that disagree (data prepared from two registries) are an error.
    """
    carried: dict[str, dict[str, str]] = {"benchmark_display": {}, "benchmark_mirror": {}}
    for benchmark, group in frame.groupby("benchmark", sort=True):
        for column, found in carried.items():
            values = sorted(set(group[column].dropna()))
            if len(values) > 1:
                raise ResultFileError(
                    f"the summaries of benchmark {benchmark!r} disagree on {column}: {values} "
                    f"({', '.join(group['path'])})"
                )
            if values:
                found[str(benchmark)] = values[0]
    return carried["benchmark_display"], carried["benchmark_mirror"]


def load_summaries(paths: Sequence[str | Path], cfg: ReportConfig) -> pd.DataFrame:
    """:func:`summaries_frame`, with the benchmark names the summaries carry adopted by ``cfg`` (where its
    options name none): the report names and places each benchmark from the files it reads."""
    frame = summaries_frame(paths)
    cfg.adopt_benchmark_names(*carried_benchmark_names(frame))
    cfg.mark_first_problems(first_problems(frame))
    return frame


def first_problems(frame: pd.DataFrame) -> dict[str, int]:
    """Benchmark -> N for each benchmark evaluated on its first N problems only (evaluate's ``limit`` cut
    every one of its summaries to N problems), so that its name can say so."""
    out = {}
    for benchmark, group in frame.groupby("benchmark", sort=True):
        limits = set(group["limit"].tolist())
        if len(limits) == 1 and None not in limits and (group["n_problems"] == next(iter(limits))).all():
            out[str(benchmark)] = int(next(iter(limits)))
    return out


def _matching(frame: pd.DataFrame, tags: Mapping[str, Any]) -> pd.DataFrame:
    return frame[(frame[list(tags)] == pd.Series(tags)).all(axis=1)]


def require(frame: pd.DataFrame, what: str, **tags: Any) -> pd.DataFrame:
    """Rows of ``frame`` matching ``tags``; an empty selection is an error naming what is missing."""
    sel = _matching(frame, tags)
    if sel.empty:
        desc = " ".join(f"{k}={v}" for k, v in tags.items())
        have = ""
        if "step" in tags and "step" in frame:
            steps = sorted(set(_matching(frame, {k: v for k, v in tags.items() if k != "step"})["step"]))
            have = f" (steps present for the rest of those tags: {steps})" if steps else ""
        raise ResultFileError(f"no {what} for {desc}{have}")
    return sel


def per_seed_accuracy(
    frame: pd.DataFrame, size: str, method: str, step: int, benchmarks: Sequence[str]
) -> pd.DataFrame:
    """Seeds x benchmarks accuracies (plus column ``avg``) of one (size, method, step).

    Every seed must have every benchmark: a hole is an error naming the missing summaries.
    """
    sel = require(frame, "evaluation summaries", size=size, method=method, step=step)
    wide = sel.pivot(index="seed", columns="benchmark", values="accuracy")
    missing = [b for b in benchmarks if b not in wide.columns]
    if missing:
        raise ResultFileError(
            f"no summaries for benchmark(s) {missing} at size={size} method={method} step={step}"
        )
    wide = wide[list(benchmarks)].sort_index()
    holes = [(int(s), b) for s in wide.index for b in benchmarks if pd.isna(wide.loc[s, b])]
    if holes:
        raise ResultFileError(
            f"missing summaries at size={size} method={method} step={step} for (seed, benchmark) {holes}"
        )
    wide[AVG] = wide[list(benchmarks)].mean(axis=1)
    return wide


# -- run folders -------------------------------------------------------------------------------------
def run_info(run_dir: str | Path) -> dict[str, Any]:
    """``run.json`` of a run folder with its tags checked: ``{size, method, seed, config_hash, provenance}``."""
    path = Path(run_dir) / "run.json"
    info = read_json(path)
    tags = info.get("tags") if isinstance(info, Mapping) else None
    if not isinstance(tags, Mapping):
        raise ResultFileError(f"{path}: needs a 'tags' mapping with size, method, seed")
    return {
        "size": _tag(tags, "size", path, str),
        "method": _tag(tags, "method", path, str),
        "seed": _tag(tags, "seed", path, int),
        "config_hash": info.get("config_hash"),
        "provenance": info.get("provenance") or {},
        "run_dir": str(run_dir),
    }


def _logging_interval(run_dir: str | Path) -> int | None:
    """``logging_steps`` of a run, from its run.json (None if it does not say, or is a fraction)."""
    try:
        value = read_json(Path(run_dir) / "run.json").get("config", {}).get("trl", {}).get("logging_steps")
    except (ResultFileError, AttributeError):
        return None
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 1 else None


def _check_no_gap(path: Path, steps: list[int], interval: int | None) -> None:
    """A curve must not silently skip logged steps: every multiple of the logging interval (from
    run.json, else the smallest step difference) up to the last step must be there (a run resumed after
    its live logs were lost would otherwise be drawn from the resume point)."""
    positive = [s for s in steps if s > 0]
    if not positive:
        return
    if interval is None:
        diffs = [b - a for a, b in itertools.pairwise(positive)]
        interval = min(diffs) if diffs else positive[0]
    missing = [s for s in range(interval, positive[-1] + 1, interval) if s not in set(positive)]
    if missing:
        shown = f"{missing[0]}-{missing[-1]}" if len(missing) > 2 else ", ".join(map(str, missing))
        raise ResultFileError(
            f"{path} has no line for step(s) {shown} (every {interval} step(s) are logged up to step "
            f"{positive[-1]}): a curve would hide that gap"
        )


def metrics_frame(run_dirs: Sequence[str | Path]) -> pd.DataFrame:
    """Per-step training metrics of every run, tagged with size, method and seed (one row per step)."""
    if not run_dirs:
        raise ResultFileError("no run folders given (--runs)")
    frames = []
    for run_dir in run_dirs:
        info = run_info(run_dir)
        path = Path(run_dir) / "metrics.jsonl"
        records = read_jsonl(path)
        if not records:
            raise ResultFileError(f"{path} is empty")
        if any("step" not in r for r in records):
            raise ResultFileError(f"{path}: every line needs a 'step'")
        f = pd.DataFrame.from_records(records)
        f["step"] = f["step"].astype(int)
        _check_no_gap(path, sorted(set(f["step"])), _logging_interval(run_dir))
        # A resumed run may log a step twice; the last line wins.
        f = f.drop_duplicates("step", keep="last").sort_values("step")
        for tag in ("seed", "method", "size"):
            f.insert(0, tag, info[tag])
        f["run_dir"] = str(run_dir)
        frames.append(f)
    out = pd.concat(frames, ignore_index=True)
    dup = out[out.duplicated(["size", "method", "seed", "step"], keep=False)]
    if not dup.empty:
        raise ResultFileError(
            f"several run folders share tags size/method/seed: {sorted(set(dup['run_dir']))}"
        )
    return out


def need_columns(metrics: pd.DataFrame, *columns: str) -> None:
    """Each of ``columns`` was logged (metrics.jsonl) by at least one of the runs in ``metrics``."""
    for column in columns:
        if column not in metrics.columns or metrics[column].isna().all():
            runs = sorted(set(metrics["run_dir"]))
            raise ResultFileError(f"no {column!r} in metrics.jsonl of the runs {runs}")


def cov_samples(run_dir: str | Path) -> list[dict[str, Any]]:
    """Lines of ``cov_samples.jsonl``: ``{step, cov: array, weight: array}`` (arrays as float64).

    A missing file is an error; an empty one (sampling switched off) gives an empty list.
    """
    path = Path(run_dir) / "cov_samples.jsonl"
    out = []
    for i, r in enumerate(read_jsonl(path), start=1):
        if "cov" not in r or "step" not in r:
            raise ResultFileError(f"{path}:{i}: needs 'step' and 'cov'")
        try:  # a foreign line ({"cov": {...}}, a ragged list, "step": "x"): named, not a traceback
            cov = np.asarray(r["cov"], dtype=float)
            weight = np.asarray(r.get("weight", [math.nan] * cov.size), dtype=float)
            step = int(r["step"])
        except (TypeError, ValueError):
            raise ResultFileError(
                f"{path}:{i}: 'step' must be an integer, 'cov' and 'weight' lists of numbers"
            ) from None
        if weight.shape != cov.shape:
            raise ResultFileError(f"{path}:{i}: 'cov' and 'weight' differ in length")
        out.append({"step": step, "cov": cov, "weight": weight})
    return out
