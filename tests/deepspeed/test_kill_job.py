"""A kill of a DeepSpeed training job ends every training process, and its port (and GPU) leases are free
only once the last of them is gone (cwgrpo.launch.workers): torch's elastic agent starts each worker in a
session of its own, out of reach of a signal to the job's process group."""

from __future__ import annotations

import fcntl
import os
import signal
import time
from pathlib import Path

import pytest

from tests.deepspeed.conftest import Job, logged_steps

pytestmark = pytest.mark.slow


def lease_is_free(locks: list[Path]) -> bool:
    """Whether another job could claim every one of these lock files now."""
    for path in locks:
        with open(path, "a") as handle:
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                return False
            fcntl.flock(handle, fcntl.LOCK_UN)
    return True


def kill(job: Job, how: str) -> None:
    """``group``: SIGKILL to the job's process group (a node failure, `kill -9 -PGID`); ``term``: SIGTERM to
    the job's command (Snakemake or a user stopping it); ``slurm``: what a Slurm cancel does, SIGTERM then
    SIGKILL to the job's processes."""
    if how == "group":
        os.killpg(job.proc.pid, signal.SIGKILL)
    elif how == "term":
        job.proc.send_signal(signal.SIGTERM)
    else:
        os.killpg(job.proc.pid, signal.SIGTERM)
        time.sleep(1.0)
        os.killpg(job.proc.pid, signal.SIGKILL)


@pytest.mark.parametrize("how", ["group", "term", "slurm"])
def test_a_killed_job_leaves_no_worker_and_frees_its_lease_last(ds_job, how):
    job = ds_job(2)
    job.start()
    job.wait_until(lambda: 1 in logged_steps(job.run_dir / "live" / "metrics.jsonl"))
    started = job.processes()  # the command, the agent and the two training processes
    assert len(started) >= 4, started
    locks = sorted(job.locks.glob("*.lock"))
    assert len(locks) == 1 and not lease_is_free(locks)  # the rendezvous port (a CPU job claims no GPU)
    kill(job, how)
    seen_free_while_alive, deadline = [], time.monotonic() + 20
    while True:
        alive = [pid for pid in started if pid in job.processes()]
        if not alive:
            break
        if lease_is_free(locks):
            seen_free_while_alive.append(alive)
        assert time.monotonic() < deadline, f"processes {alive} still run 20 s after the kill ({how})"
        time.sleep(0.02)
    job.proc.wait(timeout=10)
    assert seen_free_while_alive == [], "the lease was free while training processes still ran"
    deadline = time.monotonic() + 5
    while not lease_is_free(locks):
        assert time.monotonic() < deadline, "the lease is still held once every process is gone"
        time.sleep(0.05)
    assert not (job.run_dir / "run.json").exists()
