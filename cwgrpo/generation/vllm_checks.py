"""vLLM engine settings of ``cwgrpo train`` that vLLM would refuse, refused first, in one line each.

vLLM rejects them only once its engine starts, minutes into a job, with a traceback from inside it. All
but the context are checked where the options are parsed (so ``snakemake -n`` too); the context needs the
model's config.json, so ``cwgrpo train`` checks it before it starts any engine.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from cwgrpo.configs import ConfigError


def check_vllm_options(options: Mapping[str, Any], num_processes: int = 1) -> None:
    """Raise ``ConfigError`` on a vLLM setting of TRL's options that vLLM would refuse."""
    share = options.get("vllm_gpu_memory_utilization")
    if isinstance(share, (int, float)) and not isinstance(share, bool):
        check_memory_share("vllm_gpu_memory_utilization", share)
    context = options.get("vllm_max_model_length")
    if isinstance(context, int) and not isinstance(context, bool) and context < 1:
        raise ConfigError(f"vllm_max_model_length={context}: a context length must be >= 1 token")
    mode = options.get("vllm_mode", "colocate")
    if mode not in ("colocate", "server"):  # TRL says so only once its trainer is built, the model loaded
        raise ConfigError(f"vllm_mode={mode!r}: 'colocate' (an engine in each training process) or 'server'")
    extra = options.get("generation_kwargs")
    wanted = extra.get("max_tokens") if isinstance(extra, Mapping) else None
    if wanted is not None and (isinstance(wanted, bool) or not isinstance(wanted, int) or wanted < 1):
        raise ConfigError(
            f"generation_kwargs.max_tokens={wanted!r}: vLLM generates at least one token; give an integer "
            ">= 1, or null for the rest of the context"
        )
    size = options.get("vllm_tensor_parallel_size")
    if not isinstance(size, int) or isinstance(size, bool):
        return
    if size < 1:
        raise ConfigError(f"vllm_tensor_parallel_size={size}: must be >= 1")
    colocated = options.get("use_vllm") and options.get("vllm_mode", "colocate") == "colocate"
    if colocated and num_processes % size:
        raise ConfigError(
            f"vllm_tensor_parallel_size={size} does not divide num_processes={num_processes}: each colocated "
            "vLLM engine spans that many training processes; choose a divisor"
        )


def check_memory_share(name: str, share: float) -> None:
    """Raise ``ConfigError`` unless ``share`` (option ``name``) is in (0, 1], as vLLM requires."""
    if not 0 < share <= 1:
        raise ConfigError(f"{name}={share}: the share of GPU memory vLLM may use must be in (0, 1]")


def check_context_fits_model(options: Mapping[str, Any], model_dir: str | Path) -> None:
    """Raise ``ConfigError`` when ``vllm_max_model_length`` exceeds ``max_position_embeddings``."""
    from cwgrpo.generation import model_context

    context = options.get("vllm_max_model_length")
    if not options.get("use_vllm") or context is None:
        return
    try:
        limit = model_context(model_dir)
    except FileNotFoundError:
        return
    if limit is not None and context > limit:
        raise ConfigError(
            f"vllm_max_model_length={context} exceeds the model's context of {limit} tokens "
            f"(max_position_embeddings in {Path(model_dir) / 'config.json'}): lower it to at most {limit}"
        )
