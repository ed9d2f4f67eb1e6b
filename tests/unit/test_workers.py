"""cwgrpo.launch.workers' tie of a process to its parent (the agent to `cwgrpo train`, a worker to the agent),
on real processes: the tied one dies with its parent, and one whose parent is already gone ends at once.
The whole launch, killed mid-training, is tests/deepspeed/test_kill_job.py."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest

from cwgrpo.launch.workers import AGENT_PID_ENV, lease_fds

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_PDEATHSIG is Linux's")

# A parent that starts a tied child (in a session of its own, as torch's elastic agent starts a worker),
# prints the child's pid, then sleeps.
PARENT = """
import os, subprocess, sys, time
child = subprocess.Popen([sys.executable, "-c", '''
import os, time
from cwgrpo.launch.workers import tie_worker
tie_worker(os.environ)
time.sleep(120)
'''], env={**os.environ, "CWGRPO_AGENT_PID": str(os.getpid())}, start_new_session=True)
print(child.pid, flush=True)
time.sleep(120)
"""


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def test_a_tied_process_dies_with_its_parent_even_in_a_session_of_its_own():
    parent = subprocess.Popen([sys.executable, "-c", PARENT], stdout=subprocess.PIPE, text=True)
    child = int(parent.stdout.readline())
    time.sleep(1.0)  # the child has set its tie
    assert _alive(child)
    parent.send_signal(signal.SIGKILL)
    parent.wait()
    deadline = time.monotonic() + 10
    while _alive(child):
        assert time.monotonic() < deadline, "the tied process outlived its parent"
        time.sleep(0.05)


def test_a_process_whose_parent_is_already_gone_ends_at_once():
    env = {**os.environ, AGENT_PID_ENV: "1" if os.getppid() != 1 else "2"}  # not this process's parent
    code = "import os; from cwgrpo.launch.workers import tie_worker; tie_worker(os.environ); print('ran on')"
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == -signal.SIGKILL and "ran on" not in done.stdout


def test_the_tie_is_not_inherited_by_what_a_worker_starts():
    env = {**os.environ, AGENT_PID_ENV: str(os.getpid())}  # this process is the child's parent: it runs on
    code = "import os; from cwgrpo.launch.workers import tie_worker; tie_worker(os.environ); print(dict(os.environ))"
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert AGENT_PID_ENV not in done.stdout
    assert lease_fds({"CWGRPO_LEASE_FDS": "5,7"}) == (5, 7) and lease_fds({}) == ()
