"""Multi-GPU launch for ``cwgrpo train`` (paper preset): accelerate + DeepSpeed ZeRO-2, and a vLLM server.

The authors' recipe trains on 3 GPUs and generates with vLLM on a fourth; ``relaunch`` does that from one
``cwgrpo train`` call: it claims the job's GPUs and ports, starts ``trl vllm-serve`` on ``vllm_server_gpu``
if set, runs ``accelerate launch`` on the other GPUs through ``cwgrpo.launch.workers`` (with
``CWGRPO_LAUNCHED=1`` so the children train), and stops the server whatever happened. A job over several
nodes goes to ``cwgrpo.launch.multinode`` instead.
"""

from __future__ import annotations

import logging
import os
import re
import signal
import subprocess
import sys
import threading
from collections.abc import Mapping, Sequence
from importlib import resources
from pathlib import Path
from typing import Any, BinaryIO

from cwgrpo.configs import ConfigError
from cwgrpo.launch import LaunchJob, multinode
from cwgrpo.launch.devices import lease
from cwgrpo.launch.multinode import ports_needed
from cwgrpo.launch.vllm_server import GROUP_PORT_ENV, SERVER_PORT_ENV, vllm_server_options, wait_for_server
from cwgrpo.launch.workers import LAUNCHER_PID_ENV, LEASE_FDS_ENV, op_cache_env, start_tied, stop

logger = logging.getLogger(__name__)


def accelerate_config_path(name: str) -> Path:
    """A bundled accelerate config by name (``zero2``, ``zero3``), or a config file by path."""
    if "/" in name or name.endswith((".yaml", ".yml")):
        path = Path(name).expanduser()
        if not path.is_file():
            raise ConfigError(f"accelerate_config={name!r}: no such file (from {Path.cwd()})")
        return path.resolve()
    path = Path(str(resources.files("cwgrpo") / "resources" / "accelerate" / f"{name}.yaml"))
    if not path.is_file():
        folder = path.parent
        known = sorted(p.stem for p in folder.glob("*.yaml")) if folder.is_dir() else []
        raise ConfigError(
            f"accelerate_config={name!r}: no bundled config; known: {known}, or give a path to a .yaml file"
        )
    return path


def gpus_needed(job: LaunchJob, trl_options: Mapping[str, Any] | None = None) -> int:
    """GPUs the job claims: one per training process and the vLLM server's; none on the CPU (``use_cpu``)."""
    if (trl_options or {}).get("use_cpu"):
        return 0
    return job.num_processes + (1 if job.vllm_server_gpu is not None else 0)


def plan(
    command: Sequence[str],
    job: LaunchJob,
    gpus: list[str],
    model_dir: str,
    ports: tuple[int, ...] = (),
    trl_options: Mapping[str, Any] | None = None,
) -> tuple[list[str] | None, dict, list, dict]:
    """(server command or None, server env, training command, training env) for these GPUs and ports."""
    if ports and len(ports) != ports_needed(job):
        raise ValueError(f"plan() needs {ports_needed(job)} ports for this job, got {list(ports)}")
    need = gpus_needed(job, trl_options)
    if len(gpus) < need:
        raise ConfigError(
            f"num_processes={job.num_processes} plus vllm_server_gpu={job.vllm_server_gpu} need {need} GPUs, "
            f"but {len(gpus)} are visible ({gpus})"
        )
    server_cmd, server_env = None, {}
    train_gpus = list(gpus)
    if job.vllm_server_gpu is not None:
        if not 0 <= job.vllm_server_gpu < len(gpus):
            raise ConfigError(f"vllm_server_gpu={job.vllm_server_gpu}: only {len(gpus)} GPUs are visible")
        server_gpu = train_gpus.pop(job.vllm_server_gpu)
        server_cmd = ["trl", "vllm-serve", "--model", model_dir, *vllm_server_options(job, trl_options)]
        server_env = {"CUDA_VISIBLE_DEVICES": server_gpu}
        if ports:
            server_cmd += ["--port", str(ports[1])]
    train_cmd = [
        sys.executable,
        "-m",
        "cwgrpo.launch.workers",
        "--config_file",
        str(accelerate_config_path(job.accelerate_config)),
        "--num_processes",
        str(job.num_processes),
        *(["--main_process_port", str(ports[0])] if ports else []),
        "-m",
        "cwgrpo.cli",
        *command,
    ]
    train_env = {"CUDA_VISIBLE_DEVICES": ",".join(train_gpus[: job.num_processes]), "CWGRPO_LAUNCHED": "1"}
    if server_cmd is not None and ports:
        train_env |= {SERVER_PORT_ENV: str(ports[1]), GROUP_PORT_ENV: str(ports[2])}
    return server_cmd, server_env, train_cmd, train_env


def relaunch(
    command: Sequence[str], job: LaunchJob, model_dir: Path, trl_options: Mapping[str, Any] | None = None
) -> int:
    """Claim the job's GPUs and ports, then start the server (if any) and the training processes."""
    if job.vllm_server_gpu is not None and (trl_options or {}).get("vllm_server_base_url"):
        raise ConfigError(
            "vllm_server_base_url is set, but vllm_server_gpu makes cwgrpo start the server itself; unset one"
        )
    config_file = str(accelerate_config_path(job.accelerate_config))  # a missing file fails before any claim
    if multinode.is_multinode(job):  # one srun step per node inside a Slurm allocation
        return multinode.relaunch(command, job, str(model_dir), config_file, trl_options or {})
    with lease(gpus_needed(job, trl_options), ports_needed(job)) as held:
        server_cmd, server_env, train_cmd, train_env = plan(
            command, job, list(held.gpus), str(model_dir), held.ports, trl_options
        )
        return _run(server_cmd, server_env, train_cmd, train_env, held.fds())


# torch's elastic agent ends with the first failure: "rank      : 1 (local_rank: 1)\n  exitcode  : -9 (pid..."
_ROOT_CAUSE = re.compile(rb"rank\s*:\s*(\d+) \(local_rank: (\d+)\)\s*exitcode\s*:\s*(-?\d+)")
_ROOT_CAUSE_HEADER = b"Root Cause (first observed failure):"
TAIL_BYTES = 1 << 16
RELAY_GRACE_S = 10.0  # after the launcher exits, how long its last output may take to arrive


def relay(stream: BinaryIO, out: BinaryIO) -> bytes:
    """Copy ``stream`` to ``out`` as it comes (progress bars too) and return its last ``TAIL_BYTES``."""
    tail = b""
    while chunk := os.read(stream.fileno(), 1 << 16):
        out.write(chunk)
        out.flush()
        tail = (tail + chunk)[-TAIL_BYTES:]
    return tail


def failed_rank(stderr_tail: bytes) -> str | None:
    """Which training process ended the job and how, from torch's elastic summary, in our words."""
    start = stderr_tail.rfind(_ROOT_CAUSE_HEADER)  # the summary's own header, the last one
    found = _ROOT_CAUSE.search(stderr_tail, start) if start >= 0 else None
    if found is None:
        return None
    rank, local, code = (int(x) for x in found.groups())
    how = (
        f"killed by {signal.Signals(-code).name}"
        if code < 0 and -code in signal.valid_signals()
        else f"exit code {code}"
    )
    return f"training process of rank {rank} (local rank {local}) ended ({how}), and the job with it"


def _run(
    server_cmd: list[str] | None,
    server_env: dict,
    train_cmd: list[str],
    train_env: dict,
    lock_fds: tuple = (),
) -> int:
    """Run the server (if any) and the training command, each dying with this process, holding the lease."""
    me = os.getpid()
    server = None
    try:
        if server_cmd is not None:
            logger.info("starting vLLM server: %s", " ".join(server_cmd))
            server = start_tied(server_cmd, {**os.environ, **server_env}, lock_fds)
            port = server_cmd[server_cmd.index("--port") + 1] if "--port" in server_cmd else "8000"
            wait_for_server(f"http://localhost:{port}/health", server)
        logger.info("launching: %s", " ".join(train_cmd))
        env = {**op_cache_env(os.environ), **os.environ, **train_env, LAUNCHER_PID_ENV: str(me)}
        env[LEASE_FDS_ENV] = ",".join(map(str, lock_fds))
        proc = subprocess.Popen(train_cmd, env=env, pass_fds=lock_fds, stderr=subprocess.PIPE)
        tail: list[bytes] = []
        reader = threading.Thread(
            target=lambda: tail.append(relay(proc.stderr, sys.stderr.buffer)), daemon=True
        )
        reader.start()
        code = proc.wait()
        reader.join(timeout=RELAY_GRACE_S)  # a process the job left holding the pipe must not hold us
        if code != 0 and tail and (died := failed_rank(tail[0])):
            logger.error("%s; rerun the same command: it resumes from the newest complete checkpoint", died)
        return code
    finally:
        if server is not None:
            stop(server)
