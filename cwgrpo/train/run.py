"""``cwgrpo train``: one GRPO-family training run, resumable, with one marker per saved checkpoint.

Reads top to bottom: options -> (maybe) relaunch under accelerate -> seed -> data -> model -> trainer ->
resume from the newest complete checkpoint -> train -> markers and ``run.json``; the outputs are listed in
docs/architecture.md. A run's identity is its options (``config_hash``) and its inputs
(``cwgrpo.train.identity``): a folder holding another identity's checkpoints is moved aside
(``<name>.old-N``, nothing deleted) and the run trains afresh.
"""

from __future__ import annotations

import argparse
import dataclasses
import logging
import os
import re
import shutil
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cwgrpo.configs import ConfigError, add_config_arguments, config_hash, parse_overrides, parse_tags
from cwgrpo.io import write_json
from cwgrpo.train.checkpoints import (
    check_logs,
    check_resumable,
    finalize,
    log_files,
    move_aside_if_changed,
    prune_resume_state,
    reset_logs,
    resumable_checkpoints,
    write_marker,
)
from cwgrpo.train.options import LIVE, TrainConfig, TrainJob, build_train_config
from cwgrpo.train.runguard import COMPLETE_FLAG, RunLock, check_free_space, check_run_lock, flag_record

if TYPE_CHECKING:
    from datasets import Dataset
    from transformers import PreTrainedTokenizerBase

    from cwgrpo.trainer import CWGRPOConfig

logger = logging.getLogger(__name__)

# Wall-clock fields of a log line: to --timings, never to metrics.jsonl (identical runs, identical metrics).
TIMING_KEYS = re.compile(r"(runtime|_per_second|step_time|total_flos|^epoch$)")


OUTPUTS = ("run_dir", "timings")  # every other path argument is read (cwgrpo.cli)


@dataclasses.dataclass(frozen=True)
class TrainPlan:
    """What one training process trains with, every part checked before the run folder is made."""

    run_dir: Path
    model_dir: Path
    config: CWGRPOConfig  # TRL's options, with the launcher's ports
    dataset: Dataset
    tokenizer: PreTrainedTokenizerBase
    init_kwargs: dict[str, Any]  # from_pretrained options of the policy (``model_init_kwargs``)
    reward_funcs: list  # TRL reward functions, checked on a sample row
    block: dict[str, Any]  # the run's identity and provenance, in every marker, flag and run.json
    resolved: dict[str, Any]  # the options as run, for run.json
    logs: dict[str, Path]  # each live log and its final file (``log_files``)


def configure_parser(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--model-dir", type=Path, help="base model folder (with tokenizer); a recipe's model_name_or_path"
    )
    parser.add_argument(
        "--train-data", type=Path, help="training problems (JSONL records); a recipe's dataset_name"
    )
    parser.add_argument("--run-dir", type=Path, help="output folder of this run; a recipe's output_dir")
    parser.add_argument(
        "--timings",
        type=Path,
        help="JSONL file for the wall-clock fields of each logged step (kept out of metrics.jsonl, so that "
        "identical runs give identical metrics); default RUN_DIR/timings.jsonl",
    )
    parser.add_argument(
        "--tag",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="identity of the run (size, method, seed)",
    )
    add_config_arguments(parser)
    parser.epilog = (
        "Options (--config/--set): the fields of cwgrpo.train.options.TrainJob "
        f"({', '.join(f.name for f in dataclasses.fields(TrainJob))}) and every "
        "field of cwgrpo.trainer.CWGRPOConfig (TRL's GRPOConfig and the package's cw_*, clip_cov_* and "
        "kl_cov_* fields, each with its help in the class). A TRL/open-r1 GRPO recipe "
        "(model_name_or_path, dataset_name, output_dir, system_prompt, torch_dtype, attn_implementation plus "
        "GRPOConfig fields) is accepted as --config and parsed by TRL's TrlParser (cwgrpo.train.recipe)."
    )


def _callbacks(run_dir: Path, provenance_block: dict[str, Any]):
    from transformers import TrainerCallback

    from cwgrpo.io import append_jsonl

    class LogToJsonl(TrainerCallback):
        """metrics.jsonl gets deterministic fields; wall-clock ones go to timings.jsonl."""

        def on_log(self, args, state, control, logs=None, **kwargs):
            if not state.is_world_process_zero or not logs:
                return
            if "train_runtime" in logs:  # the end-of-training summary: all of it is about time
                metrics, timings = {}, dict(logs)
            else:
                metrics = {k: v for k, v in logs.items() if not TIMING_KEYS.search(k)}
                timings = {k: v for k, v in logs.items() if TIMING_KEYS.search(k)}
            if metrics:
                append_jsonl(run_dir / LIVE / "metrics.jsonl", {"step": state.global_step, **metrics})
            if timings:
                append_jsonl(run_dir / LIVE / "timings.jsonl", {"step": state.global_step, **timings})

    class MarkCompleteCheckpoints(TrainerCallback):
        """Once every process saved checkpoint-N (their RNG states come after DeepSpeed's save), flag it
        complete and write the step marker the DAG waits for."""

        def on_save(self, args, state, control, **kwargs):
            from accelerate import PartialState

            processes = PartialState()
            processes.wait_for_everyone()
            if not state.is_world_process_zero:
                return
            ckpt = run_dir / f"checkpoint-{state.global_step}"
            if ckpt.is_dir():
                record = flag_record(ckpt, state.global_step, provenance_block, processes.num_processes)
                write_json(ckpt / COMPLETE_FLAG, record)
                write_marker(run_dir, state.global_step, ckpt, provenance_block)
                prune_resume_state(run_dir, keep=ckpt)

    class CheckFreeSpace(TrainerCallback):
        """Before a save: stop, naming the folder, if the disk cannot hold one more checkpoint."""

        def on_step_end(self, args, state, control, model=None, **kwargs):
            if state.is_world_process_zero:
                check_run_lock(run_dir)
            if control.should_save and state.is_world_process_zero:
                check_free_space(run_dir, model)

    from cwgrpo.grading.reward_guard import missing_rewards_callback

    return [LogToJsonl(), MarkCompleteCheckpoints(), CheckFreeSpace(), missing_rewards_callback()]


def build_dataset(records: list[dict], job: TrainJob):
    """Records -> a TRL dataset of ``training_rows``; a long prompt is cut by the trainer, never dropped."""
    from datasets import Dataset

    from cwgrpo.train.rows import training_rows

    rows = training_rows(records, job.prompt_set, job.system_prompt)
    if not rows:
        raise ConfigError("no training problem: the training data is empty")
    return Dataset.from_list(rows)


def model_init_kwargs(config) -> dict[str, Any]:
    """The policy's ``from_pretrained`` options from TRL's ``model_init_kwargs``, read as TRL reads them."""
    import torch

    kwargs = dict(config.model_init_kwargs or {})
    dtype = kwargs.get("dtype", "float32")
    if isinstance(dtype, str) and dtype != "auto":
        if dtype not in ("bfloat16", "float16", "float32"):
            raise ConfigError(f"model_init_kwargs.dtype={dtype!r}; valid: bfloat16, float16, float32, auto")
        dtype = getattr(torch, dtype)
    kwargs["dtype"] = dtype
    return kwargs


def run(args: argparse.Namespace) -> int:
    from cwgrpo.configs import read_options
    from cwgrpo.generation.vllm_checks import check_context_fits_model
    from cwgrpo.train.recipe import is_recipe, parse_recipe

    options = read_options(args.config) if args.config else {}
    named, options = parse_recipe(args.config) if is_recipe(options) else ({}, options)  # may name folders
    paths = {}
    for name, key in (
        ("model_dir", "model_name_or_path"),
        ("train_data", "dataset_name"),
        ("run_dir", "output_dir"),
    ):
        paths[name] = getattr(args, name) or named.get(name)  # a flag on the command line wins
        if paths[name] is None:
            raise ConfigError(f"--{name.replace('_', '-')} is required (or {key} in a TRL/open-r1 recipe)")
    model_dir, train_data, run_dir = paths["model_dir"], paths["train_data"], paths["run_dir"]
    timings = args.timings or run_dir / "timings.jsonl"
    options.update(parse_overrides(args.overrides))
    # a bad option fails here, in any process
    cfg = build_train_config(options, run_dir, parse_tags(args.tag))
    if "CWGRPO_LAUNCHED" not in os.environ:  # the one process before any training process starts
        check_rewards(cfg.job, train_data)
    check_context_fits_model(cfg.trl_kwargs, model_dir)  # before any vLLM engine or server starts
    if "CWGRPO_LAUNCHED" not in os.environ:
        move_aside_if_changed(run_dir, config_hash(cfg.identity()), model_dir, train_data)
    if cfg.job.launcher == "accelerate" and "CWGRPO_LAUNCHED" not in os.environ:
        from cwgrpo.launch.launcher import relaunch

        command = launched_command(model_dir, train_data, run_dir, timings, args)
        return relaunch(command, cfg.job, model_dir, cfg.trl_kwargs)
    if cfg.job.launcher == "none" and not cfg.trl_kwargs.get("use_cpu"):
        from cwgrpo.launch.devices import one_gpu

        with one_gpu():  # this process trains: a GPU of its own on a shared box
            return train(model_dir, train_data, run_dir, cfg, timings)
    return train(model_dir, train_data, run_dir, cfg, timings)


def check_rewards(job: TrainJob, train_data: Path) -> None:
    """Each reward imported and called on the first training rows, as the dry run does."""
    from cwgrpo.grading.reward_guard import prepared_rewards
    from cwgrpo.train.rows import first_rows

    if Path(train_data).is_file():  # a missing file is named by the data check in train
        rows = first_rows(train_data, job.prompt_set, job.system_prompt)
        prepared_rewards(job.reward_funcs, rows, job.reward_timeout_s)


def first(dataset: Dataset) -> list[dict]:
    from cwgrpo.train.rows import SAMPLE_ROWS

    return [dataset[i] for i in range(min(SAMPLE_ROWS, len(dataset)))]


def launched_command(
    model_dir: Path, train_data: Path, run_dir: Path, timings: Path, args: argparse.Namespace
) -> list[str]:
    """The ``cwgrpo train`` arguments each launched process runs: this call's, with the folders resolved."""
    command = ["train", "--model-dir", str(model_dir), "--train-data", str(train_data)]
    command += ["--run-dir", str(run_dir), "--timings", str(timings)]
    command += [item for tag in args.tag for item in ("--tag", tag)]
    command += ["--config", str(args.config)] if args.config is not None else []
    return command + [item for pair in args.overrides for item in ("--set", pair)]


def train(
    model_dir: Path, train_data: Path, run_dir: Path, cfg: TrainConfig, timings: Path | None = None
) -> int:
    """Train one run into ``run_dir``, resuming it from complete checkpoints of the same identity."""
    from transformers import AutoTokenizer

    from cwgrpo.data.registry import load_records
    from cwgrpo.generation import check_model_dir
    from cwgrpo.grading.reward_guard import prepared_rewards
    from cwgrpo.launch.vllm_server import apply_endpoints
    from cwgrpo.provenance import provenance
    from cwgrpo.seeding import seed_everything
    from cwgrpo.train.identity import run_inputs

    # Every check runs before anything is written: a bad option or input leaves no run folder behind.
    job, config = cfg.job, cfg.trl
    apply_endpoints(config, os.environ)  # the ports the launcher claimed; not in trl_kwargs, not hashed
    check_model_dir(model_dir)
    seed_everything(config.seed, job.deterministic)

    records = load_records(train_data)
    if job.train_limit is not None:
        records = records[: job.train_limit]
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    if not tokenizer.chat_template:
        raise ConfigError(
            f"--model-dir {model_dir}: the tokenizer has no chat template, and training prompts are chat "
            "messages (add chat_template to tokenizer_config.json or a chat_template.jinja)"
        )
    dataset = build_dataset(records, job)
    check_dataset_fits(dataset, tokenizer, model_dir, config.max_completion_length)
    plan = TrainPlan(  # evaluated in this order: the last checks, then the run's identity
        run_dir=run_dir,
        model_dir=model_dir,
        config=config,
        dataset=dataset,
        tokenizer=tokenizer,
        init_kwargs=model_init_kwargs(config),
        reward_funcs=prepared_rewards(job.reward_funcs, first(dataset), job.reward_timeout_s),  # no model yet
        resolved=cfg.resolved(),
        block={
            "tags": cfg.tags,
            "config_hash": config_hash(cfg.identity()),
            "inputs": run_inputs(model_dir, train_data),
            "provenance": provenance(seed=config.seed),
        },
        logs=log_files(run_dir, timings or run_dir / "timings.jsonl"),
    )
    try:
        run_dir.mkdir(parents=True)
        made = os.stat(run_dir)
        created = (made.st_dev, made.st_ino)  # the folder this job made, by identity: a path may change hands
    except FileExistsError:
        created = None
    lock = RunLock(run_dir) if _is_rank_zero() else None
    held = False
    try:
        if lock is not None:
            lock.acquire()  # raises, naming the holder, if another `cwgrpo train` trains into run_dir
            held = True
        return _train_locked(plan)
    except BaseException:
        # a failed start leaves no run folder behind; only the lock holder that made it removes it (another
        # process may have taken the lock of the folder this one made)
        if created and held and _same_folder(run_dir, created) and not any(run_dir.glob("checkpoint-*")):
            shutil.rmtree(run_dir, ignore_errors=True)
        raise
    finally:
        if lock is not None:
            lock.release()


def _same_folder(path: Path, identity: tuple[int, int]) -> bool:
    """Whether ``path`` is still the folder of ``identity`` (device, inode), not one made after it was moved
    or deleted: another run's, never to be removed."""
    try:
        st = os.stat(path)
    except OSError:
        return False
    return (st.st_dev, st.st_ino) == identity


def _is_rank_zero() -> bool:
    """The process that owns the run folder (under accelerate every rank calls ``train``)."""
    return int(os.environ.get("RANK", "0")) == 0


def check_dataset_fits(dataset, tokenizer, model_dir: Path, completion_budget: int | None) -> None:
    """Every training prompt, as built, plus the completion budget fits the model's context."""
    from cwgrpo.generation import check_prompts_fit, model_context

    prompts = [
        p
        if isinstance(p, str)
        else tokenizer.apply_chat_template(p, add_generation_prompt=True, tokenize=False)
        for p in dataset["prompt"]
    ]
    check_prompts_fit(prompts, tokenizer, model_context(model_dir), completion_budget or 0, "training prompt")


def _train_locked(plan: TrainPlan) -> int:
    from transformers import AutoModelForCausalLM

    from cwgrpo.trainer import CWGRPOTrainer

    run_dir, config = plan.run_dir, plan.config
    owner = _is_rank_zero()  # every process runs this; one of them writes into the run folder
    done = resumable_checkpoints(run_dir, plan.block, owner)
    resume = str(done[max(done)]) if done else None
    if done and max(done) >= config.max_steps:  # a finished run: resuming would train one step more
        logger.info("%s is complete (step %d): writing its outputs only", run_dir, max(done))
        check_logs(run_dir, max(done), config)
        if owner:
            finalize(run_dir, plan.block, plan.resolved, resume, plan.logs)
        return 0
    if resume is not None:  # the logs before the resume point must all be there, or figures hide a gap
        check_logs(run_dir, max(done), config)
        check_resumable(Path(resume))
    if owner:
        reset_logs(run_dir, plan.logs, max(done) if done else None)
    if resume is not None:
        logger.info("resuming from %s", resume)

    trainer = CWGRPOTrainer(
        model=AutoModelForCausalLM.from_pretrained(plan.model_dir, **plan.init_kwargs),
        args=config,
        train_dataset=plan.dataset,
        reward_funcs=plan.reward_funcs,
        processing_class=plan.tokenizer,
        callbacks=_callbacks(run_dir, plan.block),
    )
    from cwgrpo.launch.workers import process_description

    logger.info("training process %s", process_description(trainer.accelerator))
    try:
        trainer.train(resume_from_checkpoint=resume)
    except OSError as err:  # e.g. a full disk inside TRL's save: say where
        if err.filename is None:
            raise OSError(err.errno, f"writing under {run_dir} failed: {err.strerror or err}") from err
        raise
    if trainer.accelerator.is_main_process:
        finalize(run_dir, plan.block, plan.resolved, resume, plan.logs)
    return 0
