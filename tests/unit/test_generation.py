"""cwgrpo.generation: backends by name and their errors, sampling settings and seeds, the engine options
each backend gets, the context check (the transformers backend itself: test_transformers_backend.py)."""

from __future__ import annotations

import importlib.util

import pytest

from cwgrpo.configs import ConfigError
from cwgrpo.generation import BACKENDS, SamplingSettings, encode_prompt, get_backend, sample_seed

PROMPTS = [[{"role": "user", "content": p}] for p in ("47+35", "12+35-8", "90-45+11", "3+4")]


def test_get_backend_unknown_name_lists_names(tmp_path):
    with pytest.raises(
        ConfigError, match="unknown generation backend 'hf'; known: \\['transformers', 'vllm'\\]"
    ):
        get_backend("hf", tmp_path)
    assert sorted(BACKENDS) == ["transformers", "vllm"]


def test_get_backend_missing_model_dir(tmp_path):
    with pytest.raises(FileNotFoundError, match="model folder not found"):
        get_backend("transformers", tmp_path / "absent")
    with pytest.raises(FileNotFoundError, match=r"no config\.json"):
        get_backend("transformers", tmp_path)


@pytest.mark.skipif(importlib.util.find_spec("vllm") is not None, reason="vllm is installed")
def test_vllm_backend_missing_package_is_a_clear_error(tiny_model_dir):
    with pytest.raises(ImportError, match="needs the 'vllm' package"):
        get_backend("vllm", tiny_model_dir)


def test_sampling_settings_validation():
    with pytest.raises(ConfigError, match="temperature"):
        SamplingSettings(-0.1, 1.0, 8, 0)
    with pytest.raises(ConfigError, match="top_p"):
        SamplingSettings(1.0, 0.0, 8, 0)
    with pytest.raises(ConfigError, match="max_new_tokens"):
        SamplingSettings(1.0, 1.0, 0, 0)


def test_sample_seed_streams_are_distinct_and_stable():
    seeds = {sample_seed(s, i, j) for s in range(3) for i in range(5) for j in range(4)}
    assert len(seeds) == 60
    assert sample_seed(0, 1, 2) == 8455681950010755518  # pinned: a new value would resample every answer


def test_vllm_backend_passes_the_engine_settings_to_vllm(monkeypatch, tmp_path):
    import sys
    import types

    from cwgrpo.generation.vllm_backend import VLLMBackend

    seen = {}

    class FakeLLM:
        def __init__(self, **kwargs):
            seen.update(kwargs)

        def get_tokenizer(self):
            return None

    monkeypatch.setitem(sys.modules, "vllm", types.SimpleNamespace(LLM=FakeLLM))
    VLLMBackend(
        tmp_path,
        seed=3,
        max_model_len=32768,
        gpu_memory_utilization=0.7,
        tensor_parallel_size=2,
        enforce_eager=True,
    )
    assert seen["max_model_len"] == 32768
    assert seen["enforce_eager"] is True
    assert seen["gpu_memory_utilization"] == 0.7
    assert seen["tensor_parallel_size"] == 2
    assert seen["seed"] == 3


def test_a_prompt_longer_than_the_context_names_the_fix():
    from cwgrpo.generation import check_prompts_fit

    def tokenizer(text, add_special_tokens=False):
        return {"input_ids": list(text)}  # one token per character

    with pytest.raises(ConfigError, match=r"prompt 1 has 12 tokens, more than the model's context of 10 .*; "
                       r"shorten or remove that problem in the data .*system_prompt.*longer context"):  # fmt: skip
        check_prompts_fit(["short", "x" * 12], tokenizer, 10, 0, "prompt")


def test_the_context_check_counts_the_doubled_bos_when_asked():
    """An evaluation with ``add_special_tokens`` sends one token more than the templated text: the check
    before any generation counts it."""
    from cwgrpo.generation import check_prompts_fit
    from cwgrpo.models.tiny import build_tokenizer

    tokenizer = build_tokenizer(add_bos=True)
    text = tokenizer.apply_chat_template(PROMPTS[0], tokenize=False, add_generation_prompt=True)
    n = len(encode_prompt(tokenizer, PROMPTS[0]))
    check_prompts_fit([text], tokenizer, n, 0)
    with pytest.raises(
        ConfigError, match=rf"prompt 0 has {n + 1} tokens, more than the model's context of {n}"
    ):
        check_prompts_fit([text], tokenizer, n, 0, add_special_tokens=True)
