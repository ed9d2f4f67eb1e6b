"""Reading a dataset's rows as stored (``cwgrpo.data.rows``, through ``cwgrpo prepare-data``): every reader
gives the gold text the user sees, reads what Excel and editors write, and refuses, in one line naming
the file, row and column, what it cannot read as written.
"""

from __future__ import annotations

import codecs
import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from cwgrpo import cli
from cwgrpo.data import registry as data
from cwgrpo.data import rows
from cwgrpo_workflow.dag import preset_files

# --------------------------------------------------------------------------------------------------
# Your own data: gold answers keep the text the user wrote


def _prepare(tmp_path: Path, name: str, content: str | bytes, *sets: str) -> tuple[int, list[dict]]:
    """``cwgrpo prepare-data`` of a file ``name`` holding ``content`` (text as UTF-8): (exit code, records)."""
    source = tmp_path / name
    source.write_bytes(content.encode("utf-8") if isinstance(content, str) else content)
    out = tmp_path / "out.jsonl"
    argv = ["prepare-data", "--dataset", "mine", "--set", f"path={source}", *sets, "--out", str(out)]
    code = cli.main(argv)
    return code, [json.loads(line) for line in out.read_text().split("\n") if line] if out.exists() else []


def _parquet(**columns: pa.Array) -> bytes:
    sink = pa.BufferOutputStream()
    pq.write_table(pa.table(columns), sink)
    return sink.getvalue().to_pybytes()


def _answers(records: list[dict]) -> list[str]:
    return [r["answer"] for r in records]


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


def test_the_same_problem_with_two_golds_is_said_not_written_silently(tmp_path, caplog):
    """Weak spot: a problem twice with golds 1 and 2 was written without a word."""
    text = "".join(
        f'{{"problem": "{p}", "answer": "{a}"}}\n' for p, a in (("p", 1), ("q", 5), ("p", 2), ("q", 5))
    )
    with caplog.at_level("WARNING", logger="cwgrpo.data.registry"):
        code, records = _prepare(tmp_path, "own.jsonl", text)
    assert code == 0 and _answers(records) == ["1", "5", "2", "5"]
    assert (
        "dataset mine: 1 row(s) repeat an earlier problem with another gold answer (first: rows 0 and 2, golds "
        "'1' and '2'); each is kept as its own record"
    ) in caplog.text


def test_a_gold_that_is_the_prompt_is_refused(tmp_path, capsys):
    """Weak spot: --set problem=answer was accepted silently."""
    code, records = _prepare(
        tmp_path, "own.jsonl", '{"problem": "p", "answer": "1"}\n', "--set", "problem=answer"
    )
    assert code == 2 and records == []
    assert "problem and answer are both the column 'answer'" in capsys.readouterr().err


def test_prepare_data_onto_its_own_input_keeps_the_input(tmp_path, capsys):
    """Bug: --set path=in.jsonl --out in.jsonl exited 0 and replaced the input (unmapped columns lost)."""
    source = tmp_path / "in.jsonl"
    text = '{"problem": "p", "answer": "1", "extra": "kept"}\n'
    source.write_text(text)
    argv = ["prepare-data", "--dataset", "mine", "--set", f"path={source}", "--out", str(source)]
    assert cli.main(argv) == 2
    assert "would overwrite the input" in capsys.readouterr().err
    assert source.read_text() == text


# --------------------------------------------------------------------------------------------------
# Binary floats: the text that reads back as the stored float


def test_a_float32_parquet_answer_is_the_text_it_reads_back_as(tmp_path):
    """Bug: a float32 cell shown as 123456.7 became the gold 123456.703125 (its float64 widening)."""
    answers = pa.array([123456.7, 0.1, 27.0, 1e7, 1e20], pa.float32())
    code, records = _prepare(
        tmp_path, "own.parquet", _parquet(problem=pa.array(list("abcde")), answer=answers)
    )
    assert code == 0
    assert _answers(records) == ["123456.7", "0.1", "27", "10000000", "1e+20"]


def test_float16_and_float64_parquet_answers_are_their_shortest_text(tmp_path):
    """Bug: float16 0.1 became 0.0999755859375; float64 1e300 a 301-digit integer of made-up digits."""
    table = _parquet(
        problem=pa.array(["a", "b", "c"]),
        answer=pa.array([0.1, 1e300, 2.0**53], pa.float64()),
        half=pa.array([0.1, 2.5, 1.0], pa.float16()),
    )
    code, records = _prepare(tmp_path, "own.parquet", table)
    assert code == 0 and _answers(records) == ["0.1", "1e+300", "9007199254740992"]
    code, records = _prepare(tmp_path, "own.parquet", table, "--set", "answer=half")
    assert code == 0 and _answers(records) == ["0.1", "2.5", "1"]


def test_a_hub_dataset_keeps_its_float32_width(tmp_path):
    """Bug: a Hub dataset's float32 column was read through Python floats (``datasets`` reading a folder
    as it reads a downloaded repository)."""
    (tmp_path / "hub").mkdir()
    answers = pa.array([123456.7, 0.1], pa.float32())
    (tmp_path / "hub" / "train.parquet").write_bytes(_parquet(problem=pa.array(["a", "b"]), answer=answers))
    spec = data.DatasetSpec("hub_f32", str(tmp_path / "hub"), "train", None, 0)
    assert _answers(data.normalise(spec, data.load_rows(spec))) == ["123456.7", "0.1"]


def test_exact_parquet_types_keep_their_digits(tmp_path):
    """int64 beyond 2**53 and decimals never pass through a float."""
    from decimal import Decimal

    table = _parquet(
        problem=pa.array(["a", "b"]),
        answer=pa.array([2**60 + 1, -(2**63)], pa.int64()),
        dec=pa.array([Decimal("1.50"), Decimal("12345678901234567890.125")], pa.decimal128(38, 3)),
    )
    code, records = _prepare(tmp_path, "own.parquet", table)
    assert code == 0 and _answers(records) == [str(2**60 + 1), str(-(2**63))]
    code, records = _prepare(tmp_path, "own.parquet", table, "--set", "answer=dec")
    assert code == 0 and _answers(records) == ["1.500", "12345678901234567890.125"]


def test_a_binary_parquet_column_is_read_as_its_utf8_text(tmp_path, capsys):
    """Bug: a binary column (how some writers store strings) gave the gold "b'12'"."""
    table = _parquet(
        problem=pa.array([b"p", b"q"], pa.binary()), answer=pa.array([b"12", b"\xff"], pa.binary())
    )
    code, _ = _prepare(tmp_path, "own.parquet", table)
    assert code == 2
    assert "row 1 column 'answer' is bytes that are not UTF-8 text" in capsys.readouterr().err
    table = _parquet(problem=pa.array([b"p"], pa.binary()), answer=pa.array([b"12"], pa.binary()))
    code, records = _prepare(tmp_path, "own.parquet", table)
    assert code == 0 and records[0]["problem"] == "p" and _answers(records) == ["12"]


# --------------------------------------------------------------------------------------------------
# Text encodings and line ends


@pytest.mark.parametrize(
    ("name", "text"),
    [
        ("own.csv", "problem,answer\r\np,1.50\r\n"),  # Excel's "CSV UTF-8": a byte-order mark, CRLF
        ("own.jsonl", '{"problem": "p", "answer": "1.50"}\n'),
        ("own.json", '[{"problem": "p", "answer": 1.50}]'),
    ],
)
def test_a_utf8_byte_order_mark_is_read(tmp_path, name, text):
    """Regression: a UTF-8 byte-order mark made the first column '\\ufeffproblem' or the JSON invalid."""
    code, records = _prepare(tmp_path, name, codecs.BOM_UTF8 + text.encode("utf-8"))
    assert code == 0 and _answers(records) == ["1.50"] and records[0]["problem"] == "p"


def test_the_parse_time_column_check_reads_a_byte_order_mark_too(tmp_path):
    """Regression: the workflow's column check said 'problem' is not in a CSV with a byte-order mark."""
    path = tmp_path / "own.csv"
    path.write_bytes(codecs.BOM_UTF8 + b"problem,answer\np,1\n")
    assert preset_files.dataset_errors({"mine": {"path": str(path)}}, ["path", "problem", "answer"]) == []


def test_the_parse_time_column_check_reads_only_the_first_record(tmp_path):
    """A bad byte far down the file is the data job's to name; the header is still checked at parse time."""
    path = tmp_path / "own.csv"
    path.write_bytes(b"question,gold\n" + b"p,1\n" * 10_000 + b"\xff,2\n")
    lines = preset_files.dataset_errors({"mine": {"path": str(path)}}, ["path", "problem", "answer"])
    assert [line.split(":")[0] for line in lines] == ["datasets.mine.problem", "datasets.mine.answer"]


def test_utf16_with_a_byte_order_mark_is_read_and_without_one_is_named(tmp_path, capsys):
    """Weak spot: UTF-16 without a mark was read as UTF-8 and its columns listed as 'p\\x00r\\x00...'."""
    code, records = _prepare(tmp_path, "own.csv", "problem,answer\ncafé,1\n".encode("utf-16"))
    assert code == 0 and records[0]["problem"] == "café"
    code, _ = _prepare(tmp_path, "own.csv", "problem,answer\np,1\n".encode("utf-16-le"))
    assert code == 2 and "holds NUL characters (UTF-16 without a byte-order mark?)" in capsys.readouterr().err


def test_a_line_separator_inside_a_jsonl_string_is_text(tmp_path):
    """Bug: U+2028 (valid unescaped in a JSON string, written by ensure_ascii=False) split a line in two
    and the file was refused as invalid JSON; the records file written kept it raw, so the sample page
    (which reads it by ``splitlines``) found the benchmark file unreadable."""
    text = json.dumps({"problem": "p\u2028q\u0085r", "answer": "1"}, ensure_ascii=False) + "\n\n"
    code, records = _prepare(tmp_path, "own.jsonl", text)
    assert code == 0 and records[0]["problem"] == "p\u2028q\u0085r"
    assert len((tmp_path / "out.jsonl").read_text().splitlines()) == 1  # one line for any line reader


def test_a_lone_surrogate_is_named_with_its_row(tmp_path, capsys):
    """Weak spot: a JSON '\\ud800' reached the writer: "'utf-8' codec can't encode", no row named."""
    code, _ = _prepare(
        tmp_path, "own.jsonl", '{"problem": "p", "answer": "1"}\n{"problem": "\\ud800", "answer": "2"}\n'
    )
    err = capsys.readouterr().err
    assert code == 2 and "own.jsonl): row 1 column 'problem' holds text that is not valid Unicode" in err


# --------------------------------------------------------------------------------------------------
# Cells that are no answer: one line naming file, row and column


@pytest.mark.parametrize(
    ("constant", "kind"), [("NaN", "NaN"), ("Infinity", "infinite"), ("-Infinity", "infinite")]
)
def test_a_json_nan_or_infinity_answer_is_refused_naming_the_row(tmp_path, capsys, constant, kind):
    """Regression: Python's json reads NaN/Infinity; they became the gold texts "NaN"/"Infinity"."""
    text = f'{{"problem": "p", "answer": "1"}}\n{{"problem": "q", "answer": {constant}}}\n'
    code, records = _prepare(tmp_path, "own.jsonl", text)
    err = capsys.readouterr().err
    assert code == 2 and records == []
    assert f"dataset mine (file:{tmp_path / 'own.jsonl'}): row 1 column 'answer' is {kind}" in err


def test_a_parquet_nan_and_a_json_nan_problem_are_refused_naming_the_row(tmp_path, capsys):
    """Weak spot: a NaN float was 'an empty answer' without the file; a NaN problem became the text 'NaN'."""
    table = _parquet(problem=pa.array(["a", "b"]), answer=pa.array([1.5, float("nan")], pa.float32()))
    assert _prepare(tmp_path, "own.parquet", table)[0] == 2
    assert "own.parquet): row 1 column 'answer' is NaN" in capsys.readouterr().err
    assert _prepare(tmp_path, "own.jsonl", '{"problem": NaN, "answer": "1"}\n')[0] == 2
    assert "own.jsonl): row 0 column 'problem' is NaN" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("name", "text"),
    [
        ("own.jsonl", '{"problem": "p", "answer": "1"}\n{"problem": "q", "answer": null}\n'),
        ("own.jsonl", '{"problem": "p", "answer": "1"}\n{"problem": "q", "answer": " $ $ "}\n'),
        ("own.csv", "problem,answer\np,1\nq,\n"),
        ("own.csv", "problem,answer\np,1\nq\n"),  # a short row
    ],
)
def test_an_empty_answer_is_one_line_naming_file_row_and_column(tmp_path, capsys, name, text):
    code, _ = _prepare(tmp_path, name, text)
    assert code == 2
    assert f"dataset mine (file:{tmp_path / name}): row 1 column 'answer' is empty" in capsys.readouterr().err


def test_a_header_only_csv_names_its_file(tmp_path, capsys):
    assert _prepare(tmp_path, "own.csv", "problem,answer\r\n")[0] == 2
    assert f"dataset mine (file:{tmp_path / 'own.csv'}): zero rows" in capsys.readouterr().err


# --------------------------------------------------------------------------------------------------
# A column read twice, a long cell, a file that is not one of ours


@pytest.mark.parametrize(
    ("name", "content", "sets", "column"),
    [
        ("own.csv", "problem,answer,answer\np,1,2\n", (), "answer"),
        ("own.csv", "q,question,a,q\n1,p,2,3\n", ("--set", "problem=question", "--set", "answer=q"), "q"),
        ("own.jsonl", '{"problem": "p", "answer": "1", "answer": "2"}\n', (), "answer"),
    ],
)
def test_a_column_read_twice_is_refused_naming_it(tmp_path, capsys, name, content, sets, column):
    """Weak spot: the last of two 'answer' columns (or JSON keys) was used silently."""
    code, records = _prepare(tmp_path, name, content, *sets)
    assert code == 2 and records == []
    assert f"the column {column!r} appears 2 times; keep one" in capsys.readouterr().err


def test_a_parquet_column_read_twice_is_refused_and_named_at_parse_time(tmp_path, capsys):
    """Bug: a Parquet file with two 'answer' columns gave a raw DatasetGenerationError traceback."""
    arrays = [pa.array(["p"]), pa.array(["1"]), pa.array(["2"])]
    path = tmp_path / "own.parquet"
    pq.write_table(pa.Table.from_arrays(arrays, names=["problem", "answer", "answer"]), path)
    assert _prepare(tmp_path, "own.parquet", path.read_bytes())[0] == 2
    assert "the column 'answer' appears 2 times" in capsys.readouterr().err
    lines = preset_files.dataset_errors({"mine": {"path": str(path)}}, ["path", "problem", "answer"])
    assert lines == ["datasets.mine.answer: the column 'answer' appears 2 times in own.parquet; keep one"]


def test_an_unread_column_may_appear_twice(tmp_path):
    code, records = _prepare(tmp_path, "own.csv", "problem,note,answer,note\np,x,1,y\n")
    assert code == 0 and _answers(records) == ["1"]


def test_a_long_csv_cell_is_read_and_one_past_the_bound_named(tmp_path, capsys, monkeypatch):
    """Weak spot: a 200,000-character problem raised a raw _csv.Error (field larger than field limit)."""
    code, records = _prepare(tmp_path, "own.csv", "problem,answer\n" + "x" * 200_000 + ",1\n")
    assert code == 0 and len(records[0]["problem"]) == 200_000
    monkeypatch.setattr(rows, "CSV_CELL_LIMIT", 1000)
    code, _ = _prepare(tmp_path, "own.csv", "problem,answer\np,1\n" + "x" * 2000 + ",1\n")
    err = capsys.readouterr().err
    assert code == 2 and f"{tmp_path / 'own.csv'}:3: field larger than field limit (1000)" in err
    assert "a cell holds at most 1,000 characters" in err


def test_json_errors_name_their_line(tmp_path, capsys):
    """Weak spot: a .json array broken on line 3 was reported at line 1 (read again as JSON lines)."""
    code, _ = _prepare(
        tmp_path, "own.json", '[\n{"problem": "p", "answer": "1"},\n{"problem": "q", "answer": }\n]'
    )
    assert code == 2 and "own.json:3 is not valid JSON" in capsys.readouterr().err
    code, _ = _prepare(tmp_path, "own.jsonl", '{"problem": "p", "answer": "1"}\n{"problem": "q", "ans')
    assert code == 2 and "own.jsonl:2 is not valid JSON" in capsys.readouterr().err


def test_a_json_file_of_one_object_is_one_row(tmp_path):
    """Weak spot: a pretty-printed single object was 'own.json:1 is not valid JSON'."""
    code, records = _prepare(tmp_path, "own.json", '{\n  "problem": "p",\n  "answer": 2.50\n}\n')
    assert code == 0 and _answers(records) == ["2.50"]


def test_a_compressed_file_is_named(tmp_path, capsys):
    import gzip

    code, _ = _prepare(tmp_path, "own.jsonl.gz", gzip.compress(b'{"problem": "p", "answer": "1"}\n'))
    assert code == 2 and "(a compressed file: decompress it first)" in capsys.readouterr().err


def test_a_gzip_file_under_a_plain_name_is_named(tmp_path, capsys):
    """Weak spot: a gzip'ed .jsonl was 'not UTF-8 text (can't decode byte 0x8b)'."""
    import gzip

    code, _ = _prepare(tmp_path, "own.jsonl", gzip.compress(b'{"problem": "p", "answer": "1"}\n'))
    assert code == 2 and "own.jsonl is gzip-compressed: decompress it first" in capsys.readouterr().err


@pytest.mark.parametrize("sep", [";", "\t"])
def test_a_csv_separated_by_another_character_is_named(tmp_path, capsys, sep):
    """Weak spot: Excel's ';'-separated CSV (a European locale) was 'missing column problem'."""
    code, _ = _prepare(tmp_path, "own.csv", f"problem{sep}answer\np{sep}1\n")
    err = capsys.readouterr().err
    assert code == 2 and "the header is one column" in err and "save the file with ',' between cells" in err


def test_jsonl_with_old_mac_line_ends_is_read(tmp_path):
    """Weak spot: CR-only line ends made the whole file one line ('Extra data')."""
    code, records = _prepare(
        tmp_path, "own.jsonl", '{"problem": "p", "answer": "1"}\r{"problem": "q", "answer": 2}\r'
    )
    assert code == 0 and _answers(records) == ["1", "2"]
