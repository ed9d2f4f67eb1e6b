"""Inputs shared by the end-to-end tests: a tiny model and two synthetic splits, built once via the CLI."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest


def cwgrpo(*args: str, cwd: Path, timeout: float = 600, check: bool = True) -> subprocess.CompletedProcess:
    """Run ``cwgrpo ARGS`` in ``cwd`` as the workflow would (a fresh process)."""
    proc = subprocess.run(
        [sys.executable, "-m", "cwgrpo.cli", *args], cwd=cwd, capture_output=True, text=True, timeout=timeout
    )
    if check and proc.returncode != 0:
        raise AssertionError(f"cwgrpo {' '.join(args)} failed ({proc.returncode}):\n{proc.stderr[-4000:]}")
    return proc


@pytest.fixture(scope="session")
def e2e_inputs(tmp_path_factory) -> Path:
    """A folder with ``model/`` (random tiny model), ``data/syn_train.jsonl`` and ``data/syn_math500.jsonl``."""
    root = tmp_path_factory.mktemp("e2e-inputs")
    cwgrpo("build-tiny", "--size", "small", "--out-dir", "model", "--marker", "model.json", cwd=root)
    for name in ("syn_train", "syn_math500"):
        cwgrpo("prepare-data", "--dataset", name, "--out", f"data/{name}.jsonl", cwd=root)
    return root
