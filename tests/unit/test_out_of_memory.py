"""Out of memory under an address-space limit (``ulimit -v``): the ``cwgrpo`` command says so in one line
and fails, instead of a raw traceback (an import, a grading worker) or a SIGABRT (torch's C++ start)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys

import pytest

pytestmark = pytest.mark.skipif(shutil.which("bash") is None or sys.platform != "linux", reason="ulimit -v")


def run_limited(kib: int, *args: str, cwd) -> subprocess.CompletedProcess:
    command = " ".join([f"ulimit -v {kib};", sys.executable, "-m", "cwgrpo.cli", *args])
    return subprocess.run(["bash", "-c", command], cwd=cwd, capture_output=True, text=True, timeout=300)


def assert_one_line_out_of_memory(done: subprocess.CompletedProcess, command: str) -> None:
    lines = done.stderr.strip().splitlines()
    assert done.returncode not in (0, -6, 134), (done.returncode, done.stderr[-2000:])
    assert "Traceback" not in done.stderr, done.stderr[-2000:]
    assert len(lines) == 1 and lines[0].startswith(f"cwgrpo {command}: error: out of memory"), lines


@pytest.mark.parametrize("kib", [300_000, 400_000, 500_000, 700_000])
def test_a_torch_command_under_a_small_limit_says_out_of_memory_instead_of_aborting(tmp_path, kib):
    """torch's start under these limits fails with a raw ImportError or aborts (SIGABRT), by limit."""
    done = run_limited(
        kib, "build-tiny", "--size", "small", "--out-dir", "t", "--marker", "t.json", cwd=tmp_path
    )
    assert_one_line_out_of_memory(done, "build-tiny")
    assert not (tmp_path / "t").exists()


def test_grading_under_shrinking_limits_either_works_or_says_out_of_memory(tmp_path):
    """From too little to import math-verify, through grading workers that run out, to enough: every
    run either grades or fails with one line; at least one runs out."""
    rows = [{"completion": f"so $\\boxed{{\\frac{{{i}}}{{7}}}}$", "gold": "\\frac{1}{7}"} for i in range(70)]
    (tmp_path / "in.jsonl").write_text("".join(json.dumps({**r, "gold_kind": "latex"}) + "\n" for r in rows))
    ran_out = 0
    for kib in (60_000, 80_000, 100_000, 130_000, 400_000):
        done = run_limited(
            kib, "grade", "--metric", "strict", "--in", "in.jsonl", "--out", "o.jsonl", cwd=tmp_path
        )
        if done.returncode == 0:
            assert "strict: 1/70 correct" in done.stdout, done.stdout
            continue
        assert_one_line_out_of_memory(done, "grade")
        ran_out += 1
    assert ran_out >= 1
