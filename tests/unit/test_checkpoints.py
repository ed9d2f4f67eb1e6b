"""A run folder's checkpoint bookkeeping (cwgrpo.checkpoints) on fake folders: complete checkpoints, pruned
resume state, cut logs, the outputs written at the end."""

from __future__ import annotations

import json

import pytest

from cwgrpo.checkpoints import (
    PRUNED_FLAG,
    check_resumable,
    complete_checkpoints,
    finalize,
    log_files,
    prune_resume_state,
    truncate_log,
)
from cwgrpo.configs import ConfigError
from cwgrpo.runguard import COMPLETE_FLAG

WEIGHTS = ("model.safetensors", "config.json", "tokenizer.json", "trainer_state.json")
STATE = ("optimizer.pt", "scheduler.pt", "rng_state_0.pth", "latest", "zero_to_fp32.py")


def _checkpoint(run, step, complete=True, deepspeed=True):
    ckpt = run / f"checkpoint-{step}"
    ckpt.mkdir(parents=True)
    for name in (*WEIGHTS, *STATE):
        (ckpt / name).write_text(name)
    if deepspeed:
        (ckpt / f"global_step{step}").mkdir()
        (ckpt / f"global_step{step}" / "zero_pp_rank_0_mp_rank_00_optim_states.pt").write_text("shard")
    if complete:
        (ckpt / COMPLETE_FLAG).write_text(json.dumps({"step": step}))
    return ckpt


def test_only_the_newest_complete_checkpoint_keeps_its_resume_state(tmp_path):
    old, resumed, new = (_checkpoint(tmp_path, s) for s in (50, 100, 150))
    cut = _checkpoint(tmp_path, 200, complete=False)  # being saved: neither kept nor touched
    assert prune_resume_state(tmp_path, keep=new) == [old, resumed]
    for ckpt in (old, resumed):
        assert sorted(p.name for p in ckpt.iterdir()) == sorted([*WEIGHTS, COMPLETE_FLAG, PRUNED_FLAG])
        assert json.loads((ckpt / PRUNED_FLAG).read_text())["newest"] == 150
    for ckpt in (new, cut):
        assert all((ckpt / name).exists() for name in STATE) and not (ckpt / PRUNED_FLAG).exists()
    assert prune_resume_state(tmp_path, keep=new) == []  # nothing left to prune


def test_nothing_is_pruned_before_the_next_checkpoint_is_complete(tmp_path):
    old = _checkpoint(tmp_path, 2, deepspeed=False)
    cut = _checkpoint(tmp_path, 4, complete=False, deepspeed=False)
    with pytest.raises(ValueError, match="not a complete checkpoint"):
        prune_resume_state(tmp_path, keep=cut)
    assert (old / "optimizer.pt").exists()


def test_a_pruned_checkpoint_is_never_resumed_from(tmp_path):
    old, new = _checkpoint(tmp_path, 2), _checkpoint(tmp_path, 4)
    prune_resume_state(tmp_path, keep=new)
    check_resumable(new)
    with pytest.raises(ConfigError, match="holds no optimiser state"):
        check_resumable(old)


def test_complete_checkpoints_ignores_folders_without_the_flag(tmp_path):
    for step in (2, 4, 6):
        (tmp_path / f"checkpoint-{step}").mkdir()
    for step in (2, 4):
        (tmp_path / f"checkpoint-{step}" / COMPLETE_FLAG).write_text("{}")
    (tmp_path / "checkpoint-x").mkdir()
    assert list(complete_checkpoints(tmp_path)) == [2, 4]


def test_truncate_log_drops_steps_after_the_resume_point_and_cut_lines(tmp_path):
    path = tmp_path / "metrics.jsonl"
    lines = [json.dumps({"step": s, "loss": s / 10}) for s in (1, 2, 3, 4)]
    path.write_text("\n".join(lines) + '\n{"step": 5, "lo')
    truncate_log(path, 2)
    assert [json.loads(line)["step"] for line in path.read_text().splitlines()] == [1, 2]


def test_finalize_copies_each_live_log_to_its_file_and_the_timings_where_told(tmp_path):
    run = tmp_path / "run"
    (run / "live").mkdir(parents=True)
    (run / "live" / "metrics.jsonl").write_text('{"step": 1, "loss": 0.5}\n')
    (run / "live" / "timings.jsonl").write_text('{"step": 1, "step_time": 2.0}\n')
    timings = tmp_path / "logs" / "t.jsonl"
    finalize(run, {"tags": {}}, {"job": {}}, None, log_files(run, timings))
    assert (run / "metrics.jsonl").read_text() == '{"step": 1, "loss": 0.5}\n'
    assert timings.read_text() == '{"step": 1, "step_time": 2.0}\n'
    assert not (run / "timings.jsonl").exists()
    assert (run / "cov_samples.jsonl").read_text() == ""  # no samples logged: an empty file, still written
    assert json.loads((run / "run.json").read_text()) == {
        "tags": {},
        "config": {"job": {}},
        "resumed_from": None,
        "learning_signal": [],  # the log's stretches without learning signal: none in one line with a loss
    }


def _user_folder(path):
    path.mkdir()
    (path / "data.bin").write_text("precious")
    return path


def test_a_checkpoint_planted_as_a_link_is_never_removed_through(tmp_path):
    """A ``checkpoint-N`` link without a flag is named, not removed; a link among a checkpoint's resume
    state is removed as a link, and the folder it points to kept."""
    from cwgrpo.checkpoints import remove_incomplete_checkpoints

    run = tmp_path / "run"
    run.mkdir()
    (run / "checkpoint-7").symlink_to(_user_folder(tmp_path / "mine"))
    with pytest.raises(ConfigError, match=r"checkpoint-7 is a symbolic link without a completion flag"):
        remove_incomplete_checkpoints(run)
    assert (tmp_path / "mine" / "data.bin").read_text() == "precious"
    (run / "checkpoint-7").unlink()
    old, new = _checkpoint(run, 2, deepspeed=False), _checkpoint(run, 4, deepspeed=False)
    (old / "optimizer_0").symlink_to(_user_folder(tmp_path / "shards"))
    assert prune_resume_state(run, keep=new) == [old]
    assert not (old / "optimizer_0").exists() and (tmp_path / "shards" / "data.bin").read_text() == "precious"
