"""Guards of a run folder: one trainer at a time, checkpoints checked before reuse, logs without gaps.

``RunLock`` holds ``lockf`` (NFS too) on ``.cwgrpo.lock`` for the whole training process. A checkpoint's
completion flag records each file's size (sizes, not checksums: hashing tens of GB at every save would
take minutes), checked with every ``*.safetensors`` header before a resume or an evaluation.
"""

from __future__ import annotations

import errno
import fcntl
import json
import os
import re
import shlex
import shutil
import socket
import struct
import time
from pathlib import Path
from typing import Any

from cwgrpo.configs import ConfigError

LOCK_NAME = ".cwgrpo.lock"
COMPLETE_FLAG = "cwgrpo_complete.json"  # written inside a checkpoint folder once every process saved it
PRUNED_FLAG = "cwgrpo_pruned.json"  # written inside a checkpoint folder before its resume state is deleted
SPACE_MARGIN = 1.1  # free space wanted: this times the size of the newest checkpoint
CHECKPOINT = re.compile(r"checkpoint-(\d+)")


_HELD: dict[Path, tuple[int, int]] = {}  # run lock file -> (device, inode) of the one this process holds


class RunLock:
    """Exclusive lock on a run folder for the life of this process."""

    def __init__(self, run_dir: Path) -> None:
        self.path = Path(run_dir) / LOCK_NAME
        self._fd: int | None = None

    def acquire(self) -> None:
        from cwgrpo.launch.devices import open_lock_file

        fd = open_lock_file(self.path)
        try:
            fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as err:
            holder = _holder(os.pread(fd, 4096, 0))
            os.close(fd)
            if err.errno not in (errno.EACCES, errno.EAGAIN):
                raise
            raise ConfigError(
                f"{self.path.parent} is being trained into by another `cwgrpo train` ({holder}): "
                "wait for it to finish or end it, then rerun"
            ) from None
        os.ftruncate(fd, 0)
        info = {
            "pid": os.getpid(),
            "host": socket.gethostname(),
            "started": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        }
        os.write(fd, json.dumps(info).encode())
        self._fd = fd
        st = os.fstat(fd)
        _HELD[self.path] = (st.st_dev, st.st_ino)

    def release(self) -> None:
        _HELD.pop(self.path, None)
        if self._fd is not None:
            os.close(self._fd)  # closing drops the lock; the file stays (removing it would race)
            self._fd = None


def check_run_lock(run_dir: Path) -> None:
    """Stop a job whose run folder's lock file is no longer the one it holds (the folder was deleted or
    replaced under it): another ``cwgrpo train`` may then have taken the folder, and two must never train
    into one."""
    path = Path(run_dir) / LOCK_NAME
    held = _HELD.get(path)
    if held is None:
        return
    try:
        st = os.stat(path)
        same = (st.st_dev, st.st_ino) == held
    except FileNotFoundError:
        same = False
    if not same:
        raise ConfigError(
            f"{run_dir}: its lock file was removed or replaced under this job (was the folder deleted?): "
            "stopping, so that no other `cwgrpo train` trains into it beside this one"
        )


def _holder(text: bytes) -> str:
    """Who holds a run lock, from what its holder wrote into the lock file."""
    try:
        info = json.loads(text)
        return f"pid {info['pid']} on host {info['host']}, since {info['started']}"
    except (ValueError, KeyError, TypeError):
        return "holder unknown"


def aside_path(run_dir: Path) -> Path:
    """A free sibling name for a run folder moved out of the way: ``<name>.old-1``, ``.old-2``, ...; a
    run folder that is a link moves its target, on the target's own disk. A name held by anything, a
    dangling link included, is taken."""
    folder = Path(run_dir).resolve() if Path(run_dir).is_symlink() else Path(run_dir)
    n = 1
    while os.path.lexists(folder.with_name(f"{folder.name}.old-{n}")):
        n += 1
    return folder.with_name(f"{folder.name}.old-{n}")


def move_aside(run_dir: Path) -> Path:
    """Rename a run folder (a link's target, the link kept and its target made again, empty) to
    ``aside_path``; return where it went."""
    aside = aside_path(run_dir)
    folder = Path(run_dir).resolve() if Path(run_dir).is_symlink() else Path(run_dir)
    folder.rename(aside)
    if folder != Path(run_dir):
        folder.mkdir()
    return aside


def move_aside_hint(run_dir: Path) -> str:
    """The one command that keeps a refused run (renamed) and lets the same command train afresh."""
    aside = aside_path(run_dir)
    if Path(run_dir).is_symlink():
        folder = shlex.quote(str(Path(run_dir).resolve()))
        command = f"mv {folder} {shlex.quote(str(aside))} && mkdir {folder}"
    else:
        command = f"mv {shlex.quote(str(run_dir))} {shlex.quote(str(aside))}"
    return f"to keep it and train afresh, move it aside and run the same command again: {command}"


def incomplete_checkpoints(run_dir: Path) -> list[Path]:
    """``checkpoint-<int>`` folders without the completion flag: saves cut by a kill."""
    return sorted(
        p
        for p in Path(run_dir).glob("checkpoint-*")
        if p.is_dir() and CHECKPOINT.fullmatch(p.name) and not (p / COMPLETE_FLAG).is_file()
    )


def _file_sizes(ckpt: Path) -> dict[str, int]:
    return {
        p.relative_to(ckpt).as_posix(): p.stat().st_size
        for p in sorted(ckpt.rglob("*"))
        if p.is_file() and p.name != COMPLETE_FLAG
    }


def flag_record(ckpt: Path, step: int, block: dict[str, Any], processes: int = 1) -> dict[str, Any]:
    """A checkpoint's completion flag: step, the run's identity, the processes that saved it, file sizes."""
    return {
        "step": step,
        "config_hash": block["config_hash"],
        "inputs": block.get("inputs"),
        "processes": processes,
        "files": _file_sizes(ckpt),
    }


def _read_flag(path: Path) -> dict[str, Any]:
    return json.loads(path.read_text(encoding="utf-8")) if path.is_file() else {}


def rng_state_names(processes: int) -> list[str]:
    """The RNG state files transformers' Trainer writes: one per process, or one without a rank alone."""
    return ["rng_state.pth"] if processes <= 1 else [f"rng_state_{r}.pth" for r in range(processes)]


def missing_rank_files(ckpt: Path) -> str | None:
    """None if the flag lists every saving process's RNG state, else the problem."""
    flag = _read_flag(Path(ckpt) / COMPLETE_FLAG)
    if "processes" not in flag:
        return None
    missing = [n for n in rng_state_names(flag["processes"]) if n not in (flag.get("files") or {})]
    if missing:
        return (
            f"{ckpt} was flagged complete before process(es) of {flag['processes']} had saved "
            f"{', '.join(missing)} (its completion flag does not list them)"
        )
    return None


def safetensors_problem(path: Path) -> str | None:
    """Why a ``.safetensors`` file is unreadable (bad header, or data not ending at the file's end)."""
    size = path.stat().st_size
    try:
        with open(path, "rb") as fh:
            head = fh.read(8)
            if len(head) < 8:
                return f"{path} is truncated ({size} bytes, no header)"
            (n,) = struct.unpack("<Q", head)
            if n > size - 8:
                return f"{path} is truncated or corrupt (header of {n} bytes in a file of {size})"
            header = json.loads(fh.read(n))
    except (ValueError, UnicodeDecodeError):
        return f"{path} is corrupt (its header is not JSON)"
    ends = [v["data_offsets"][1] for k, v in header.items() if k != "__metadata__" and isinstance(v, dict)]
    expected = 8 + n + max(ends, default=0)
    if expected != size:
        return f"{path} is truncated or corrupt ({size} bytes, its header needs {expected})"
    return None


def verify_checkpoint(ckpt: Path) -> str | None:
    """None if the checkpoint's files match its flag and its safetensors headers are sound, else why not."""
    ckpt = Path(ckpt)
    try:
        flag = _read_flag(ckpt / COMPLETE_FLAG)
        removed = set(_read_flag(ckpt / PRUNED_FLAG).get("removed") or [])
    except (ValueError, UnicodeDecodeError) as err:
        return f"a flag file in {ckpt} is corrupt ({err})"
    for name, size in (flag.get("files") or {}).items():
        path = ckpt / name
        if path.is_file() and path.stat().st_size != size:
            return f"{path} has {path.stat().st_size} bytes, {size} when the checkpoint was saved (truncated or corrupt)"
        if not path.is_file() and name.split("/")[0] not in removed:
            return f"{path} is missing (listed when the checkpoint was saved)"
    for path in sorted(ckpt.glob("*.safetensors")):
        problem = safetensors_problem(path)
        if problem:
            return problem
    return None


def check_logs_cover(metrics: Path, last_step: int, logging_steps: float, max_steps: int) -> None:
    """Refuse a resume at ``last_step`` unless ``metrics`` logs every logging step up to it."""
    interval = int(logging_steps) if logging_steps >= 1 else max(1, int(-(-logging_steps * max_steps // 1)))
    present = set()
    if metrics.is_file():
        for line in metrics.read_text(encoding="utf-8").splitlines():
            try:
                present.add(int(json.loads(line)["step"]))
            except (ValueError, KeyError, TypeError):
                continue  # a line cut by a kill
    missing = [s for s in range(interval, last_step + 1, interval) if s not in present]
    if missing:
        raise ConfigError(
            f"{metrics} lacks the logs of step(s) {_ranges(missing)} before the resume point {last_step} "
            "(the live logs were lost or cut): resuming would leave a gap in metrics.jsonl; "
            f"{move_aside_hint(metrics.parent.parent)}"
        )


def _ranges(steps: list[int]) -> str:
    return f"{steps[0]}-{steps[-1]}" if len(steps) > 2 else ", ".join(map(str, steps))


def check_free_space(run_dir: Path, model: Any = None) -> None:
    """Raise ``OSError(ENOSPC)`` if ``run_dir`` cannot hold another checkpoint as large as the newest."""
    ckpts = sorted(
        (p for p in Path(run_dir).glob("checkpoint-*") if CHECKPOINT.fullmatch(p.name)),
        key=lambda p: int(p.name.split("-")[1]),
    )
    if ckpts:
        need = sum(p.stat().st_size for p in ckpts[-1].rglob("*") if p.is_file())
    elif model is not None:
        need = 3 * sum(p.numel() * p.element_size() for p in model.parameters())
    else:
        return
    need = int(need * SPACE_MARGIN)
    free = shutil.disk_usage(run_dir).free
    if free < need:
        raise OSError(
            errno.ENOSPC,
            f"not enough free space in {run_dir} for the next checkpoint: {free / 2**20:.0f} MiB free, "
            f"about {need / 2**20:.0f} MiB needed",
        )
