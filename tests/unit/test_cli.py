"""The ``cwgrpo`` command line: a command run under its stage's interpreter (CWGRPO_<COMMAND>_PYTHON), as
each stage's conda env would run it under --use-conda; an interrupt ends a command with one line and status
130, not a traceback."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from cwgrpo import cli
from tests.conftest import TWO_STEP_TRL

REPO = Path(__file__).resolve().parents[2]


def _wrapper(path: Path, record: Path) -> Path:
    """A wrapper of this interpreter, as a pyenv shim, conda wrapper or module script is: it records each
    start (its arguments and PYTHONPATH) and runs the real interpreter."""
    path.write_text(
        f'#!/bin/sh\nprintf "%s\\n" "start" "$@" "PYTHONPATH=$PYTHONPATH" >> {record}\nexec {sys.executable} "$@"\n'
    )
    path.chmod(0o755)
    return path


def test_stage_python_is_the_named_interpreter_unless_it_is_this_one(tmp_path):
    assert cli.stage_python("train", {}) is None
    assert cli.stage_python("train", {"CWGRPO_TRAIN_PYTHON": sys.executable}) is None
    assert cli.stage_python("fetch-model", {"CWGRPO_FETCH_MODEL_PYTHON": sys.executable}) is None
    other = _wrapper(tmp_path / "python", tmp_path / "starts.txt")
    assert cli.stage_python("train", {"CWGRPO_TRAIN_PYTHON": str(other)}) == str(other)
    assert cli.stage_python("evaluate", {"CWGRPO_TRAIN_PYTHON": str(other)}) is None  # another stage's
    taken = {"CWGRPO_TRAIN_PYTHON": str(other), cli.STAGE_MARK: "CWGRPO_TRAIN_PYTHON"}
    assert cli.stage_python("train", taken) is None  # this process is that interpreter's already


def _run(env: dict[str, str], *argv: str) -> subprocess.CompletedProcess:
    env = {**os.environ, **env, "PYTHONPATH": str(REPO)}
    return subprocess.run(
        [sys.executable, "-m", "cwgrpo.cli", *argv], env=env, capture_output=True, text=True, timeout=300
    )


def test_a_wrapper_named_as_the_stage_interpreter_replaces_the_command_once(tmp_path):
    """A wrapper's path never equals the interpreter's sys.executable: the command runs under it once (its
    version asked first), with this checkout first on the path, and does not replace itself again."""
    record = tmp_path / "starts.txt"
    wrapper = _wrapper(tmp_path / "python", record)
    done = _run({"CWGRPO_EVALUATE_PYTHON": str(wrapper)}, "evaluate", "--help")
    assert done.returncode == 0, done.stderr
    assert "usage: cwgrpo evaluate" in done.stdout
    starts = record.read_text().split("start\n")[1:]
    assert len(starts) == 2, starts  # the version question, then the command: no loop
    lines = starts[1].splitlines()
    assert lines[:-1] == ["-m", "cwgrpo.cli", "evaluate", "--help"]
    assert lines[-1].startswith(f"PYTHONPATH={REPO}")


def test_a_stage_interpreter_that_is_not_a_python_is_refused_in_one_line():
    done = _run({"CWGRPO_GRADE_PYTHON": "/bin/true"}, "grade", "--help")
    assert done.returncode == 2
    assert done.stdout == ""
    assert done.stderr.strip().splitlines() == [
        "cwgrpo grade: error: CWGRPO_GRADE_PYTHON=/bin/true: not a Python 3.11 or newer (asked its version, it "
        "answered 'nothing'); point it at a venv's bin/python, or unset it"
    ]


def test_a_missing_stage_interpreter_is_one_line_naming_the_variable():
    done = _run({"CWGRPO_TRAIN_PYTHON": "/no/such/venv/bin/python"}, "train", "--help")
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [
        "cwgrpo train: error: CWGRPO_TRAIN_PYTHON=/no/such/venv/bin/python: no such interpreter; "
        "point it at a venv's bin/python, or unset it"
    ]


def test_a_reward_raising_keyboard_interrupt_ends_train_in_one_line(tmp_path, tiny_model_dir):
    (tmp_path / "interrupting.py").write_text(
        "def stops(completions, **kwargs):\n    raise KeyboardInterrupt\n"
    )
    records = [{"id": f"p-{i}", "problem": "1+1", "answer": "2", "source": "test"} for i in range(2)]
    (tmp_path / "train.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    options = [f"--set={key}={json.dumps(value)}" for key, value in TWO_STEP_TRL.items()]
    cmd = [sys.executable, "-m", "cwgrpo.cli", "train", "--model-dir", str(tiny_model_dir)]
    cmd += ["--train-data", "train.jsonl", "--run-dir", "run", "--set", "reward_funcs=[interrupting:stops]"]
    done = subprocess.run([*cmd, *options], cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert done.returncode == 130, done.stderr[-3000:]
    assert "Traceback" not in done.stderr
    assert done.stderr.strip().splitlines()[-1] == "cwgrpo train: interrupted"
    assert not (tmp_path / "run" / "run.json").exists()
