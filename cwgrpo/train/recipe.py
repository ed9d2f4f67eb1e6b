"""TRL / open-r1 GRPO recipes for ``cwgrpo train --config recipe.yaml``.

A recipe (``GRPOConfig`` fields plus open-r1's keys) is parsed with TRL's ``TrlParser`` once our job
fields (``TrainJob``) are set aside, so an unknown key is TRL's error, naming it; open-r1's keys map to
``--model-dir``, ``--train-data``, ``--run-dir`` (a flag on the command line wins) and ``model_init_kwargs``.
"""

from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cwgrpo.configs import ConfigError, read_options
from cwgrpo.train.options import TrainJob, current_trl_names

PATH_KEYS = {"model_name_or_path": "model_dir", "dataset_name": "train_data", "output_dir": "run_dir"}


@dataclass
class RecipeArguments:
    """open-r1's model and script keys that ``cwgrpo train`` understands (see the module docstring)."""

    model_name_or_path: str | None = field(default=None, metadata={"help": "local model folder"})
    model_revision: str | None = field(default=None, metadata={"help": "only 'main' (a local folder)"})
    torch_dtype: str | None = field(default=None, metadata={"help": "-> model_init_kwargs.dtype"})
    attn_implementation: str | None = field(
        default=None, metadata={"help": "-> model_init_kwargs.attn_implementation"}
    )
    dataset_name: str | None = field(default=None, metadata={"help": "local records JSONL file"})
    # system_prompt: a TrainJob field of the same name and meaning


RECIPE_KEYS = frozenset(f.name for f in dataclasses.fields(RecipeArguments))


def is_recipe(options: dict[str, Any]) -> bool:
    """A config with any open-r1 key (or TRL's ``output_dir``) is read as a recipe."""
    return bool((RECIPE_KEYS | {"output_dir", "system_prompt"}) & set(options))


def parse_recipe(path: Path) -> tuple[dict[str, Path], dict[str, Any]]:
    """(paths named by the recipe: model_dir, train_data, run_dir; the options of ``cwgrpo train``)."""
    from trl import TrlParser

    from cwgrpo.trainer import CWGRPOConfig

    written = read_options(path)
    # Job fields first (as `split_options` does: `vllm_gpu_memory_utilization` is both ours and TRL's), the
    # rest through TRL's parser, which names every key that neither CWGRPOConfig nor RecipeArguments knows.
    job_keys = {f.name for f in dataclasses.fields(TrainJob)}
    rest = {k: v for k, v in written.items() if k not in job_keys and k != "env"}
    parser = TrlParser((CWGRPOConfig, RecipeArguments))
    try:
        # builds CWGRPOConfig: its checks run
        trl_args, recipe = parser.parse_dict(current_trl_names(rest), allow_extra_keys=False)
    except (ValueError, TypeError) as err:  # "Some keys are not used by the HfArgumentParser: [...]"
        raise ConfigError(f"{path}: {err}") from err
    del trl_args, recipe  # parsed only to check them; the values go on as written (run.json shows them so)
    options = {k: v for k, v in written.items() if k != "env"}
    for key, value in (written.get("env") or {}).items():  # as TrlParser: the recipe's environment variables
        os.environ[str(key)] = str(value)
    paths = {ours: Path(str(options.pop(key))) for key, ours in PATH_KEYS.items() if options.get(key)}
    revision = options.pop("model_revision", None)
    if revision not in (None, "main"):
        raise ConfigError(f"{path}: model_revision={revision!r}, but model_name_or_path is a local folder")
    init = dict(options.get("model_init_kwargs") or {})
    for key, target in (("torch_dtype", "dtype"), ("attn_implementation", "attn_implementation")):
        value = options.pop(key, None)
        if value is not None:
            init[target] = value
    if init:
        options["model_init_kwargs"] = init
    for key in ("model_name_or_path", "dataset_name", "output_dir"):
        options.pop(key, None)
    return paths, options
