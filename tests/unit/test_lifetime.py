"""Processes the package starts die with the process that started them (``cwgrpo.grading.lifetime``): a killed
``cwgrpo grade`` leaves no grading workers, forkserver or resource tracker behind, and the commands
``cwgrpo.launch.multinode``/``cwgrpo.launch.launcher`` start end with their launcher."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from cwgrpo.grading.lifetime import pool_options, watch_parent

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")


def session_members(sid: int) -> list[str]:
    """``pid cmdline`` of each process whose session is ``sid`` (a process started in its own session
    is its session's id, and everything it starts stays in it)."""
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            stat = Path(f"/proc/{pid}/stat").read_text()
            cmd = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()[:120]
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2 :].split()
        if fields[0] != "Z" and int(fields[3]) == sid:
            found.append(f"{pid} {cmd}")
    return found


def wait_until(check, timeout_s: float) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if check():
            return True
        time.sleep(0.2)
    return check()


def alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat[stat.rindex(")") + 2] != "Z"


def kill_and_expect_no_survivors(proc: subprocess.Popen, how: int = signal.SIGKILL) -> None:
    os.kill(proc.pid, how)
    proc.wait(timeout=30)
    try:
        assert wait_until(lambda: not session_members(proc.pid), 10), session_members(proc.pid)
    finally:
        for line in session_members(proc.pid):  # leave nothing behind whatever the outcome
            os.kill(int(line.split()[0]), signal.SIGKILL)


def test_a_pool_worker_exits_once_its_owner_is_killed(tmp_path):
    """``pool_options()`` ties each worker to the process that made the pool: the owner is killed with no
    chance to stop its pool, and the worker, otherwise waiting for work for ever, exits."""
    assert pool_options() == {"initializer": watch_parent, "initargs": (os.getpid(),)}
    script = textwrap.dedent(
        """
        import concurrent.futures, multiprocessing, os, sys, time
        from cwgrpo.grading.lifetime import pool_options
        pool = concurrent.futures.ProcessPoolExecutor(
            1, mp_context=multiprocessing.get_context("fork"), **pool_options()
        )
        print(pool.submit(os.getpid).result(), flush=True)
        time.sleep(600)
        """
    )
    proc = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    worker = int(proc.stdout.readline())
    proc.kill()
    proc.wait(timeout=30)
    try:
        assert wait_until(lambda: not alive(worker), 10)
    finally:
        if alive(worker):
            os.kill(worker, signal.SIGKILL)


@pytest.mark.parametrize("how", [signal.SIGKILL, signal.SIGTERM])
def test_a_killed_grade_leaves_no_process_behind(tmp_path, how):
    slow = "The answer is $" + "(" * 3000 + "x" + ")" * 3000 + "$"  # seconds of math-verify each
    rows = [{"completion": slow, "gold": f"\\frac{{{i}}}{{3}}", "gold_kind": "latex"} for i in range(1, 140)]
    (tmp_path / "in.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    cmd = [sys.executable, "-m", "cwgrpo.cli", "grade", "--metric", "strict", "--in", "in.jsonl"]
    cmd += ["--out", "out.jsonl", "--processes", "2", "--timeout-s", "60"]
    proc = subprocess.Popen(
        cmd, cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True
    )
    # the pool is grading: the command, the forkserver, two workers and the resource tracker
    started = wait_until(lambda: len(session_members(proc.pid)) >= 5, 120)
    assert started, session_members(proc.pid)
    kill_and_expect_no_survivors(proc, how)


def test_a_killed_launcher_takes_its_commands_with_it(tmp_path):
    script = textwrap.dedent(
        """
        from cwgrpo.launch.multinode import Step, run_steps
        run_steps(None, [Step("a", ["sleep", "600"]), Step("b", ["sleep", "600"])])
        """
    )
    proc = subprocess.Popen([sys.executable, "-c", script], start_new_session=True)
    assert wait_until(lambda: len(session_members(proc.pid)) >= 3, 60), session_members(proc.pid)
    kill_and_expect_no_survivors(proc)
