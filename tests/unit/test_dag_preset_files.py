"""cwgrpo_workflow.dag.preset_files: every mistake of a preset's files found in one pass, one line each."""

from __future__ import annotations

import pytest
import yaml
from dag_presets import REPO
from dag_presets import SCHEMA as SCHEMA_PATH

from cwgrpo.configs import nearest
from cwgrpo_workflow.dag import preset_files as cc
from cwgrpo_workflow.dag import preset_rules

SCHEMA = cc.load_schema(SCHEMA_PATH)


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
    assert nearest("Train_7B", ["train_7b", "evaluate"]) == "train_7b"


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


def test_collected_errors_print_as_one_numbered_block():
    lines = cc.collect([lambda: [("a", "bad"), ("b", "bad")], lambda: [("a", "bad")]])  # each line once
    assert lines == ["a: bad", "b: bad"]
    assert cc.error_text([*lines, "a: bad"]) == "2 config errors:\n  a: bad\n  b: bad"
    assert cc.error_text(["kind: is real"]) == "config error in kind: is real"


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


def test_preset_file_errors_are_all_shown_before_validation(tmp_path):
    config = {"name": "x", "kind": "tiny", "sizes": {}, "methods": {}, "data": {}, "tarin": {}, "sedes": [0]}
    found = cc.preset_errors(config, SCHEMA_PATH, [], lambda: [])
    assert len([line for line in found if "tarin" in line or "sedes" in line]) == 2


def test_option_level_checks_run_beside_file_level_mistakes():
    """A schema mistake does not hide an option its command does not know: both in one pass, and the
    checks see the schema's defaults (the raw tiny preset has no `resources:`, which they read)."""
    config = yaml.safe_load((REPO / "config" / "config.yaml").read_text())
    config.pop("resources")
    config["colour"] = "blue"
    config["evaluate"]["temprature"] = 0.6
    run = {"uses_conda": False, "gpu_cap": None, "gpu_models": {}}
    found = cc.preset_errors(config, SCHEMA_PATH, [], lambda: preset_rules.preset_checks(config, **run))
    assert [line.split(":")[0] for line in found] == ["colour", "evaluate.temprature"], found
    assert config["resources"]["default"] == {}  # the schema's default, filled in


def test_seeds_from_the_command_line_become_ints():
    config = {"seeds": ["0", "1", "x"]}
    cc.seeds_from_command_line(config)
    assert config["seeds"] == [0, 1, "x"]


@pytest.mark.parametrize(
    ("files", "refused"),
    [
        ([("paper.yaml", ("paper", None)), ("rehearsal.yaml", ("paper-rehearsal", "paper"))], []),
        ([("rehearsal.yaml", ("paper-rehearsal", "paper"))], ["rehearsal.yaml"]),
        ([("config.yaml", ("tiny", None)), ("rehearsal.yaml", ("paper-rehearsal", "paper"))], ["rehearsal.yaml"]),
        ([("paper-7b-2nodes.yaml", (None, "paper")), ("rehearsal.yaml", ("paper-rehearsal", "paper"))],
         ["paper-7b-2nodes.yaml", "rehearsal.yaml"]),
    ],
)  # fmt: skip
def test_an_overlay_must_follow_its_preset(files, refused):
    found = cc.overlay_errors(files)
    assert [line.split(":")[0] for line in found] == refused
    assert all("--configfile config/paper.yaml" in line for line in found)


def test_names_and_options_fixed_per_run_are_the_schemas_one_line_each():
    """A size name and a run label reach file names and shell commands; steps and seed are fixed per run."""
    preset = yaml.safe_load((REPO / "config/config.yaml").read_text())
    preset["sizes"]["sm all"] = preset["sizes"].pop("small")
    preset["methods"]["base"] = preset["methods"].pop("grpo")
    preset["methods"]["cw_grpo"]["save_steps"] = 1
    preset["sizes"]["large"]["resources"] = {"trian": {"gpu": 1}}
    assert sorted(cc.schema_errors(preset, SCHEMA)) == [
        "methods.base: a run label is letters, digits and _, and not 'base'",
        "methods.cw_grpo.save_steps: set it in train or sizes.<size>.train, not per method",
        "sizes.large.resources.trian: 'trian' is not one of ['prepare_data', 'fetch_model', 'build_tiny', "
        "'sft', 'train', 'evaluate', 'grade', 'report']",
        "sizes.sm all: a size name is letters, digits, '.', '-' and '_'",
    ]
