"""A run whose options or inputs changed is moved aside (renamed, never deleted) so the same command trains
afresh; a run refused for another reason says the one command that keeps it and frees its folder, and that
command works."""

from __future__ import annotations

import json
import logging
import re
import shlex
import subprocess

import pytest

from cwgrpo.configs import ConfigError
from cwgrpo.train.checkpoints import check_same_config, move_aside_changed_run
from cwgrpo.train.runguard import COMPLETE_FLAG, aside_path, check_logs_cover, move_aside_hint

INPUTS = {"model": {"files_sha256": "m", "files": 1, "marker": {}}, "train_data_sha256": "d"}


def _run_with_checkpoint(run_dir, config_hash):
    ckpt = run_dir / "checkpoint-2"
    ckpt.mkdir(parents=True)
    (ckpt / "model.safetensors").write_bytes(b"weights")
    (ckpt / COMPLETE_FLAG).write_text(json.dumps({"step": 2, "config_hash": config_hash, "inputs": INPUTS}))
    return ckpt


def _command(message):
    (command,) = re.findall(r"run the same command again: (mv .+)$", message)
    return command


def test_a_changed_run_names_the_mv_that_keeps_it_and_the_mv_works(tmp_path):
    run_dir = tmp_path / "runs" / "my model" / "seed0"  # a space: the command is shell-quoted
    ckpt = _run_with_checkpoint(run_dir, "old-hash")
    with pytest.raises(ConfigError) as err:
        check_same_config(run_dir, {2: ckpt}, "new-hash", INPUTS)
    message = str(err.value)
    assert "the options (config hash old-hash, now new-hash)" in message
    command = _command(message)
    assert shlex.split(command) == ["mv", str(run_dir), str(run_dir.with_name("seed0.old-1"))]
    subprocess.run(command, shell=True, check=True)
    assert not run_dir.exists()
    assert (
        run_dir.with_name("seed0.old-1") / "checkpoint-2" / "model.safetensors"
    ).read_bytes() == b"weights"
    check_same_config(run_dir, {}, "new-hash", INPUTS)  # the folder is free: nothing to refuse


def test_a_second_move_never_lands_on_the_first(tmp_path):
    run_dir = tmp_path / "seed0"
    run_dir.with_name("seed0.old-1").mkdir()
    ckpt = _run_with_checkpoint(run_dir, "old-hash")
    with pytest.raises(ConfigError) as err:
        check_same_config(run_dir, {2: ckpt}, "new-hash", INPUTS)
    assert aside_path(run_dir).name == "seed0.old-2"
    assert _command(str(err.value)).endswith("seed0.old-2")


def test_a_gap_in_the_logs_names_the_same_way_forward(tmp_path):
    metrics = tmp_path / "seed0" / "live" / "metrics.jsonl"
    metrics.parent.mkdir(parents=True)
    metrics.write_text('{"step": 1}\n')
    with pytest.raises(ConfigError) as err:
        check_logs_cover(metrics, 3, 1, 4)
    assert shlex.split(_command(str(err.value)))[1:] == [
        str(tmp_path / "seed0"),
        str(tmp_path / "seed0.old-1"),
    ]


def test_a_changed_configuration_moves_the_old_run_aside_and_leaves_the_folder_free(tmp_path, caplog):
    run_dir = tmp_path / "runs" / "seed0"
    _run_with_checkpoint(run_dir, "old-hash")
    (run_dir / "live").mkdir()
    (run_dir / "live" / "metrics.jsonl").write_text('{"step": 2}\n')
    with caplog.at_level(logging.WARNING, logger="cwgrpo.train.run"):
        aside = move_aside_changed_run(run_dir, {"config_hash": "new-hash", "inputs": INPUTS})
    assert aside == run_dir.with_name("seed0.old-1") and not run_dir.exists()
    assert (aside / "checkpoint-2" / "model.safetensors").read_bytes() == b"weights"  # nothing deleted
    assert (aside / "live" / "metrics.jsonl").is_file()
    (line,) = caplog.messages
    assert f"moved it to {aside}" in line and "config hash old-hash, now new-hash" in line


def test_a_run_of_the_same_configuration_stays_where_it_is(tmp_path):
    run_dir = tmp_path / "seed0"
    _run_with_checkpoint(run_dir, "same-hash")
    assert move_aside_changed_run(run_dir, {"config_hash": "same-hash", "inputs": INPUTS}) is None
    assert (run_dir / "checkpoint-2").is_dir()


def test_a_run_being_trained_by_another_process_is_never_moved(tmp_path):
    """The move happens under the run folder's lock: while another `cwgrpo train` holds it, it is refused."""
    import sys

    from cwgrpo.train.checkpoints import move_aside_if_changed

    run_dir = tmp_path / "seed0"
    _run_with_checkpoint(run_dir, "old-hash")
    (tmp_path / "model").mkdir()
    (tmp_path / "train.jsonl").write_text("{}\n")
    holder = subprocess.Popen(
        [sys.executable, "-c", "import sys, time; from cwgrpo.train.runguard import RunLock; "
         "RunLock(sys.argv[1]).acquire(); print('held', flush=True); time.sleep(60)", str(run_dir)],
        stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert holder.stdout.readline().strip() == "held"
        with pytest.raises(ConfigError, match="is being trained into by another"):
            move_aside_if_changed(run_dir, "new-hash", tmp_path / "model", tmp_path / "train.jsonl")
    finally:
        holder.kill()
        holder.wait()
    assert (run_dir / "checkpoint-2").is_dir() and not run_dir.with_name("seed0.old-1").exists()


def test_a_dangling_link_at_the_aside_name_is_never_moved_onto(tmp_path):
    """Weak spot: a dangling link at seed0.old-1 gave NotADirectoryError."""
    run_dir = tmp_path / "seed0"
    _run_with_checkpoint(run_dir, "old-hash")
    run_dir.with_name("seed0.old-1").symlink_to(tmp_path / "gone")
    aside = move_aside_changed_run(run_dir, {"config_hash": "new-hash", "inputs": INPUTS})
    assert aside == run_dir.with_name("seed0.old-2")
    assert (aside / "checkpoint-2" / "model.safetensors").read_bytes() == b"weights"


def test_a_run_folder_linked_to_another_disk_moves_its_target_there_and_keeps_the_link(tmp_path):
    """Weak spot: the link was renamed and the fresh run trained on the local disk instead."""
    elsewhere = tmp_path / "big-disk" / "seed0"
    _run_with_checkpoint(elsewhere, "old-hash")
    run_dir = tmp_path / "runs" / "seed0"
    run_dir.parent.mkdir()
    run_dir.symlink_to(elsewhere)
    aside = move_aside_changed_run(run_dir, {"config_hash": "new-hash", "inputs": INPUTS})
    assert aside == tmp_path / "big-disk" / "seed0.old-1"
    assert (aside / "checkpoint-2" / "model.safetensors").read_bytes() == b"weights"
    assert run_dir.is_symlink() and run_dir.resolve() == elsewhere and list(elsewhere.iterdir()) == []
    command = _command(move_aside_hint(run_dir))
    assert command == f"mv {elsewhere} {elsewhere.with_name('seed0.old-2')} && mkdir {elsewhere}"


def test_a_job_whose_run_folder_was_deleted_under_it_stops(tmp_path):
    """Weak spot: after an rm -rf of the run folder under a running job, a second job could take the folder
    and both trained into one path; the first now stops at its next step (``on_step_end``)."""
    import shutil
    import sys

    from cwgrpo.train.runguard import RunLock, check_run_lock

    run_dir = tmp_path / "seed0"
    run_dir.mkdir()
    lock = RunLock(run_dir)
    lock.acquire()
    try:
        check_run_lock(run_dir)  # its own lock: nothing to say
        shutil.rmtree(run_dir)
        with pytest.raises(ConfigError, match="its lock file was removed or replaced under this job"):
            check_run_lock(run_dir)
        run_dir.mkdir()
        take = f"from cwgrpo.train.runguard import RunLock; RunLock({str(run_dir)!r}).acquire()"
        second = subprocess.run([sys.executable, "-c", take], capture_output=True, text=True)
        assert second.returncode == 0, second.stderr  # a second job takes the new folder's lock
        with pytest.raises(ConfigError, match="removed or replaced"):
            check_run_lock(run_dir)  # the folder's lock file is another one now
    finally:
        lock.release()
    check_run_lock(run_dir)  # released: nothing held, nothing checked
