"""``cwgrpo grade``: one verdict per answer, under the metric asked for.

Input: JSONL ``{completion, gold, gold_kind}`` or an evaluation's samples; output: one verdict line per
input line, in order (``docs/architecture.md``, "Verdicts"). With ``--summary-in`` the samples get this
metric's verdict and ``--summary-out`` the summary recomputed from the ``--primary`` metric. A bad line,
or an answer out of its time budget, gets a verdict with a reason and never stops the run.
"""

from __future__ import annotations

import argparse
import json
import math
from pathlib import Path
from typing import Any

from cwgrpo.configs import ConfigError
from cwgrpo.data.registry import gold_kind_for
from cwgrpo.grading.paper_metric.worker import (
    GOLD_KINDS,  # the worker's own list (it imports nothing of ours)
)
from cwgrpo.grading.time_budget import MAX_SECONDS
from cwgrpo.io import read_json, write_json, write_jsonl

METRICS = ("strict", "paper")
PASS_THROUGH = ("id", "sample")


def paper_gold(answer: str, gold_kind: str) -> str:
    """The gold text lighteval gets: ``latex`` wrapped in ``$...$`` (lighteval finds a bare number only inside
    math delimiters), ``expr`` as is."""
    return f"${answer}$" if gold_kind == "latex" and answer.strip() else answer


class BadLine(str):
    """A line that cannot be graded, as its verdict's reason; ``keep``: its valid ``id`` and ``sample``."""

    keep: dict[str, Any]


def _writable(value: Any) -> bool:
    try:
        json.dumps(value, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def read_items(path: Path, gold_kind: str | None) -> list[Any]:
    """Decoded lines; one that is not JSON becomes a string, one not valid Unicode a ``BadLine``."""
    items: list[Any] = []
    with open(path, encoding="utf-8-sig") as f:  # a byte-order mark (an editor's "UTF-8 with BOM") dropped
        for lineno, line in enumerate(f, start=1):
            if not line.strip():
                continue
            try:
                item = json.loads(line)
            except ValueError:
                items.append(line.strip()[:200])
                continue
            if not _writable(item):
                bad = BadLine(f"line {lineno} holds text that is not valid Unicode (a lone surrogate)")
                passed = item.items() if isinstance(item, dict) else ()
                bad.keep = {k: v for k, v in passed if k in PASS_THROUGH and _writable(v)}
                items.append(bad)
                continue
            if isinstance(item, dict) and gold_kind is not None and item.get("gold_kind") in (None, ""):
                item = {**item, "gold_kind": gold_kind}  # null or empty is no kind either
            items.append(item)
    return items


def input_problem(item: Any) -> str | None:
    """Why ``item`` cannot be scored at all, or None."""
    if isinstance(item, BadLine):
        return str(item)
    if not isinstance(item, dict):
        return f"line is not a JSON object: {str(item)[:80]!r}"
    for key in ("completion", "gold"):
        if not isinstance(item.get(key), str):
            return f"{key!r} is missing or not a string"
    if item.get("gold_kind") not in GOLD_KINDS:
        return f"unknown gold_kind {item.get('gold_kind')!r}; known: {', '.join(GOLD_KINDS)}"
    return None


def grade_strict(items: list[Any], processes: int, timeout_s: float) -> list[dict[str, Any]]:
    """Verdicts of today's grader (``cwgrpo.grading.scoring``); the gold kind is checked but not used."""
    from cwgrpo.grading.scoring import grade_many

    problems = [input_problem(it) for it in items]
    good = [i for i, p in enumerate(problems) if p is None]
    grades = grade_many(
        [(items[i]["completion"], items[i]["gold"]) for i in good], processes=processes, timeout_s=timeout_s
    )
    verdicts: list[dict[str, Any]] = [
        {"correct": False, "pred": [], "gold": [], "reason": p, "timed_out": False} for p in problems
    ]
    for i, g in zip(good, grades, strict=True):
        reasons = [
            f"timeout: grading ran past its budget of {timeout_s:g} s of CPU time" if g.timed_out else None,
            "no answer extracted" if g.extracted is None else None,
            "gold not parseable by math-verify" if g.unscorable else None,
        ]
        verdicts[i] = {
            "correct": g.correct,
            "pred": [] if g.extracted is None else [g.extracted],
            "gold": [],
            "reason": "; ".join(r for r in reasons if r) or None,
            "timed_out": g.timed_out,
        }
    return verdicts


def grade_items(
    items: list[Any],
    metric: str,
    processes: int = 2,
    timeout_s: float | None = None,
    lighteval_python: str | Path | None = None,
) -> list[dict[str, Any]]:
    """Verdict lines for ``items`` under ``metric`` (``id``/``sample`` copied, ``metric`` named)."""
    from cwgrpo.grading import paper_metric

    if metric not in METRICS:
        raise ConfigError(f"unknown metric {metric!r}; known: {', '.join(METRICS)}")
    if processes < 1:
        raise ConfigError(f"processes must be >= 1, got {processes}")
    if timeout_s is not None and not (math.isfinite(timeout_s) and 0 < timeout_s <= MAX_SECONDS):
        raise ConfigError(
            f"timeout_s must be a number of seconds > 0 and at most {MAX_SECONDS:g}, got {timeout_s}"
        )
    if metric == "strict":
        from cwgrpo.grading.scoring import DEFAULT_TIMEOUT_S

        verdicts = grade_strict(items, processes, timeout_s or DEFAULT_TIMEOUT_S)
    else:
        python = paper_metric.find_lighteval_python(lighteval_python)
        sent = [i for i, it in enumerate(items) if not isinstance(it, BadLine)]  # the rest cannot be sent
        verdicts = [
            {"correct": False, "pred": [], "gold": [], "reason": str(it), "timed_out": False} for it in items
        ]
        scored = paper_metric.score_paper(
            [items[i] for i in sent],
            python,
            processes=processes,
            timeout_s=timeout_s or paper_metric.DEFAULT_TIMEOUT_S,
        )
        for i, verdict in zip(sent, scored, strict=True):
            verdicts[i] = verdict
    out = []
    for item, verdict in zip(items, verdicts, strict=True):
        keep = item.keep if isinstance(item, BadLine) else {}
        keep = keep or {k: item[k] for k in PASS_THROUGH if isinstance(item, dict) and k in item}
        out.append({**keep, "metric": metric, **verdict})
    return out


def merge_verdicts(
    rows: list[dict[str, Any]], verdicts: list[dict[str, Any]], metric: str, primary: str
) -> list[dict[str, Any]]:
    """Evaluation rows with ``metric``'s verdicts added and ``correct`` set to the ``primary`` metric's."""
    if primary not in METRICS:
        raise ConfigError(f"unknown primary metric {primary!r}; known: {', '.join(METRICS)}")
    merged = []
    for i, (row, verdict) in enumerate(zip(rows, verdicts, strict=True)):
        if not isinstance(row, dict) or "correct" not in row:
            raise ConfigError(f"line {i + 1} of the samples is not an evaluation sample (no 'correct')")
        out = {"correct_strict": row["correct"], **row}
        out |= {f"correct_{metric}": verdict["correct"], f"{metric}_pred": verdict["pred"]}
        out[f"{metric}_reason"] = verdict["reason"]
        out[f"timed_out_{metric}"] = verdict["timed_out"]
        if f"correct_{primary}" not in out:
            raise ConfigError(f"primary metric {primary!r} was not scored for these samples")
        out["correct"] = out[f"correct_{primary}"]
        merged.append(out)
    return merged


def merged_summary(summary: dict[str, Any], rows: list[dict[str, Any]], primary: str) -> dict[str, Any]:
    """The evaluation summary recomputed from merged rows: primary metric on top, each under ``by_metric``."""
    from cwgrpo.evaluate.summary import summarise

    k = int(summary.get("k") or 1)
    seed = int((summary.get("settings") or {}).get("seed", 0))
    if k < 1 or len(rows) % k:
        raise ConfigError(f"{len(rows)} samples do not make whole problems of k={k} samples")
    out = {**summary, **summarise(rows, k, seed, primary)}
    if all("correct_paper" in r for r in rows):
        out["n_disagree"] = sum(r["correct_strict"] != r["correct_paper"] for r in rows)
    return out


OUTPUTS = ("out", "summary_out")  # every other path argument is read (cwgrpo.cli)


def configure_parser(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--metric", required=True, choices=METRICS, help="strict (ours) or paper (lighteval)")
    parser.add_argument(
        "--in",
        dest="inp",
        required=True,
        type=Path,
        action="append",
        help="JSONL of {completion, gold, gold_kind}; repeat (with --out, ...) to grade several files "
        "with one lighteval start",
    )
    parser.add_argument(
        "--out", required=True, type=Path, action="append", help="verdicts JSONL to write (atomically)"
    )
    parser.add_argument(
        "--gold-kind",
        choices=GOLD_KINDS,
        action="append",
        help="gold kind of lines without one (an evaluation's samples); one per --in, or one for all; "
        "default with --summary-in: the released kind of the benchmark the summary names (or mirrors)",
    )
    parser.add_argument("--processes", type=int, default=2, help="worker processes (default 2)")
    parser.add_argument(
        "--timeout-s", type=float, help="CPU-time budget per answer (strict: 3 s, paper: 20 s by default)"
    )
    parser.add_argument(
        "--summary-in",
        type=Path,
        action="append",
        help="the evaluation's summary: merge into its samples (one per --in)",
    )
    parser.add_argument(
        "--summary-out", type=Path, action="append", help="merged summary to write (one per --summary-in)"
    )
    parser.add_argument(
        "--primary", choices=METRICS, default="strict", help="metric of `correct` and the summary (merge)"
    )
    parser.add_argument(
        "--lighteval-python",
        help="python of the lighteval environment (else $CWGRPO_LIGHTEVAL_PYTHON, the active conda "
        "env, .venv-lighteval/bin/python)",
    )


def _groups(args: argparse.Namespace) -> list[tuple[Path, Path, str | None, Path | None, Path | None]]:
    """(in, out, gold kind, summary in, summary out) per input file, the repeated flags checked."""
    n = len(args.inp)
    kinds = args.gold_kind or [None]
    if len(kinds) == 1:
        kinds = kinds * n
    summaries_in, summaries_out = args.summary_in or [], args.summary_out or []
    if len(args.out) != n or len(kinds) != n:
        raise ConfigError(
            f"give one --out (and one or n --gold-kind) per --in: {n} --in, {len(args.out)} --out"
        )
    if len(summaries_in) != len(summaries_out) or len(summaries_in) not in (0, n):
        raise ConfigError("give --summary-in and --summary-out together, one of each per --in (or neither)")
    for path in args.inp:
        if not path.is_file():
            raise FileNotFoundError(f"input file not found: {path}")
    ins = summaries_in or [None] * n
    outs = summaries_out or [None] * n
    kinds = [
        summary_gold_kind(summary) if kind is None and summary is not None else kind
        for kind, summary in zip(kinds, ins, strict=True)
    ]
    return list(zip(args.inp, args.out, kinds, ins, outs, strict=True))


def summary_gold_kind(summary_path: Path) -> str:
    """The released gold kind of the benchmark an evaluation summary names, or of the one it mirrors."""
    summary = read_json(summary_path)
    benchmark, mirror = summary.get("benchmark"), summary.get("benchmark_mirror")
    if not isinstance(benchmark, str):
        raise ConfigError(f"{summary_path}: not an evaluation summary (no 'benchmark')")
    return gold_kind_for(benchmark, mirror if isinstance(mirror, str) else None)


def check_regradable(summary_path: Path) -> None:
    """Refuse to re-grade an ``answer_form: number`` evaluation (merging would credit any answer form)."""
    form = (read_json(summary_path).get("settings") or {}).get("answer_form", "any")
    if form != "any":
        raise ConfigError(
            f"{summary_path}: evaluated with answer_form={form!r}, which --summary-in would drop (its verdicts "
            "credit any answer form); grade its samples without --summary-in, or evaluate with answer_form=any"
        )


def run(args: argparse.Namespace) -> int:
    groups = _groups(args)
    for *_, summary_in, _ in groups:
        if summary_in is not None:
            check_regradable(summary_in)
    per_file, scored = [], []
    for inp, _, kind, summary_in, _ in groups:
        items = read_items(inp, kind)
        kindless = [it for it in items if isinstance(it, dict) and it.get("gold_kind") in (None, "")]
        if kindless:  # every such line would be graded wrong, for a reason only the output file gives
            raise ConfigError(
                f"{inp}: {len(kindless)} of its {len(items)} lines have no gold_kind: give --gold-kind expr or "
                "latex (expr for AIME24 and AMC23, latex for MATH-500, Minerva and OlympiadBench), or the "
                "evaluation's --summary-in"
            )
        per_file.append(items)
        if summary_in is not None and args.metric == "paper":  # an evaluation's golds are our answers
            items = [
                {**it, "gold": paper_gold(it["gold"], it["gold_kind"])} if input_problem(it) is None else it
                for it in items
            ]
        scored += items
    verdicts = grade_items(scored, args.metric, args.processes, args.timeout_s, args.lighteval_python)
    late = sum(v["timed_out"] for v in verdicts)
    print(
        f"{args.metric}: {sum(v['correct'] for v in verdicts)}/{len(verdicts)} correct"
        + (f" ({late} ran out of grading time and count as wrong)" if late else "")
    )
    start, writes = 0, []  # everything is computed before anything is written
    for (_, out, _, summary_in, summary_out), items in zip(groups, per_file, strict=True):
        mine = verdicts[start : start + len(items)]
        start += len(items)
        if summary_in is None:
            writes.append((out, mine, None, None))
            continue
        merged = merge_verdicts(items, mine, args.metric, args.primary)
        writes.append((out, merged, summary_out, merged_summary(read_json(summary_in), merged, args.primary)))
    for out, rows, summary_out, summary in writes:
        write_jsonl(out, rows)
        if summary_out is not None:
            write_json(summary_out, summary)  # after its samples, as evaluate writes its summary last
    return 0
