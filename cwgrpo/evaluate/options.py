"""``cwgrpo evaluate``'s options: one validator, run when the workflow parses a preset and in the job.

Torch-free, so the workflow's parse checks a preset's evaluation options with the class the job builds.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import field
from typing import Any

from cwgrpo.configs import ConfigError
from cwgrpo.data.prompts import PromptSet, check_system_prompt, get_prompt_set
from cwgrpo.generation import SamplingSettings, check_backend_name
from cwgrpo.generation.vllm_checks import check_memory_share
from cwgrpo.grading.scoring import ANSWER_FORMS, DEFAULT_TIMEOUT_S
from cwgrpo.grading.time_budget import MAX_SECONDS

# Weight dtypes both backends accept by these names (torch's attribute names, vLLM's `dtype` strings).
DTYPES = ("float32", "bfloat16", "float16")


@dataclasses.dataclass
class EvalConfig:
    """Options of ``cwgrpo evaluate``."""

    backend: str = field(
        default="transformers", metadata={"help": "generation backend: transformers or vllm"}
    )
    k: int = field(default=1, metadata={"help": "samples per problem (the paper reports one)"})
    temperature: float = field(default=0.6, metadata={"help": "sampling temperature; 0 is greedy"})
    top_p: float = field(default=0.95, metadata={"help": "nucleus sampling mass"})
    max_new_tokens: int = field(
        default=4096, metadata={"help": "most new tokens per answer (paper: 32768 for 1.5B, 4096 for 7B)"}
    )
    seed: int = field(default=0, metadata={"help": "seed of sampling and of the bootstrap interval"})
    batch_size: int = field(
        default=32, metadata={"help": "sequences per generate call (transformers backend)"}
    )
    dtype: str | None = field(
        default=None,
        metadata={
            "help": "weights dtype: float32, bfloat16 or float16 (paper: bfloat16); "
            "null: the backend's default (vllm: bfloat16; transformers: bfloat16 on CUDA, float32 on CPU)"
        },
    )
    prompt_set: str = field(
        default="open_rs", metadata={"help": "prompt set (cwgrpo.data.prompts): open_rs or tiny"}
    )
    system_prompt: str | None = field(
        default=None,
        metadata={"help": "system message of the prompts, replacing the prompt set's ('': none)"},
    )
    add_special_tokens: bool = field(
        default=False,
        metadata={
            "help": "tokenise the templated prompt with the tokenizer's own special tokens, as the released "
            "lighteval did: a second BOS with DeepSeek-R1-Distill (paper preset: true for 1.5B)"
        },
    )
    limit: int | None = field(
        default=None, metadata={"help": "evaluate only the first N problems (smoke runs)"}
    )
    cpu_threads: int | None = field(
        default=None, metadata={"help": "torch CPU threads for generation (transformers); null keeps torch's"}
    )
    max_model_len: int | None = field(
        default=None,
        metadata={
            "help": "vllm: context length cap (released evaluation: 32768 for 1.5B, 4096 for 7B); null: the model's"
        },
    )
    gpu_memory_utilization: float = field(
        default=0.9, metadata={"help": "vllm: share of GPU memory the engine may take, in (0, 1]"}
    )
    tensor_parallel_size: int = field(default=1, metadata={"help": "vllm: GPUs per model"})
    enforce_eager: bool = field(
        default=False,
        metadata={
            "help": "vllm: no compilation or CUDA graphs (starts in seconds, not minutes; slower on GPU)"
        },
    )
    grading_processes: int = field(default=2, metadata={"help": "worker processes for grading"})
    grading_timeout_s: float = field(
        default=DEFAULT_TIMEOUT_S, metadata={"help": "CPU-time budget for grading one answer, seconds"}
    )
    answer_form: str = field(
        default="any",
        metadata={"help": "any, or number: correct only if the extracted answer is a plain number"},
    )

    def __post_init__(self) -> None:
        for name in ("k", "batch_size", "limit", "cpu_threads", "max_model_len"):
            value, optional = getattr(self, name), name in ("limit", "cpu_threads", "max_model_len")
            if not (optional and value is None) and value < 1:
                raise ConfigError(f"{name} must be >= 1{' or null' if optional else ''}, got {value}")
        if self.dtype is not None and self.dtype not in DTYPES:
            raise ConfigError(f"dtype must be one of {list(DTYPES)} or null, got {self.dtype!r}")
        check_memory_share("gpu_memory_utilization", self.gpu_memory_utilization)
        for name in ("tensor_parallel_size", "grading_processes"):
            if getattr(self, name) < 1:
                raise ConfigError(f"{name} must be >= 1, got {getattr(self, name)}")
        if not (math.isfinite(self.grading_timeout_s) and 0 < self.grading_timeout_s <= MAX_SECONDS):
            raise ConfigError(
                f"grading_timeout_s must be a number of seconds > 0 and at most {MAX_SECONDS:g}, "
                f"got {self.grading_timeout_s}"
            )
        if self.answer_form not in ANSWER_FORMS:
            raise ConfigError(f"answer_form must be one of {list(ANSWER_FORMS)}, got {self.answer_form!r}")
        check_backend_name(self.backend)
        check_system_prompt(self.system_prompt)
        self.prompts()  # checks the prompt set's name
        self.sampling()  # checks temperature, top_p and max_new_tokens

    def prompts(self) -> PromptSet:
        """The prompt set, its evaluation system message replaced by ``system_prompt`` when one is given."""
        found = get_prompt_set(self.prompt_set)
        return (
            found
            if self.system_prompt is None
            else dataclasses.replace(found, eval_system=self.system_prompt or None)
        )

    def sampling(self) -> SamplingSettings:
        return SamplingSettings(self.temperature, self.top_p, self.max_new_tokens, self.seed)

    def backend_options(self) -> dict[str, Any]:
        """Keyword arguments of the backend's constructor; the engine settings go to vllm only."""
        options: dict[str, Any] = {
            "batch_size": self.batch_size,
            "seed": self.seed,
            "cpu_threads": self.cpu_threads,
            "add_special_tokens": self.add_special_tokens,
        }
        if self.dtype is not None:
            options["dtype"] = self.dtype
        if self.backend == "vllm":
            options |= {
                "max_model_len": self.max_model_len,
                "gpu_memory_utilization": self.gpu_memory_utilization,
                "tensor_parallel_size": self.tensor_parallel_size,
                "enforce_eager": self.enforce_eager,
            }
        return options
