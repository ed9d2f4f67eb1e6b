"""Pruning of resume-only state from older checkpoints (cwgrpo.train.prune_resume_state), on fake folders."""

from __future__ import annotations

import json

import pytest

from cwgrpo.configs import ConfigError
from cwgrpo.train import COMPLETE_FLAG, PRUNED_FLAG, check_resumable, prune_resume_state

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
