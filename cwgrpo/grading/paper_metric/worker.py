"""The paper's metric, scored by lighteval 0.8.1 itself: a standalone worker.

Run by path with the interpreter of the lighteval environment (``make lighteval`` or
``envs/lighteval.yaml``); it imports only lighteval and the standard library, never the ``cwgrpo``
package, whose math-verify 0.9.0 cannot share an environment with lighteval's ``latex2sympy2_extended``.

Protocol: one JSON object per input line ``{"completion": str, "gold": str, "gold_kind": "expr"|"latex"}``
on stdin; one JSON object per output line, in order, flushed at once::

    {"correct": bool, "pred": [str, ...], "gold": [str, ...], "reason": str | null, "timed_out": bool}

``pred``/``gold`` are what lighteval extracted (its ``doc.specific``); ``reason`` says why a sample
could not be scored as intended (bad line, unknown gold kind, gold not extracted, no prediction).
Before the first line it writes ``{"ready": true, "lighteval": VERSION}``, so that its caller can
time each answer without counting the import. ``--check`` prints that line and exits.

The verdict is ``multilingual_extractive_match_metric(...).sample_level_fn`` of the released
``src/open_r1/evaluate.py`` configuration: gold extraction by kind (``latex``: MATH-500, Minerva,
OlympiadBench; ``expr``: AIME24, AMC23), predictions ``(ExprExtractionConfig(),
LatexExtractionConfig(boxed_match_priority=0))``, ``fallback_mode="first_match"``, ``precision=5``,
``aggregation_function=max``. Faults of that metric are reproduced on purpose: they produced the
paper's numbers, with one exception: lighteval times its parses and comparisons with ``signal.alarm``, in
seconds of wall-clock time, so a busy machine grades a right answer wrong; here the same seconds count this
process's CPU time (``cpu_time_timeouts``), which gives the idle machine's verdict under any load, and an
answer whose parse or comparison ran out says so (``timed_out``). The caller bounds each answer in the
worker's CPU time too.
"""

from __future__ import annotations

import argparse
import functools
import json
import logging
import signal
import sys
from typing import Any, TextIO

GOLD_KINDS = ("expr", "latex")
_fired = [0]  # lighteval timeouts that ran out in this process


def cpu_time_timeouts() -> None:
    """lighteval's ``timeout`` decorator with its seconds counted in CPU time (``ITIMER_PROF``), each
    timeout that fires counted in ``_fired``; before lighteval's metrics are imported, since they bind it
    at import. It nests as the released one does (an inner timeout's end disarms the outer one)."""
    import lighteval.utils.timeout as released

    def timeout(timeout_seconds: int = 10) -> Any:
        def decorator(func: Any) -> Any:
            def ran_out(signum: int, frame: Any) -> None:
                _fired[0] += 1
                raise TimeoutError("Operation timed out!")

            @functools.wraps(func)
            def wrapper(*args: Any, **kwargs: Any) -> Any:
                previous = signal.signal(signal.SIGPROF, ran_out)
                signal.setitimer(signal.ITIMER_PROF, timeout_seconds)
                try:
                    return func(*args, **kwargs)
                finally:
                    signal.setitimer(signal.ITIMER_PROF, 0)
                    signal.signal(signal.SIGPROF, previous)

            return wrapper

        return decorator

    released.timeout = timeout


def _metrics() -> dict[str, Any]:
    """The released metric per gold kind (built once: building them is not free)."""
    cpu_time_timeouts()
    from lighteval.metrics.dynamic_metrics import (
        ExprExtractionConfig,
        LatexExtractionConfig,
        multilingual_extractive_match_metric,
    )
    from lighteval.utils.language import Language

    def build(gold_target: Any) -> Any:
        return multilingual_extractive_match_metric(
            language=Language.ENGLISH,
            fallback_mode="first_match",
            precision=5,
            gold_extraction_target=(gold_target,),
            pred_extraction_target=(ExprExtractionConfig(), LatexExtractionConfig(boxed_match_priority=0)),
            aggregation_function=max,
        )

    return {"latex": build(LatexExtractionConfig()), "expr": build(ExprExtractionConfig())}


def score(item: Any, metrics: dict[str, Any]) -> dict[str, Any]:
    """Verdict for one decoded input line; bad input gives a verdict with a reason, never an exception."""
    from lighteval.tasks.requests import Doc

    if not isinstance(item, dict):
        return _verdict(False, reason=f"line is not a JSON object but {type(item).__name__}")
    for key in ("completion", "gold"):
        if not isinstance(item.get(key), str):
            return _verdict(False, reason=f"{key!r} is missing or not a string")
    kind = item.get("gold_kind")
    if kind not in GOLD_KINDS:
        return _verdict(False, reason=f"unknown gold_kind {kind!r}; known: {', '.join(GOLD_KINDS)}")
    gold, completion = item["gold"], item["completion"]
    doc = Doc(task_name=f"cwgrpo|{kind}", query="", choices=[gold], gold_index=0)
    fired = _fired[0]
    value = metrics[kind].sample_level_fn(golds=[gold], predictions=[completion], formatted_doc=doc)
    timed_out = _fired[0] > fired
    specific = doc.specific or {}
    preds = list(specific.get("extracted_predictions", []))
    golds = list(specific.get("extracted_golds", []))
    reason = None
    if not preds:
        reason = "no prediction extracted"
    # lighteval falls back to the raw gold string when it cannot extract one; say so.
    if golds == [gold] and gold.strip():
        reason = "gold not extracted: compared as the raw string" + (f"; {reason}" if reason else "")
    if timed_out:
        reason = "timeout: a lighteval time limit ran out" + (f"; {reason}" if reason else "")
    return _verdict(bool(value >= 1.0), preds, golds, reason, timed_out)


def _verdict(
    correct: bool,
    pred: list[str] | None = None,
    gold: list[str] | None = None,
    reason: str | None = None,
    timed_out: bool = False,
) -> dict[str, Any]:
    return {
        "correct": correct,
        "pred": pred or [],
        "gold": gold or [],
        "reason": reason,
        "timed_out": timed_out,
    }


def serve(lines: TextIO, out: TextIO) -> int:
    """Score every line of ``lines`` to ``out``; returns the number of lines scored."""
    import lighteval

    logging.getLogger("lighteval").setLevel(logging.ERROR)  # its per-sample warnings are our reasons
    metrics = _metrics()
    out.write(json.dumps({"ready": True, "lighteval": getattr(lighteval, "__version__", "?")}) + "\n")
    out.flush()
    n = 0
    for line in lines:
        if not line.strip():
            continue
        try:
            item = json.loads(line)
        except ValueError as err:
            verdict = _verdict(False, reason=f"line is not valid JSON: {err}")
        else:
            try:
                verdict = score(item, metrics)
            except Exception as err:  # lighteval's own failure on this answer: a verdict, not a crash
                verdict = _verdict(False, reason=f"lighteval raised {type(err).__name__}: {err}"[:500])
        out.write(json.dumps(verdict, ensure_ascii=False) + "\n")
        out.flush()
        n += 1
    return n


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="import lighteval, print the ready line, exit")
    args = parser.parse_args(argv)
    if args.check:
        return 0 if serve(iter(()), sys.stdout) == 0 else 1
    serve(sys.stdin, sys.stdout)
    return 0


if __name__ == "__main__":
    sys.exit(main())
