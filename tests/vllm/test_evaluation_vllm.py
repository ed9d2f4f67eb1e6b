"""The vLLM evaluation backend on real vLLM (CPU build) against the transformers backend.

One vLLM run (tests/vllm/generate_with_vllm.py) starts one engine per model, in float32 (the
``dtype`` evaluation option), and generates every task below; the transformers backend generates the
same tasks here, in float32, and the tests compare:

- greedy, token for token: the tiny model (the tiny preset's shape: 64 new tokens, batch 32) and
  SmolLM2-135M-Instruct (the real preset's: 32 new tokens, batch 8, from the GGUF file the real preset
  uses, rebuilt once as a float safetensors folder by the ``real_model`` fixture, which vLLM loads);
- the ``dtype`` and ``max_model_len`` options reach the engine, and a completion budget past the
  context is cut at the context (prompt + completion = max_model_len), marked truncated;
- k > 1 at temperature 0: both backends give the one greedy completion repeated (vLLM itself refuses
  ``n > 1`` without sampling);
- sampled (the presets' evaluation sampling: temperature 0.6, top-p 0.95, k = 2): the two backends draw
  from different random streams, so their samples are compared as distributions (``_KS_ALPHA``).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.vllm.conftest import run_in_vllm

pytestmark = pytest.mark.slow

SCRIPT = Path(__file__).with_name("generate_with_vllm.py")
GREEDY_TINY = {"prompts": 32, "max_new_tokens": 64, "batch_size": 32}
TINY_CONTEXT = 128  # max_model_len of the tiny engine (the model's own: 256)
GREEDY_REAL = {"prompts": 16, "max_new_tokens": 32, "batch_size": 8}
SAMPLED = {"prompts": 64, "n": 2, "temperature": 0.6, "top_p": 0.95, "max_new_tokens": 32, "seed": 0}
# Two-sample Kolmogorov-Smirnov test of the completions' mean token log-probability under the model.
# Under the null (both backends sample the same distribution) its false-alarm rate is at most alpha:
# the samples are stratified by prompt in the same way on both sides, which can only narrow the
# empirical distributions' spread against the i.i.d. case the KS null distribution assumes.
_KS_ALPHA = 1e-3


def _prompts(prompt_set: str, n: int) -> list[list[dict[str, str]]]:
    from cwgrpo.data.prompts import eval_messages
    from cwgrpo.data.synthetic import generate_split

    return [eval_messages(prompt_set, r["problem"]) for r in generate_split("syn_math500")[:n]]


def _task(name: str, prompts, n=1, temperature=0.0, top_p=1.0, max_new_tokens=32, seed=0) -> dict:
    return {"name": name, "prompts": prompts, "n": n, "temperature": temperature, "top_p": top_p,
            "max_new_tokens": max_new_tokens, "seed": seed}  # fmt: skip


def _tiny_tasks() -> list[dict]:
    sampled = {k: v for k, v in SAMPLED.items() if k != "prompts"}
    prompts = _prompts("tiny", SAMPLED["prompts"])
    return [
        _task(
            "greedy", _prompts("tiny", GREEDY_TINY["prompts"]), max_new_tokens=GREEDY_TINY["max_new_tokens"]
        ),
        _task("greedy_k3", _prompts("tiny", 8), n=3, max_new_tokens=16),
        _task("past_the_context", _prompts("tiny", 4), max_new_tokens=4 * TINY_CONTEXT),
        _task("sampled", prompts, **sampled),
        _task("sampled_hotter", prompts, **(sampled | {"temperature": 1.0, "top_p": 1.0})),
        _task("one_prompt_8_times", prompts[:1] * 8, **(sampled | {"n": 1})),
    ]


@pytest.fixture(scope="module")
def vllm_runs(vllm_python, tiny_model_dir, real_model_dir, tmp_path_factory) -> dict[str, dict]:
    """vLLM's completions of every task, per model ("tiny", "real"), from one vLLM run."""
    folder = tmp_path_factory.mktemp("vllm-eval")
    jobs = [
        {
            "model_dir": str(tiny_model_dir),
            "dtype": "float32",
            "max_model_len": TINY_CONTEXT,
            "tasks": _tiny_tasks(),
        },
        {
            "model_dir": str(real_model_dir),
            "dtype": "float32",
            "tasks": [
                _task(
                    "greedy",
                    _prompts("open_rs", GREEDY_REAL["prompts"]),
                    max_new_tokens=GREEDY_REAL["max_new_tokens"],
                )
            ],
        },
    ]
    (folder / "jobs.json").write_text(json.dumps(jobs))
    run_in_vllm(vllm_python, SCRIPT, str(folder / "jobs.json"), str(folder / "out.json"), timeout=900)
    tiny, real = json.loads((folder / "out.json").read_text())
    return {"tiny": tiny | {"jobs": jobs[0]}, "real": real | {"jobs": jobs[1]}}


def _transformers(model_dir: Path, task: dict, batch_size: int) -> list[list[dict]]:
    import dataclasses

    from cwgrpo.generation import SamplingSettings, get_backend

    backend = get_backend(
        "transformers", model_dir, batch_size=batch_size, dtype="float32", device="cpu", progress=False
    )
    settings = SamplingSettings(task["temperature"], task["top_p"], task["max_new_tokens"], task["seed"])
    out = backend.generate(task["prompts"], task["n"], settings)
    return [[dataclasses.asdict(c) | {"token_ids": list(c.token_ids)} for c in row] for row in out]


def _task_of(run: dict, name: str) -> dict:
    return next(t for t in run["jobs"]["tasks"] if t["name"] == name)


def _parity(vllm_rows: list[list[dict]], hf_rows: list[list[dict]]) -> dict:
    """Prompts compared, prompts identical token for token, and tokens equal position by position."""
    pairs = [(v[0]["token_ids"], h[0]["token_ids"]) for v, h in zip(vllm_rows, hf_rows, strict=True)]
    same_tokens = sum(sum(a == b for a, b in zip(v, h, strict=False)) for v, h in pairs)
    return {
        "prompts": len(pairs),
        "identical": sum(v == h for v, h in pairs),
        "tokens_equal": same_tokens,
        "tokens": sum(max(len(v), len(h)) for v, h in pairs),
    }


def _same_completion(v: dict, h: dict) -> bool:
    """The fields the samples file stores. The text only where it is valid UTF-8: the random tiny model
    emits lone bytes of its byte-level vocabulary, which vLLM's incremental detokenizer holds back (text
    '') where transformers' decode writes U+FFFD; the tokens are compared either way."""
    same = (v["token_ids"], v["n_tokens"], v["truncated"]) == (h["token_ids"], h["n_tokens"], h["truncated"])
    return same and (v["text"] == h["text"] or "\ufffd" in h["text"])


@pytest.mark.parametrize(("model", "shape"), [("tiny", GREEDY_TINY), ("real", GREEDY_REAL)])
def test_greedy_vllm_equals_transformers_token_for_token(
    vllm_runs, tiny_model_dir, real_model_dir, model, shape
):
    run = vllm_runs[model]
    hf = _transformers(tiny_model_dir if model == "tiny" else real_model_dir, _task_of(run, "greedy"),
                       shape["batch_size"])  # fmt: skip
    vllm_rows = run["tasks"]["greedy"]
    parity = _parity(vllm_rows, hf)
    print(f"greedy parity, {model}: {parity} (vLLM engine start {run['start_s']} s)")
    assert parity["identical"] == parity["prompts"] == shape["prompts"], parity
    assert all(_same_completion(v[0], h[0]) for v, h in zip(vllm_rows, hf, strict=True))


def test_greedy_k_samples_are_one_completion_repeated_in_both_backends(vllm_runs, tiny_model_dir):
    run = vllm_runs["tiny"]
    vllm_rows = run["tasks"]["greedy_k3"]
    assert not isinstance(vllm_rows, dict), vllm_rows  # {"error": ...}: vLLM refused n > 1 greedy
    assert all(row == [row[0]] * 3 for row in vllm_rows)
    hf = _transformers(tiny_model_dir, _task_of(run, "greedy_k3"), batch_size=32)
    assert all(
        _same_completion(v, h)
        for vs, hs in zip(vllm_rows, hf, strict=True)
        for v, h in zip(vs, hs, strict=True)
    )


def _mean_logprobs(model_dir: Path, prompts, rows: list[list[dict]]) -> list[float]:
    """Each completion's mean token log-probability under the model (float32, temperature 1)."""
    import torch

    from cwgrpo.generation import encode_prompt, get_backend

    backend = get_backend("transformers", model_dir, dtype="float32", device="cpu", progress=False)
    means = []
    with torch.inference_mode():
        for messages, row in zip(prompts, rows, strict=True):
            prompt = encode_prompt(backend.tokenizer, messages)
            for completion in row:
                ids = torch.tensor([prompt + completion["token_ids"]])
                logps = backend.model(ids).logits[0, len(prompt) - 1 : -1].float().log_softmax(-1)
                taken = logps.gather(-1, ids[0, len(prompt) :, None]).squeeze(-1)
                means.append(taken.mean().item())
    return means


def test_sampled_evaluation_is_consistent_between_backends(vllm_runs, tiny_model_dir):
    """Same settings: the KS test does not reject (false-alarm rate <= _KS_ALPHA). Its power, shown on the
    same data: vLLM at temperature 1.0 / top-p 1.0 is told apart from transformers at 0.6 / 0.95."""
    from scipy.stats import ks_2samp

    run = vllm_runs["tiny"]
    task = _task_of(run, "sampled")
    hf = _transformers(tiny_model_dir, task, batch_size=32)
    vllm_rows, hotter = run["tasks"]["sampled"], run["tasks"]["sampled_hotter"]
    # k samples of a prompt are distinct draws in vLLM too (one seed per request, not per sample)
    distinct = {name: sum(r[0] != r[1] for r in rows) for name, rows in (("vllm", vllm_rows), ("hf", hf))}
    stats = {name: _mean_logprobs(tiny_model_dir, task["prompts"], rows)
             for name, rows in (("vllm", vllm_rows), ("hf", hf), ("hotter", hotter))}  # fmt: skip
    same, apart = ks_2samp(stats["vllm"], stats["hf"]), ks_2samp(stats["hotter"], stats["hf"])
    print(f"sampled: distinct pairs {distinct} of {len(hf)}; KS p same settings {same.pvalue:.3g}, "
          f"T=1.0 vs 0.6 {apart.pvalue:.3g}")  # fmt: skip
    assert distinct["vllm"] >= 0.9 * len(vllm_rows), distinct
    assert same.pvalue > _KS_ALPHA, same
    assert apart.pvalue < _KS_ALPHA, apart


def test_engine_options_reach_vllm_and_the_context_caps_completions(vllm_runs, tiny_model_dir):
    from cwgrpo.generation import encode_prompt, get_backend

    run = vllm_runs["tiny"]
    assert (run["engine_dtype"], run["max_model_len"]) == ("torch.float32", TINY_CONTEXT)
    assert vllm_runs["real"]["engine_dtype"] == "torch.float32"
    tokenizer = get_backend("transformers", tiny_model_dir, progress=False).tokenizer

    def encode(messages):
        return encode_prompt(tokenizer, messages)

    prompts = _task_of(run, "past_the_context")["prompts"]
    for messages, (completion,) in zip(prompts, run["tasks"]["past_the_context"], strict=True):
        if completion["truncated"]:
            assert len(encode(messages)) + completion["n_tokens"] == TINY_CONTEXT
        else:  # ended at EOS within the context
            assert len(encode(messages)) + completion["n_tokens"] < TINY_CONTEXT
    assert any(c["truncated"] for (c,) in run["tasks"]["past_the_context"])


def test_sampled_prompts_draw_independent_samples(vllm_runs):
    """Eight copies of one prompt get eight different samples: each request has its own seed (with one
    seed for all requests, vLLM draws the same random numbers for each: eight identical completions)."""
    rows = vllm_runs["tiny"]["tasks"]["one_prompt_8_times"]
    assert len({tuple(row[0]["token_ids"]) for row in rows}) == 8, rows
