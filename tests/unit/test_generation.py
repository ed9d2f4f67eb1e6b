"""Generation backends: registry, errors, and the transformers backend on the offline tiny model."""

from __future__ import annotations

import importlib.util

import pytest

from cwgrpo.configs import ConfigError
from cwgrpo.generation import BACKENDS, Completion, SamplingSettings, encode_prompt, get_backend, sample_seed

PROMPTS = [[{"role": "user", "content": p}] for p in ("47+35", "12+35-8", "90-45+11", "3+4")]
MAX_NEW = 10


@pytest.fixture(scope="module")
def backend(tiny_model_dir):
    import torch

    threads = torch.get_num_threads()
    yield get_backend("transformers", tiny_model_dir, batch_size=5, progress=False, cpu_threads=1)
    torch.set_num_threads(threads)


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


def test_encode_applies_the_chat_template(backend):
    ids = encode_prompt(backend.tokenizer, PROMPTS[0])
    text = backend.tokenizer.decode(ids)
    assert text == "<|bos|><|user|>47+35<|end|><|assistant|>"
    assert ids.count(backend.tokenizer.bos_token_id) == 1


def _r1_like_model_dir(tiny_model_dir, tmp_path):
    """The tiny model with a tokenizer that adds a BOS and whose chat template emits one, as
    DeepSeek-R1-Distill's (the released 1.5B)."""
    import shutil

    from cwgrpo.models.tiny import build_tokenizer

    out = tmp_path / "r1-like"
    shutil.copytree(tiny_model_dir, out)
    build_tokenizer(add_bos=True).save_pretrained(out)
    return out


def test_evaluation_prompts_get_the_doubled_bos_only_when_asked(tiny_model_dir, tmp_path):
    """The released 1.5B evaluation (lighteval at ed084813) tokenised the templated prompt with special
    tokens: two BOS with R1-Distill's tokenizer. ``add_special_tokens`` reproduces it; off, one BOS."""
    from cwgrpo.evaluate.run import EvalConfig
    from cwgrpo.models.tiny import build_tokenizer

    r1_like, qwen_like = build_tokenizer(add_bos=True), build_tokenizer()
    bos = r1_like.bos_token_id
    once = encode_prompt(r1_like, PROMPTS[0])
    assert once[:2] == [bos, r1_like.convert_tokens_to_ids("<|user|>")] and once.count(bos) == 1
    assert encode_prompt(r1_like, PROMPTS[0], add_special_tokens=True) == [bos, *once]
    assert encode_prompt(qwen_like, PROMPTS[0], add_special_tokens=True) == once  # no BOS of its own: 7B
    assert EvalConfig(add_special_tokens=True).backend_options()["add_special_tokens"] is True

    seen = []

    def recording(generate):
        return lambda input_ids, **kw: (
            seen.append(input_ids[0].tolist()) or generate(input_ids=input_ids, **kw)
        )

    for option in (True, False):
        model_dir = _r1_like_model_dir(tiny_model_dir, tmp_path / str(option))
        backend = get_backend("transformers", model_dir, progress=False, add_special_tokens=option)
        backend.model.generate = recording(backend.model.generate)
        backend.generate(PROMPTS[:1], 1, SamplingSettings(0.0, 1.0, 2, 0))
    assert seen == [[bos, *once], once]


def test_generate_shape_and_fields(backend):
    out = backend.generate(PROMPTS, 3, SamplingSettings(1.0, 0.95, MAX_NEW, 0))
    assert len(out) == len(PROMPTS) and all(len(row) == 3 for row in out)
    for row in out:
        for c in row:
            assert isinstance(c, Completion)
            assert 1 <= c.n_tokens <= MAX_NEW
            assert not c.truncated or c.n_tokens == MAX_NEW


def test_generate_same_seed_same_output_and_other_seed_differs(backend):
    settings = SamplingSettings(1.0, 1.0, MAX_NEW, 7)
    a = backend.generate(PROMPTS, 2, settings)
    b = backend.generate(PROMPTS, 2, settings)
    c = backend.generate(PROMPTS, 2, SamplingSettings(1.0, 1.0, MAX_NEW, 8))
    assert a == b
    assert a != c
    assert a[0][0] != a[0][1]  # samples of one prompt use different streams


def test_generate_does_not_depend_on_batching(backend, tiny_model_dir):
    settings = SamplingSettings(1.0, 1.0, MAX_NEW, 3)
    batched = backend.generate(PROMPTS, 2, settings)
    one_at_a_time = get_backend("transformers", tiny_model_dir, batch_size=1, progress=False)
    assert one_at_a_time.generate(PROMPTS, 2, settings) == batched
    # nor on the prompts after it (the batches are cut differently)
    assert backend.generate(PROMPTS[:3], 2, settings) == batched[:3]


def test_greedy_k_samples_are_the_one_greedy_completion_repeated(backend):
    """k > 1 at temperature 0 generates once and repeats, as the vLLM backend does (vLLM refuses n > 1
    greedy; tests/vllm/test_evaluation_vllm.py runs the same call there)."""
    greedy = SamplingSettings(0.0, 1.0, MAX_NEW, 0)
    once = backend.generate(PROMPTS, 1, greedy)
    assert backend.generate(PROMPTS, 3, greedy) == [row * 3 for row in once]
    assert all(len(c.token_ids) == c.n_tokens > 0 for row in once for c in row)


def test_truncated_flag_at_max_new_tokens(backend):
    out = backend.generate(PROMPTS[:1], 4, SamplingSettings(1.5, 1.0, 2, 0))
    for c in out[0]:
        assert c.n_tokens <= 2
        assert c.truncated == (c.n_tokens == 2)


def test_vllm_engine_settings_reach_the_vllm_backend_only():
    from cwgrpo.evaluate.run import EvalConfig

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
    from cwgrpo.evaluate.run import EvalConfig

    assert EvalConfig(backend="vllm", dtype="float32").backend_options()["dtype"] == "float32"
    assert EvalConfig(dtype="bfloat16").backend_options()["dtype"] == "bfloat16"
    assert "dtype" not in EvalConfig().backend_options()  # each backend's own default
    with pytest.raises(ConfigError, match=r"dtype must be one of \['float32', 'bfloat16', 'float16'\]"):
        EvalConfig(dtype="fp32")


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
