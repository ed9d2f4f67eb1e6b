"""cwgrpo.evaluate.options: EvalConfig, the one validator of ``cwgrpo evaluate``'s options, torch-free."""

from __future__ import annotations

import subprocess
import sys

import pytest

from cwgrpo.configs import ConfigError
from cwgrpo.evaluate.options import EvalConfig


def test_the_options_import_without_torch():
    """The workflow's parse builds EvalConfig for every preset: it must not pay for torch."""
    code = "import sys, cwgrpo.evaluate.options; print(any(m.startswith('torch') for m in sys.modules))"
    assert (
        subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
        == "False\n"
    )


def test_an_unknown_answer_form_is_refused_naming_the_valid_ones():
    with pytest.raises(ConfigError, match=r"answer_form must be one of \['any', 'number'\], got 'numeric'"):
        EvalConfig(answer_form="numeric")


def test_vllm_engine_settings_reach_the_vllm_backend_only():
    vllm = EvalConfig(
        backend="vllm",
        max_model_len=4096,
        gpu_memory_utilization=0.8,
        tensor_parallel_size=2,
        enforce_eager=True,
    )
    assert vllm.backend_options() == {
        "batch_size": 32,
        "seed": 0,
        "cpu_threads": None,
        "add_special_tokens": False,
        "max_model_len": 4096,
        "gpu_memory_utilization": 0.8,
        "tensor_parallel_size": 2,
        "enforce_eager": True,
    }
    # The transformers backend takes no engine settings: they are not passed to it.
    assert set(EvalConfig(max_model_len=4096).backend_options()) == {
        "batch_size", "seed", "cpu_threads", "add_special_tokens"
    }  # fmt: skip
    for bad in ({"max_model_len": 0}, {"gpu_memory_utilization": 1.5}, {"tensor_parallel_size": 0}):
        with pytest.raises(ConfigError, match=next(iter(bad))):
            EvalConfig(**bad)


def test_dtype_is_an_evaluation_option_for_both_backends():
    assert EvalConfig(backend="vllm", dtype="float32").backend_options()["dtype"] == "float32"
    assert EvalConfig(dtype="bfloat16").backend_options()["dtype"] == "bfloat16"
    assert "dtype" not in EvalConfig().backend_options()  # each backend's own default
    with pytest.raises(ConfigError, match=r"dtype must be one of \['float32', 'bfloat16', 'float16'\]"):
        EvalConfig(dtype="fp32")
