"""Colocated training (the paper-1gpu path: TRL's in-process vLLM engine) on vLLM's CPU build.

tests/vllm/train_colocated.py runs `cwgrpo train` with config/paper-1gpu.yaml's training options, shrunk
to the tiny model on a CPU (3 steps, G = 4, a 64-token context), once per method, and records what TRL's
engine did around every weight sync. vLLM's CPU build pre-packs its linear weights and cannot take TRL's
sync; the run uses the test-only shim tests/vllm/cpu_linear_without_prepacking.py (docs/fidelity.md says
what that means for a CPU user).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.vllm.conftest import run_in_vllm

pytestmark = pytest.mark.slow

SCRIPT = Path(__file__).with_name("train_colocated.py")
METHODS = ("grpo", "cw_grpo")
# vLLM runs the float32 tiny model in bfloat16 (its CPU default for a float32 checkpoint; the paper's
# engine is bf16 too), the trainer in float32: per token, the log-probs of one sequence agree to within
# bf16 rounding. Measured after each sync: at most 0.003 nats; one step at lr 1e-2 moves them by about
# 1-2 nats, so a sync that did not land fails by far.
BF16_TOLERANCE = 0.05


@pytest.fixture(scope="module")
def colocated_runs(vllm_python, tiny_model_dir, tmp_path_factory) -> dict[str, dict]:
    runs = {}
    for method in METHODS:
        work = tmp_path_factory.mktemp(f"colocated-{method}")
        run_in_vllm(
            vllm_python, SCRIPT, str(tiny_model_dir), str(work), str(work / "out.json"), method, timeout=900
        )
        runs[method] = json.loads((work / "out.json").read_text()) | {"work": work}
    return runs


def _syncs(run: dict) -> list[dict]:
    return [r for r in run["records"] if "after" in r]


def _generations(run: dict) -> list[dict]:
    return [r for r in run["records"] if "completion_lengths" in r]


@pytest.mark.parametrize("method", METHODS)
def test_colocated_steps_train_and_log(colocated_runs, method):
    run = colocated_runs[method]
    assert run["exit"] == 0
    lines = (run["work"] / method / "metrics.jsonl").read_text().splitlines()
    assert len(lines) == run["options"]["max_steps"]


@pytest.mark.parametrize("method", METHODS)
def test_after_each_sync_vllm_logprobs_equal_the_trainers(colocated_runs, method):
    syncs = _syncs(colocated_runs[method])
    print(f"{method}: syncs (max |vLLM - trainer| nats, before -> after): "
          f"{[(round(s['before'], 3), round(s['after'], 3)) for s in syncs]}, vLLM {syncs[0]['vllm_dtype']}")  # fmt: skip
    assert len(syncs) == colocated_runs[method]["options"]["max_steps"]  # one before each step's generation
    assert all(s["after"] <= BF16_TOLERANCE for s in syncs), syncs
    # after an optimiser step the engine's old weights are far off: the sync is what makes them agree
    assert all(s["before"] > 10 * BF16_TOLERANCE for s in syncs[1:]), syncs


@pytest.mark.parametrize("method", METHODS)
def test_colocated_requests_get_the_rest_of_the_context_from_the_whole_prompt(colocated_runs, method):
    """generation_kwargs {max_tokens: null}: each completion runs to vllm_max_model_length minus its prompt
    (or stops at EOS), past max_completion_length; and vLLM sees the whole prompt, longer than
    max_prompt_length (which cuts prompts for the loss only)."""
    options = colocated_runs[method]["options"]
    context = options["vllm_max_model_length"]
    rows = [
        row
        for g in _generations(colocated_runs[method])
        for row in zip(g["prompt_lengths"], g["completion_lengths"], g["ends_with_eos"], strict=True)
    ]
    assert rows
    assert all(p > options["max_prompt_length"] for p, _, _ in rows)
    assert all(c == context - p for p, c, eos in rows if not eos), rows
    assert all(c <= context - p for p, c, _ in rows)
    assert any(c > options["max_completion_length"] for _, c, _ in rows)
