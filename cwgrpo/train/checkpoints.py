"""A run folder's checkpoints between runs: which one a rerun resumes from, what is pruned.

A ``checkpoint-N/`` counts once TRL finished saving it (``COMPLETE_FLAG``); only the newest keeps the
optimiser state a resume reads (``PRUNED_FLAG``). The growing logs live in ``LIVE``, an undeclared folder,
since Snakemake deletes a failed job's declared outputs and with them the history before a resume point.
"""

from __future__ import annotations

import json
import logging
import shutil
from pathlib import Path
from typing import Any

from cwgrpo.configs import ConfigError
from cwgrpo.io import read_json, write_json, write_text
from cwgrpo.train.options import LIVE
from cwgrpo.train.runguard import (
    CHECKPOINT,
    COMPLETE_FLAG,
    PRUNED_FLAG,
    RunLock,
    check_logs_cover,
    incomplete_checkpoints,
    missing_rank_files,
    move_aside,
    move_aside_hint,
    verify_checkpoint,
)
from cwgrpo.trainer import learning_signal

logger = logging.getLogger("cwgrpo.train.run")  # these lines are the training run's

# What only a resume reads (transformers' Trainer and DeepSpeed); evaluation reads the weights and tokenizer.
# tests/unit/test_checkpoints.py checks this against layouts recorded from real ZeRO-2 and ZeRO-3 saves.
RESUME_STATE = (
    "optimizer*",
    "scheduler.pt",
    "scaler.pt",
    "rng_state*.pth",
    "global_step*",
    "latest",
    "zero_to_*.py",
)


def complete_checkpoints(run_dir: Path) -> dict[int, Path]:
    """Checkpoints whose save finished (flag file present), by step."""
    found = {}
    for path in run_dir.glob("checkpoint-*"):
        match = CHECKPOINT.fullmatch(path.name)
        if match and (path / COMPLETE_FLAG).is_file():
            found[int(match.group(1))] = path
    return dict(sorted(found.items()))


def resumable_checkpoints(run_dir: Path, block: dict[str, Any], owner: bool = True) -> dict[int, Path]:
    """The complete checkpoints a rerun may resume from; raises on another identity's."""
    if owner:
        remove_incomplete_checkpoints(run_dir)
    done = complete_checkpoints(run_dir)
    check_same_config(run_dir, done, block["config_hash"], block["inputs"])
    return _verified(done)


def remove_incomplete_checkpoints(run_dir: Path) -> None:
    """``checkpoint-<int>`` folders without the completion flag were cut by a kill: remove them."""
    for path in incomplete_checkpoints(run_dir):
        if path.is_symlink():  # TRL saves into a folder, never a link: this one is not this run's to remove
            raise ConfigError(
                f"{path} is a symbolic link without a completion flag, not a checkpoint this run saved: "
                "move it out of the run folder, then rerun"
            )
        logger.warning("removing incomplete checkpoint %s", path)
        shutil.rmtree(path)


def check_same_config(run_dir: Path, done: dict[int, Path], expected: str, inputs: dict[str, Any]) -> None:
    """Never resume from checkpoints that other options, another base model or other data produced."""
    changes = changed_identity(done, expected, inputs)
    if changes:
        raise ConfigError(
            f"{run_dir} holds checkpoints {sorted(changes)} of another configuration: changed "
            f"{'; '.join(_changed(changes))}. Restore the options and inputs that produced it, or "
            f"{move_aside_hint(run_dir)}"
        )


def changed_identity(done: dict[int, Path], expected: str, inputs: dict[str, Any]) -> dict[int, list[str]]:
    """What differs, by step, between each checkpoint's identity and the run's."""
    from cwgrpo.train.identity import changed_inputs

    foreign: dict[int, list[str]] = {}
    for step, ckpt in done.items():
        flag = read_json(ckpt / COMPLETE_FLAG)
        found = flag.get("config_hash")
        changes = changed_inputs(flag.get("inputs"), inputs)
        if found != expected:
            changes.insert(0, f"the options (config hash {found}, now {expected})")
        if changes:
            foreign[step] = changes
    return foreign


def _changed(foreign: dict[int, list[str]]) -> list[str]:
    return sorted({c for cs in foreign.values() for c in cs})


def move_aside_changed_run(run_dir: Path, block: dict[str, Any]) -> Path | None:
    """Rename a run folder of another identity's checkpoints to a free ``<name>.old-N``; return it."""
    changes = changed_identity(complete_checkpoints(run_dir), block["config_hash"], block["inputs"])
    if not changes:
        return None
    aside = move_aside(run_dir)
    logger.warning(
        "%s held checkpoints %s of another configuration (changed %s): moved it to %s, nothing deleted; "
        "training afresh",
        run_dir,
        sorted(changes),
        "; ".join(_changed(changes)),
        aside,
    )
    return aside


def move_aside_if_changed(run_dir: Path, config_hash: str, model_dir: Path, train_data: Path) -> None:
    """``move_aside_changed_run`` under the folder's lock; missing inputs are left to ``train`` to name."""
    from cwgrpo.train.identity import run_inputs

    if not complete_checkpoints(run_dir) or not Path(model_dir).is_dir() or not Path(train_data).is_file():
        return
    lock = RunLock(run_dir)
    lock.acquire()
    try:
        move_aside_changed_run(
            run_dir, {"config_hash": config_hash, "inputs": run_inputs(model_dir, train_data)}
        )
    finally:
        lock.release()


def _verified(done: dict[int, Path]) -> dict[int, Path]:
    """Complete checkpoints whose files match their flag; a damaged newest one is skipped if the previous
    still holds its optimiser state."""
    while done:
        step = max(done)
        problem = verify_checkpoint(done[step]) or missing_rank_files(done[step])
        if problem is None:
            return done
        older = {s: p for s, p in done.items() if s != step}
        if older and (older[max(older)] / PRUNED_FLAG).is_file():
            raise ConfigError(
                f"{problem}; the previous complete checkpoint {older[max(older)].name} holds no optimiser state "
                f"(only the newest keeps it): restore the damaged checkpoint, or {move_aside_hint(older[max(older)].parent)}"
            )
        logger.warning("%s; resuming from the previous complete checkpoint instead", problem)
        done = older
    return done


def check_resumable(ckpt: Path) -> None:
    """Refuse a pruned checkpoint: transformers would resume it with a fresh optimiser, saying nothing."""
    if (ckpt / PRUNED_FLAG).is_file():
        raise ConfigError(
            f"{ckpt} is the newest complete checkpoint but holds no optimiser state (pruned once a newer one "
            f"was complete; that one is gone): restore the newer checkpoint, or {move_aside_hint(ckpt.parent)}"
        )


def prune_resume_state(run_dir: Path, keep: Path) -> list[Path]:
    """Delete the resume-only state of every complete checkpoint older than ``keep``, flagging each first."""
    done = complete_checkpoints(run_dir)
    keep_step = next((step for step, path in done.items() if path == keep), None)
    if keep_step is None:
        raise ValueError(f"{keep} is not a complete checkpoint of {run_dir}: nothing is pruned before it is")
    pruned = []
    for step, ckpt in done.items():
        state = sorted({p for pattern in RESUME_STATE for p in ckpt.glob(pattern)})
        if step >= keep_step or not state:
            continue
        write_json(
            ckpt / PRUNED_FLAG, {"step": step, "newest": keep_step, "removed": [p.name for p in state]}
        )
        for path in state:
            _remove(path)
        pruned.append(ckpt)
    if pruned:
        logger.info("kept the optimiser state of %s only; pruned %s", keep.name, [p.name for p in pruned])
    return pruned


def _remove(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():  # a link is removed, never what it points to
        shutil.rmtree(path)
    else:
        path.unlink()


def check_logs(run_dir: Path, last_step: int, config) -> None:
    """The live metrics log every logging step up to ``last_step`` (``config``: the run's TRL config)."""
    if str(getattr(config.logging_strategy, "value", config.logging_strategy)) == "steps":
        check_logs_cover(run_dir / LIVE / "metrics.jsonl", last_step, config.logging_steps, config.max_steps)


def reset_logs(run_dir: Path, logs: dict[str, Path], resume_step: int | None) -> None:
    """Start each live log afresh, or cut it after ``resume_step`` (the resumed run logs those again)."""
    for name in logs:
        if resume_step is None:
            (run_dir / LIVE / name).unlink(missing_ok=True)
        else:
            truncate_log(run_dir / LIVE / name, resume_step)


def truncate_log(path: Path, last_step: int) -> None:
    """Drop log lines after ``last_step`` (they are re-logged when training resumes from there)."""
    if not path.is_file():
        return
    kept = []
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            record = json.loads(line)
        except json.JSONDecodeError:  # a line cut by a kill
            continue
        if record.get("step", 0) <= last_step:
            kept.append(line)

    write_text(path, "".join(f"{line}\n" for line in kept))


def log_files(run_dir: Path, timings: Path) -> dict[str, Path]:
    """Each growing log (``LIVE/NAME``) and the file it is copied to once training ends."""
    return {
        "metrics.jsonl": run_dir / "metrics.jsonl",
        "timings.jsonl": timings,
        "cov_samples.jsonl": run_dir / "cov_samples.jsonl",
    }


def write_marker(run_dir: Path, step: int, ckpt: Path, provenance_block: dict[str, Any]) -> None:
    write_json(
        run_dir / "steps" / f"step{step}.json", {"step": step, "checkpoint": str(ckpt), **provenance_block}
    )


def finalize(
    run_dir: Path, block: dict[str, Any], resolved: dict[str, Any], resume: str | None, logs: dict[str, Path]
) -> None:
    """Write the declared outputs: a marker per complete checkpoint, the logs, then ``run.json`` last."""
    for step, ckpt in complete_checkpoints(run_dir).items():
        write_marker(run_dir, step, ckpt, block)
    for name, path in logs.items():
        live = run_dir / LIVE / name
        write_text(path, live.read_text(encoding="utf-8") if live.is_file() else "")
    signal = learning_signal.findings_of_log(logs["metrics.jsonl"], resolved.get("trl") or {})
    record = {**block, "config": resolved, "resumed_from": resume, "learning_signal": signal}
    write_json(run_dir / "run.json", record)
