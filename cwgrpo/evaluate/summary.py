"""What ``cwgrpo evaluate`` writes of one benchmark: a line per sample, and the summary's accuracy fields.

``cwgrpo grade --summary-in`` recomputes summaries with the same ``summarise``.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from cwgrpo.grading.scoring import GradeResult
from cwgrpo.io import read_json


def benchmark_identity(path: Path) -> dict[str, str | None]:
    """A benchmark file's registry name, display name and mirrored paper benchmark, from its manifest."""
    from cwgrpo.data.registry import manifest_path

    stem = path.name.removesuffix(".jsonl")
    manifest = manifest_path(path)
    found = read_json(manifest) if manifest.is_file() else {}
    name = _text(found, "name") or stem
    return {
        "benchmark": name,
        "benchmark_display": _text(found, "display") or name,
        "benchmark_mirror": _text(found, "mirrors"),
    }


def _text(mapping: dict[str, Any], key: str) -> str | None:
    value = mapping.get(key)
    return value if isinstance(value, str) and value else None


def _finite_or_none(x: float) -> float | None:
    return x if math.isfinite(x) else None


def sample_rows(records: list[dict], completions: list[list], grades: list[GradeResult]) -> list[dict]:
    """Per-sample lines, problem-major (grades are in the same order as the flattened completions)."""
    rows = []
    flat = iter(grades)
    for rec, outs in zip(records, completions, strict=True):
        for j, completion in enumerate(outs):
            g = next(flat)
            rows.append(
                {
                    "id": rec["id"],
                    "sample": j,
                    "completion": completion.text,
                    "extracted": g.extracted,
                    "gold": rec["answer"],
                    "correct": g.correct,
                    "correct_strict": g.correct,
                    "unscorable": g.unscorable,
                    "timed_out_strict": g.timed_out,
                    "truncated": completion.truncated,
                    "tokens": completion.n_tokens,
                }
            )
    return rows


def accuracy_fields(rows: list[dict], k: int, seed: int, key: str = "correct") -> dict[str, Any]:
    """``pass1``, ``avg_k`` and its SE and interval from the rows' verdicts ``key`` (k rows a problem)."""
    from cwgrpo.stats import accuracy_summary

    table = [[bool(r[key]) for r in rows[i : i + k]] for i in range(0, len(rows), k)]
    acc = accuracy_summary(table, seed=seed)
    return {
        "pass1": acc["pass1"],
        "avg_k": acc["avg_k"],
        "avg_k_se": _finite_or_none(acc["avg_k_se"]),
        "avg_k_ci95": [_finite_or_none(x) for x in acc["avg_k_ci95"]],
    }


def summarise(rows: list[dict], k: int, seed: int, metric: str = "strict") -> dict[str, Any]:
    """The summary's accuracy fields: the primary ``metric``'s on top, each scored one under ``by_metric``."""
    acc = accuracy_fields(rows, k, seed)
    scored = [m for m in ("strict", "paper") if rows and f"correct_{m}" in rows[0]]
    return {
        "n_problems": -(-len(rows) // k),
        "k": k,
        "primary_metric": metric,
        **acc,
        "by_metric": {
            m: {**accuracy_fields(rows, k, seed, f"correct_{m}"), "n_timed_out": timed_out(rows, m)}
            for m in scored
        },
        "n_samples": len(rows),
        "n_truncated": sum(bool(r["truncated"]) for r in rows),
        "n_unscorable": sum(bool(r["unscorable"]) for r in rows),
        "n_timed_out": timed_out(rows, metric),
    }


def timed_out(rows: list[dict], metric: str) -> int:
    """How many answers ran out of ``metric``'s grading budget (graded wrong for it)."""
    return sum(bool(r.get(f"timed_out_{metric}")) for r in rows)


def summary_line(name: str, summary: dict[str, Any]) -> str:
    """The log's one line of a benchmark's result, every number to three decimals."""
    lo, hi = ("none" if x is None else f"{x:.3f}" for x in summary["avg_k_ci95"])
    line = f"{name}: pass1 {summary['pass1']:.3f}, avg@{summary['k']} {summary['avg_k']:.3f} [{lo}, {hi}]"
    if summary.get("n_truncated"):  # campaign #92: an answer cut at max_new_tokens is rarely a right one
        line += f"; {summary['n_truncated']} of {summary['n_samples']} answers cut at max_new_tokens"
    if summary.get("n_timed_out"):
        line += f"; {summary['n_timed_out']} answers ran out of grading time and count as wrong"
    return line
