"""config/paper-1gpu.yaml: config/paper.yaml with exactly its listed deviations, and a dry run on 1 GPU."""

from __future__ import annotations

import copy
import shlex

import yaml
from test_workflow import REPO, jobs, run_snakemake

PAPER = REPO / "config" / "paper.yaml"
ONE_GPU = REPO / "config" / "paper-1gpu.yaml"
DEVIATIONS = {  # train options that differ from the 4-GPU preset, and why (the file's header says more)
    "vllm_mode": "colocate",  # no 4th GPU for a server
    "vllm_server_gpu": None,
    "vllm_gpu_memory_utilization": 0.3,  # vLLM shares the training GPU
    "num_processes": 1,
    "gradient_accumulation_steps": 12,  # 1 x 12 micro-batches of 12 = the paper's 3 x 4 x 12
}
ONE_GROUP = {"steps_per_generation": 1, "cw_one_group_per_micro_batch": True}  # as the 4-GPU preset


def test_one_gpu_preset_is_the_paper_preset_but_for_its_deviations():
    paper, one = yaml.safe_load(PAPER.read_text()), yaml.safe_load(ONE_GPU.read_text())
    expected = copy.deepcopy(paper)
    expected["name"] = "paper-1gpu"
    del expected["sizes"]["7b"]  # 18 bytes/param unsharded: 137 GB, more than one 80 GB GPU
    expected["train"] |= DEVIATIONS
    expected["resources"]["train"] |= {"gpu": 1, "threads": 16, "mem_mb": 128000, "runtime": 8640}
    assert one == expected
    t, p = one["train"], paper["train"]
    completions = t["num_processes"] * t["gradient_accumulation_steps"] * t["per_device_train_batch_size"]
    assert (
        completions
        == p["num_processes"] * p["gradient_accumulation_steps"] * p["per_device_train_batch_size"]
    )
    assert t["per_device_train_batch_size"] == t["num_generations"] == 12  # one group per micro-batch


def test_one_gpu_preset_dry_run_on_one_gpu(tmp_path):
    proc, out = run_snakemake(
        tmp_path,
        "-n",
        "--profile",
        str(REPO / "profiles" / "gpu-box"),
        "--resources",
        "gpu=1",
        configfile=ONE_GPU,
    )
    assert proc.returncode == 0, out[-3000:]
    trains = [j for j in jobs(out) if j["rule"].startswith("train_")]
    assert sorted(j["wildcards"]["method"] for j in trains) == ["clip_cov", "cw_grpo", "grpo"]
    assert {j["rule"] for j in trains} == {"train_1_5b"}
    assert {j["resources"]["gpu"] for j in trains} == {"1"}
    assert "results/paper-1gpu/runs/1.5b/grpo/seed2025/run.json" in out
    command = next(line for line in out.splitlines() if line.startswith("Shell command: cwgrpo train"))
    words = shlex.split(command.removeprefix("Shell command: "))
    options = yaml.safe_load((tmp_path / words[words.index("--config") + 1]).read_text())
    got = {k: options[k] for k in [*DEVIATIONS, *ONE_GROUP]}
    assert got == DEVIATIONS | ONE_GROUP


def test_one_gpu_preset_lint_is_clean(tmp_path):
    proc, out = run_snakemake(tmp_path, "--lint", configfile=ONE_GPU)
    assert proc.returncode == 0, out[-3000:]
