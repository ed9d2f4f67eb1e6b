"""lighteval 0.8.1's own verdicts, the reference of the parity study (docs/paper-metric.md).

    .venv-lighteval/bin/python benchmarks/paper_metric/reference.py ITEMS.jsonl OUT.jsonl [PROCESSES]

Builds the two metrics exactly as the released ``src/open_r1/evaluate.py`` does (``latex_gold_metric``,
``expr_gold_metric``) and calls their ``sample_level_fn`` directly on each ``{key, completion, gold,
gold_kind}`` line: no worker, no time budget, no transport. Writes ``{key, gold_kind, correct}`` per
line, in order. lighteval and the standard library only.
"""

from __future__ import annotations

import json
import logging
import multiprocessing
import sys

_METRICS: dict = {}


def _init() -> None:
    from lighteval.metrics.dynamic_metrics import (
        ExprExtractionConfig,
        LatexExtractionConfig,
        multilingual_extractive_match_metric,
    )
    from lighteval.utils.language import Language

    logging.getLogger("lighteval").setLevel(logging.ERROR)
    for kind, gold_target in (("latex", LatexExtractionConfig()), ("expr", ExprExtractionConfig())):
        _METRICS[kind] = multilingual_extractive_match_metric(
            language=Language.ENGLISH,
            fallback_mode="first_match",
            precision=5,
            gold_extraction_target=(gold_target,),
            pred_extraction_target=(ExprExtractionConfig(), LatexExtractionConfig(boxed_match_priority=0)),
            aggregation_function=max,
        )


def _one(item: dict) -> dict:
    from lighteval.tasks.requests import Doc

    doc = Doc(task_name="reference", query="", choices=[item["gold"]], gold_index=0)
    value = _METRICS[item["gold_kind"]].sample_level_fn(
        golds=[item["gold"]], predictions=[item["completion"]], formatted_doc=doc
    )
    return {"key": item["key"], "gold_kind": item["gold_kind"], "correct": value >= 1.0}


def main(src: str, dst: str, processes: str = "2") -> None:
    with open(src, encoding="utf-8") as f:
        items = [json.loads(line) for line in f if line.strip()]
    with multiprocessing.get_context("fork").Pool(int(processes), initializer=_init) as pool:
        rows = pool.map(_one, items, chunksize=16)
    with open(dst, "w", encoding="utf-8") as f:
        f.writelines(json.dumps(r) + "\n" for r in rows)


if __name__ == "__main__":
    main(*sys.argv[1:])
