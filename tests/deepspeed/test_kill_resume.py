"""kill -9 of a DeepSpeed job during training and during a save, ZeRO-2 and ZeRO-3, then the same command
again: the rerun's metrics.jsonl and cov_samples.jsonl are byte-identical to an uninterrupted run's."""

from __future__ import annotations

import json
import time

import pytest

from cwgrpo.train.runguard import COMPLETE_FLAG
from tests.deepspeed.conftest import SAVE_STEPS, STEPS, Job, logged_steps

pytestmark = pytest.mark.slow
LOGS = ("metrics.jsonl", "cov_samples.jsonl")


def lines_up_to(path, step: int) -> list[str]:
    return [line for line in path.read_text().splitlines() if json.loads(line)["step"] <= step]


def kill_and_wait(job: Job) -> None:
    job.kill_group()
    deadline = time.monotonic() + 20
    while job.processes():
        assert time.monotonic() < deadline, "processes of the killed job still run"
        time.sleep(0.05)


@pytest.mark.parametrize("stage", [2, 3])
def test_killed_in_training_and_in_a_save_then_rerun_logs_what_a_whole_run_logs(uninterrupted, ds_job, stage):
    whole = uninterrupted(stage)
    job = ds_job(stage, slow_rank=1)  # rank 1 writes its RNG state 4 s late: the save's window stays open
    live = job.run_dir / "live"
    saving = job.run_dir / f"checkpoint-{2 * SAVE_STEPS}"

    job.start()  # 1: killed between the first and the second checkpoint
    job.wait_until(lambda: SAVE_STEPS + 1 in logged_steps(live / "metrics.jsonl"))
    kill_and_wait(job)

    job.start()  # 2: resumed, then killed while rank 1 still saves the second checkpoint
    job.wait_until(lambda: (saving / "rng_state_0.pth").exists())
    assert not (saving / "rng_state_1.pth").exists(), "rank 1 saved early: the kill would not be mid-save"
    kill_and_wait(job)
    assert not (saving / COMPLETE_FLAG).exists(), "a checkpoint was flagged before every process saved it"
    for name in LOGS:  # what the first resume logged (steps up to the save) is the whole run's
        assert lines_up_to(live / name, 2 * SAVE_STEPS) == lines_up_to(whole / name, 2 * SAVE_STEPS), name

    done = job.run()  # 3: resumed from the first checkpoint again, to the end
    assert done.returncode == 0, done.stdout
    run = json.loads((job.run_dir / "run.json").read_text())
    assert run["resumed_from"].endswith(f"checkpoint-{SAVE_STEPS}")
    for name in LOGS:
        assert (job.run_dir / name).read_bytes() == (whole / name).read_bytes(), name
    assert logged_steps(job.run_dir / "metrics.jsonl") == list(range(1, STEPS + 1))
