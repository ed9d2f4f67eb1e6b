"""The ``cwgrpo`` command line's last resort (``cwgrpo.cli.main``): an interrupt ends a command with one
line and status 130, not a traceback."""

from __future__ import annotations

import json
import subprocess
import sys

from tests.conftest import TWO_STEP_TRL


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
