"""cwgrpo_workflow.dag.machine: what this machine offers a CPU training job, checked before the first job."""

from __future__ import annotations

from pathlib import Path

import pytest
from dag_presets import preset

from cwgrpo_workflow.dag import machine


def test_cpu_deepspeed_needs_a_compiler_and_deepspeed_in_the_train_interpreter():
    config = preset("paper.yaml", "rehearsal.yaml")
    has = {"yes": lambda: ("/venv/bin/python", True), "no": lambda: ("/venv/bin/python", False)}
    assert list(machine.cpu_deepspeed_errors(config, has["yes"], "/usr/bin/g++")) == []
    assert list(machine.cpu_deepspeed_errors(config, None, "/usr/bin/g++")) == []  # conda: its env brings it
    ((_, no_compiler),) = machine.cpu_deepspeed_errors(config, has["yes"], None)
    assert "no g++ is on PATH: install it" in no_compiler
    ((_, no_deepspeed),) = machine.cpu_deepspeed_errors(config, has["no"], "/usr/bin/g++")
    assert "/venv/bin/python has no DeepSpeed: build `make deepspeed`" in no_deepspeed
    assert list(machine.cpu_deepspeed_errors(preset("paper.yaml"), has["no"], None)) == []  # GPU training


@pytest.mark.parametrize(
    "interpreter", ["/opt/my envs/bin/python3", "/" + "x" * 130 + "/bin/python3", "/opt/env/bin/python3"]
)
def test_the_jobs_interpreter_is_read_from_pips_launcher_in_every_form(tmp_path, interpreter):
    """Weak spot: for an interpreter path with a space or over 127 characters pip writes a /bin/sh launcher,
    and its #! line (/bin/sh) was taken as the jobs' Python. The launchers here are written by pip's own
    script maker (distlib)."""
    from pip._vendor.distlib.scripts import ScriptMaker, enquote_executable

    from cwgrpo_workflow.dag.machine import script_python, train_python

    maker = ScriptMaker(None, str(tmp_path), add_launchers=False)
    maker.executable, maker.variants = enquote_executable(interpreter), {""}  # as pip quotes its own
    (script,) = maker.make("cwgrpo = cwgrpo.cli:main")
    assert script_python(Path(script)) == interpreter
    assert train_python({"PATH": str(tmp_path)}) == interpreter
    Path(script).write_text("#!/usr/bin/env python3\nimport sys\n")
    assert script_python(Path(script)) == "python3"
