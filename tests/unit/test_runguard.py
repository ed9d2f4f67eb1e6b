"""The run folder's lock (cwgrpo.train.runguard.RunLock): one trainer at a time, and no file written through a link."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from cwgrpo.configs import ConfigError
from cwgrpo.train.runguard import LOCK_NAME, RunLock


def test_a_run_lock_planted_as_a_link_is_refused_and_its_target_kept(tmp_path):
    run, victim = tmp_path / "run", tmp_path / "thesis.tex"
    run.mkdir()
    victim.write_text("precious\n")
    (run / LOCK_NAME).symlink_to(victim)
    with pytest.raises(ConfigError, match=rf"lock file .*{LOCK_NAME} is a symbolic link"):
        RunLock(run).acquire()
    assert victim.read_text() == "precious\n"


@pytest.mark.parametrize("make", [os.mkdir, os.mkfifo], ids=["folder", "fifo"])
def test_a_run_lock_that_is_not_a_plain_file_is_refused(tmp_path, make):
    make(tmp_path / LOCK_NAME)
    with pytest.raises(
        ConfigError, match=rf"lock file .*{LOCK_NAME} (is not|cannot be opened).* a plain file"
    ):
        RunLock(tmp_path).acquire()


def test_a_run_folder_that_is_a_file_is_named(tmp_path):
    (tmp_path / "run").write_text("x\n")
    with pytest.raises(ConfigError, match=r"cannot be created: .*run is not a folder"):
        RunLock(tmp_path / "run").acquire()
    assert (tmp_path / "run").read_text() == "x\n"


def test_a_lock_left_by_a_killed_trainer_is_taken_and_a_live_one_is_named(tmp_path):
    """The kernel drops a dead holder's lock: its file stays, and the next trainer takes it. A live holder
    is named by what it wrote."""
    code = "import sys; from cwgrpo.train.runguard import RunLock; RunLock(sys.argv[1]).acquire(); print('held', flush=True); sys.stdin.read()"
    holder = subprocess.Popen([sys.executable, "-c", code, str(tmp_path)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)  # fmt: skip
    try:
        assert holder.stdout.readline().strip() == "held"
        with pytest.raises(ConfigError, match=rf"another `cwgrpo train` \(pid {holder.pid} on host"):
            RunLock(tmp_path).acquire()
    finally:
        holder.kill()
        holder.wait(timeout=30)
    lock = RunLock(tmp_path)
    lock.acquire()
    lock.release()


def test_a_start_that_loses_the_lock_leaves_the_winners_new_folder(tmp_path, tiny_model_dir, monkeypatch):
    """Two starts on one new run folder: this one makes it, the other takes its lock first. This one fails
    naming the holder and leaves the folder (the holder trains into it); only a lock holder removes a
    folder it made."""
    import json

    from cwgrpo.train import run as train_module
    from cwgrpo.train.options import build_train_config
    from tests.conftest import TWO_STEP_TRL

    data = tmp_path / "train.jsonl"
    data.write_text("".join(json.dumps({"id": f"p-{i}", "problem": "1+1", "answer": "2", "source": "t"}) + "\n" for i in range(2)))  # fmt: skip
    run = tmp_path / "run"
    code = "import sys; from cwgrpo.train.runguard import RunLock; RunLock(sys.argv[1]).acquire(); print('held', flush=True); sys.stdin.read()"
    holders = []

    class LosingLock(RunLock):
        def acquire(self) -> None:  # the other start takes the lock between this one's mkdir and lock
            holder = subprocess.Popen([sys.executable, "-c", code, str(run)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)  # fmt: skip
            holders.append(holder)
            assert holder.stdout.readline().strip() == "held"
            super().acquire()

    monkeypatch.setattr(train_module, "RunLock", LosingLock)
    try:
        with pytest.raises(ConfigError, match="being trained into by another `cwgrpo train`"):
            train_module.train(tiny_model_dir, data, run, build_train_config(dict(TWO_STEP_TRL), run))
        assert (run / LOCK_NAME).is_file()
    finally:
        for holder in holders:
            holder.stdin.close()
            holder.wait(timeout=30)
