"""A training run killed after its first checkpoint resumes from it when the same command is rerun."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time

import pytest

pytestmark = pytest.mark.slow

TRAIN = [
    "train",
    "--model-dir", "model",
    "--train-data", "data/syn_train.jsonl",
    "--run-dir", "run",
    "--tag", "size=small", "--tag", "method=cw_grpo", "--tag", "seed=0",
    "--set", "use_cpu=true", "--set", "bf16=false", "--set", "gradient_checkpointing=false",
    "--set", "loss_type=grpo", "--set", "beta=0.0", "--set", "learning_rate=1e-4",
    "--set", "num_generations=4", "--set", "per_device_train_batch_size=8",
    "--set", "max_completion_length=8", "--set", "max_steps=8", "--set", "save_steps=2",
    "--set", "reward_funcs=[accuracy,format]", "--set", "seed=0",
]  # fmt: skip


def test_killed_training_resumes_from_its_newest_complete_checkpoint(e2e_inputs, tmp_path):
    for name in ("model", "data"):
        shutil.copytree(e2e_inputs / name, tmp_path / name)
    cmd = [sys.executable, "-m", "cwgrpo.cli", *TRAIN]
    killed_at = _kill_after_first_checkpoint(cmd, tmp_path)  # a hard kill: no handler runs (a node failure)
    assert not (tmp_path / "run" / "run.json").exists(), "the run was not cut before its end"
    assert 2 <= killed_at < 8

    second = subprocess.run(cmd, cwd=tmp_path, capture_output=True, text=True, timeout=600)
    assert second.returncode == 0, second.stderr[-3000:]
    run = json.loads((tmp_path / "run" / "run.json").read_text())
    assert run["resumed_from"] is not None, "the rerun started from scratch"
    assert int(run["resumed_from"].rsplit("-", 1)[1]) == killed_at
    for step in (2, 4, 6, 8):  # no checkpoint lost, every marker written
        assert (tmp_path / "run" / f"checkpoint-{step}" / "cwgrpo_complete.json").is_file()
        assert json.loads((tmp_path / "run" / "steps" / f"step{step}.json").read_text())["step"] == step
    steps = [
        json.loads(line)["step"] for line in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()
    ]
    assert steps == list(range(1, 9)), "metrics.jsonl must hold each optimiser step exactly once"

    # A rerun of the finished run trains nothing more and rewrites the same outputs.
    before = (tmp_path / "run" / "metrics.jsonl").read_bytes()
    third = subprocess.run(cmd, cwd=tmp_path, capture_output=True, text=True, timeout=600)
    assert third.returncode == 0, third.stderr[-3000:]
    assert not (tmp_path / "run" / "checkpoint-9").exists()
    assert (tmp_path / "run" / "metrics.jsonl").read_bytes() == before

    # Checkpoints of another configuration are never resumed: a changed configuration is a new run, the
    # old one moved aside whole, in one log line.
    changed = [*cmd, "--set", "learning_rate=3e-4", "--set", "max_steps=2"]
    fourth = subprocess.run(changed, cwd=tmp_path, capture_output=True, text=True, timeout=600)
    assert fourth.returncode == 0, fourth.stderr[-3000:]
    aside = tmp_path / "run.old-1"
    assert (aside / "metrics.jsonl").read_bytes() == before and (aside / "checkpoint-8").is_dir()
    assert [line for line in fourth.stderr.splitlines() if "moved it to" in line] != []
    assert "resuming from" not in fourth.stderr
    steps = [
        json.loads(line)["step"] for line in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()
    ]
    assert steps == [1, 2]


SPREAD = """
def spread(completions, **kwargs):
    texts = [c if isinstance(c, str) else c[0]["content"] for c in completions]
    return [float(sum(map(ord, t)) % 7) for t in texts]
"""


def _kill_after_first_checkpoint(cmd: list[str], cwd) -> int:
    """Start ``cmd``, SIGKILL it once its first checkpoint is complete; the newest complete step."""
    first = subprocess.Popen(
        cmd, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True
    )
    marker = cwd / "run" / "steps" / "step2.json"
    deadline = time.monotonic() + 300
    while not marker.exists():
        assert first.poll() is None, first.stderr.read().decode()[-3000:]
        assert time.monotonic() < deadline, "no first checkpoint within 300 s"
        time.sleep(0.1)
    os.killpg(first.pid, signal.SIGKILL)
    first.wait()
    complete = [p for p in (cwd / "run").glob("checkpoint-*") if (p / "cwgrpo_complete.json").is_file()]
    return max(int(p.name.split("-")[1]) for p in complete)


def test_a_resumed_run_with_a_probe_logs_what_the_uninterrupted_run_logs(e2e_inputs, tmp_path):
    """The probe set and its start are kept in the run folder: a killed and resumed run's metrics.jsonl is
    byte-identical to the uninterrupted run's; without them the resume is marked in the log."""
    replaced = {"max_steps=8": "max_steps=6", "learning_rate=1e-4": "learning_rate=1e-2"}
    replaced["reward_funcs=[accuracy,format]"] = "reward_funcs=[probe_rewards:spread]"
    probe = [replaced.get(a, a) for a in TRAIN] + ["--set", "cw_probe_prompts=4"]
    cmd = [sys.executable, "-m", "cwgrpo.cli", *probe]
    folders = {name: tmp_path / name for name in ("whole", "resumed", "lost")}
    for folder in folders.values():
        folder.mkdir()
        for name in ("model", "data"):
            shutil.copytree(e2e_inputs / name, folder / name)
        (folder / "probe_rewards.py").write_text(SPREAD)  # a reward with spread: the policy moves
    done = subprocess.run(cmd, cwd=folders["whole"], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]

    killed_at = _kill_after_first_checkpoint(cmd, folders["resumed"])
    assert killed_at < 6, "the run was not cut before its end"
    shutil.rmtree(folders["lost"])
    shutil.copytree(folders["resumed"], folders["lost"])
    (folders["lost"] / "run" / "live" / "probe_set.pt").unlink(missing_ok=True)
    for name in ("resumed", "lost"):
        done = subprocess.run(cmd, cwd=folders[name], capture_output=True, text=True, timeout=600)
        assert done.returncode == 0, done.stderr[-3000:]

    metrics = {name: (folder / "run" / "metrics.jsonl").read_bytes() for name, folder in folders.items()}
    whole = [json.loads(line) for line in metrics["whole"].splitlines()]
    assert all(r["probe/kl_from_start"] > 0 for r in whole), "the policy did not move: nothing is compared"
    assert metrics["resumed"] == metrics["whole"]
    lost = [json.loads(line) for line in metrics["lost"].splitlines()]
    assert [r["step"] for r in lost if "probe/restarted" in r] == [killed_at + 1]


def test_a_job_whose_run_folder_is_replaced_stops_and_deletes_nothing(e2e_inputs, tmp_path):
    """The run folder moved away under a training job and a new one made at its path (another run's): the
    job stops at its next step, and neither folder loses a file (it removes only the folder it made, and
    only while that is still the one at the path)."""
    for name in ("model", "data"):
        shutil.copytree(e2e_inputs / name, tmp_path / name)
    cmd = [sys.executable, "-m", "cwgrpo.cli", *TRAIN, "--set", "max_steps=400", "--set", "save_steps=400"]
    job = subprocess.Popen(cmd, cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    metrics = tmp_path / "run" / "live" / "metrics.jsonl"
    deadline = time.monotonic() + 300
    while not (metrics.is_file() and metrics.read_text().strip()):
        assert job.poll() is None and time.monotonic() < deadline, job.stderr.read()[-3000:]
        time.sleep(0.05)
    (tmp_path / "run").rename(tmp_path / "run.moved")
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "other.txt").write_text("another run's\n")
    _, err = job.communicate(timeout=300)
    assert job.returncode != 0
    assert "its lock file was removed or replaced under this job" in err
    assert (tmp_path / "run" / "other.txt").read_text() == "another run's\n"
    assert (tmp_path / "run.moved" / "live" / "metrics.jsonl").is_file()
