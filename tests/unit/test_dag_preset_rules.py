"""cwgrpo.dag.checks and option_checks: the parse-time checks, called on config dicts (the bad-config
cases that run snakemake are in tests/workflow/test_presets.py)."""

from __future__ import annotations

import pytest
import yaml
from dag_presets import REPO, SCHEMA, preset

from cwgrpo import weighting
from cwgrpo.dag import checks, option_checks, options
from cwgrpo.dag.configcheck import collect


def lines(config: dict, **settings) -> list[str]:
    run = {"uses_conda": False, "gpu_cap": None, "gpu_models": {}} | settings
    return collect(checks.preset_checks(config, **run))


@pytest.mark.parametrize(
    "names",
    [
        ("config.yaml",),
        ("paper.yaml",),
        ("paper.yaml", "paper-7b-2nodes.yaml"),
        ("paper.yaml", "rehearsal.yaml"),
        ("paper.yaml", "paper-7b-2nodes.yaml", "rehearsal.yaml"),
        ("study.yaml",),
        ("study-regime.yaml",),
        ("real.yaml",),
    ],
)
def test_shipped_presets_pass_every_check(names):
    assert lines(preset(*names)) == []


def test_size_names_are_the_packages_own():
    from cwgrpo import paper
    from cwgrpo.models import tiny

    assert checks.size_names("tiny") == tuple(tiny.SIZES) and checks.size_names("paper") == paper.SIZES
    assert checks.size_names("real") is None
    config = preset("paper.yaml")
    config["sizes"]["13b"] = config["sizes"].pop("7b")
    assert "sizes.13b: '13b' is not a size of a paper preset; known: 1.5b, 7b" in lines(config)


def test_every_registered_method_is_a_known_cw_method():
    config = preset("config.yaml")
    first = next(iter(config["methods"]))
    for method in weighting.METHODS:
        config["methods"][first]["cw_method"] = method
        assert list(checks.method_errors(config)) == [], method
    config["methods"][first]["cw_method"] = "cw_grop"
    ((key, message),) = checks.method_errors(config)
    assert key == f"methods.{first}.cw_method" and "unknown or missing method 'cw_grop'" in message


def test_a_method_registered_in_the_process_passes_the_option_checks():
    """A method of the user's own, registered in a process that loaded the registry (a TRL script), passes
    the option checks there; the workflow's torch-free parse knows the package's (``METHOD_NAMES``)."""
    from cwgrpo.dag.optioncheck import check_train_options

    config = preset("config.yaml")
    first = next(iter(config["methods"]))
    config["methods"][first]["cw_method"] = "parse_probe"
    assert [key for key, _ in checks.method_errors(config)] == [f"methods.{first}.cw_method"]
    weighting.register_method("parse_probe")(weighting.METHODS["grpo"])
    try:
        assert list(checks.method_errors(config)) == []
        check_train_options({"cw_method": "parse_probe"})  # the `train` section's check: no error
    finally:
        del weighting.METHODS["parse_probe"]


def test_a_typo_in_a_train_option_names_its_section():
    config = preset("paper.yaml")
    config["sizes"]["7b"]["train"]["learnig_rate"] = 1e-6
    found = lines(config)
    assert any(line.startswith("sizes.7b.train.learnig_rate: unknown training option") for line in found)
    assert "did you mean 'learning_rate'?" in "\n".join(found)


def test_every_error_of_a_preset_is_listed_at_once():
    config = preset("config.yaml")
    config["train"]["save_steps"] = config["train"]["max_steps"] + 1
    config["evaluate"] |= {"one_job_per_run": True, "one_job_per_benchmark": True}
    config["resources"]["train"] = {"threads": "four"}
    found = lines(config)
    assert any(line.startswith("train.save_steps: save interval") for line in found)
    assert any(line.startswith("evaluate.one_job_per_run: is true") for line in found)
    assert "resources.train.threads: must be a positive integer, got 'four'" in found


def test_a_check_crashing_after_an_error_is_that_errors_consequence():
    def bad():
        yield "a", "first"
        raise KeyError("consequence")

    assert collect([bad, lambda: [("b", "second")]]) == ["a: first", "b: second"]
    with pytest.raises(KeyError):
        collect([lambda: iter([]), lambda: {}["crash"]])


def test_real_preset_refused_under_conda():
    (line,) = lines(preset("real.yaml"), uses_conda=True)
    assert line.startswith("kind: is real, which has no conda env")


def test_study_floor():
    config = preset("study.yaml")
    config["seeds"] = [0]
    assert any(line.startswith("seeds: 1 seed(s) [0], but the study needs >=") for line in lines(config))


def test_an_option_outside_the_registered_regime_is_refused_naming_where_it_is_set():
    config = preset("study.yaml")
    config["study"]["regime"] = {"beta": 0.0, "lr_scheduler_type": "constant"}
    assert [line for line in lines(config) if "study.regime" in line] == []  # the preset as registered
    config["methods"]["cw_grpo"]["beta"] = 0.04
    config["train"]["lr_scheduler_type"] = "cosine"
    del config["study"]["regime"]["beta"]
    config["study"]["regime"]["warmup_steps"] = 0.1
    found = [line for line in lines(config) if "study.regime" in line]
    assert (
        "train.lr_scheduler_type: lr_scheduler_type='cosine' for grpo (size 'small'), but the registered "
        "regime fixes 'constant' (study.regime)" in found
    )
    assert any(line.startswith("train.warmup_steps: warmup_steps='unset' for") for line in found)
    config["study"]["regime"]["beta"] = 0.0
    assert any(line.startswith("methods.cw_grpo.beta: beta=0.04 for cw_grpo") for line in lines(config))


def test_the_second_study_refuses_a_method_outside_the_papers_regime():
    config = preset("study-regime.yaml")
    config["methods"]["clip_cov"]["beta"] = 0.0  # one method without the reference model's KL
    config["methods"]["grpo"]["lr_scheduler_kwargs"] = {"min_lr_rate": 0.0}
    found = [line for line in lines(config) if "study.regime" in line]
    assert found == [
        "methods.grpo.lr_scheduler_kwargs: lr_scheduler_kwargs={'min_lr_rate': 0.0} for grpo (size 'small'), "
        "but the registered regime fixes {'min_lr_rate': 0.1} (study.regime)",
        "methods.clip_cov.beta: beta=0.0 for clip_cov (size 'small'), but the registered regime fixes 0.04 "
        "(study.regime)",
    ]
    config = preset("study-regime.yaml")
    config["seeds"] = [0, 1, 2, 3, 4, 5]  # one fewer than registered
    assert any(line.startswith("seeds: 6 seed(s)") and "(study.min_seeds)" in line for line in lines(config))


def test_preset_file_errors_are_all_shown_before_validation(tmp_path):
    config = {"name": "x", "kind": "tiny", "sizes": {}, "methods": {}, "data": {}, "tarin": {}, "sedes": [0]}
    found = option_checks.preset_file_errors(config, SCHEMA, [])
    assert len([line for line in found if "tarin" in line or "sedes" in line]) == 2


def test_option_level_checks_run_beside_file_level_mistakes():
    """A schema mistake does not hide an option its command does not know: both in one pass, and the
    checks see the schema's defaults (the raw tiny preset has no `resources:`, which they read)."""
    config = yaml.safe_load((REPO / "config" / "config.yaml").read_text())
    config.pop("resources")
    config["colour"] = "blue"
    config["evaluate"]["temprature"] = 0.6
    run = {"uses_conda": False, "gpu_cap": None, "gpu_models": {}}
    found = option_checks.preset_errors(config, SCHEMA, [], lambda: checks.preset_checks(config, **run))
    assert [line.split(":")[0] for line in found] == ["colour", "evaluate.temprature"], found
    assert config["resources"]["default"] == {}  # the schema's default, filled in


def test_seeds_from_the_command_line_become_ints():
    config = {"seeds": ["0", "1", "x"]}
    option_checks.seeds_from_command_line(config)
    assert config["seeds"] == [0, 1, "x"]


def test_a_tiny_source_builds_that_size_here_and_only_a_known_architecture():
    config = preset("paper.yaml", "rehearsal.yaml")
    assert options.built_sizes(config) == {"1.5b": "small", "7b": "large"}
    assert options.built_sizes(preset("paper.yaml")) == {}
    config["sizes"]["7b"]["model"] = "tiny:huge"
    assert "sizes.7b.model: 'tiny:huge': no tiny architecture 'huge'; known: tiny:small, tiny:large" in lines(
        config
    )
    config = preset("paper.yaml")
    config["sizes"]["7b"]["sft"] = {"max_steps": 3}  # a fetched size is not warmed up
    assert any(line.startswith("sizes.7b.sft: only a size built here") for line in lines(config))


def test_the_tiny_models_context_bounds_a_built_sizes_lengths():
    config = preset("paper.yaml", "rehearsal.yaml")
    config["sizes"]["7b"]["evaluate"]["max_new_tokens"] = 4096
    assert any(
        line.startswith("sizes.7b (tiny:large): evaluate.max_new_tokens: 4096 tokens")
        for line in lines(config)
    )


def test_cpu_training_processes_beyond_the_cores_are_refused_per_node():
    config = preset("paper.yaml", "rehearsal.yaml")
    assert list(checks.cpu_process_errors(config, cpu_count=2)) == []
    found = list(checks.cpu_process_errors(config, cpu_count=1))
    assert [key for key, _ in found] == ["sizes.1.5b.train.num_processes", "sizes.7b.train.num_processes"]
    assert (
        "2 training processes a node on CPU (use_cpu, size '1.5b'), but this machine has 1 cores"
        in found[0][1]
    )
    two_nodes = preset("paper.yaml", "paper-7b-2nodes.yaml", "rehearsal.yaml")  # 2 processes, 1 a node
    assert [k for k, _ in checks.cpu_process_errors(two_nodes, cpu_count=1)] == [
        "sizes.1.5b.train.num_processes"
    ]
    assert list(checks.cpu_process_errors(preset("paper.yaml"), cpu_count=1)) == []  # GPU processes


def test_cpu_deepspeed_needs_a_compiler_and_deepspeed_in_the_train_interpreter():
    config = preset("paper.yaml", "rehearsal.yaml")
    has = {"yes": lambda: ("/venv/bin/python", True), "no": lambda: ("/venv/bin/python", False)}
    assert list(checks.cpu_deepspeed_errors(config, has["yes"], "/usr/bin/g++")) == []
    assert list(checks.cpu_deepspeed_errors(config, None, "/usr/bin/g++")) == []  # conda: its env brings it
    ((_, no_compiler),) = checks.cpu_deepspeed_errors(config, has["yes"], None)
    assert "no g++ is on PATH: install it" in no_compiler
    ((_, no_deepspeed),) = checks.cpu_deepspeed_errors(config, has["no"], "/usr/bin/g++")
    assert "/venv/bin/python has no DeepSpeed: build `make deepspeed`" in no_deepspeed
    assert list(checks.cpu_deepspeed_errors(preset("paper.yaml"), has["no"], None)) == []  # GPU training


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
    found = option_checks.overlay_errors(files)
    assert [line.split(":")[0] for line in found] == refused
    assert all("--configfile config/paper.yaml" in line for line in found)
