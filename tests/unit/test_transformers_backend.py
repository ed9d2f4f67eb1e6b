"""cwgrpo.generation.transformers_backend on the offline tiny model: the chat template and BOS it feeds the
model, sampling by seed and per-sample stream (not by batch), greedy repeats, truncation."""

from __future__ import annotations

import pytest

from cwgrpo.generation import Completion, SamplingSettings, encode_prompt, get_backend
from cwgrpo.generation.transformers_backend import TransformersBackend

PROMPTS = [[{"role": "user", "content": p}] for p in ("47+35", "12+35-8", "90-45+11", "3+4")]
MAX_NEW = 10


@pytest.fixture(scope="module")
def backend(tiny_model_dir):
    import torch

    threads = torch.get_num_threads()
    backend = get_backend("transformers", tiny_model_dir, batch_size=5, progress=False, cpu_threads=1)
    assert isinstance(backend, TransformersBackend)
    yield backend
    torch.set_num_threads(threads)


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
    from cwgrpo.evaluate.options import EvalConfig
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
