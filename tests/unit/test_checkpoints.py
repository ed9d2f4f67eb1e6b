"""A run folder's checkpoint bookkeeping (cwgrpo.train.checkpoints): complete checkpoints, pruned resume state,
cut logs, the outputs written at the end. Checkpoints have the layouts recorded from real ZeRO-2 and ZeRO-3
saves of 2 processes (tests/fixtures/checkpoint_layouts), their files holding stand-in bytes."""

from __future__ import annotations

import json

import pytest

from cwgrpo.configs import ConfigError
from cwgrpo.io import write_json
from cwgrpo.train.checkpoints import (
    PRUNED_FLAG,
    check_resumable,
    complete_checkpoints,
    finalize,
    log_files,
    prune_resume_state,
    resumable_checkpoints,
    truncate_log,
)
from cwgrpo.train.runguard import COMPLETE_FLAG, flag_record, missing_rank_files, verify_checkpoint
from tests.unit.checkpoint_layouts import make_checkpoint, recorded_layout

# What evaluation reads of a checkpoint, and all that pruning may leave of an older one.
EVALUATION = {
    "chat_template.jinja",
    "config.json",
    "generation_config.json",
    "model.safetensors",
    "tokenizer.json",
    "tokenizer_config.json",
    "trainer_state.json",
    "training_args.bin",
}
BLOCK = {"config_hash": "h", "inputs": {"model": {"marker": "m"}, "train_data_sha256": "d"}}


def _checkpoint(run, step, stage=2, complete=True, processes=2):
    """A checkpoint with the files of a real ZeRO-``stage`` save of 2 processes (recorded layout)."""
    ckpt = make_checkpoint(run, step, stage)
    if complete:
        write_json(ckpt / COMPLETE_FLAG, flag_record(ckpt, step, BLOCK, processes))
    return ckpt


def _files(ckpt):
    return {p.relative_to(ckpt).as_posix() for p in ckpt.rglob("*") if p.is_file()}


@pytest.mark.parametrize("stage", [2, 3])
def test_only_the_newest_complete_checkpoint_keeps_its_resume_state(tmp_path, stage):
    old, resumed, new = (_checkpoint(tmp_path, s, stage) for s in (50, 100, 150))
    cut = _checkpoint(tmp_path, 200, stage, complete=False)  # being saved: neither kept nor touched
    before = _files(new)
    assert prune_resume_state(tmp_path, keep=new) == [old, resumed]
    for ckpt in (old, resumed):
        assert _files(ckpt) == EVALUATION | {COMPLETE_FLAG, PRUNED_FLAG}
        assert json.loads((ckpt / PRUNED_FLAG).read_text())["newest"] == 150
        assert verify_checkpoint(ckpt) is None  # what was pruned is not missing
    assert _files(new) == before and not (cut / PRUNED_FLAG).exists()
    assert _files(cut) == {n.replace("{step}", "200") for n in recorded_layout(stage)}
    assert prune_resume_state(tmp_path, keep=new) == []  # nothing left to prune


def test_recorded_layouts_hold_every_process_files_and_the_weights():
    for stage in (2, 3):
        layout = recorded_layout(stage)
        assert {"rng_state_0.pth", "rng_state_1.pth", "latest", "model.safetensors"} <= set(layout)
        assert set(layout) >= EVALUATION
        assert any(n.startswith("global_step{step}/") and "optim_states" in n for n in layout)


def test_nothing_is_pruned_before_the_next_checkpoint_is_complete(tmp_path):
    old = _checkpoint(tmp_path, 2)
    cut = _checkpoint(tmp_path, 4, complete=False)
    with pytest.raises(ValueError, match="not a complete checkpoint"):
        prune_resume_state(tmp_path, keep=cut)
    assert (old / "global_step2").is_dir() and (old / "rng_state_1.pth").is_file()


def test_a_pruned_checkpoint_is_never_resumed_from(tmp_path):
    old, new = _checkpoint(tmp_path, 2), _checkpoint(tmp_path, 4)
    prune_resume_state(tmp_path, keep=new)
    check_resumable(new)
    with pytest.raises(ConfigError, match="holds no optimiser state"):
        check_resumable(old)


def test_a_flag_written_before_a_process_saved_its_files_is_not_resumed_from(tmp_path):
    """Rank 0 flagged the checkpoint before rank 1 wrote its RNG state (no barrier): the newest is
    refused and the previous complete one, still unpruned, is resumed from instead."""
    older = _checkpoint(tmp_path, 2)
    newest = make_checkpoint(tmp_path, 4, 2)
    (newest / "rng_state_1.pth").unlink()
    write_json(newest / COMPLETE_FLAG, flag_record(newest, 4, BLOCK, processes=2))
    (newest / "rng_state_1.pth").write_text("written after the flag")
    assert "rng_state_1.pth" in missing_rank_files(newest)
    assert resumable_checkpoints(tmp_path, BLOCK) == {2: older}


def test_only_the_run_folders_owner_removes_a_cut_checkpoint(tmp_path):
    """Every training process looks for the checkpoint to resume from; two removing the same cut one at
    once would fail, so the others leave it to the owner (rank 0) and never count it."""
    done = _checkpoint(tmp_path, 2)
    cut = _checkpoint(tmp_path, 4, complete=False)
    assert resumable_checkpoints(tmp_path, BLOCK, owner=False) == {2: done} and cut.is_dir()
    assert resumable_checkpoints(tmp_path, BLOCK) == {2: done} and not cut.exists()


def test_a_listed_file_that_is_gone_makes_a_checkpoint_damaged(tmp_path):
    ckpt = _checkpoint(tmp_path, 2)
    (ckpt / "rng_state_1.pth").unlink()
    assert "rng_state_1.pth is missing" in verify_checkpoint(ckpt)


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
    from cwgrpo.train.checkpoints import remove_incomplete_checkpoints

    run = tmp_path / "run"
    run.mkdir()
    (run / "checkpoint-7").symlink_to(_user_folder(tmp_path / "mine"))
    with pytest.raises(ConfigError, match=r"checkpoint-7 is a symbolic link without a completion flag"):
        remove_incomplete_checkpoints(run)
    assert (tmp_path / "mine" / "data.bin").read_text() == "precious"
    (run / "checkpoint-7").unlink()
    old, new = _checkpoint(run, 2), _checkpoint(run, 4)
    (old / "optimizer_0").symlink_to(_user_folder(tmp_path / "shards"))
    assert prune_resume_state(run, keep=new) == [old]
    assert not (old / "optimizer_0").exists() and (tmp_path / "shards" / "data.bin").read_text() == "precious"
