"""Multi-GPU launch for ``cwgrpo train`` (paper preset): accelerate + DeepSpeed ZeRO-2, and a vLLM server.

The authors' recipe trains on 3 GPUs and generates with vLLM on a fourth. ``relaunch`` reproduces that
from a single ``cwgrpo train`` call, so the workflow rule stays one command:

1. if ``vllm_server_gpu`` is set, start ``trl vllm-serve`` pinned to that GPU and wait until it answers;
2. run ``accelerate launch --config_file <bundled zero2.yaml> --num_processes N -m cwgrpo.cli train ...``
   on the other GPUs, with ``CWGRPO_LAUNCHED=1`` so the children train instead of relaunching;
3. stop the server, whatever happened.

Nothing here runs on CPU CI except the command construction, which ``tests/unit/test_launch.py`` checks.
"""

from __future__ import annotations

import logging
import os
import subprocess
import sys
import time
import urllib.request
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING

from cwgrpo.configs import ConfigError

if TYPE_CHECKING:
    from cwgrpo.train import TrainJob

logger = logging.getLogger(__name__)


def accelerate_config_path(name: str) -> Path:
    path = Path(str(resources.files("cwgrpo") / "resources" / "accelerate" / f"{name}.yaml"))
    if not path.is_file():
        folder = path.parent
        known = sorted(p.stem for p in folder.glob("*.yaml")) if folder.is_dir() else []
        raise ConfigError(f"accelerate_config={name!r}: no bundled config; known: {known}")
    return path


def vllm_server_options(job: TrainJob) -> list[str]:
    """The engine options of `trl vllm-serve` that the released run fixed (its in-process vLLM engine).

    ``--max_model_len`` bounds prompt + completion tokens per request (released: 4096). vLLM's server
    rejects a request whose prompt plus ``max_tokens`` exceeds it, so the paper preset sends no
    ``max_tokens`` (``generation_kwargs: {max_tokens: null}``) and vLLM gives each request the rest of the
    context, as the released engine did.
    """
    options = []
    if job.vllm_max_model_len is not None:
        options += ["--max_model_len", str(job.vllm_max_model_len)]
    if job.vllm_gpu_memory_utilization is not None:
        options += ["--gpu_memory_utilization", str(job.vllm_gpu_memory_utilization)]
    if job.vllm_enforce_eager:
        options += ["--enforce_eager", "true"]
    return options


def visible_gpus(env: dict[str, str]) -> list[str]:
    """GPU ids this job may use: CUDA_VISIBLE_DEVICES if the scheduler set it, else all that torch sees."""
    if env.get("CUDA_VISIBLE_DEVICES"):
        return [g for g in env["CUDA_VISIBLE_DEVICES"].split(",") if g]
    import torch

    return [str(i) for i in range(torch.cuda.device_count())]


def plan(
    argv: list[str], job: TrainJob, gpus: list[str], model_dir: str
) -> tuple[list[str] | None, dict, list, dict]:
    """(server command or None, server env, training command, training env) for the given GPUs."""
    need = job.num_processes + (1 if job.vllm_server_gpu is not None else 0)
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
        server_cmd = ["trl", "vllm-serve", "--model", model_dir, *vllm_server_options(job)]
        server_env = {"CUDA_VISIBLE_DEVICES": server_gpu}
    train_cmd = [
        sys.executable,
        "-m",
        "accelerate.commands.launch",
        "--config_file",
        str(accelerate_config_path(job.accelerate_config)),
        "--num_processes",
        str(job.num_processes),
        "-m",
        "cwgrpo.cli",
        *argv,
    ]
    train_env = {"CUDA_VISIBLE_DEVICES": ",".join(train_gpus[: job.num_processes]), "CWGRPO_LAUNCHED": "1"}
    return server_cmd, server_env, train_cmd, train_env


def _wait_for_server(url: str, process: subprocess.Popen, timeout_s: float = 900.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"the vLLM server exited with status {process.returncode} before answering")
        try:
            with urllib.request.urlopen(url, timeout=5):
                return
        except OSError:
            time.sleep(5)
    raise RuntimeError(f"the vLLM server did not answer at {url} within {timeout_s:.0f} s")


def relaunch(argv: list[str], job: TrainJob) -> int:
    model_dir = argv[argv.index("--model-dir") + 1]
    server_cmd, server_env, train_cmd, train_env = plan(argv, job, visible_gpus(dict(os.environ)), model_dir)
    server = None
    try:
        if server_cmd is not None:
            logger.info("starting vLLM server: %s", " ".join(server_cmd))
            server = subprocess.Popen(server_cmd, env={**os.environ, **server_env})
            _wait_for_server("http://localhost:8000/health/", server)
        logger.info("launching: %s", " ".join(train_cmd))
        return subprocess.run(train_cmd, env={**os.environ, **train_env}, check=False).returncode
    finally:
        if server is not None:
            server.terminate()
            try:
                server.wait(timeout=60)
            except subprocess.TimeoutExpired:
                server.kill()
