"""cwgrpo_workflow.dag.machine: what this machine offers a CPU training job, checked before the first job."""

from __future__ import annotations

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
