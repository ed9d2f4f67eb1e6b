"""config/paper-7b-2nodes.yaml: what a 2-node training job asks Slurm for, and its checks before any job.

Dry runs with the Slurm executor (it needs no cluster to plan) show each training job's resources; the
Slurm lines themselves are checked against a real cluster in tests/slurm/test_slurm_multinode.py.
"""

from __future__ import annotations

from pathlib import Path

import yaml
from test_workflow import PRESETS, REPO, jobs, run_snakemake

TWO_NODES = REPO / "config" / "paper-7b-2nodes.yaml"
TARGETS = [f"results/paper/runs/{size}/grpo/seed2025/run.json" for size in ("1.5b", "7b")]


def _configfiles(*extra: Path) -> list[str]:
    return ["--configfile", str(PRESETS["paper"]), str(TWO_NODES), *map(str, extra)]


def test_two_node_7b_job_asks_slurm_for_2_nodes_of_4_gpus_and_the_1_5b_job_for_one(tmp_path):
    proc, out = run_snakemake(tmp_path, *TARGETS, "-n", "--executor", "slurm", "-j", "4", *_configfiles())
    assert proc.returncode == 0, out[-3000:]
    res = {j["rule"]: j["resources"] for j in jobs(out) if j["rule"].startswith("train_")}
    seven, small = res["train_7b"], res["train_1_5b"]
    assert (seven["nodes"], seven["tasks"], seven["gres"], seven["mpi"]) == ("2", "2", "gpu:4", "srun")
    assert seven["tasks_per_gpu"] == "0" and "gpu" not in seven  # no --gpus=N: it may split unevenly
    assert (seven["cpus_per_task"], seven["mem_mb"]) == ("32", "256000")  # per task = per node
    assert small["gpu"] == "4" and not {"nodes", "gres", "mpi"} & set(small)


def test_more_gpus_per_node_than_the_job_gets_stops_at_parse_time(tmp_path):
    bad = tmp_path / "six.yaml"
    bad.write_text(yaml.safe_dump({"sizes": {"7b": {"resources": {"train": {"gpu": 6}}}}}))
    proc, out = run_snakemake(tmp_path, *TARGETS, "-n", "--executor", "slurm", "-j", "4", *_configfiles(bad))
    assert proc.returncode != 0
    assert "gpu=6 is 3 per node, but the training options need 4 GPUs on a node" in out


def test_a_multinode_job_without_slurm_stops_before_any_job(tmp_path):
    proc, out = run_snakemake(tmp_path / "work", *TARGETS, "--cores", "1", *_configfiles())
    assert proc.returncode != 0
    assert "span several nodes and need a Slurm allocation, but this run uses the 'local' executor" in out
    # not even the downloads started: results/ holds only the jobs' options files (written at parse time)
    assert [p.name for p in (tmp_path / "work" / "results").glob("*/*")] == ["options"]


def test_a_gpu_model_for_a_multinode_rule_is_refused_naming_the_fix(tmp_path):
    """The plugin would add --gpus=h100:1 beside --gres=gpu:4; the type belongs in the preset's gres."""
    args = ["-n", "--executor", "slurm", "-j", "4", "--set-resources", "train_7b:gpu_model=h100"]
    proc, out = run_snakemake(tmp_path, *TARGETS, *args, *_configfiles())
    assert proc.returncode != 0
    assert "resources.train.gres: gpu:h100:4" in out, out[-2000:]
    typed = tmp_path / "typed.yaml"
    typed.write_text(yaml.safe_dump({"resources": {"train": {"gres": "gpu:h100:4"}}}))
    proc, out = run_snakemake(
        tmp_path, *TARGETS, "-n", "--executor", "slurm", "-j", "4", *_configfiles(typed)
    )
    assert proc.returncode == 0, out[-3000:]
    assert {j["rule"]: j["resources"].get("gres") for j in jobs(out)}["train_7b"] == "gpu:h100:4"


def test_overlay_changes_only_the_7b_training_layout_and_keeps_the_batch():
    """144 completions (12 prompts x G=12) per optimiser step and one group per micro-batch, as 3 x 12 x 4;
    the layout the workflow derives (2 nodes, 4 GPUs each) is the one cwgrpo.launch.multinode plans."""
    import dataclasses

    from cwgrpo.launch import multinode
    from cwgrpo.train.options import TrainJob

    paper, overlay = (yaml.safe_load(p.read_text()) for p in (PRESETS["paper"], TWO_NODES))
    assert set(overlay) == {"overlay_of", "sizes"} and set(overlay["sizes"]) == {"7b"}
    assert overlay["overlay_of"] == "paper"  # refused without paper.yaml first
    assert set(overlay["sizes"]["7b"]) == {"train", "resources"}
    assert set(overlay["sizes"]["7b"]["resources"]) == {"train"}
    for size, extra in (("1.5b", {}), ("7b", overlay["sizes"]["7b"]["train"])):
        opts = {**paper["train"], **paper["sizes"][size]["train"], **extra}
        batch = (
            opts["num_processes"] * opts["per_device_train_batch_size"] * opts["gradient_accumulation_steps"]
        )
        assert batch == 144 and opts["per_device_train_batch_size"] == opts["num_generations"], size
    fields = {f.name for f in dataclasses.fields(TrainJob)}
    job = TrainJob(**{k: v for k, v in opts.items() if k in fields})
    assert (multinode.nodes_needed(job), multinode.gpus_per_node(job)) == (2, 4)
    assert overlay["sizes"]["7b"]["resources"]["train"]["gpu"] == 2 * 4
