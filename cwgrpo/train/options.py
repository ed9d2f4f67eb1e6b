"""The options of ``cwgrpo train``, checked once: a preset's train section and the command line to a config.

``build_train_config`` turns merged options (a ``--config`` file or recipe, then ``--set`` overrides) into
the job's own fields (``TrainJob``) and TRL's ``CWGRPOConfig`` with the run's defaults filled in; ``cwgrpo
train`` calls it before it launches anything, and the workflow's dry run through ``train_option_errors``,
which names every mistake at once. Imports neither TRL nor torch until a config is built.
"""

from __future__ import annotations

import dataclasses
import math
import os
import re
import tempfile
import typing
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cwgrpo.configs import ConfigError, OptionError, check_together, coerce_value
from cwgrpo.data.prompts import TRAIN_PROMPT_SET
from cwgrpo.generation.vllm_checks import check_vllm_options

# The run folder's undeclared folder of growing logs (cwgrpo.train.run); TRL's covariance samples go there too.
LIVE = "live"
INVALID = "invalid training options: "  # what TRL's config refused, in build_train_config


@dataclass
class TrainJob:
    """Options of the training job that are not ``CWGRPOConfig`` fields (those pass straight to TRL)."""

    reward_funcs: list[str] = field(
        default_factory=lambda: ["accuracy"],
        metadata={
            "help": "reward functions by name (cwgrpo.grading.rewards.REWARDS), e.g. [accuracy, format]"
        },
    )
    reward_timeout_s: float | None = field(
        default=None,
        metadata={"help": "wall-clock budget of one call of each reward, in seconds (default: none)"},
    )
    prompt_set: str = field(
        default=TRAIN_PROMPT_SET, metadata={"help": "prompt set (cwgrpo.data.prompts.PROMPT_SETS)"}
    )
    system_prompt: str | None = field(
        default=None,
        metadata={
            "help": "system message of the training prompts, replacing the prompt set's (open-r1's key)"
        },
    )
    train_limit: int | None = field(default=None, metadata={"help": "use only the first N training problems"})
    launcher: str = field(
        default="none",
        metadata={"help": "'none' (this process trains) or 'accelerate' (relaunch on num_processes GPUs)"},
    )
    num_processes: int = field(
        default=1, metadata={"help": "training processes (GPUs) for launcher=accelerate"}
    )
    accelerate_config: str = field(
        default="zero2",
        metadata={"help": "bundled accelerate config (cwgrpo/resources/accelerate/NAME.yaml)"},
    )
    vllm_enforce_eager: bool = field(
        default=False,
        metadata={
            "help": "`--enforce_eager` for the `trl vllm-serve` process: no CUDA graphs (released: true). The "
            "server's context and memory share come from TRL's vllm_max_model_length and "
            "vllm_gpu_memory_utilization, as for its colocated engine"
        },
    )
    vllm_server_gpu: int | None = field(
        default=None,
        metadata={
            "help": "GPU index for a `trl vllm-serve` process (use_vllm with vllm_mode=server); None: none"
        },
    )
    num_nodes: int = field(
        default=1,
        metadata={
            "help": "machines the training processes span (accelerate --num_machines); > 1 runs one srun step "
            "per node inside a Slurm allocation (cwgrpo.launch.multinode). num_processes is the total, split evenly"
        },
    )
    vllm_server_node: bool = field(
        default=False,
        metadata={
            "help": "run the `trl vllm-serve` process on a node of its own (the allocation's last, on its GPU "
            "vllm_server_gpu) instead of on the first training node; needs a Slurm allocation"
        },
    )
    deterministic: bool = field(default=False, metadata={"help": "ask torch for deterministic kernels"})

    def __post_init__(self) -> None:
        """Check names and counts here, so a typo fails before TRL, the data or the model load."""
        from cwgrpo.data.prompts import check_system_prompt, get_prompt_set
        from cwgrpo.grading.rewards import check_reward_name

        check_system_prompt(self.system_prompt)

        if self.launcher not in ("none", "accelerate"):
            raise ConfigError(f"launcher={self.launcher!r}; valid: ['none', 'accelerate']")
        get_prompt_set(self.prompt_set)  # raises, listing the known prompt sets
        if isinstance(self.reward_funcs, str):  # its letters would be taken for reward names
            raise ConfigError(
                f"reward_funcs: expected a list, got {self.reward_funcs!r} (str): write [{self.reward_funcs!r}]"
            )
        if not self.reward_funcs:
            raise ConfigError("reward_funcs is empty: name at least one reward function")
        for name in self.reward_funcs:  # imported and called on the data before training (reward_guard)
            check_reward_name(name)
        budget = self.reward_timeout_s
        if budget is not None and not (math.isfinite(budget) and budget > 0):
            raise ConfigError(
                f"reward_timeout_s={budget}: must be a number of seconds > 0 (or null for none)"
            )
        if self.train_limit is not None and self.train_limit < 1:
            raise ConfigError(f"train_limit={self.train_limit}: must be >= 1 (or null for no limit)")
        if self.num_processes < 1:
            raise ConfigError(f"num_processes={self.num_processes}: must be >= 1")
        if self.num_nodes < 1:
            raise ConfigError(f"num_nodes={self.num_nodes}: must be >= 1")
        if self.num_processes % self.num_nodes:
            raise ConfigError(
                f"num_processes={self.num_processes} (the total) does not split evenly over "
                f"num_nodes={self.num_nodes}: accelerate runs num_processes // num_nodes per node"
            )
        if self.vllm_server_node and self.vllm_server_gpu is None:
            raise ConfigError(
                "vllm_server_node: true needs vllm_server_gpu (the server's GPU on its node, e.g. 0)"
            )
        if (self.num_nodes > 1 or self.vllm_server_node) and self.launcher != "accelerate":
            raise ConfigError(f"num_nodes={self.num_nodes}/vllm_server_node need launcher=accelerate")


def split_options(options: Mapping[str, Any]) -> tuple[TrainJob, dict[str, Any]]:
    """Split merged options into the job's fields and ``CWGRPOConfig``'s keyword arguments, or raise."""
    job, trl_kwargs, errors = split_with_errors(options)
    if errors:
        raise ConfigError("\n".join(map(str, errors)))
    return job, trl_kwargs


def split_with_errors(
    options: Mapping[str, Any],
) -> tuple[TrainJob | None, dict[str, Any], list[OptionError]]:
    """The job's fields (None if they break a rule), ``CWGRPOConfig``'s arguments and every mistake."""
    from cwgrpo.configs import nearest
    from cwgrpo.trainer import CWGRPOConfig

    job_fields = {f.name for f in dataclasses.fields(TrainJob)}
    trl_fields = {f.name for f in dataclasses.fields(CWGRPOConfig)}
    hints = typing.get_type_hints(CWGRPOConfig)
    job_options, trl_kwargs, errors = {}, {}, []
    for key, value in options.items():
        if key in job_fields:
            job_options[key] = value
            continue
        try:
            if key not in trl_fields:
                guess = nearest(key, [*trl_fields, *job_fields])
                hint = f"; did you mean {guess!r}?" if guess else ""
                raise ConfigError(
                    f"unknown training option {key!r}: not a TrainJob nor a CWGRPOConfig field{hint}"
                )
            checked = coerce_value(key, value, hints.get(key, Any))
            check_finite_option(key, checked)
        except ConfigError as err:
            errors.append(OptionError(key, str(err)))
            continue
        # An int where TRL wants a float is kept as written: TRL takes it, and run.json stays as configured.
        trl_kwargs[key] = value if isinstance(checked, float) and type(value) is int else checked
    job = None
    try:
        job = check_together(TrainJob, job_options)
    except OptionError as err:
        errors.append(err)
    try:
        check_vllm_options(trl_kwargs, job.num_processes if job else 1)
    except ConfigError as err:
        named = str(err).split("=", 1)[0].split(".")[0]  # each message starts with its option: KEY=VALUE
        errors.append(OptionError(named if named in options else None, str(err)))
    return job, trl_kwargs, errors


def check_finite_option(key: str, value: Any) -> None:
    """Refuse NaN and a bad learning rate now, not once the run folder exists."""
    if isinstance(value, float) and math.isnan(value):
        raise ConfigError(f"{key}={value}: not a number")
    if key == "learning_rate" and isinstance(value, (int, float)) and not (0 <= value < math.inf):
        raise ConfigError(f"learning_rate={value}: must be a finite number >= 0")


def monitoring_names(tags: dict[str, Any], trl_kwargs: dict[str, Any]) -> dict[str, Any]:
    """``run_name`` ``size/method/seedN`` and W&B's group ``size/method``, when ``report_to`` is on."""
    report_to = trl_kwargs.get("report_to", "none")
    if report_to in ("none", None, []) or report_to == ["none"]:
        return {}
    group = "/".join(str(tags[k]) for k in ("size", "method") if k in tags)
    if group:
        os.environ.setdefault("WANDB_RUN_GROUP", group)
    name = "/".join([*([group] if group else []), *([f"seed{tags['seed']}"] if "seed" in tags else [])])
    return {"run_name": name} if name else {}


# transformers renamed these TrainingArguments fields and warns at every old name; the options keep the names
# the recipes use (run.json stores them as written), and TRL gets the current ones where it has them.
RENAMED_TRL_FIELDS = (
    ("gradient_checkpointing", "activation_checkpointing"),
    ("gradient_checkpointing_kwargs", "activation_checkpointing_kwargs"),
)


def current_trl_names(trl_kwargs: Mapping[str, Any]) -> dict[str, Any]:
    """``trl_kwargs`` with each renamed field under its current name (which wins where given)."""
    from cwgrpo.trainer import CWGRPOConfig

    defaults = {f.name: f.default for f in dataclasses.fields(CWGRPOConfig)}
    out = dict(trl_kwargs)
    for old, new in RENAMED_TRL_FIELDS:
        if new not in defaults:  # a transformers before the rename (the GPU envs pin 5.17): the old name
            continue
        value = out.pop(old, defaults[old])
        if out.get(new) is None and value is not None:
            out[new] = value
    return out


@dataclass(frozen=True)
class TrainConfig:
    """What one run trains with: the job's options, TRL's config and the keyword arguments it came from."""

    job: TrainJob
    trl: Any  # cwgrpo.trainer.CWGRPOConfig (typed loosely: importing it imports TRL)
    trl_kwargs: dict[str, Any]
    tags: dict[str, Any]

    def resolved(self) -> dict[str, Any]:
        """The run's configuration as ``run.json`` stores it."""
        return {"job": dataclasses.asdict(self.job), "trl": self.trl_kwargs, "tags": self.tags}

    def identity(self) -> dict[str, Any]:
        """What ``config_hash`` hashes: ``resolved()`` with the run folder as ``<run_dir>``."""
        run_dir = str(self.trl_kwargs["output_dir"]).rstrip("/")

        def relative(value: Any) -> Any:
            if isinstance(value, str) and (value == run_dir or value.startswith(f"{run_dir}/")):
                return "<run_dir>" + value[len(run_dir) :]
            return value

        resolved = self.resolved()
        return {**resolved, "trl": {k: relative(v) for k, v in resolved["trl"].items()}}


def build_train_config(
    options: Mapping[str, Any], run_dir: Path, tags: Mapping[str, Any] | None = None
) -> TrainConfig:
    """Merged options of ``cwgrpo train`` -> the run's ``TrainConfig``, or ``ConfigError``."""
    from cwgrpo.trainer import CWGRPOConfig
    from cwgrpo.trainer.options import samples_path

    tags = dict(tags or {})
    job, trl_kwargs = split_options(dict(options))
    trl_kwargs = {
        "output_dir": str(run_dir),
        "report_to": "none",
        "save_strategy": "steps",
        **monitoring_names(tags, trl_kwargs),
        **trl_kwargs,
    }
    trl_kwargs.setdefault("logging_steps", 1)
    trl_kwargs.setdefault("cw_samples_path", samples_path(run_dir / LIVE))
    try:  # CWGRPOConfig's checks (TRL's, then CWOptions') run here, before anything loads
        config = CWGRPOConfig(**current_trl_names(trl_kwargs))
    except (TypeError, ValueError) as err:
        raise ConfigError(f"{INVALID}{err}") from err
    if config.max_steps is None or config.max_steps < 1:
        raise ConfigError(f"max_steps={config.max_steps}: must be a positive number of optimiser steps")
    return TrainConfig(job, config, trl_kwargs, tags)


def train_option_errors(options: Mapping[str, Any]) -> list[OptionError]:
    """Every mistake ``build_train_config`` refuses in ``options``, with the option to blame; TRL's config is
    built for a CPU (the dry run judges the options, not the machine)."""
    _, _, errors = split_with_errors(options)
    bad = {err.key for err in errors}
    good = {k: v for k, v in options.items() if k not in bad}
    with tempfile.TemporaryDirectory() as tmp:
        try:
            build_train_config({**good, "use_cpu": True}, Path(tmp) / "run")
        except Exception as err:  # whatever TRL raises, the job would raise it too
            said = {str(e) for e in errors}
            text = str(err) if isinstance(err, ConfigError) else f"{type(err).__name__}: {err}"
            lines = [line for line in text.removeprefix(INVALID).splitlines() if line not in said]
            errors += [OptionError(blamed(line, options), line) for line in lines]
    return errors


def blamed(message: str, options: Mapping[str, Any]) -> str | None:
    """The option a message of TRL's config blames: the first it names, else one whose value it cites."""
    named = [word for word in re.findall(r"\w+", message) if word in options]
    if named:
        return named[0]
    quoted = (k for k, v in options.items() if isinstance(v, str) and v and _word(v, message))
    return next(quoted, None)


def _word(text: str, message: str) -> bool:
    """``text`` stands as a word of its own in ``message``."""
    return re.search(rf"(?<![\w-]){re.escape(text)}(?![\w-])", message) is not None
