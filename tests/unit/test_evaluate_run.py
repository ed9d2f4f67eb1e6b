"""cwgrpo.evaluate.run: the ``answer_form`` option, from the grades to the per-sample rows and the summary."""

from __future__ import annotations

import json

from cwgrpo.evaluate.options import EvalConfig
from cwgrpo.evaluate.run import _evaluate_one
from cwgrpo.generation import Completion

# SmolLM2 restating the problem: math-verify evaluates "75-51" and grades it equal to the gold 24.
ANSWERS = {"p0": ["The answer is 75-51.", "\\boxed{24}"], "p1": ["So 3+4", "The answer is 7."]}
GOLDS = {"p0": "24", "p1": "7"}


class FixedBackend:
    """A generation backend (``cwgrpo.generation.Backend``) that answers each problem with fixed texts."""

    name = "fixed"

    def generate(self, prompts, n, settings):
        assert n == 2
        return [[Completion(text, 4, False) for text in texts] for texts in ANSWERS.values()]


def _evaluate(tmp_path, answer_form: str) -> tuple[list[dict], dict]:
    bench = tmp_path / "bench.jsonl"
    records = [{"id": i, "problem": "?", "answer": GOLDS[i], "source": "t"} for i in ANSWERS]
    bench.write_text("".join(json.dumps(r) + "\n" for r in records))
    out, summary = tmp_path / f"{answer_form}.jsonl", tmp_path / f"{answer_form}.summary.json"
    cfg = EvalConfig(k=2, prompt_set="tiny", answer_form=answer_form, grading_processes=1)
    _evaluate_one(FixedBackend(), tmp_path, bench, records, out, summary, cfg, {})
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    return rows, json.loads(summary.read_text())


def test_the_number_form_counts_an_echoed_expression_incorrect_in_rows_and_summary(tmp_path):
    rows, summary = _evaluate(tmp_path, "any")
    assert [r["extracted"] for r in rows] == ["75-51.", "24", "3+4", "7"]
    assert [r["correct"] for r in rows] == [True, True, True, True]
    assert (summary["pass1"], summary["avg_k"], summary["settings"]["answer_form"]) == (1.0, 1.0, "any")

    rows, summary = _evaluate(tmp_path, "number")
    assert [(r["correct"], r["correct_strict"]) for r in rows] == [(False, False), (True, True)] * 2
    assert (summary["pass1"], summary["avg_k"]) == (0.0, 0.5)
    assert summary["by_metric"]["strict"]["avg_k"] == 0.5
    assert summary["settings"]["answer_form"] == "number"
