"""Multi-node training inside one Slurm allocation: one ``srun`` step per node, built from a ``TrainJob``.

``cwgrpo train`` with ``num_nodes > 1`` (or ``vllm_server_node``) runs once in the allocation's batch step
and starts the vLLM server's step and one ``srun --nodes=1`` step per training node, each running
``accelerate launch --num_machines N --machine_rank I`` through ``cwgrpo.launch.workers``. Steps use
``--overlap`` (each is given all of its node's GPUs), so ``python -m cwgrpo.launch.multinode --gpus I,J
-- CMD`` keeps the GPUs at those positions, refusing a node that has fewer.
"""

from __future__ import annotations

import logging
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from cwgrpo.configs import ConfigError
from cwgrpo.launch import LaunchJob
from cwgrpo.launch.vllm_server import (
    GROUP_PORT_ENV,
    SERVER_HOST_ENV,
    SERVER_PORT_ENV,
    vllm_server_options,
    wait_for_server,
)
from cwgrpo.launch.workers import op_cache_env, start_tied, stop

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class Step:
    """One ``srun`` job step: its command line and the variables it adds to the launcher's environment."""

    name: str
    argv: list[str]
    env: dict[str, str] = field(default_factory=dict)


def is_multinode(job: LaunchJob) -> bool:
    return job.num_nodes > 1 or job.vllm_server_node


def nodes_needed(job: LaunchJob) -> int:
    """Nodes of the allocation: the training nodes, plus one for a server on a node of its own."""
    return job.num_nodes + (1 if job.vllm_server_node else 0)


def gpu_positions(job: LaunchJob) -> dict[str, list[int]]:
    """GPU positions (in what the node shows) of ``train0``, ``train`` (other nodes) and ``server``."""
    per_node = job.num_processes // job.num_nodes
    server = job.vllm_server_gpu
    on_first = server is not None and not job.vllm_server_node
    first = [i for i in range(per_node + (1 if on_first else 0)) if not (on_first and i == server)]
    return {
        "train0": first[:per_node],
        "train": list(range(per_node)),
        "server": [] if server is None else [server],
    }


def gpus_per_node(job: LaunchJob) -> int:
    """GPUs every node of the allocation must have (Slurm gives each node the same count)."""
    positions = gpu_positions(job)
    return max(max(p, default=-1) + 1 for p in positions.values())


def ports_needed(job: LaunchJob) -> int:
    """The rendezvous of accelerate's processes, plus the vLLM server and its NCCL weight-sync group."""
    return 3 if job.vllm_server_gpu is not None else 1


def srun_prefix(node: str) -> list[str]:
    """One task on one named node, sharing the allocation's CPUs and GPUs with the other steps there."""
    return ["srun", "--nodes=1", "--ntasks=1", f"--nodelist={node}", "--overlap", "--kill-on-bad-exit=1"]


def _wrapped(node: str, positions: Sequence[int], cmd: Sequence[str]) -> list[str]:
    gpus = ",".join(map(str, positions))
    return [*srun_prefix(node), sys.executable, "-m", "cwgrpo.launch.multinode", "--gpus", gpus, "--", *cmd]


def plan(
    command: Sequence[str],
    job: LaunchJob,
    nodes: Sequence[str],
    ports: Sequence[int],
    model_dir: str,
    accelerate_config: str,
    trl_options: Mapping[str, Any] | None = None,
) -> tuple[Step | None, list[Step]]:
    """(server step or None, one training step per training node) on the allocation's ``nodes``."""
    need = nodes_needed(job)
    if len(nodes) < need:
        raise ConfigError(
            f"num_nodes={job.num_nodes}{' plus vllm_server_node' if job.vllm_server_node else ''} need {need} "
            f"nodes, but the Slurm allocation has {len(nodes)} ({','.join(nodes)}): submit it with --nodes={need}"
        )
    if len(ports) != ports_needed(job):
        raise ValueError(f"plan() needs {ports_needed(job)} ports for this job, got {list(ports)}")
    train_nodes = list(nodes[: job.num_nodes])
    positions = gpu_positions(job)
    env = {"CWGRPO_LAUNCHED": "1"}
    server = None
    if job.vllm_server_gpu is not None:
        host = nodes[job.num_nodes] if job.vllm_server_node else train_nodes[0]
        serve = ["trl", "vllm-serve", "--model", model_dir, *vllm_server_options(job, trl_options)]
        serve += ["--host", "0.0.0.0", "--port", str(ports[1])]
        server = Step("vllm-server", _wrapped(host, positions["server"], serve))
        env |= {SERVER_HOST_ENV: host, SERVER_PORT_ENV: str(ports[1]), GROUP_PORT_ENV: str(ports[2])}
    steps = []
    for rank, node in enumerate(train_nodes):
        launch = [
            sys.executable, "-m", "cwgrpo.launch.workers",
            "--config_file", accelerate_config,
            "--num_processes", str(job.num_processes),
            "--num_machines", str(job.num_nodes),
            "--machine_rank", str(rank),
            "--main_process_ip", train_nodes[0],
            "--main_process_port", str(ports[0]),
            "--deepspeed_multinode_launcher", "standard",
            "-m", "cwgrpo.cli", *command,
        ]  # fmt: skip
        where = positions["train0"] if rank == 0 else positions["train"]
        steps.append(Step(f"train-node{rank}", _wrapped(node, where, launch), dict(env)))
    return server, steps


def allocation_nodes(env: Mapping[str, str]) -> list[str]:
    """Host names of this Slurm allocation's nodes, in Slurm's order, from ``SLURM_JOB_NODELIST`` or (which
    the Snakemake job-step plugin removes) ``scontrol show job``; outside an allocation: ``ConfigError``."""
    job_id = env.get("SLURM_JOB_ID")
    if not job_id:
        raise ConfigError(
            "a multi-node training job (num_nodes > 1 or vllm_server_node) runs inside a Slurm allocation, "
            "and SLURM_JOB_ID is not set: use `--profile profiles/slurm` (docs/hardware.md), or one node"
        )
    for tool in ("srun", "scontrol"):
        if shutil.which(tool, path=env.get("PATH")) is None:
            raise ConfigError(f"a multi-node training job needs Slurm's `{tool}` on PATH; it is not there")
    nodelist = env.get("SLURM_JOB_NODELIST")
    if not nodelist:
        shown = _scontrol(env, "show", "job", "-o", job_id)
        match = re.search(r"(?:^|\s)NodeList=(\S+)", shown)
        if not match or match[1] in ("(null)", ""):
            raise ConfigError(f"Slurm job {job_id}: no node list in `scontrol show job` ({shown.strip()!r})")
        nodelist = match[1]
    return _scontrol(env, "show", "hostnames", nodelist).split()


def _scontrol(env: Mapping[str, str], *args: str) -> str:
    out = subprocess.run(["scontrol", *args], capture_output=True, text=True, env=dict(env), check=False)
    if out.returncode != 0:
        raise ConfigError(f"`scontrol {' '.join(args)}` failed: {out.stderr.strip() or out.stdout.strip()}")
    return out.stdout


def pick_gpus(visible: str | None, positions: Sequence[int], node: str) -> str:
    """The ``CUDA_VISIBLE_DEVICES`` of a step that uses ``positions`` of the node's devices ``visible``."""
    shown = [g.strip() for g in (visible or "").split(",") if g.strip()]
    if positions and max(positions) >= len(shown):
        raise ConfigError(
            f"node {node}: this step needs GPU positions {list(positions)} but the node shows {len(shown)} GPUs "
            f"(CUDA_VISIBLE_DEVICES={visible!r}): the job asks for more GPUs per node than the allocation has"
        )
    return ",".join(shown[i] for i in positions)


def relaunch(
    command: Sequence[str],
    job: LaunchJob,
    model_dir: str,
    accelerate_config: str,
    trl_options: Mapping[str, Any],
) -> int:
    """Claim ports on this node, then start the server step (if any) and one training step per node."""
    from cwgrpo.launch.devices import lease

    nodes = allocation_nodes(os.environ)  # outside Slurm, fails before anything is claimed
    with lease(0, ports_needed(job)) as held:
        server, steps = plan(command, job, nodes, held.ports, model_dir, accelerate_config, trl_options)
        return run_steps(server, steps, held.fds())


def run_steps(server: Step | None, steps: list[Step], lock_fds: tuple[int, ...] = ()) -> int:
    """Start the server, wait until it answers, then every training step; the first nonzero exit status."""
    base_env = {**op_cache_env(os.environ), **os.environ}  # each node's processes find the compiled op
    started: list[subprocess.Popen] = []  # each dies with this launcher, even when it is killed (start_tied)
    try:
        if server is not None:
            logger.info("starting vLLM server: %s", " ".join(server.argv))
            proc = start_tied(server.argv, {**base_env, **server.env}, lock_fds)
            started.append(proc)
            env = steps[0].env
            host, port = env[SERVER_HOST_ENV], env[SERVER_PORT_ENV]
            wait_for_server(f"http://{host}:{port}/health", proc)
        training = []
        for step in steps:
            logger.info("launching %s: %s", step.name, " ".join(step.argv))
            proc = start_tied(step.argv, {**base_env, **step.env}, lock_fds)
            started.append(proc)
            training.append(proc)
        status = 0
        for proc in training:
            code = proc.wait()
            if code and not status:
                status = code
                for other in training:  # one node failed: the others would wait for it forever
                    if other.poll() is None:
                        other.terminate()
        return status
    finally:
        for proc in started:
            stop(proc)


def main(args: Sequence[str] | None = None) -> int:
    """``python -m cwgrpo.launch.multinode --gpus I,J -- CMD``: run CMD on the GPUs at those positions."""
    args = list(sys.argv[1:] if args is None else args)
    if len(args) < 4 or args[0] != "--gpus" or args[2] != "--":
        print("usage: python -m cwgrpo.launch.multinode --gpus I,J,... -- COMMAND ...", file=sys.stderr)
        return 2
    positions = [int(p) for p in args[1].split(",") if p.strip()]
    node = os.environ.get("SLURMD_NODENAME") or os.uname().nodename
    try:
        os.environ["CUDA_VISIBLE_DEVICES"] = pick_gpus(
            os.environ.get("CUDA_VISIBLE_DEVICES"), positions, node
        )
    except ConfigError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    os.execvp(args[3], args[3:])
    return 127  # not reached


if __name__ == "__main__":
    sys.exit(main())
