"""What this machine offers a training job.

The interpreter `cwgrpo train` will run under (asked at parse time), and a CPU job's DeepSpeed and C++
compiler."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

from cwgrpo.cli import checkout_first, stage_python_var
from cwgrpo.configs import ConfigError
from cwgrpo_workflow.dag.options import train_options
from cwgrpo_workflow.dag.resources import Error


def train_python(env: Mapping[str, str]) -> str:
    """$CWGRPO_TRAIN_PYTHON, else the interpreter of the `cwgrpo` script on PATH, else this one."""
    named = env.get(stage_python_var("train"))
    if named:
        return named
    script = shutil.which("cwgrpo", path=env.get("PATH"))
    return script_python(Path(script)) if script else sys.executable


# pip's launcher for an interpreter path with a space or over 127 characters: a shell script whose second
# line execs the interpreter: '''exec' "/path/to/python" "$0" "$@"
_SH_LAUNCHER = re.compile(r"""^'''exec' ("(?P<quoted>[^"]+)"|(?P<plain>\S+)) "\$0" "\$@"$""")


def script_python(script: Path) -> str:
    """The interpreter a console script runs under: its #! line's, or the one pip's shell launcher execs;
    this interpreter where neither names one."""
    try:
        with open(script, "rb") as fh:
            lines = fh.read(4096).decode(errors="replace").splitlines()
    except OSError:
        return sys.executable
    first = lines[0] if lines else ""
    if first.startswith("#!/bin/sh") and len(lines) > 1 and (found := _SH_LAUNCHER.match(lines[1].strip())):
        return found.group("quoted") or found.group("plain")
    words = first[2:].split() if first.startswith("#!") else []
    if words and Path(words[0]).name == "env":  # #!/usr/bin/env python3
        words = words[1:]
    return words[0] if words and "python" in Path(words[0]).name else sys.executable


def ask_train_python(request: dict[str, Any], env: Mapping[str, str], timeout: float, what: str) -> Any:
    """The answer of ``python -P -m cwgrpo.train.probe`` in the jobs' interpreter to ``request``, importing
    as a job imports; ``ConfigError`` saying why there is none."""
    python = train_python(env)
    env = {**env, "PYTHONPATH": checkout_first(env)}
    try:
        proc = subprocess.run(
            [python, "-P", "-m", "cwgrpo.train.probe"],
            input=json.dumps(request),
            capture_output=True,
            text=True,
            env=env,
            timeout=timeout,
        )
    except (OSError, subprocess.TimeoutExpired) as err:
        reason = str(err)
    else:
        try:
            return json.loads(proc.stdout.strip().splitlines()[-1])
        except (ValueError, IndexError):
            reason = " ".join(proc.stderr.strip().splitlines()[-1:])
    raise ConfigError(f"could not check {what} in the jobs' Python ({python}): {reason}")


def deepspeed_errors(config: Mapping[str, Any], uses_conda: bool, env: Mapping[str, str]) -> list[str]:
    """``cpu_deepspeed_errors`` on this machine; not DeepSpeed under --use-conda (the train env brings it)."""
    from cwgrpo_workflow.dag.preset_files import collect

    def deepspeed() -> tuple[str, bool]:  # found, not imported: DeepSpeed's import takes seconds
        python = train_python(env)
        code = "import importlib.util, sys; sys.exit(importlib.util.find_spec('deepspeed') is None)"
        try:
            proc = subprocess.run([python, "-c", code], env=dict(env), capture_output=True, timeout=60)
        except (OSError, subprocess.TimeoutExpired):
            return python, False
        return python, proc.returncode == 0

    compiler = shutil.which(env.get("CXX") or "g++", path=env.get("PATH"))
    return collect([lambda: cpu_deepspeed_errors(config, None if uses_conda else deepspeed, compiler)])


def cpu_deepspeed_sizes(config: Mapping[str, Any]) -> dict[str, dict]:
    """size -> training options, for the sizes that train on CPU (`use_cpu`) through accelerate."""
    first = next(iter(config["methods"]))
    sizes = {size: train_options(config, size, first) for size in config["sizes"]}
    return {s: o for s, o in sizes.items() if o.get("use_cpu") and o.get("launcher") == "accelerate"}


def cpu_deepspeed_errors(
    config: Mapping[str, Any], deepspeed_python: Callable[[], tuple[str, bool]], compiler: str | None
) -> Iterator[Error]:
    """No DeepSpeed in the interpreter that will train, or no C++ compiler for its CPU op: either stops every
    training job at its start. ``deepspeed_python``: () -> (that interpreter, whether it has DeepSpeed)."""
    sizes = cpu_deepspeed_sizes(config)
    if not sizes:
        return
    size = next(iter(sizes))
    if compiler is None:
        yield (
            f"sizes.{size}.train",
            "trains on CPU with DeepSpeed, which compiles its CPU op with g++ at the first start, and no g++ "
            "is on PATH: install it (apt-get install g++), or name another compiler in $CXX",
        )
    if deepspeed_python is not None:
        python, found = deepspeed_python()
        if not found:
            yield (
                f"sizes.{size}.train",
                f"trains with accelerate + DeepSpeed on CPU, and {python} has no DeepSpeed: build "
                "`make deepspeed` and set CWGRPO_TRAIN_PYTHON=.venv-deepspeed/bin/python (docs/hardware.md)",
            )
