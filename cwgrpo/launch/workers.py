"""The training processes' agent: ``accelerate launch`` run so that a kill of the job ends every worker.

torch's elastic agent starts each worker in a session of its own, out of reach of a kill of the job's
process group. ``python -m cwgrpo.launch.workers`` dies with the ``cwgrpo train`` process that started it
(``PR_SET_PDEATHSIG``), ties each worker to itself, and hands them the lease's lock descriptors.
"""

from __future__ import annotations

import ctypes
import os
import signal
import subprocess
import sys
from collections.abc import Mapping, MutableMapping, Sequence
from pathlib import Path

LAUNCHER_PID_ENV = "CWGRPO_LAUNCHER_PID"  # the `cwgrpo train` process that holds the lease
AGENT_PID_ENV = "CWGRPO_AGENT_PID"  # the agent, parent of every worker
LEASE_FDS_ENV = "CWGRPO_LEASE_FDS"  # the lease's lock descriptors, comma-separated
PR_SET_PDEATHSIG = 1


def die_with_parent(parent: int) -> None:
    """Be killed (SIGKILL) when the parent process dies; end now if ``parent`` is no longer the parent."""
    if sys.platform.startswith("linux"):
        libc = ctypes.CDLL(None, use_errno=True)
        if libc.prctl(PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0) != 0:
            err = ctypes.get_errno()
            raise OSError(err, f"prctl(PR_SET_PDEATHSIG): {os.strerror(err)}")
    if os.getppid() != parent:  # the parent died before the tie was set
        os.kill(os.getpid(), signal.SIGKILL)


def start_tied(argv: Sequence[str], env: Mapping[str, str], lock_fds: tuple[int, ...]) -> subprocess.Popen:
    """Start ``argv`` with ``env`` and the lease's ``lock_fds``, to be killed when this process dies."""
    me = os.getpid()
    return subprocess.Popen(argv, env=env, pass_fds=lock_fds, preexec_fn=lambda: die_with_parent(me))


def stop(proc: subprocess.Popen) -> None:
    """Terminate ``proc`` if it still runs; kill it if it has not ended 60 s later."""
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()


def tie_worker(env: MutableMapping[str, str]) -> None:
    """In a training process this module's agent started: die with the agent (a child of it is not tied)."""
    agent = env.pop(AGENT_PID_ENV, None)
    if agent is not None:
        die_with_parent(int(agent))


def lease_fds(env: Mapping[str, str]) -> tuple[int, ...]:
    return tuple(int(fd) for fd in env.get(LEASE_FDS_ENV, "").split(",") if fd.strip())


def _hand_fds_to_workers(fds: tuple[int, ...]) -> None:
    """Make torch's elastic agent start each worker with ``fds`` open (it closes every other descriptor)."""
    from torch.distributed.elastic.multiprocessing.subprocess_handler import handlers, subprocess_handler

    base = subprocess_handler.SubprocessHandler
    if not hasattr(base, "_popen") or not hasattr(handlers, "SubprocessHandler"):
        raise RuntimeError(
            "this torch's elastic agent has no SubprocessHandler._popen: cwgrpo.launch.workers cannot hand the "
            "lease to the workers; use the torch version of envs/train.yaml"
        )

    class Handler(base):
        def _popen(self, args: tuple, env: dict[str, str]):
            return subprocess.Popen(
                args=args,
                env=env,
                stdout=self._stdout,
                stderr=self._stderr,
                start_new_session=True,
                pass_fds=fds,
            )

    handlers.SubprocessHandler = Handler


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m cwgrpo.launch.workers ARGS``: ``accelerate launch ARGS``, tied to the job as described above."""
    launcher = os.environ.pop(LAUNCHER_PID_ENV, None)
    if launcher is not None:
        die_with_parent(int(launcher))
    fds = lease_fds(os.environ)
    os.environ.pop(LEASE_FDS_ENV, None)
    os.environ[AGENT_PID_ENV] = str(os.getpid())  # the workers inherit it (tie_worker)
    if fds:
        _hand_fds_to_workers(fds)
    from accelerate.commands.launch import launch_command, launch_command_parser

    args = launch_command_parser().parse_args(list(sys.argv[1:] if argv is None else argv))
    launch_command(args)
    return 0


def op_cache_env(environ: Mapping[str, str], prefix: str = sys.prefix) -> dict[str, str]:
    """``TORCH_EXTENSIONS_DIR`` for the training processes: the environment's op cache, if unset and there."""
    cache = Path(prefix) / "torch_extensions"
    if "TORCH_EXTENSIONS_DIR" in environ or not cache.is_dir():
        return {}
    return {"TORCH_EXTENSIONS_DIR": str(cache)}


def process_description(accelerator) -> str:
    """``I of N`` and how they train together: accelerate's distributed type, the ZeRO stage, the backend."""
    import torch.distributed as dist

    state = accelerator.state
    how = [str(getattr(state.distributed_type, "value", state.distributed_type))]
    plugin = getattr(state, "deepspeed_plugin", None)
    if plugin is not None:
        how.append(f"ZeRO-{plugin.zero_stage}")
    if dist.is_available() and dist.is_initialized():
        how.append(f"backend {dist.get_backend()}")
    return f"{accelerator.process_index} of {accelerator.num_processes} ({', '.join(how)})"


if __name__ == "__main__":
    sys.exit(main())
