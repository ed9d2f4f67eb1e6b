"""Checkpoints saved by 2 real DeepSpeed processes (ZeRO-2 and ZeRO-3): every process's files are in each
completion flag, the recorded layouts of tests/fixtures/checkpoint_layouts are DeepSpeed's, and pruning
leaves an old checkpoint only what evaluation reads."""

from __future__ import annotations

import json
from fnmatch import fnmatch

import pytest

from cwgrpo.train.checkpoints import RESUME_STATE, complete_checkpoints
from cwgrpo.train.runguard import COMPLETE_FLAG, PRUNED_FLAG, missing_rank_files, verify_checkpoint
from tests.deepspeed.conftest import SAVE_STEPS, STEPS, checkpoint_files
from tests.unit.checkpoint_layouts import recorded_layout

pytestmark = pytest.mark.slow


@pytest.mark.parametrize("stage", [2, 3])
def test_each_completion_flag_lists_every_process_files(uninterrupted, stage):
    """Rank 1 writes its RNG state late (as it does now and then): the flag still waits for it."""
    run = uninterrupted(stage)
    done = complete_checkpoints(run)
    assert sorted(done) == list(range(SAVE_STEPS, STEPS + 1, SAVE_STEPS))
    for ckpt in done.values():
        flag = json.loads((ckpt / COMPLETE_FLAG).read_text())
        assert flag["processes"] == 2
        assert {"rng_state_0.pth", "rng_state_1.pth"} <= set(flag["files"]), ckpt.name
        assert verify_checkpoint(ckpt) is None and missing_rank_files(ckpt) is None


@pytest.mark.parametrize("stage", [2, 3])
def test_recorded_layout_is_what_deepspeed_writes(uninterrupted, stage):
    newest = complete_checkpoints(uninterrupted(stage))[STEPS]
    assert checkpoint_files(newest) == recorded_layout(stage)


@pytest.mark.parametrize("stage", [2, 3])
def test_pruned_checkpoints_keep_only_what_evaluation_reads(uninterrupted, stage):
    done = complete_checkpoints(uninterrupted(stage))
    layout = recorded_layout(stage)
    kept = [name for name in layout if not any(fnmatch(name.split("/")[0], p) for p in RESUME_STATE)]
    assert "model.safetensors" in kept and "config.json" in kept
    for step, ckpt in done.items():
        if step == STEPS:
            assert (ckpt / PRUNED_FLAG).exists() is False
            continue
        assert checkpoint_files(ckpt) == kept, ckpt.name
        assert verify_checkpoint(ckpt) is None  # what pruning removed is not missing
