"""The server path's per-request completion budget (cwgrpo.generation.context_budget); on the real server:
tests/vllm/test_server.py."""

from __future__ import annotations

import pytest

from cwgrpo.generation.context_budget import budget_groups, completion_budget, fit_to_context, merge_outputs


def test_budget_is_the_rest_of_the_context_capped_by_max_tokens():
    assert completion_budget(18, 64, None) == 46  # the released engine with max_tokens null
    assert completion_budget(18, 64, 40) == 40
    assert completion_budget(18, 64, 200) == 46  # the released engine capped instead of refusing
    assert completion_budget(512, 4096, 4096) == 3584


def test_a_prompt_that_fills_the_context_is_refused_naming_both_lengths():
    with pytest.raises(ValueError, match=r"prompt of 64 tokens .* context of 64 tokens"):
        completion_budget(64, 64, None)


def test_groups_keep_prompt_order_within_each_budget():
    assert budget_groups([10, 12, 10, 3], 20, None) == {10: [0, 2], 8: [1], 17: [3]}
    assert budget_groups([10, 12, 10, 3], 20, 9) == {9: [0, 2, 3], 8: [1]}


def test_merge_puts_n_completions_per_prompt_back_in_prompt_order():
    parts = [
        (
            [0, 2],
            {"prompt_ids": [[0], [2]], "completion_ids": [[0, 0], [0, 1], [2, 0], [2, 1]], "logprobs": None},
        ),
        ([1], {"prompt_ids": [[1]], "completion_ids": [[1, 0], [1, 1]], "logprobs": [[0.0], [0.0]]}),
    ]
    merged = merge_outputs(parts, n_prompts=3, n=2)
    assert merged["prompt_ids"] == [[0], [1], [2]]
    assert merged["completion_ids"] == [[0, 0], [0, 1], [1, 0], [1, 1], [2, 0], [2, 1]]
    assert merged["logprobs"] is None  # absent from one group: absent


def test_fit_to_context_sends_each_length_its_budget_and_drops_the_null():
    """What TRL's server branch passes (max_tokens=max_completion_length, generation_kwargs from the
    preset), against a recorder standing in for the HTTP client."""
    calls = []

    def record(prompts, features, n, max_tokens, generation_kwargs, **sampling):
        calls.append((len(prompts[0]), max_tokens, generation_kwargs, sampling))
        return {
            "prompt_ids": [list(p) for p in prompts],
            "completion_ids": [[len(p)] * max_tokens for p in prompts for _ in range(n)],
        }

    generate = fit_to_context(record, max_model_len=32)
    prompts = [[1] * 5, [1] * 7, [1] * 5]
    out = generate(
        prompts=prompts, features=None, n=2, temperature=0.7, max_tokens=4096,
        generation_kwargs={"max_tokens": None, "seed": 1},
    )  # fmt: skip
    assert sorted(c[:2] for c in calls) == [(5, 27), (7, 25)]
    assert all(c[2] == {"seed": 1} and c[3]["temperature"] == 0.7 for c in calls)
    assert [len(c) for c in out["completion_ids"]] == [27, 27, 25, 25, 27, 27]
    assert out["prompt_ids"] == prompts
    # without a null in generation_kwargs, max_tokens is the cap
    calls.clear()
    generate(prompts=prompts, n=1, max_tokens=26, generation_kwargs=None)
    assert sorted(c[:2] for c in calls) == [(5, 26), (7, 25)]
