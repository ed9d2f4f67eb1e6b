"""cwgrpo_workflow.dag.options: each job's merged options, and the one file per job that carries them."""

from __future__ import annotations

import copy
import os

import pytest
from dag_presets import preset

from cwgrpo.configs import ConfigError, options_text, read_options
from cwgrpo_workflow.dag import options


def test_train_options_merge_train_then_size_then_method_then_seed():
    config = preset("paper.yaml")
    size, method = "7b", "cw_grpo"
    opts = options.train_options(config, size, method, "3")
    assert opts["seed"] == 3
    for key, value in config["methods"][method].items():
        assert opts[key] == value
    for key, value in config["sizes"][size]["train"].items():
        if key not in config["methods"][method]:
            assert opts[key] == value


def test_every_train_job_of_a_preset_has_its_own_file():
    config = preset("paper.yaml")
    names = [name for name, _ in options.job_options(config)]
    trains = [n for n in names if n[0] == "train"]
    assert len(trains) == len(config["sizes"]) * len(config["methods"]) * len(config["seeds"])
    assert len(set(names)) == len(names)
    assert ("table",) in names and ("evaluate", "7b") in names and ("build", "7b") not in names
    assert ("build", "small") in [n for n, _ in options.job_options(preset("config.yaml"))]


def test_options_file_reads_back_what_was_written_with_its_types(tmp_path):
    """The command reads the file with cwgrpo.configs.read_options: a float stays a float (1e-06 too,
    which YAML 1.1 reads as a string when written plainly), a bool a bool, a list a list."""
    opts = {"learning_rate": 1e-06, "beta": 0.0, "max_steps": 2, "bf16": True, "reward_funcs": ["a", "b"],
            "model_init_kwargs": {"dtype": "bfloat16"}, "text": "≈ 1.5B", "none": None, "big": 1e300}  # fmt: skip
    path = tmp_path / "options" / "train.yaml"
    assert options.write_option_files([(path, options_text(opts))]) == []
    back = read_options(path)
    assert back == opts
    assert {k: type(v) for k, v in back.items()} == {k: type(v) for k, v in opts.items()}


def test_an_options_file_is_named_by_its_content_and_never_rewritten(tmp_path):
    config = preset("config.yaml")
    files = options.option_files(tmp_path, config)
    path, text = files[("train", "small", "grpo", "seed0")]
    assert path.parent == tmp_path / "train" / "small" / "grpo" and path.name.startswith("seed0.")
    assert options.write_option_files(files.values()) == []
    os.utime(path, (1, 1))
    assert options.write_option_files(options.option_files(tmp_path, config).values()) == []
    assert path.stat().st_mtime == 1  # same options: same file, untouched, Snakemake sees no change
    edited = copy.deepcopy(config)
    edited["methods"]["grpo"]["learning_rate"] = 5e-4
    new_files = options.option_files(tmp_path, edited)
    assert new_files[("train", "small", "grpo", "seed0")][0] != path  # an edit is a new file...
    grpo_runs = [k for k in files if k[0] == "train" and k[2] == "grpo"]
    assert all(new_files[k] != files[k] for k in grpo_runs)
    assert {k: v for k, v in new_files.items() if k not in grpo_runs} == {
        k: v for k, v in files.items() if k not in grpo_runs
    }
    assert options.write_option_files(new_files.values()) == []
    assert path.read_text() == text and path.stat().st_mtime == 1  # ... and the old one stays as it was
    assert not list(tmp_path.rglob(".*.tmp"))  # no temporary file left behind


def test_an_options_file_edited_by_hand_is_refused_by_the_workflow_and_by_the_job(tmp_path):
    (path, text), *_ = options.option_files(tmp_path, preset("config.yaml")).values()
    assert options.write_option_files([(path, text)]) == []
    path.chmod(0o644)
    path.write_text(text.replace("seed: 0", "seed: 1"))
    (error,) = options.write_option_files([(path, text)])
    assert error.startswith(f"{path} was edited after the workflow wrote it") and "\n" not in error
    with pytest.raises(ConfigError, match="was changed after the workflow wrote it"):
        read_options(path)


def test_an_options_file_swapped_for_another_jobs_is_refused_by_the_job(tmp_path):
    files = options.option_files(tmp_path, preset("config.yaml"))
    (mine, _), (other, _) = (
        files[("train", "small", "grpo", "seed0")],
        files[("train", "small", "clip_cov", "seed0")],
    )
    assert options.write_option_files(files.values()) == []
    mine.unlink()
    mine.symlink_to(other)  # a whole, valid options file, of another job
    with pytest.raises(ConfigError, match="holds the options of another job"):
        read_options(mine)
    assert read_options(other)["cw_method"] == "clip_cov"


@pytest.mark.parametrize("blocker", ["options folder is a file", "options file is a folder"])
def test_an_options_file_that_cannot_be_written_is_one_line_and_leaves_no_temporary_file(tmp_path, blocker):
    path, text = options.option_files(tmp_path / "options", preset("config.yaml"))[("table",)]
    if blocker == "options folder is a file":
        path.parent.write_text("")
    else:
        path.mkdir(parents=True)
    (error,) = options.write_option_files([(path, text)])
    assert error.startswith(f"{path}: cannot write this job's options file (") and "\n" not in error
    assert [p.name for p in tmp_path.rglob("*")] == (
        ["options"] if "file" in blocker[-4:] else ["options", path.name]
    )


def test_saved_steps_end_at_max_steps():
    config = preset("config.yaml")
    config = copy.deepcopy(config)
    config["train"] |= {"max_steps": 10, "save_steps": 4}
    for spec in config["sizes"].values():
        spec.get("train", {}).pop("max_steps", None)
        spec.get("train", {}).pop("save_steps", None)
    assert options.saved_steps(config, next(iter(config["sizes"]))) == [4, 8, 10]


def test_table_defaults_cut_to_the_trained_methods():
    config = preset("paper.yaml")
    assert "methods" not in options.report_options(config, "table")  # trains all of the paper's
    dropped = sorted(config["methods"])[0]
    del config["methods"][dropped]
    opts = options.report_options(config, "table")
    assert opts["kind"] == "paper" and "base" in opts["methods"] and dropped not in opts["methods"]
    assert set(opts["methods"]) - {"base"} <= set(config["methods"])


def test_preset_contents_names_sizes_seeds_and_methods():
    config = preset("config.yaml")
    text = options.preset_contents(config)
    assert text.startswith("This run: models ") and all(m in text for m in config["methods"])
    assert f"Table 1 at step {config['report']['step']}." in text


def test_the_dry_run_names_a_preset_whose_runs_cannot_resume():
    """#47: save_only_model checkpoints hold no optimiser or RNG state, so a stopped run restarts at step 0;
    the shipped presets resume unless a reason is written beside the setting (the third study's)."""
    for name in ("config.yaml", "real.yaml", "byo.yaml", "paper.yaml", "study.yaml"):
        assert options.resume_note(preset(name)) is None, name
    note = options.resume_note(preset("study-smollm2.yaml"))
    assert note.startswith(
        "note: train.save_only_model is true (size 135m, grpo): a stopped training run cannot"
    )
    changed = preset("config.yaml")
    changed["methods"]["cw_grpo"]["save_only_model"] = True
    assert "methods.cw_grpo.save_only_model is true (size small, cw_grpo)" in options.resume_note(changed)
