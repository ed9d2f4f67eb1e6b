"""Generation with Hugging Face transformers: batched, left-padded, KV cache, one seeded stream per sample.

A logits processor (``_SeededSampler``) draws each row's token from that row's own ``torch.Generator`` and
hands ``generate`` a one-hot score for greedy decoding to take, so a draw never depends on the global
RNG or on which rows share a batch.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from cwgrpo.generation import (
    Completion,
    Messages,
    SamplingSettings,
    encode_prompt,
    repeat_greedy,
    sample_seed,
)


def _default_device() -> str:
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"


class _SeededSampler:
    """Logits processor: temperature + top-p sampling with one generator per row; returns one-hot scores."""

    def __init__(self, seeds: list[int], temperature: float, top_p: float, device: Any) -> None:
        import torch

        self.temperature = temperature
        self.top_p = top_p
        self.generators = [torch.Generator(device=device).manual_seed(s) for s in seeds]

    def __call__(self, input_ids: Any, scores: Any) -> Any:
        import torch

        logits = scores.float() / self.temperature  # (B, V)
        if self.top_p < 1.0:
            sorted_logits, order = logits.sort(dim=-1, descending=True)
            probs = sorted_logits.softmax(dim=-1)
            # drop a token once the mass of the tokens before it already reaches top_p (keeps >= 1)
            drop = probs.cumsum(dim=-1) - probs >= self.top_p
            sorted_logits = sorted_logits.masked_fill(drop, float("-inf"))
            logits = torch.full_like(logits, float("-inf")).scatter(-1, order, sorted_logits)
        probs = logits.softmax(dim=-1)
        tokens = torch.stack(
            [torch.multinomial(probs[r], 1, generator=g) for r, g in enumerate(self.generators)]
        )  # (B, 1)
        return torch.full_like(scores, float("-inf")).scatter(-1, tokens, 0.0)


class TransformersBackend:
    """``AutoModelForCausalLM`` + ``AutoTokenizer`` from a local folder."""

    name = "transformers"

    def __init__(
        self,
        model_dir: str | Path,
        batch_size: int = 16,
        device: str | None = None,
        dtype: str | None = None,
        progress: bool = True,
        cpu_threads: int | None = None,
        seed: int | None = None,
        add_special_tokens: bool = False,
    ) -> None:
        import torch
        from transformers import AutoModelForCausalLM, AutoTokenizer, GenerationConfig

        if batch_size < 1:
            raise ValueError(f"batch_size must be >= 1, got {batch_size}")
        if cpu_threads is not None:
            torch.set_num_threads(cpu_threads)
        self.device = torch.device(device or _default_device())
        dtype = dtype or ("bfloat16" if self.device.type == "cuda" else "float32")
        self.tokenizer = AutoTokenizer.from_pretrained(str(model_dir))
        self.model = AutoModelForCausalLM.from_pretrained(str(model_dir), dtype=getattr(torch, dtype))
        self.model.to(self.device).eval()
        self.batch_size = batch_size
        self.progress = progress
        self.add_special_tokens = add_special_tokens
        self.pad_id = self.tokenizer.pad_token_id
        if self.pad_id is None:
            self.pad_id = self.tokenizer.eos_token_id
        eos = self.model.generation_config.eos_token_id
        if eos is None:
            eos = self.tokenizer.eos_token_id
        self.eos_ids = set(eos if isinstance(eos, list) else [eos]) - {None}
        if not self.eos_ids:
            raise ValueError(
                f"{model_dir}: neither the generation config nor the tokenizer names an EOS token"
            )
        # generate() fills every unset option from model.generation_config (a hub model's sampling
        # defaults, repetition penalties, ...); a bare config makes SamplingSettings the only settings.
        self.model.generation_config = GenerationConfig(
            bos_token_id=self.model.generation_config.bos_token_id,
            eos_token_id=sorted(self.eos_ids),
            pad_token_id=self.pad_id,
        )

    def _decode(self, tokens: list[int]) -> Completion:
        """A row of generated ids (right-padded after its EOS) -> Completion; truncated without an EOS."""
        end = next((k for k, t in enumerate(tokens) if t in self.eos_ids), None)
        if end is None:
            text = self.tokenizer.decode(tokens, skip_special_tokens=True)
            return Completion(text, len(tokens), True, tuple(tokens))
        text = self.tokenizer.decode(tokens[:end], skip_special_tokens=True)
        return Completion(text, end + 1, False, tuple(tokens[: end + 1]))

    def generate(self, prompts: list[Messages], n: int, settings: SamplingSettings) -> list[list[Completion]]:
        import torch
        from tqdm.auto import tqdm
        from transformers import GenerationConfig, LogitsProcessorList

        repeated = repeat_greedy(self.generate, prompts, n, settings)
        if repeated is not None:
            return repeated
        encoded = [encode_prompt(self.tokenizer, m, self.add_special_tokens) for m in prompts]
        rows = [(i, j) for i in range(len(prompts)) for j in range(n)]
        config = GenerationConfig(
            max_new_tokens=settings.max_new_tokens,
            do_sample=False,  # sampling happens in _SeededSampler; greedy then takes its one-hot choice
            num_beams=1,
            pad_token_id=self.pad_id,
            eos_token_id=sorted(self.eos_ids),
            use_cache=True,
        )
        out: list[list[Completion | None]] = [[None] * n for _ in prompts]
        bar = tqdm(total=len(rows), desc="generate", unit="seq", disable=not self.progress)
        with torch.inference_mode():
            for start in range(0, len(rows), self.batch_size):
                batch = rows[start : start + self.batch_size]
                ids = [encoded[i] for i, _ in batch]
                width = max(len(x) for x in ids)
                input_ids = torch.tensor(
                    [[self.pad_id] * (width - len(x)) + x for x in ids], device=self.device
                )
                mask = torch.tensor([[0] * (width - len(x)) + [1] * len(x) for x in ids], device=self.device)
                processors = LogitsProcessorList()
                if settings.temperature > 0:
                    seeds = [sample_seed(settings.seed, i, j) for i, j in batch]
                    processors.append(
                        _SeededSampler(seeds, settings.temperature, settings.top_p, self.device)
                    )
                generated = self.model.generate(
                    input_ids=input_ids,
                    attention_mask=mask,
                    generation_config=config,
                    logits_processor=processors,
                )
                for (i, j), row in zip(batch, generated[:, width:].tolist(), strict=True):
                    out[i][j] = self._decode(row)
                bar.update(len(batch))
        bar.close()
        return out  # type: ignore[return-value]
