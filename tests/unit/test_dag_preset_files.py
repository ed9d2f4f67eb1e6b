"""cwgrpo.dag.configcheck: every mistake of a preset found in one pass, one line each."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from cwgrpo.dag import configcheck as cc

REPO = Path(__file__).resolve().parents[2]
SCHEMA = cc.load_schema(REPO / "workflow/schemas/config.schema.yaml")


def test_every_duplicate_key_is_named_with_both_lines():
    text = "name: a\ntrain:\n  lr: 1\n  beta: 0\n  lr: 2\nname: b\nlist:\n  - {x: 1, x: 2}\n"
    assert cc.duplicate_keys(text, "mine.yaml") == [
        "mine.yaml:5: train.lr: duplicate key (first at line 3; YAML would keep only this one)",
        "mine.yaml:6: name: duplicate key (first at line 1; YAML would keep only this one)",
        "mine.yaml:8: list[0].x: duplicate key (first at line 8; YAML would keep only this one)",
    ]
    assert yaml.safe_load(text)["train"]["lr"] == 2  # what PyYAML alone does: keeps the last, silently


def test_a_file_without_duplicates_and_a_broken_one():
    assert cc.duplicate_keys("a: 1\nb: {a: 2}\n") == []
    (line,) = cc.duplicate_keys("a: [1\n", "x.yaml")
    assert line.startswith("x.yaml: not valid YAML:") and "\n" not in line


def test_schema_errors_are_all_found_one_line_each_with_the_nearest_key():
    preset = yaml.safe_load((REPO / "config/real.yaml").read_text())
    del preset["name"]
    preset["trian"] = {}
    preset["seeds"] = "zero"
    preset["data"]["benchmark"] = preset["data"].pop("benchmarks")
    lines = cc.schema_errors(preset, SCHEMA)
    assert sorted(lines) == sorted(
        [
            "trian: unknown key; did you mean 'train'?",
            "name: missing (required)",
            "seeds: expected array, got 'zero' (str)",
            "data.benchmark: unknown key; did you mean 'benchmarks'?",
            "data.benchmarks: missing (required)",
        ]
    ), lines
    assert all("\n" not in line and len(line) < 300 for line in lines)


def test_shipped_presets_have_no_schema_errors_and_no_duplicates():
    for path in sorted((REPO / "config").glob("**/*.yaml")):
        assert cc.duplicate_keys(path.read_text(), path.name) == []
        preset = yaml.safe_load(path.read_text())
        if "kind" in preset:  # a whole preset, not an overlay given after one (paper-7b-2nodes.yaml)
            assert cc.schema_errors(preset, SCHEMA) == [], path.name


def test_unknown_key_far_from_every_known_one_lists_them():
    assert cc.unknown_key_line("data", "zzz", ["train", "dev"]) == "data.zzz: unknown key; known: dev, train"
    assert cc.nearest("Train_7B", ["train_7b", "evaluate"]) == "train_7b"


def test_reward_weights_against_reward_functions():
    sections = [
        ("sizes.small.train", {"reward_funcs": ["accuracy", "format"], "reward_weights": [1.0]}),
        ("sizes.large.train", {"reward_funcs": ["accuracy"], "reward_weights": [1.0]}),
        ("train", {"reward_funcs": ["accuracy"]}),
    ]
    assert cc.reward_weight_errors(sections) == [
        "sizes.small.train.reward_weights: 1 weight(s) [1.0] for 2 reward function(s) ['accuracy', 'format']; "
        "give one weight per reward function"
    ]


def test_a_completion_budget_the_context_cannot_hold_names_the_fix(tmp_path):
    (tmp_path / "config.json").write_text(json.dumps({"max_position_embeddings": 128}))
    context = cc.context_of_folder(str(tmp_path))
    assert context == 128 and cc.context_of_folder(str(tmp_path / "nowhere")) is None
    (line,) = cc.context_errors("train", context, {"max_completion_length": 128, "other": 4})
    assert line.startswith("train.max_completion_length: 128 tokens, but the model's context is 128")
    assert "set max_completion_length to at most 64" in line
    assert cc.context_errors("train", None, {"max_completion_length": 10**6}) == []


def test_collected_errors_print_as_one_numbered_block():
    from cwgrpo.dag.configcheck import collect

    lines = collect([lambda: [("a", "bad"), ("b", "bad")], lambda: [("a", "bad")]])  # each line once
    err = cc.ConfigErrors(lines)
    assert str(err) == "2 config errors:\n  a: bad\n  b: bad" and err.lines == ["a: bad", "b: bad"]
    assert str(cc.ConfigErrors(["kind: is real"])) == "config error in kind: is real"


def test_local_paths_that_are_not_there_are_named_and_hub_ids_are_not_paths(tmp_path):
    (tmp_path / "data.jsonl").write_text("{}\n")
    config = {
        "sizes": {"a": {"model": str(tmp_path / "gone")}, "b": {"model": "owner/name@main"}, "c": {"model": str(tmp_path)},
                  "d": {"model": "mine/model"}, "e": {"model": "owner/name", "revision": "main"}},
        "datasets": {"mine": {"path": str(tmp_path / "data.jsonl")}, "lost": {"path": "lost.csv"}, "hub": {"id": "o/n"}},
    }  # fmt: skip
    assert cc.missing_local_paths(config) == [
        ("sizes.a.model", f"{tmp_path / 'gone'}: no such folder or file (a model folder, a .gguf file, or owner/name@revision)"),
        ("sizes.d.model", "mine/model: no such folder or file here, and as a Hub model it needs a revision (owner/name@revision)"),
        ("datasets.lost.path", "lost.csv: no such file (.jsonl, .json, .csv or .parquet)"),
    ]  # fmt: skip


def test_a_misspelt_command_option_gets_the_nearest_name():
    from cwgrpo.dag.optioncheck import OptionError, check_options, check_train_options
    from cwgrpo.evaluate.run import EvalConfig

    with pytest.raises(OptionError, match=r"'learnig_rate'.*; did you mean 'learning_rate'\?"):
        check_train_options({"learnig_rate": 1e-4})
    with pytest.raises(
        OptionError, match=r"unknown option 'tempreature' for EvalConfig; did you mean 'temperature'\?"
    ):
        check_options(EvalConfig, {"tempreature": 0.6})
    with pytest.raises(OptionError, match=r"unknown option 'zzz' for EvalConfig; known: \["):
        check_options(EvalConfig, {"zzz": 0.6})


def test_own_datasets_unknown_keys_and_missing_columns(tmp_path):
    (tmp_path / "a.jsonl").write_text('{"question": "1+1", "gold": "2"}\n')
    (tmp_path / "b.csv").write_text("problem,answer\n1+1,2\n")
    datasets = {
        "a": {"path": str(tmp_path / "a.jsonl"), "probelm": "question", "answer": "gold"},
        "b": {"path": str(tmp_path / "b.csv"), "solution": "steps"},
        "hub": {"id": "owner/name", "problem": "anything"},
    }
    fields = ["id", "path", "problem", "answer", "solution"]
    assert cc.dataset_errors(datasets, fields) == [
        "datasets.a.probelm: unknown key; did you mean 'problem'?",
        "datasets.a.problem: column 'problem' is not in a.jsonl (its columns: question, gold); set problem: to one of them",
        "datasets.b.solution: column 'steps' is not in b.csv (its columns: problem, answer); set solution: to one of them",
    ]  # fmt: skip
