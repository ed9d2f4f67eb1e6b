"""The Makefile's checks of its variables, run with `make -n` (nothing is built)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("variable", ["VLLM_VENV", "LIGHTEVAL_VENV", "VENV"])
def test_make_refuses_an_environment_folder_with_a_space_before_any_recipe(tmp_path, variable):
    if shutil.which("make") is None:
        pytest.skip("no make here")
    folder = tmp_path / "my envs" / "vllm"
    done = subprocess.run(
        ["make", "-C", str(REPO), "-n", "vllm", f"{variable}={folder}"], capture_output=True, text=True
    )
    assert done.returncode != 0
    assert f"{variable}='{folder}': give one folder path without spaces" in done.stderr
    assert "venv" not in done.stdout  # no recipe line printed: `python -m venv` would make two folders
