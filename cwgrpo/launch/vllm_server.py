"""The ``trl vllm-serve`` process that a launcher starts for a training job, seen from both sides.

The launcher passes the server's ports through the environment, not the options, so a resumed run keeps
its config hash.
"""

from __future__ import annotations

import subprocess
import time
import urllib.request
from collections.abc import Mapping
from typing import Any

from cwgrpo.configs import ConfigError
from cwgrpo.launch import LaunchJob

# Set by the launcher for its training processes: where the server it started listens (host: only when
# it runs on another node), and the port of the NCCL group that syncs the weights into it.
SERVER_PORT_ENV = "CWGRPO_VLLM_SERVER_PORT"
GROUP_PORT_ENV = "CWGRPO_VLLM_GROUP_PORT"
SERVER_HOST_ENV = "CWGRPO_VLLM_SERVER_HOST"


def vllm_server_options(job: LaunchJob, trl_options: Mapping[str, Any] | None = None) -> list[str]:
    """Engine options of the `trl vllm-serve` process, from those of TRL's colocated engine (one preset key
    means the same in both modes)."""
    trl_options = trl_options or {}
    options = []
    if trl_options.get("vllm_max_model_length") is not None:
        options += ["--max_model_len", str(trl_options["vllm_max_model_length"])]
    if trl_options.get("vllm_gpu_memory_utilization") is not None:
        options += ["--gpu_memory_utilization", str(trl_options["vllm_gpu_memory_utilization"])]
    if job.vllm_enforce_eager:
        options += ["--enforce_eager", "true"]
    return options


def apply_endpoints(config: Any, env: Mapping[str, str]) -> None:
    """In a launched training process: connect the trainer to the server its launcher started."""
    if SERVER_PORT_ENV not in env:
        return
    if config.vllm_server_base_url:
        raise ConfigError(
            f"vllm_server_base_url={config.vllm_server_base_url!r}: cwgrpo starts the vLLM server itself "
            "(vllm_server_gpu) on a port it chooses; unset one of the two"
        )
    config.vllm_server_port = int(env[SERVER_PORT_ENV])
    config.vllm_group_port = int(env[GROUP_PORT_ENV])
    if SERVER_HOST_ENV in env:  # a multi-node job: the server runs on another node
        config.vllm_server_host = env[SERVER_HOST_ENV]


def wait_for_server(url: str, process: subprocess.Popen, timeout_s: float = 900.0) -> None:
    """Return once the server answers at ``url``; raise if it exits first or stays silent too long."""
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
