"""A dataset of the user's (``cwgrpo prepare-data --dataset mine --set path=``): its file read as written
(cwgrpo.owndata) and its column options: gold answers keep the text the user wrote."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cwgrpo import cli


def _prepare(tmp_path: Path, name: str, text: str, *sets: str) -> tuple[int, list[dict]]:
    source = tmp_path / name
    source.write_text(text, encoding="utf-8")
    out = tmp_path / "out.jsonl"
    argv = ["prepare-data", "--dataset", "mine", "--set", f"path={source}", *sets, "--out", str(out)]
    code = cli.main(argv)
    return code, [json.loads(line) for line in out.read_text().splitlines()] if out.exists() else []


def test_json_numbers_keep_their_exact_decimal_text(tmp_path):
    """Bug: 12345678901234567890 became 12345678901234567168 beside a float; 1e300 a 301-digit integer."""
    rows = [
        '{"problem": "p1", "answer": 12345678901234567890}',
        '{"problem": "p2", "answer": 1.5}',
        '{"problem": "p3", "answer": 1e300}',
        '{"problem": "p4", "answer": 27.0}',
        '{"problem": "p5", "answer": true}',
    ]
    code, records = _prepare(tmp_path, "own.jsonl", "\n".join(rows) + "\n")
    assert code == 0
    assert [r["answer"] for r in records] == ["12345678901234567890", "1.5", "1e300", "27.0", "true"]


def test_a_json_array_file_keeps_number_text_too(tmp_path):
    text = '[{"problem": "p", "answer": 1}, {"problem": "q", "answer": 1e300}]'
    code, records = _prepare(tmp_path, "own.json", text)
    assert code == 0 and [r["answer"] for r in records] == ["1", "1e300"]


def test_csv_cells_are_text_as_written(tmp_path):
    """Weak spot: 007 became 7, 1.50 became 1.5, None and NA became empty and were refused."""
    text = "problem,answer\np1,12345678901234567890\np2,1.5\np3,007\np4,1.50\np5,None\np6,NA\np7,True\n"
    code, records = _prepare(tmp_path, "own.csv", text)
    assert code == 0
    assert [r["answer"] for r in records] == [
        "12345678901234567890",
        "1.5",
        "007",
        "1.50",
        "None",
        "NA",
        "True",
    ]
    assert [r["problem"] for r in records] == [f"p{i}" for i in range(1, 8)]


@pytest.mark.parametrize("answer", ['{"a": 1}', "[1, 2]"])
def test_a_non_scalar_answer_is_refused_naming_the_row(tmp_path, capsys, answer):
    """Weak spot: a JSON object answer was stored as its Python repr."""
    text = '{"problem": "p", "answer": "1"}\n' + f'{{"problem": "q", "answer": {answer}}}\n'
    code, records = _prepare(tmp_path, "own.jsonl", text)
    err = capsys.readouterr().err
    assert code == 2 and records == []
    assert "row 1 column 'answer'" in err and "not text or a number" in err


def test_a_gold_that_is_the_prompt_is_refused(tmp_path, capsys):
    """Weak spot: --set problem=answer was accepted silently."""
    code, records = _prepare(
        tmp_path, "own.jsonl", '{"problem": "p", "answer": "1"}\n', "--set", "problem=answer"
    )
    assert code == 2 and records == []
    assert "problem and answer are both the column 'answer'" in capsys.readouterr().err
