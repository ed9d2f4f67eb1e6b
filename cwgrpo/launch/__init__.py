"""Processes and GPUs of a training job: accelerate + DeepSpeed, Slurm nodes, leases, the vLLM server."""

from typing import Protocol


class LaunchJob(Protocol):
    """What the launchers read of a training job (``TrainJob``), so this folder does not depend on it."""

    accelerate_config: str
    num_processes: int
    num_nodes: int
    vllm_enforce_eager: bool
    vllm_server_gpu: int | None
    vllm_server_node: bool
