"""Generation backends by name: ``transformers`` (CPU or GPU) and ``vllm`` (GPU, imported lazily).

``get_backend(name, model_dir, ...).generate(prompts, n, settings)[i][j]`` is sample ``j`` of chat prompt
``i``, drawn from its own stream (``sample_seed``), whichever rows share its batch.
"""

from __future__ import annotations

import dataclasses
import hashlib
import importlib
import math
from pathlib import Path
from typing import Any, Protocol

from cwgrpo.configs import ConfigError

Messages = list[dict[str, str]]


@dataclasses.dataclass(frozen=True)
class SamplingSettings:
    """Sampling settings shared by all backends; temperature 0 is greedy; ``seed`` seeds each sample."""

    temperature: float
    top_p: float
    max_new_tokens: int
    seed: int

    def __post_init__(self) -> None:
        if not (math.isfinite(self.temperature) and self.temperature >= 0):
            raise ConfigError(f"temperature must be a finite number >= 0, got {self.temperature}")
        if not 0 < self.top_p <= 1:
            raise ConfigError(f"top_p must be in (0, 1], got {self.top_p}")
        if self.max_new_tokens < 1:
            raise ConfigError(f"max_new_tokens must be >= 1, got {self.max_new_tokens}")


@dataclasses.dataclass(frozen=True)
class Completion:
    """One completion: ``text`` without special tokens; ``n_tokens`` and ``token_ids`` with the EOS."""

    text: str
    n_tokens: int
    truncated: bool
    token_ids: tuple[int, ...] = ()


def repeat_greedy(generate, prompts: list[Messages], n: int, settings: SamplingSettings):
    """At temperature 0 with ``n > 1``: one greedy completion per prompt, repeated ``n`` times; else None."""
    if n < 1:
        raise ValueError(f"n must be >= 1, got {n}")
    if settings.temperature > 0 or n == 1:
        return None
    return [row * n for row in generate(prompts, 1, settings)]


class Backend(Protocol):
    name: str

    def generate(self, prompts: list[Messages], n: int, settings: SamplingSettings) -> list[list[Completion]]:
        """``n`` completions for each prompt, in prompt order."""
        ...


# name -> (module, class); modules are imported only when their backend is asked for.
BACKENDS: dict[str, tuple[str, str]] = {
    "transformers": ("cwgrpo.generation.transformers_backend", "TransformersBackend"),
    "vllm": ("cwgrpo.generation.vllm_backend", "VLLMBackend"),
}


def check_backend_name(name: str) -> None:
    if name not in BACKENDS:
        raise ConfigError(f"unknown generation backend {name!r}; known: {sorted(BACKENDS)}")


# Files that hold a tokenizer's vocabulary, one of which every saved tokenizer has.
TOKENIZER_FILES = ("tokenizer.json", "tokenizer.model", "spiece.model", "vocab.json", "vocab.txt")


def check_model_dir(model_dir: str | Path) -> Path:
    """The model folder as a Path; refused without ``config.json`` or tokenizer files (for a Qwen2 config,
    transformers would silently build an empty tokenizer)."""
    path = Path(model_dir)
    if not path.is_dir():
        raise FileNotFoundError(f"model folder not found: {path}")
    if not (path / "config.json").is_file():
        raise FileNotFoundError(f"{path} is not a model folder (no config.json)")
    if not any((path / name).is_file() for name in TOKENIZER_FILES):
        raise FileNotFoundError(
            f"{path} has no tokenizer (none of {list(TOKENIZER_FILES)}); save the tokenizer beside the model"
        )
    return path


def get_backend(name: str, model_dir: str | Path, **kwargs) -> Backend:
    """Instantiate backend ``name`` on the model in ``model_dir`` (keyword arguments go to its class)."""
    check_backend_name(name)
    path = check_model_dir(model_dir)
    module_name, class_name = BACKENDS[name]
    module = importlib.import_module(module_name)
    return getattr(module, class_name)(path, **kwargs)


def sample_seed(seed: int, prompt_index: int, sample_index: int) -> int:
    """Seed of one sample's stream: a hash, so streams never collide as ``seed + i`` would."""
    digest = hashlib.sha256(f"{seed}:{prompt_index}:{sample_index}".encode()).digest()
    return int.from_bytes(digest[:8], "big") & ((1 << 63) - 1)


def messages_to_text(messages: Messages) -> str:
    """Plain-text prompt for a tokenizer without a chat template: the message contents, one per line."""
    return "\n".join(m["content"] for m in messages)


def encode_prompt(tokenizer: Any, messages: Messages, add_special_tokens: bool = False) -> list[int]:
    """Prompt token ids, as both backends build them; ``add_special_tokens`` adds the tokenizer's own too, as
    the released lighteval did (a second BOS for R1-Distill; docs/fidelity.md)."""
    if getattr(tokenizer, "chat_template", None):
        text = tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
        return tokenizer(text, add_special_tokens=add_special_tokens)["input_ids"]
    return tokenizer(messages_to_text(messages))["input_ids"]


def with_special_tokens(tokenizer: Any, ids: list[int]) -> list[int]:
    """``ids`` with the special tokens the tokenizer adds around a text, as vLLM 0.7.2 tokenised the released
    run's text prompts (a second BOS for R1-Distill; none for Qwen2.5)."""
    probe = "a"
    plain = tokenizer(probe, add_special_tokens=False)["input_ids"]
    full = tokenizer(probe, add_special_tokens=True)["input_ids"]
    start = next((i for i in range(len(full)) if full[i : i + len(plain)] == plain), None)
    if start is None:
        raise ValueError(f"the tokenizer's special tokens do not wrap the text: {plain} vs {full}")
    return [*full[:start], *ids, *full[start + len(plain) :]]


# A token is at most this many characters, so a prompt over ``context`` times it cannot fit: refused before
# tokenising it (a 10 MB line would take minutes).
MAX_CHARS_PER_TOKEN = 64


def model_context(model_dir: str | Path) -> int | None:
    """The model's context length (``max_position_embeddings`` of its config.json), or None if unset."""
    import json

    try:
        config = json.loads((Path(model_dir) / "config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError) as err:
        raise FileNotFoundError(f"{model_dir}/config.json cannot be read: {err}") from err
    if not isinstance(config, dict):
        raise FileNotFoundError(f"{model_dir}/config.json is not a model config (a JSON object)")
    value = config.get("max_position_embeddings")
    if value is None and isinstance(config.get("text_config"), dict):
        value = config["text_config"].get("max_position_embeddings")
    return int(value) if isinstance(value, int) and value > 0 else None


PROMPT_FIX = (
    "shorten or remove that problem in the data (records count from 0), shorten the system prompt "
    "(system_prompt), or use a model with a longer context"
)


def check_prompts_fit(
    prompts: list[str],
    tokenizer,
    context: int | None,
    completion_budget: int,
    what: str = "prompt",
    add_special_tokens: bool = False,
) -> None:
    """Raise ``ConfigError`` naming the first prompt (as the model sees it) longer than the model's
    ``context``, refusing one over ``context * MAX_CHARS_PER_TOKEN`` characters untokenised; warn when
    prompt plus ``completion_budget`` exceed it (generation is then cut and recorded truncated)."""
    import logging

    if context is None:
        return
    longest = 0
    for i, text in enumerate(prompts):
        if len(text) > context * MAX_CHARS_PER_TOKEN:
            raise ConfigError(
                f"{what} {i} has {len(text)} characters: far more than the model's context of {context} "
                f"tokens can hold; {PROMPT_FIX}"
            )
        n = len(tokenizer(text, add_special_tokens=add_special_tokens)["input_ids"])
        if n > context:
            raise ConfigError(
                f"{what} {i} has {n} tokens, more than the model's context of {context} tokens "
                f"(max_position_embeddings of its config.json); {PROMPT_FIX}"
            )
        longest = max(longest, n)
    if longest + completion_budget > context:
        logging.getLogger(__name__).warning(
            "the longest %s has %d tokens: with %d for the completion it exceeds the model's context of %d",
            what,
            longest,
            completion_budget,
            context,
        )
