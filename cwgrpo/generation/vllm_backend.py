"""Generation with vLLM: the backend of the paper's evaluation (bf16, chat template, seeded).

Prompts go as token ids, so the chat template's BOS is doubled only when asked (``add_special_tokens``,
as the released evaluation did). Tested on vLLM's CPU build (tests/vllm).
"""

from __future__ import annotations

from pathlib import Path

from cwgrpo.generation import (
    Completion,
    Messages,
    SamplingSettings,
    encode_prompt,
    repeat_greedy,
    sample_seed,
)


class VLLMBackend:
    """``vllm.LLM`` on a local model folder."""

    name = "vllm"

    def __init__(
        self,
        model_dir: str | Path,
        seed: int = 0,
        dtype: str = "bfloat16",
        batch_size: int | None = None,
        progress: bool = True,
        cpu_threads: int | None = None,
        max_model_len: int | None = None,
        gpu_memory_utilization: float = 0.9,
        tensor_parallel_size: int = 1,
        enforce_eager: bool = False,
        add_special_tokens: bool = False,
    ) -> None:
        try:
            import vllm
        except ImportError as err:
            raise ImportError(
                "the vllm backend needs the 'vllm' package (pip install 'cwgrpo[vllm]', GPU only); "
                "use backend=transformers on machines without it"
            ) from err
        self._vllm = vllm
        self.progress = progress
        self.add_special_tokens = add_special_tokens
        self.llm = vllm.LLM(
            model=str(model_dir),
            dtype=dtype,
            seed=seed,
            max_model_len=max_model_len,
            gpu_memory_utilization=gpu_memory_utilization,
            tensor_parallel_size=tensor_parallel_size,
            enforce_eager=enforce_eager,
        )
        self.tokenizer = self.llm.get_tokenizer()

    def generate(self, prompts: list[Messages], n: int, settings: SamplingSettings) -> list[list[Completion]]:
        repeated = repeat_greedy(self.generate, prompts, n, settings)
        if repeated is not None:
            return repeated
        # One seed per prompt: vLLM seeds a request's own generator with it, so one seed for all requests
        # would draw the same random numbers for every prompt (identical prompts, identical samples).
        params = [
            self._vllm.SamplingParams(
                n=n,
                temperature=settings.temperature,
                top_p=settings.top_p if settings.temperature > 0 else 1.0,
                max_tokens=settings.max_new_tokens,
                seed=sample_seed(settings.seed, i, 0),
            )
            for i in range(len(prompts))
        ]
        requests = [
            {"prompt_token_ids": encode_prompt(self.tokenizer, m, self.add_special_tokens)} for m in prompts
        ]
        outputs = self.llm.generate(requests, params, use_tqdm=self.progress)
        return [
            [
                Completion(o.text, len(o.token_ids), o.finish_reason == "length", tuple(o.token_ids))
                for o in request.outputs
            ]
            for request in outputs
        ]
