"""Each request to the ``trl vllm-serve`` server gets what the released in-process engine gave it.

The released engine gave each request the rest of ``max_model_len`` after its prompt; through the server
TRL sends one ``max_tokens`` per call, which vLLM refuses where a prompt plus it exceeds the context. So
the client splits each call by prompt length and sends each group its own budget, at once.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

# Requests in flight at once: vLLM's server batches them; more only queue on its side.
MAX_CONCURRENT_REQUESTS = 32


def completion_budget(prompt_tokens: int, max_model_len: int, max_tokens: int | None) -> int:
    """Tokens the released engine let a prompt generate: the rest of the context, capped by ``max_tokens``."""
    if max_tokens is not None and max_tokens < 1:
        raise ValueError(f"max_tokens={max_tokens}: vLLM's server refuses a request for fewer than 1 token")
    room = max_model_len - prompt_tokens
    if room < 1:
        raise ValueError(
            f"a prompt of {prompt_tokens} tokens leaves no room for a completion in the vLLM server's "
            f"context of {max_model_len} tokens: raise vllm_max_model_length or shorten the prompts"
        )
    return room if max_tokens is None else min(max_tokens, room)


def budget_groups(
    prompt_lengths: Sequence[int], max_model_len: int, max_tokens: int | None
) -> dict[int, list[int]]:
    """Prompt indices by completion budget, each group in its prompts' order."""
    groups: dict[int, list[int]] = {}
    for index, length in enumerate(prompt_lengths):
        groups.setdefault(completion_budget(length, max_model_len, max_tokens), []).append(index)
    return groups


def merge_outputs(
    parts: Sequence[tuple[list[int], dict[str, Any]]], n_prompts: int, n: int
) -> dict[str, Any]:
    """The groups' outputs back in prompt order: ``prompt_ids`` one per prompt, the rest ``n`` per prompt."""
    keys = {key for _, output in parts for key in output}
    merged: dict[str, Any] = {}
    for key in keys:
        per_prompt = 1 if key == "prompt_ids" else n
        if any(output.get(key) is None for _, output in parts):
            merged[key] = None
            continue
        slots: list[Any] = [None] * (n_prompts * per_prompt)
        for indices, output in parts:
            for position, index in enumerate(indices):
                rows = output[key][position * per_prompt : (position + 1) * per_prompt]
                slots[index * per_prompt : (index + 1) * per_prompt] = rows
        merged[key] = slots
    return merged


def fit_to_context(
    generate: Callable[..., dict[str, Any]], max_model_len: int
) -> Callable[..., dict[str, Any]]:
    """``VLLMClient.generate`` with each prompt's ``max_tokens`` cut to the rest of ``max_model_len``."""

    def generate_within_context(
        prompts: Sequence[Sequence[int]],
        features: Sequence[Any] | None = None,
        *,
        n: int = 1,
        max_tokens: int | None = 16,
        generation_kwargs: dict[str, Any] | None = None,
        **sampling: Any,
    ) -> dict[str, Any]:
        if any(isinstance(prompt, str) for prompt in prompts):
            raise TypeError("fit_to_context needs prompts as token ids, to know each prompt's length")
        extra = dict(generation_kwargs or {})
        wanted = extra.pop("max_tokens", max_tokens)
        groups = budget_groups([len(p) for p in prompts], max_model_len, wanted)

        def send(budget: int, indices: list[int]) -> tuple[list[int], dict[str, Any]]:
            output = generate(
                prompts=[prompts[i] for i in indices],
                features=None if features is None else [features[i] for i in indices],
                n=n,
                max_tokens=budget,
                generation_kwargs=extra,
                **sampling,
            )
            return indices, output

        with ThreadPoolExecutor(max_workers=min(len(groups), MAX_CONCURRENT_REQUESTS) or 1) as pool:
            parts = list(pool.map(lambda item: send(*item), groups.items()))
        return merge_outputs(parts, len(prompts), n)

    return generate_within_context


def fit_client_to_context(client: Any) -> int:
    """Make a ``VLLMClient`` give each request the rest of its server's context; return that context."""
    max_model_len = int(client.get_server_info()["model_config"]["max_model_len"])
    client.generate = fit_to_context(client.generate, max_model_len)
    return max_model_len
