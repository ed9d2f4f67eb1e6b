"""GPU and port leases for jobs that share one machine (a local GPU box).

Snakemake counts GPUs but never says which ones a job gets, and vLLM, NCCL and torch.distributed each
default to one fixed port. So each job claims its devices and ports before it starts anything: one lock
file each, held with ``flock(2)``, which the kernel drops however the process exits; all or nothing, so
two jobs cannot deadlock. Inside a Slurm allocation device locks live in a folder per ``SLURM_JOB_ID``.
Environment: ``CWGRPO_LOCK_DIR``, ``CWGRPO_PORT_RANGE`` (``FIRST-LAST``), ``CWGRPO_GPU_WAIT_S``.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import logging
import math
import os
import re
import shutil
import socket
import stat
import subprocess
import tempfile
import time
from collections.abc import Iterator, Mapping, MutableMapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

from cwgrpo.configs import ConfigError

logger = logging.getLogger(__name__)

LOCK_DIR_ENV = "CWGRPO_LOCK_DIR"
PORT_RANGE_ENV = "CWGRPO_PORT_RANGE"
WAIT_ENV = "CWGRPO_GPU_WAIT_S"
DEFAULT_PORT_RANGE = (29500, 30499)


@dataclass
class Lease:
    """Devices and ports held by this process until ``release()`` (or its exit)."""

    gpus: tuple[str, ...]
    ports: tuple[int, ...]
    _handles: list[IO] = field(default_factory=list, repr=False)

    def fds(self) -> tuple[int, ...]:
        """The lock files' descriptors: a child given them (``pass_fds``) keeps the claim while it runs."""
        return tuple(handle.fileno() for handle in self._handles)

    def release(self) -> None:
        for handle in self._handles:
            handle.close()  # closing the only descriptor drops the flock
        self._handles.clear()


def lock_dir(env: Mapping[str, str]) -> Path:
    """The machine-wide (per-user) folder of lock files."""
    default = Path(tempfile.gettempdir()) / f"cwgrpo-locks-{os.getuid()}"
    return Path(env.get(LOCK_DIR_ENV) or default)


def _planted_ancestor(folder: Path) -> str | None:
    """Why an ancestor of ``folder`` lets another user swap the folder (a link or folder another user owns,
    links followed, or a folder anyone can write without the sticky bit), or None: checking the last
    component only would trust a ``TMPDIR`` link another user planted."""
    mine = (0, os.getuid())
    for path in dict.fromkeys([Path(os.path.abspath(folder)).parent, Path(os.path.realpath(folder)).parent]):
        for ancestor in [*reversed(path.parents), path]:
            try:
                info = os.lstat(ancestor)
            except FileNotFoundError:
                break  # made below, by this user
            if info.st_uid not in mine:
                kind = "a link" if stat.S_ISLNK(info.st_mode) else "a folder"
                return f"{ancestor} is {kind} owned by uid {info.st_uid}"
            if stat.S_ISDIR(info.st_mode) and info.st_mode & 0o002 and not info.st_mode & stat.S_ISVTX:
                return f"anyone can write {ancestor} (mode {stat.filemode(info.st_mode)}, no sticky bit)"
    return None


def own_lock_folder(folder: Path) -> Path:
    """Create ``folder`` (mode 0700) if missing; refuse one another user owns or others can write, or one
    under a folder another user could swap."""
    where = f"lock folder {folder} ({LOCK_DIR_ENV})"
    planted = _planted_ancestor(folder)
    if planted:
        raise ConfigError(
            f"{where}: {planted}, so another user could swap it; set {LOCK_DIR_ENV} to a folder only you own"
        )
    try:
        folder.mkdir(parents=True, exist_ok=True, mode=0o700)
        info = os.lstat(folder)  # a link is judged as itself, never by the folder it points to
    except OSError as err:
        raise ConfigError(f"{where}: cannot create or read it ({err.strerror}); set {LOCK_DIR_ENV}") from err
    if stat.S_ISLNK(info.st_mode):
        raise ConfigError(
            f"{where} is a symbolic link, which another user may have planted: set {LOCK_DIR_ENV} to the "
            "real folder, one only you own"
        )
    if not stat.S_ISDIR(info.st_mode):
        raise ConfigError(f"{where} is not a folder; set {LOCK_DIR_ENV} to a folder of your own")
    if info.st_uid != os.getuid() or info.st_mode & 0o022:
        raise ConfigError(
            f"{where} is owned by uid {info.st_uid} with mode {stat.filemode(info.st_mode)}: another user "
            f"could replace its lock files; set {LOCK_DIR_ENV} to a folder only you own and can write"
        )
    return folder


def wait_seconds(env: Mapping[str, str]) -> float | None:
    """``CWGRPO_GPU_WAIT_S`` as seconds (unset or empty: wait as long as it takes)."""
    text = env.get(WAIT_ENV)
    if not text:
        return None
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not (math.isfinite(value) and value >= 0):
        raise ConfigError(
            f"{WAIT_ENV}={text!r}: give a number of seconds >= 0, or unset it to wait for as long as it takes"
        )
    return value


def device_id(item: str) -> str:
    """One device as CUDA tells them apart: an index by value, a UUID spelled as ``nvidia-smi`` does."""
    if item.isdigit():
        return str(int(item))
    return re.sub(
        r"(?i)^(gpu|mig)-", lambda m: m[0].upper(), re.sub(r"(?i)^mig-gpu-", "MIG-GPU-", item.lower())
    )


def _same_device(a: str, b: str) -> bool:
    return a == b or (not a.isdigit() and not b.isdigit() and (a.startswith(b) or b.startswith(a)))


def device_lock_ids(pool: list[str], uuids: Mapping[str, str]) -> dict[str, str]:
    """Device -> the name of its lock: its full UUID where ``nvidia-smi`` gives one, else itself."""
    out = {}
    for gpu in pool:
        matches = [u for u in uuids.values() if u.startswith(gpu)]
        out[gpu] = uuids.get(gpu) or (matches[0] if len(matches) == 1 else gpu)
    return out


def visible_devices(text: str) -> list[str]:
    """The devices of a ``CUDA_VISIBLE_DEVICES`` value as CUDA reads them; one listed twice is refused."""
    devices = []
    for item in (g.strip() for g in text.split(",")):
        if re.fullmatch(r"-\d+", item):
            break
        if item:
            devices.append(device_id(item))
    repeated = [
        f"{a} and {b}" if a != b else a
        for k, a in enumerate(devices)
        for b in devices[k + 1 :]
        if _same_device(a, b)
    ]
    if repeated:
        raise ConfigError(
            f"CUDA_VISIBLE_DEVICES={text!r} names one GPU twice ({'; '.join(repeated)}; a UUID prefix names "
            "the GPU whose UUID it begins): list each GPU once"
        )
    if len({d.isdigit() for d in devices}) > 1:
        raise ConfigError(
            f"CUDA_VISIBLE_DEVICES={text!r} mixes GPU indices and UUIDs, so one GPU could be listed twice: "
            "give every GPU the same way (all indices or all UUIDs)"
        )
    return devices


def _smi_lines(env: Mapping[str, str], query: str) -> list[str]:
    """``nvidia-smi --query-gpu=QUERY``'s lines (none without it, or when it fails)."""
    smi = shutil.which("nvidia-smi", path=env.get("PATH"))
    if smi is None:
        return []
    out = subprocess.run(
        [smi, f"--query-gpu={query}", "--format=csv,noheader"], capture_output=True, text=True
    )
    return out.stdout.splitlines() if out.returncode == 0 else []


def gpu_uuids(env: Mapping[str, str]) -> dict[str, str]:
    """GPU index -> UUID as ``nvidia-smi`` lists them (empty without it): the names of the lock files."""
    pairs = [line.split(",") for line in _smi_lines(env, "index,uuid")]
    return {
        p[0].strip(): device_id(p[1].strip()) for p in pairs if len(p) == 2 and p[0].strip() and p[1].strip()
    }


def gpu_pool(env: Mapping[str, str]) -> list[str]:
    """GPU ids this process may use: ``CUDA_VISIBLE_DEVICES``, else ``nvidia-smi``'s (never torch's)."""
    if "CUDA_VISIBLE_DEVICES" in env:
        return visible_devices(env["CUDA_VISIBLE_DEVICES"])
    return [line.strip() for line in _smi_lines(env, "index") if line.strip()]


def gpu_lock_dir(env: Mapping[str, str]) -> Path:
    """Where device locks live: per Slurm allocation inside one (ids are the allocation's), else per machine."""
    job = env.get("SLURM_JOB_ID")
    return lock_dir(env) / f"slurm-job-{job}" if job else lock_dir(env)


def port_range(env: Mapping[str, str]) -> tuple[int, int]:
    text = env.get(PORT_RANGE_ENV)
    if not text:
        return DEFAULT_PORT_RANGE
    match = re.fullmatch(r"\s*(\d+)\s*-\s*(\d+)\s*", text)
    if not match or not 1024 <= int(match[1]) <= int(match[2]) <= 65535:
        raise ConfigError(
            f"{PORT_RANGE_ENV}={text!r}: expected FIRST-LAST with 1024 <= FIRST <= LAST <= 65535"
        )
    return int(match[1]), int(match[2])


def open_lock_file(path: Path) -> int:
    """A descriptor of the lock file ``path`` (created if missing), never opened through a symbolic link."""
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    except OSError as err:
        if err.errno == errno.ELOOP:
            why = "is a symbolic link, never followed: remove the link"
        elif err.errno == errno.ENOTDIR:
            why = f"cannot be created: {path.parent} is not a folder"
        else:
            why = f"cannot be opened for writing ({err.strerror}): it must be a plain file you can write"
        raise ConfigError(f"lock file {path} {why}") from err
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise ConfigError(f"lock file {path} is not a plain file: remove it")
    return fd


def _try_lock(path: Path) -> IO | None:
    handle = os.fdopen(open_lock_file(path), "r+", encoding="utf-8")
    try:
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        handle.close()
        return None
    handle.truncate(0)
    handle.write(f"pid {os.getpid()} on {socket.gethostname()}\n")
    handle.flush()
    return handle


def _lock_name(kind: str, ident: str) -> str:
    return f"{kind}-{re.sub(r'[^A-Za-z0-9._-]', '_', ident)}.lock"


def port_is_free(port: int) -> bool:
    """Whether nothing listens on ``port`` now (SO_REUSEADDR as the servers set it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind(("", port))
        except OSError:
            return False
    return True


def claim_gpus(
    n: int,
    pool: list[str],
    folder: Path,
    wait_s: float | None = None,
    lock_ids: Mapping[str, str] | None = None,
) -> list[tuple[str, IO]]:
    """Lock ``n`` of the ``pool`` devices, all or none, waiting up to ``wait_s`` (None: forever)."""
    lock_ids = lock_ids or {}
    if n > len(pool):
        raise ConfigError(
            f"this job needs {n} GPUs, but {len(pool)} are visible ({','.join(pool) or 'none'}): give it a "
            "machine with more, or a preset that needs fewer (docs/hardware.md)"
        )
    own_lock_folder(folder)
    start, told = time.monotonic(), False
    while True:
        got = []
        for gpu in pool:
            handle = _try_lock(folder / _lock_name("gpu", lock_ids.get(gpu, gpu)))
            if handle is not None:
                got.append((gpu, handle))
                if len(got) == n:
                    return got
        for _, handle in got:
            handle.close()
        waited = time.monotonic() - start
        if wait_s is not None and waited >= wait_s:
            raise RuntimeError(f"{n} of GPUs {pool} were not free within {wait_s:.0f} s (locks in {folder})")
        if not told:
            logger.info(
                "waiting for %d free GPUs of %s (%d free now; locks in %s)", n, pool, len(got), folder
            )
            told = True
        time.sleep(5.0)


def claim_ports(n: int, folder: Path, first: int, last: int) -> list[tuple[int, IO]]:
    """Lock ``n`` ports of ``first..last`` that no other cwgrpo job holds and nothing listens on."""
    own_lock_folder(folder)
    got = []
    for port in range(first, last + 1):
        handle = _try_lock(folder / _lock_name("port", str(port)))
        if handle is None:
            continue
        if not port_is_free(port):
            handle.close()
            continue
        got.append((port, handle))
        if len(got) == n:
            return got
    for _, handle in got:
        handle.close()
    raise ConfigError(
        f"no {n} free ports in {first}-{last}: other jobs or programs hold them; set {PORT_RANGE_ENV}=FIRST-LAST"
    )


@contextlib.contextmanager
def lease(n_gpus: int, n_ports: int, env: Mapping[str, str] | None = None) -> Iterator[Lease]:
    """Hold ``n_gpus`` devices and ``n_ports`` ports for the ``with`` block (released on exit)."""
    env = os.environ if env is None else env
    folder = lock_dir(env)
    pool = gpu_pool(env)
    first, last = port_range(env)  # checked before anything is locked
    wait = wait_seconds(env)
    handles: list[IO] = []
    try:
        gpu_folder = gpu_lock_dir(env)
        if gpu_folder != folder:
            own_lock_folder(folder)  # the allocation's folder is inside it
        ids = device_lock_ids(pool, gpu_uuids(env)) if n_gpus else {}
        claimed = claim_gpus(n_gpus, pool, gpu_folder, wait, lock_ids=ids) if n_gpus else []
        handles += [h for _, h in claimed]
        ports = claim_ports(n_ports, folder, first, last) if n_ports else []
        handles += [h for _, h in ports]
        held = Lease(tuple(g for g, _ in claimed), tuple(p for p, _ in ports), handles)
        if held.gpus or held.ports:
            logger.info("claimed GPUs %s and ports %s", list(held.gpus), list(held.ports))
        yield held
    finally:
        for handle in handles:
            handle.close()


@contextlib.contextmanager
def one_gpu(env: MutableMapping[str, str] | None = None) -> Iterator[str | None]:
    """Hold one free device and narrow ``CUDA_VISIBLE_DEVICES`` to it; yields it, or None without GPUs."""
    env = os.environ if env is None else env
    if not gpu_pool(env):
        yield None
        return
    before = env.get("CUDA_VISIBLE_DEVICES")
    with lease(1, 0, env) as held:
        env["CUDA_VISIBLE_DEVICES"] = held.gpus[0]
        try:
            yield held.gpus[0]
        finally:
            if before is None:
                env.pop("CUDA_VISIBLE_DEVICES", None)
            else:
                env["CUDA_VISIBLE_DEVICES"] = before
