"""The options of `cwgrpo train` (``cwgrpo.train.options``), checked at the workflow's parse as in the job: splitting
into job and TRL fields, checking, tags, monitoring names, the config's hash."""

import re
from pathlib import Path

import pytest
import yaml

from cwgrpo.configs import ConfigError, OptionError, parse_tags
from cwgrpo.generation.context_budget import completion_budget
from cwgrpo.train.options import build_train_config, split_options, train_option_errors

REPO = Path(__file__).resolve().parents[2]


def first_error(options: dict) -> OptionError:
    """The first mistake the dry run's check (``train_option_errors``) finds in a job's options; every job
    has a ``max_steps`` (the preset's)."""
    errors = train_option_errors({"max_steps": 1, **options})
    assert errors, f"{options} passed"
    return errors[0]


def test_split_options_separates_job_and_trl_fields():
    job, trl = split_options(
        {"reward_funcs": ["accuracy", "format"], "learning_rate": 1e-6, "cw_method": "grpo"}
    )
    assert job.reward_funcs == ["accuracy", "format"]
    assert trl == {"learning_rate": 1e-6, "cw_method": "grpo"}


def test_job_fields_never_shadow_trl_fields():
    """split_options gives a key to TrainJob first: a TrainJob field named like a CWGRPOConfig field would
    silently keep that value from TRL (as `vllm_gpu_memory_utilization` once did)."""
    import dataclasses

    from cwgrpo.train.options import TrainJob
    from cwgrpo.trainer import CWGRPOConfig

    shared = {f.name for f in dataclasses.fields(TrainJob)} & {
        f.name for f in dataclasses.fields(CWGRPOConfig)
    }
    assert not shared


def test_split_options_names_unknown_keys():
    with pytest.raises(ConfigError, match="learning_rat"):
        split_options({"learning_rat": 1e-6})


def test_split_options_rejects_unknown_launcher():
    with pytest.raises(ConfigError, match="launcher='slurm'"):
        split_options({"launcher": "slurm"})


def test_parse_tags_keeps_integers_as_integers():
    assert parse_tags(["size=small", "seed=3", "step=-1"]) == {"size": "small", "seed": 3, "step": -1}
    with pytest.raises(ConfigError, match="KEY=VALUE"):
        parse_tags(["oops"])


def test_the_option_check_names_the_bad_key():
    good = {"max_steps": 1, "learning_rate": 1e-4, "cw_variant": "released", "reward_funcs": ["accuracy"]}
    assert train_option_errors(good) == []
    for options, key, named in (
        ({"learnig_rate": 1e-4}, "learnig_rate", "learnig_rate"),
        ({"cw_variant": "relased"}, "cw_variant", "relased"),
        ({"max_steps": "ten"}, "max_steps", "ten"),
        ({"beta": "x"}, "beta", "x"),
        ({"prompt_set": "nope"}, "prompt_set", "nope"),
        ({"liger_kernel_config": 5}, "liger_kernel_config", "expected a mapping, got 5"),
        ({"loss_type": "nope"}, "loss_type", "'nope'; valid in TRL 1.16: ['grpo'"),
    ):
        error = first_error(options)
        assert error.key == key and named in str(error)


# TRL's own rules, which only TRL's config knows: (options over the tiny preset's, the option named, TRL's words)
TRL_RULES = {
    "generation batch not whole groups": (
        {"per_device_train_batch_size": 12, "num_generations": 8, "gradient_accumulation_steps": 1,
         "cw_one_group_per_micro_batch": False},
        "num_generations",
        "generation_batch_size (12) must be divisible by num_generations (8).",
    ),
    "misspelt scheduler": (
        {"lr_scheduler_type": "constnt"}, "lr_scheduler_type", "constnt is not a valid SchedulerType, please select one of"
    ),
}  # fmt: skip


@pytest.mark.parametrize("case", sorted(TRL_RULES))
def test_trls_own_rules_are_refused_by_the_dry_runs_check_in_trls_words(case):
    options, key, words = TRL_RULES[case]
    train = yaml.safe_load((REPO / "config" / "config.yaml").read_text())["train"]
    assert train_option_errors(train) == []
    (error,) = train_option_errors({**train, **options})
    assert error.key == key and str(error).startswith(words), str(error)


def test_monitoring_names_from_tags_only_when_a_logger_is_on(monkeypatch):
    from cwgrpo.train.options import monitoring_names

    monkeypatch.delenv("WANDB_RUN_GROUP", raising=False)
    tags = {"size": "135m", "method": "cw_grpo", "seed": 0}
    assert monitoring_names(tags, {}) == {}  # report_to none: the run's config stays as it was
    assert monitoring_names(tags, {"report_to": "tensorboard"}) == {"run_name": "135m/cw_grpo/seed0"}
    import os

    assert os.environ["WANDB_RUN_GROUP"] == "135m/cw_grpo"


@pytest.mark.parametrize("given, expected", [({}, True), ({"gradient_checkpointing": False}, False)])
def test_training_config_raises_no_futurewarning_about_gradient_checkpointing(tmp_path, given, expected):
    """TRL's GRPOConfig sets the deprecated `gradient_checkpointing` by default, which warned on every run:
    TRL gets the current name, with the same value, and run.json keeps the option as written."""
    import warnings

    from cwgrpo.train.options import build_train_config

    options = {"max_steps": 1, "use_cpu": True, "bf16": False, **given}
    with warnings.catch_warnings():
        warnings.filterwarnings("error", message=".*checkpointing.*", category=FutureWarning)
        cfg = build_train_config(options, tmp_path / "run")
    assert cfg.trl.activation_checkpointing is expected and cfg.trl.gradient_checkpointing is expected
    assert cfg.trl_kwargs.get("gradient_checkpointing") == given.get("gradient_checkpointing")


def test_a_run_folder_copied_elsewhere_keeps_its_config_hash(tmp_path):
    """Weak spot: a copied run folder was refused as 'changed the options': its own path was hashed."""
    from cwgrpo.configs import config_hash
    from cwgrpo.train.options import build_train_config

    options = {"max_steps": 2, "use_cpu": True, "bf16": False}
    here = build_train_config(options, tmp_path / "runs" / "a")
    there = build_train_config(options, tmp_path / "elsewhere" / "copy-of-a")
    assert here.resolved() != there.resolved()  # run.json still says where each run was trained
    assert config_hash(here.identity()) == config_hash(there.identity())
    other = build_train_config({**options, "max_steps": 3}, tmp_path / "runs" / "a")
    assert config_hash(other.identity()) != config_hash(here.identity())


def test_a_negative_no_signal_stretch_is_refused_at_parse_time(tmp_path):
    error = first_error({"cw_no_signal_steps": -1})
    assert re.search(r"cw_no_signal_steps=-1: must be an integer >= 0", str(error))
    assert error.key == "cw_no_signal_steps"
    with pytest.raises(ConfigError, match=r"cw_no_signal_steps=-1"):
        build_train_config({"cw_no_signal_steps": -1, "use_cpu": True, "bf16": False}, tmp_path / "run")
    assert not (tmp_path / "run").exists()


def test_a_completion_budget_below_one_token_is_refused_before_a_request():
    error = first_error({"use_vllm": True, "vllm_mode": "server", "generation_kwargs": {"max_tokens": 0}})
    assert re.search(r"generation_kwargs.max_tokens=0: .*>= 1", str(error))
    assert error.key == "generation_kwargs"
    with pytest.raises(ValueError, match="max_tokens=-5"):
        completion_budget(10, 100, -5)
    assert completion_budget(10, 100, None) == 90


def test_a_system_prompt_with_a_lone_surrogate_is_refused_before_the_model_loads():
    from cwgrpo.configs import build_config
    from cwgrpo.evaluate.options import EvalConfig

    bad = "Think step by step \ud800"  # YAML's "\ud800" escape; the tokenizer fails on it with a TypeError
    with pytest.raises(ConfigError, match="system_prompt: character 19 is a lone surrogate"):
        build_config(EvalConfig, None, {"system_prompt": bad})
    assert re.search(
        "system_prompt: character 19 is a lone surrogate", str(first_error({"system_prompt": bad}))
    )
    assert build_config(EvalConfig, None, {"system_prompt": "Réfléchis, 答"}).system_prompt == "Réfléchis, 答"


def test_an_unknown_vllm_mode_is_refused_at_parse_time():
    error = first_error({"use_vllm": True, "vllm_mode": "colocated"})
    assert re.search(r"vllm_mode='colocated': 'colocate' .* or 'server'", str(error))
    assert error.key == "vllm_mode"
    with pytest.raises(ConfigError, match=r"vllm_mode='colocated'"):
        split_options({"use_vllm": True, "vllm_mode": "colocated"})
    assert train_option_errors({"max_steps": 1, "use_vllm": True, "vllm_mode": "server"}) == []


def test_reward_funcs_given_as_one_string_from_python_is_refused_as_the_cli_refuses_it():
    """Campaign #70: its letters were taken for reward names ("unknown reward 'a'")."""
    from cwgrpo.train.options import TrainJob

    with pytest.raises(ConfigError, match=r"reward_funcs: expected a list, got 'accuracy' \(str\)"):
        TrainJob(reward_funcs="accuracy")
