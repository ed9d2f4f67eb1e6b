"""What the sample browser shows, read from evaluation files: cells, their samples and the choice shown.

A cell is one evaluation file (a benchmark at one checkpoint of one run), read through its summary; a line
or file that cannot be used becomes an :class:`Issue` (where, why) instead of stopping the page.
:mod:`cwgrpo_workflow.report.samples` is the command, :mod:`cwgrpo_workflow.report.samples` the HTML.
"""

from __future__ import annotations

import hashlib
import json
import random
import re
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from cwgrpo.configs import ConfigError
from cwgrpo_workflow.report.options import PAPER_BENCHMARKS, ReportConfig

METRICS = ("strict", "paper")  # cwgrpo.evaluate.grade's metrics: the verdict `correct_<m>`, the answer below
ANSWER_KEYS = {"strict": "extracted", "paper": "paper_pred"}
CELL_TAGS = ("size", "method", "seed", "step")


@dataclass
class SamplesConfig(ReportConfig):
    per_cell: int = field(default=10, metadata={"help": "samples shown per benchmark x method x checkpoint"})
    sample_seed: int = field(default=0, metadata={"help": "seed of the choice of samples shown"})
    max_chars: int = field(
        default=6000,
        metadata={"help": "longest completion shown whole; a longer one keeps its head and (longer) tail"},
    )

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.per_cell < 1:
            raise ConfigError(f"per_cell: expected an integer >= 1, got {self.per_cell}")
        if self.max_chars < 100:
            raise ConfigError(f"max_chars: expected an integer >= 100, got {self.max_chars}")


@dataclass(frozen=True)
class Issue:
    """Something the page could not use: where (``file`` or ``file:line``) and why."""

    where: str
    why: str


@dataclass(frozen=True)
class Sample:
    line: int  # 1-based line of the samples file
    problem_id: str
    index: int  # the sample's number among the k of its problem
    completion: str
    gold: str
    correct: bool  # the primary metric's verdict
    truncated: bool
    unscorable: bool
    verdicts: dict[str, bool]  # metric -> verdict
    answers: dict[str, str | None]  # metric -> extracted answer
    problem: str | None = None

    @property
    def disagree(self) -> bool:
        return len(set(self.verdicts.values())) > 1


@dataclass
class Cell:
    """One evaluation file: a benchmark at one checkpoint of one run."""

    benchmark: str
    benchmark_display: str
    mirror: str | None  # the paper benchmark it stands in for, as its summary says
    tags: dict[str, str]
    samples_path: Path
    metrics: tuple[str, ...]
    primary: str
    rows: list[Sample] = field(default_factory=list)
    shown: list[Sample] = field(default_factory=list)

    def counts(self) -> dict[str, int]:
        """Over the whole file: samples, wrong ones (primary metric), disagreements, truncated ones."""
        return {
            "samples": len(self.rows),
            "wrong": sum(not s.correct for s in self.rows),
            "disagree": sum(s.disagree for s in self.rows),
            "truncated": sum(s.truncated for s in self.rows),
        }


# -- reading ------------------------------------------------------------------------------------------
def samples_path_of(summary: Path) -> Path:
    """``X.summary.json`` -> ``X.jsonl`` (``cwgrpo evaluate`` and ``cwgrpo grade`` name them so)."""
    if not summary.name.endswith(".summary.json"):
        raise ValueError("not a *.summary.json file")
    return summary.with_name(summary.name.removesuffix(".summary.json") + ".jsonl")


def parse_sample(obj: Any, metrics: tuple[str, ...], primary: str) -> Sample:
    """One samples line, checked; a ValueError says what is wrong with it."""
    if not isinstance(obj, dict):
        raise ValueError(f"not a JSON object but {type(obj).__name__}")
    for key in ("completion", "gold"):
        if not isinstance(obj.get(key), str):
            raise ValueError(f"no string {key!r}")
    for key in ("truncated", *(f"correct_{m}" for m in metrics)):
        if not isinstance(obj.get(key), bool):
            raise ValueError(f"no true/false {key!r}")
    if not isinstance(obj.get("id"), str | int) or not isinstance(obj.get("sample", 0), int):
        raise ValueError("no 'id' (string) or 'sample' (integer)")
    answers = {m: _answer_text(obj.get(ANSWER_KEYS[m])) for m in metrics}
    verdicts = {m: obj[f"correct_{m}"] for m in metrics}
    return Sample(
        line=0,
        problem_id=str(obj["id"]),
        index=int(obj.get("sample", 0)),
        completion=obj["completion"],
        gold=obj["gold"],
        correct=verdicts[primary],
        truncated=obj["truncated"],
        unscorable=bool(obj.get("unscorable", False)),
        verdicts=verdicts,
        answers=answers,
    )


def _valid_unicode(obj: Any) -> Any:
    """``obj`` if its text can be written as UTF-8; a JSON escape of a lone surrogate (``"\\ud800"``) parses
    but cannot be written, so the page would fail whole: a ValueError names the line instead."""
    try:
        json.dumps(obj, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError:
        raise ValueError("text that is not valid Unicode (a lone surrogate)") from None
    return obj


def _answer_text(value: Any) -> str | None:
    if isinstance(value, list):  # the paper metric: every prediction lighteval extracted
        return ", ".join(map(str, value)) or None
    return None if value is None else str(value)


def read_samples(path: Path, metrics: tuple[str, ...], primary: str) -> tuple[list[Sample], list[Issue]]:
    """The good lines of a samples file and one :class:`Issue` per bad one (``file:line``, why)."""
    rows, issues = [], []
    with open(path, encoding="utf-8", errors="replace") as f:
        for number, text in enumerate(f, start=1):
            if not text.strip():
                continue
            try:
                row = parse_sample(_valid_unicode(json.loads(text)), metrics, primary)
            except json.JSONDecodeError as err:
                issues.append(Issue(f"{path}:{number}", f"not JSON ({err.msg})"))
                continue
            except ValueError as err:
                issues.append(Issue(f"{path}:{number}", str(err)))
                continue
            rows.append(replace(row, line=number))
    return rows, issues


def read_cell(summary_path: Path) -> tuple[Cell, tuple[str, str] | None]:
    """The cell a summary describes (its samples not yet read) and the benchmark file it names (path,
    SHA-256); a ValueError says why the summary cannot be used."""
    try:
        summary = _valid_unicode(json.loads(summary_path.read_text(encoding="utf-8")))
    except (OSError, UnicodeDecodeError) as err:
        raise ValueError(f"cannot be read ({err})") from err
    except json.JSONDecodeError as err:
        raise ValueError(f"not JSON ({err.msg} at line {err.lineno})") from err
    if not isinstance(summary, dict) or not isinstance(summary.get("benchmark"), str):
        raise ValueError("not an evaluation summary (no 'benchmark')")
    tags = summary.get("tags")
    if not isinstance(tags, dict) or any(t not in tags for t in CELL_TAGS):
        raise ValueError(f"its 'tags' lack one of {list(CELL_TAGS)}")
    scored = summary.get("by_metric")
    metrics = tuple(m for m in METRICS if isinstance(scored, dict) and m in scored) or ("strict",)
    primary = summary.get("primary_metric", "strict")
    if primary not in metrics:
        raise ValueError(f"primary_metric {primary!r} is not among its metrics {list(metrics)}")
    return Cell(
        benchmark=summary["benchmark"],
        benchmark_display=str(summary.get("benchmark_display") or summary["benchmark"]),
        mirror=summary.get("benchmark_mirror")
        if summary.get("benchmark_mirror") in PAPER_BENCHMARKS
        else None,
        tags={t: str(tags[t]) for t in CELL_TAGS},
        samples_path=samples_path_of(summary_path),
        metrics=metrics,
        primary=primary,
    ), _benchmark_file(summary)


def _benchmark_file(summary: dict[str, Any]) -> tuple[str, str] | None:
    prov = summary.get("provenance")
    if isinstance(prov, dict) and isinstance(prov.get("benchmark_file"), str):
        return prov["benchmark_file"], str(prov.get("benchmark_sha256", ""))
    return None


def benchmark_files(summaries: list[Path]) -> list[Path]:
    """The benchmark files the readable summaries name: read for the problems, so never an output."""
    found = []
    for path in summaries:
        try:
            source = read_cell(path)[1]
        except ValueError:
            continue
        if source is not None:
            found.append(Path(source[0]))
    return found


def problem_texts(source: tuple[str, str] | None, cache: dict, issues: list[Issue]) -> dict[str, str]:
    """id -> problem of the benchmark file a summary names, if it is there unchanged (else one Issue)."""
    if source is None:
        return {}
    if source not in cache:
        path, sha = Path(source[0]), source[1]
        cache[source] = {}
        if not path.is_file():
            issues.append(Issue(str(path), "benchmark file not found: its problems are not shown"))
        elif hashlib.sha256(path.read_bytes()).hexdigest() != sha:
            issues.append(Issue(str(path), "benchmark file changed since the evaluation: problems not shown"))
        else:
            try:
                records = [
                    _valid_unicode(json.loads(line))
                    for line in path.read_text(encoding="utf-8").splitlines()
                    if line.strip()
                ]
            except ValueError as err:  # not UTF-8 or not JSON lines: not a file `cwgrpo evaluate` read
                issues.append(Issue(str(path), f"benchmark file unreadable ({err}): problems not shown"))
                records = []
            for rec in records:
                if isinstance(rec, dict) and "id" in rec and isinstance(rec.get("problem"), str):
                    cache[source][str(rec["id"])] = rec["problem"]
    return cache[source]


def choose(rows: list[Sample], n: int, seed: int, key: str) -> list[Sample]:
    """A fixed choice of ``n`` rows (in file order) for a cell: the same seed and key give the same rows."""
    if len(rows) <= n:
        return list(rows)
    picked = sorted(random.Random(f"{seed}/{key}").sample(range(len(rows)), n))
    return [rows[i] for i in picked]


def load_cells(summaries: list[Path], cfg: SamplesConfig) -> tuple[list[Cell], list[Issue]]:
    """Every usable cell with its samples read and its shown ones chosen; what could not be used."""
    cells, issues, problem_cache = [], [], {}
    for path in _once(summaries):
        try:
            cell, source = read_cell(path)
        except ValueError as err:
            issues.append(Issue(str(path), str(err)))
            continue
        if not cell.samples_path.is_file():
            issues.append(Issue(str(cell.samples_path), f"samples file of {path} not found"))
            continue
        rows, bad = read_samples(cell.samples_path, cell.metrics, cell.primary)
        issues += bad
        problems = problem_texts(source, problem_cache, issues)
        cell.rows = [replace(r, problem=problems.get(r.problem_id)) for r in rows]
        key = "/".join([cell.benchmark, *cell.tags.values()])
        cell.shown = choose(cell.rows, cfg.per_cell, cfg.sample_seed, key)
        cells.append(cell)
    display = {c.benchmark: c.benchmark_display for c in cells}
    cfg.adopt_benchmark_names(display, {c.benchmark: c.mirror for c in cells if c.mirror})
    return order_cells(cells, cfg), issues


def _once(paths: list[Path]) -> list[Path]:
    """Each file once, in the order first named (a glob and a path may name one file twice)."""
    first: dict[Path, Path] = {}
    for path in paths:
        first.setdefault(path.resolve(), path)
    return list(first.values())


def order_cells(cells: list[Cell], cfg: SamplesConfig) -> list[Cell]:
    """Benchmark, then method, then checkpoint (size, step, seed), in the report's orders."""
    benchmarks = cfg.order_benchmarks({c.benchmark for c in cells}) if cells else []
    methods = cfg.order_methods({c.tags["method"] for c in cells})
    sizes = cfg.order_sizes({c.tags["size"] for c in cells}) if cells else []

    def key(c: Cell) -> tuple:
        t = c.tags
        return (
            _index(benchmarks, c.benchmark),
            _index(methods, t["method"]),
            _index(sizes, t["size"]),
            _number(t["step"]),
            _number(t["seed"]),
        )

    return sorted(cells, key=key)


def _index(order: list[str], value: str) -> int:
    return order.index(value) if value in order else len(order)


def _number(text: str) -> tuple[int, str]:
    return (int(text), "") if re.fullmatch(r"-?[0-9]+", text) else (1 << 62, text)  # not '--5', '²'
