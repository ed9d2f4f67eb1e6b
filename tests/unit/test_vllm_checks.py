"""vLLM settings that vLLM would refuse once its engine starts get one line first (cwgrpo.generation.vllm_checks), at
the workflow's parse (train_option_errors) and in ``cwgrpo train`` (split_options, then the model's context)."""

from __future__ import annotations

import json
import re

import pytest

from cwgrpo.configs import ConfigError
from cwgrpo.generation.vllm_checks import check_context_fits_model, check_vllm_options
from cwgrpo.train.options import split_options, train_option_errors
from tests.unit.test_train_options import first_error


@pytest.mark.parametrize("share", [0, -0.1, 1.5])
def test_memory_share_outside_zero_one_is_refused_at_parse_time(share):
    error = first_error({"vllm_gpu_memory_utilization": share})
    assert re.search(rf"vllm_gpu_memory_utilization={share}: .* in \(0, 1\]", str(error))
    assert error.key == "vllm_gpu_memory_utilization"  # the workflow names the preset section with it
    with pytest.raises(ConfigError, match="vllm_gpu_memory_utilization"):
        split_options({"vllm_gpu_memory_utilization": share})


def test_memory_shares_vllm_accepts_pass():
    for share in (0.7, 1, 1.0, None):
        check_vllm_options({"vllm_gpu_memory_utilization": share})


@pytest.mark.parametrize("share", [0, 1.5, float("nan"), float("inf")])
def test_evaluation_refuses_the_memory_shares_training_refuses(share):
    from cwgrpo.evaluate.options import EvalConfig

    with pytest.raises(ConfigError, match=rf"^gpu_memory_utilization={share}: .* in \(0, 1\]$"):
        EvalConfig(backend="vllm", gpu_memory_utilization=share)
    with pytest.raises(ConfigError, match=rf"^vllm_gpu_memory_utilization={share}: .* in \(0, 1\]$"):
        check_vllm_options({"vllm_gpu_memory_utilization": share})


def test_tensor_parallel_size_must_divide_the_colocated_processes():
    colocated = {"use_vllm": True, "vllm_mode": "colocate", "vllm_tensor_parallel_size": 2}
    error = first_error({**colocated, "num_processes": 3, "launcher": "accelerate"})
    assert "vllm_tensor_parallel_size=2 does not divide num_processes=3" in str(error)
    with pytest.raises(ConfigError, match="does not divide num_processes=3"):
        split_options({**colocated, "num_processes": 3, "launcher": "accelerate"})
    check_vllm_options(colocated, num_processes=4)
    check_vllm_options(
        {**colocated, "vllm_mode": "server"}, num_processes=3
    )  # the server: one GPU of its own
    with pytest.raises(ConfigError, match="vllm_tensor_parallel_size=0: must be >= 1"):
        check_vllm_options({"vllm_tensor_parallel_size": 0})


def test_a_context_beyond_the_models_is_refused_before_any_engine(tmp_path):
    (tmp_path / "config.json").write_text(json.dumps({"max_position_embeddings": 256}))
    options = {"use_vllm": True, "vllm_max_model_length": 4096}
    with pytest.raises(ConfigError, match="vllm_max_model_length=4096 exceeds the model's context of 256"):
        check_context_fits_model(options, tmp_path)
    check_context_fits_model({**options, "vllm_max_model_length": 256}, tmp_path)
    check_context_fits_model({**options, "use_vllm": False}, tmp_path)
    check_context_fits_model(options, tmp_path / "absent")  # the model folder's own check reports it
    assert "vllm_max_model_length=0" in str(first_error({"vllm_max_model_length": 0}))


def test_the_paper_presets_vllm_settings_pass():
    import yaml

    from tests.vllm.conftest import REPO

    paper = yaml.safe_load((REPO / "config" / "paper.yaml").read_text())
    train = paper["train"]
    for size in paper["sizes"].values():
        assert train_option_errors({**train, **size["train"]}) == []
    split_options(train)
