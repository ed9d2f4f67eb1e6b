"""The paper preset on one GPU box: the `gpu` cap (profiles/gpu-box), its checks, and a scheduled run.

Dry runs show each job's GPUs under a cap of 4 and 8; a run with a stand-in `cwgrpo` (fake_cwgrpo.py) on
8 fake GPUs (CUDA_VISIBLE_DEVICES) shows what Snakemake starts together and which devices each job holds.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from test_workflow import PRESETS, REPO, jobs, run_snakemake

PROFILE = str(REPO / "profiles" / "gpu-box")
GPUS = {"train_1_5b": 4, "train_7b": 4, "evaluate": 1}  # paper preset: 3 train + 1 vLLM; 1 per evaluation
RUN = "results/paper/runs/{size}/{method}/seed2025/run.json"


def _fake_cwgrpo(tmp_path: Path) -> tuple[Path, Path]:
    bin_dir, records = tmp_path / "bin", tmp_path / "records"
    bin_dir.mkdir()
    records.mkdir()
    fake = bin_dir / "cwgrpo"
    fake.write_text(
        f'#!/bin/sh\nexec "{sys.executable}" "{Path(__file__).with_name("fake_cwgrpo.py")}" "$@"\n'
    )
    fake.chmod(0o755)
    return bin_dir, records


@pytest.mark.parametrize("cap", [4, 8])
def test_paper_dry_run_job_table_on_a_gpu_box(cap, tmp_path):
    proc, out = run_snakemake(
        tmp_path, "-n", "--profile", PROFILE, "--resources", f"gpu={cap}", configfile=PRESETS["paper"]
    )
    assert proc.returncode == 0, out[-3000:]
    table = [(j["rule"], int(j["resources"].get("gpu", 0))) for j in jobs(out) if j["rule"] != "all"]
    assert {rule: gpus for rule, gpus in table if gpus} == GPUS  # no job scaled down to the cap
    assert all(gpus == GPUS.get(rule, 0) for rule, gpus in table)
    # At most cap // 4 trainings or cap evaluations at once: Snakemake never exceeds the cap.
    assert cap // GPUS["train_7b"] == {4: 1, 8: 2}[cap]


def test_a_cap_below_one_jobs_need_stops_at_parse_time(tmp_path):
    """On 1 GPU the paper preset cannot run (Snakemake would scale the 4-GPU jobs down to 1)."""
    proc, out = run_snakemake(tmp_path, "-n", "--resources", "gpu=1", configfile=PRESETS["paper"])
    assert proc.returncode != 0
    assert "--resources gpu=1, but jobs need more GPUs each: {'train (1.5b)': 4, 'train (7b)': 4}" in out


def test_a_cap_above_the_machines_gpus_stops_before_any_job(tmp_path):
    bin_dir, records = _fake_cwgrpo(tmp_path)
    proc, out = run_snakemake(
        tmp_path / "work",
        "--profile",
        PROFILE,
        "--cores",
        "2",
        "results/paper/data/aime24.jsonl",  # a CPU job: the check is the preset's, not the target's
        configfile=PRESETS["paper"],
        path_prefix=bin_dir,
        env={"CUDA_VISIBLE_DEVICES": "0,1,2,3", "RECORD_DIR": str(records), "CWGRPO_LOCK_DIR": str(tmp_path)},
    )
    assert proc.returncode != 0
    assert "--resources gpu=8, but this machine shows 4 GPUs" in out
    assert list(records.iterdir()) == []


def test_paper_run_on_8_fake_gpus_never_shares_a_device(tmp_path):
    """Every training run and one checkpoint's five evaluations, scheduled for real under the profile's
    cap of 8 with fake devices: at no moment are more than 8 GPUs held, two trainings run side by side,
    and jobs that overlap in time hold disjoint devices."""
    bin_dir, records = _fake_cwgrpo(tmp_path)
    runs = [RUN.format(size=s, method=m) for s in ("1.5b", "7b") for m in ("grpo", "cw_grpo", "clip_cov")]
    evals = [
        f"results/paper/eval/1.5b/grpo/seed2025/step50/{b}.summary.json"
        for b in ("aime24", "math500", "amc23", "minerva", "olympiadbench")
    ]
    proc, out = run_snakemake(
        tmp_path / "work",
        "--profile",
        PROFILE,
        "--cores",
        "64",  # the paper's 32 threads per training job; the fake jobs only sleep
        *runs,
        *evals,
        configfile=PRESETS["paper"],
        path_prefix=bin_dir,
        env={
            "CUDA_VISIBLE_DEVICES": ",".join(map(str, range(8))),
            "RECORD_DIR": str(records),
            "CWGRPO_LOCK_DIR": str(tmp_path / "locks"),
        },
    )
    assert proc.returncode == 0, out[-3000:]
    held = [json.loads(p.read_text()) for p in records.iterdir()]
    assert sorted(r["command"] for r in held if r["gpus"]) == ["evaluate"] * 5 + ["train"] * 6
    assert all(len(r["gpus"]) == (4 if r["command"] == "train" else 1) for r in held if r["gpus"])
    most_trainings = 0
    for r in held:
        overlapping = [o for o in held if o["start"] < r["end"] and r["start"] < o["end"]]
        at_start = [o for o in held if o["start"] <= r["start"] < o["end"]]
        assert sum(len(o["gpus"]) for o in at_start) <= 8
        for o in overlapping:
            assert o is r or not set(o["gpus"]) & set(r["gpus"]), (r, o)
        most_trainings = max(most_trainings, sum(o["command"] == "train" for o in at_start))
    assert most_trainings == 2
