"""What this machine offers a CPU training job, probed before the first job of a run: a C++ compiler, and
DeepSpeed in the interpreter that `cwgrpo train` will run under."""

from __future__ import annotations

import shutil
import subprocess
import sys
from collections.abc import Mapping
from typing import Any

from cwgrpo.cli import stage_python_var


def train_python(env: Mapping[str, str]) -> str:
    """The interpreter a train job's `cwgrpo` runs under: $CWGRPO_TRAIN_PYTHON, else the one named by the
    `cwgrpo` script on PATH (its #! line), else this one."""
    named = env.get(stage_python_var("train"))
    if named:
        return named
    script = shutil.which("cwgrpo", path=env.get("PATH"))
    if script:
        try:
            with open(script, "rb") as fh:
                first = fh.readline().decode(errors="replace")
        except OSError:
            first = ""
        if first.startswith("#!") and first[2:].split():
            return first[2:].split()[0]
    return sys.executable


def has_module(python: str, module: str, env: Mapping[str, str]) -> bool:
    """Whether ``python`` can import ``module`` (found, not imported: DeepSpeed's import takes seconds)."""
    code = f"import importlib.util, sys; sys.exit(importlib.util.find_spec({module!r}) is None)"
    try:
        return (
            subprocess.run([python, "-c", code], env=dict(env), capture_output=True, timeout=60).returncode
            == 0
        )
    except (OSError, subprocess.TimeoutExpired):
        return False


def deepspeed_errors(config: Mapping[str, Any], uses_conda: bool, env: Mapping[str, str]) -> list[str]:
    """``preset_rules.cpu_deepspeed_errors`` on this machine, as ``key: message`` lines; the DeepSpeed probe runs
    only if a size trains on CPU, and not under --use-conda (the train env, built by conda, brings it)."""
    from cwgrpo.dag.preset_files import collect
    from cwgrpo.dag.preset_rules import cpu_deepspeed_errors

    def deepspeed() -> tuple[str, bool]:
        python = train_python(env)
        return python, has_module(python, "deepspeed", env)

    compiler = shutil.which(env.get("CXX") or "g++", path=env.get("PATH"))
    return collect([lambda: cpu_deepspeed_errors(config, None if uses_conda else deepspeed, compiler)])
