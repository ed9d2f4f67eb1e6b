"""cwgrpo.grading.grading_server: the grading pools' forkserver imports the grader once, before it forks,
and a server without the memory for that import exits without a traceback."""

from __future__ import annotations

import subprocess
import sys

import cwgrpo.grading.grading_server  # noqa: F401


def test_the_server_holds_the_grader_and_math_verify_before_any_fork():
    assert {"math_verify", "cwgrpo.grading.scoring"} <= set(sys.modules)


def test_a_server_that_runs_out_of_memory_importing_exits_1_without_a_traceback():
    code = """
import builtins
real = builtins.__import__
def short_of_memory(name, *args, **kwargs):
    if name == "math_verify":
        raise MemoryError
    return real(name, *args, **kwargs)
builtins.__import__ = short_of_memory
import cwgrpo.grading.grading_server
print("not reached")
"""
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert (done.returncode, done.stdout, done.stderr) == (1, "", "")
