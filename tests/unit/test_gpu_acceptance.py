"""benchmarks/gpu_acceptance.py's parts that need no GPU; its server path runs on vLLM's CPU build in
tests/vllm/test_server.py, its colocated path only on a GPU."""

from __future__ import annotations

import subprocess
import sys

import pytest
import torch

from tests.vllm.conftest import REPO

SCRIPT = REPO / "benchmarks" / "gpu_acceptance.py"


def _run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True, text=True, timeout=300)


def test_the_colocated_path_without_a_gpu_is_refused_in_one_line():
    if torch.cuda.is_available():
        pytest.skip("a GPU is here: the colocated path runs")
    done = _run("--paths", "colocated")
    assert done.returncode == 2
    assert (
        done.stderr.strip()
        .splitlines()[-1]
        .endswith("the colocated path needs a CUDA GPU (vLLM's CPU build cannot take TRL's weight sync)")
    )
    assert "Traceback" not in done.stderr and done.stdout == ""  # the usage and that line, nothing run


def test_bad_token_counts_are_refused_before_anything_runs():
    done = _run("--prompt-tokens", "1")
    assert done.returncode == 2
    error = "gpu_acceptance.py: error: --prompt-tokens must be >= 2 and --completion-tokens >= 1"
    assert done.stderr.strip().splitlines()[-1] == error
    assert "Traceback" not in done.stderr and done.stdout == ""  # nothing ran


def test_lengths_are_checked_against_the_rest_of_the_context():
    sys.path.insert(0, str(SCRIPT.parent))
    from gpu_acceptance import check_lengths

    assert check_lengths([512, 500], [4096, 4096], context=4608, cap=4096)["all_reach_budget"] is True
    assert check_lengths([512, 500], [4096, 16], context=4608, cap=4096)["all_reach_budget"] is False
    assert check_lengths([20], [108], context=128, cap=4096) == {
        "completion_lengths": [108], "budgets": [108], "all_reach_budget": True,
    }  # fmt: skip


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["--arch", "nope"], "--arch 'nope': one of"),
        (["--arch", "nope", "--server-memory", "0"], "--server-memory 0.0: a share of the GPU's memory"),
        (["--arch", "nope", "--out", "."], "--out .: a folder"),
    ],
)
def test_gpu_acceptance_bad_arguments_are_one_line_before_anything_runs(args, expected):
    done = _run("--paths", "server", *args)
    assert done.returncode == 2, done.stderr[-2000:]
    assert expected in done.stderr.strip().splitlines()[-1]
    assert "Traceback" not in done.stderr
