"""cwgrpo.trainer.grpo: ``CWGRPOConfig``'s rules that need TRL's fields, the options each method receives,
and what ``CWGRPOTrainer`` accepts before TRL builds anything. (Training with it: tests/parity.)"""

from __future__ import annotations

import dataclasses
import logging

import pytest

from cwgrpo.trainer.options import CWOptions

RUN = dict(report_to="none", use_cpu=True, bf16=False)


def test_an_unknown_loss_type_is_refused_when_the_config_is_built():
    from cwgrpo.trainer.grpo import CWGRPOConfig

    with pytest.raises(ValueError, match=r"loss_type='ppo'; valid in TRL 1\.16: \['grpo'"):
        CWGRPOConfig(output_dir="unused", loss_type="ppo", **RUN)


def test_each_method_receives_the_configs_options_and_the_trainers_clip_range():
    from cwgrpo.trainer.grpo import CWGRPOConfig
    from cwgrpo.weighting import MethodOptions

    config = CWGRPOConfig(
        output_dir="unused", cw_variant="released", clip_cov_ratio=0.3, kl_cov_coef=2.0, **RUN
    )
    options = config.method_options(epsilon_low=0.1, epsilon_high=float("inf"))
    assert isinstance(options, MethodOptions)
    assert (options.cw_variant, options.clip_cov_ratio, options.kl_cov_coef) == ("released", 0.3, 2.0)
    assert (options.epsilon_low, options.epsilon_high) == (0.1, float("inf"))
    fields = {f.name for f in dataclasses.fields(MethodOptions) if f.init} - {
        "epsilon_low",
        "epsilon_high",
        "cw_knobs",
    }
    assert all(getattr(options, name) == getattr(config, name) for name in fields)


def test_the_jobs_config_keeps_the_samples_path_default_in_one_place(tmp_path):
    from cwgrpo.train.options import LIVE, build_train_config
    from cwgrpo.trainer.grpo import CWGRPOConfig
    from cwgrpo.trainer.options import samples_path

    config = CWGRPOConfig(output_dir=str(tmp_path), **RUN)
    assert config.cw_samples_path == samples_path(tmp_path) == str(tmp_path / "cov_samples.jsonl")
    assert isinstance(config, CWOptions)
    job = build_train_config({"max_steps": 1, "use_cpu": True, "bf16": False}, tmp_path)  # cwgrpo train's
    assert job.trl.cw_samples_path == job.trl_kwargs["cw_samples_path"] == samples_path(tmp_path / LIVE)


def test_kl_cov_on_policy_warns_that_it_trains_like_grpo(caplog):
    from cwgrpo.trainer.grpo import CWGRPOConfig

    with caplog.at_level(logging.WARNING, logger="cwgrpo.trainer.grpo"):
        CWGRPOConfig(output_dir="unused", cw_method="kl_cov", num_iterations=1, **RUN)
        CWGRPOConfig(output_dir="unused", cw_method="kl_cov", num_iterations=2, **RUN)
    assert [r.getMessage().split(":")[0] for r in caplog.records] == [
        "cw_method='kl_cov' with num_iterations=1"
    ]


def test_a_trainer_without_args_is_named_after_its_model_and_refuses_a_plain_grpo_config():
    import torch
    from trl import GRPOConfig

    from cwgrpo.trainer.grpo import CWGRPOTrainer, default_config

    config = default_config("HuggingFaceTB/SmolLM2-135M-Instruct")
    assert config.output_dir == "SmolLM2-135M-Instruct-CW-GRPO"
    assert config.use_cpu == (not torch.accelerator.is_available())
    with pytest.raises(TypeError, match=r"CWGRPOTrainer needs a CWGRPOConfig .*, got GRPOConfig"):
        CWGRPOTrainer("unused-model", args=GRPOConfig(output_dir="unused", **RUN))
