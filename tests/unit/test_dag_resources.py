"""cwgrpo_workflow.dag.resources and commands: jobs' resources, training layouts (from cwgrpo.launch.multinode), GPU caps and
the command-line pieces, on config dicts."""

from __future__ import annotations

import types

from dag_presets import preset

from cwgrpo.configs import build_config
from cwgrpo.launch.multinode import gpus_per_node, nodes_needed
from cwgrpo.train.options import TrainJob
from cwgrpo_workflow.dag import commands, resources
from cwgrpo_workflow.dag.options import train_options


def test_two_node_layout_is_the_launchers_own():
    config = preset("paper.yaml", "paper-7b-2nodes.yaml")
    opts = train_options(config, "7b", "cw_grpo")
    job = build_config(
        TrainJob, overrides={k: v for k, v in opts.items() if k in TrainJob.__dataclass_fields__}
    )
    assert resources.train_layout(config, "7b") == (nodes_needed(job), gpus_per_node(job)) == (2, 4)
    res = resources.train_resources(config, "7b")
    assert res["gres"] == "gpu:4" and "gpu" not in res
    assert (res["nodes"], res["tasks"], res["tasks_per_gpu"], res["mpi"]) == (2, 2, 0, "srun")
    assert resources.multinode_sizes(config) == {"7b": 2}
    assert list(resources.layout_errors(config, "7b")) == []


def test_a_two_node_job_refuses_a_gpu_count_it_cannot_split_and_a_profiles_gpu_model():
    config = preset("paper.yaml", "paper-7b-2nodes.yaml")
    config["sizes"]["7b"]["resources"]["train"]["gpu"] = 7
    ((key, message),) = resources.layout_errors(config, "7b")
    assert key == "resources.train (size '7b', 2 nodes)" and "give the job's total, 2 x" in message
    config["sizes"]["7b"]["resources"]["train"]["gpu"] = 8
    ((key, message),) = resources.layout_errors(config, "7b", gpu_model="h100")
    assert key == "set-resources train_7b.gpu_model" and "gpu:h100:4" in message


def test_one_node_jobs_keep_the_presets_resources():
    config = preset("paper.yaml")
    assert resources.train_resources(config, "1.5b") == resources.fixed_resources(config, "train", "1.5b")
    assert resources.multinode_sizes(config) == {}


def test_gpu_cap_below_a_jobs_gpus_is_refused():
    config = preset("paper.yaml")
    needs = resources.gpu_needs(config)
    assert needs and list(resources.gpu_cap_errors(config, max(needs.values()))) == []
    ((key, message),) = resources.gpu_cap_errors(config, 1 if max(needs.values()) > 1 else 0)
    assert key == "resources" and "jobs need more GPUs each" in message


def test_local_run_against_the_gpus_this_machine_shows():
    config = preset("paper.yaml")
    cap = max(resources.gpu_needs(config).values())
    env = {"CUDA_VISIBLE_DEVICES": ",".join(str(i) for i in range(cap)), "PATH": ""}
    assert resources.local_run_problems(config, "local", cap, env) == (None, None)
    error, _ = resources.local_run_problems(config, "local", cap + 1, env)
    assert error == f"--resources gpu={cap + 1}, but this machine shows {cap} GPUs; give gpu={cap}"
    error, _ = resources.local_run_problems(config, "local", 1, {"PATH": ""})
    assert "shows no GPU (no nvidia-smi, CUDA_VISIBLE_DEVICES unset)" in error
    _, warning = resources.local_run_problems(config, "local", None, env)
    assert "nothing caps them" in warning
    assert resources.local_run_problems(config, "slurm", None, env) == (None, None)
    two_nodes = preset("paper.yaml", "paper-7b-2nodes.yaml")
    error, _ = resources.local_run_problems(two_nodes, "local", 8, env)
    assert "need a Slurm allocation" in error


def test_per_size_resources_are_functions_of_the_size():
    config = preset("paper.yaml")
    per_size = resources.size_resources(config, "evaluate")
    for size in config["sizes"]:
        wildcards = types.SimpleNamespace(size=size)
        got = {key: value(wildcards) for key, value in per_size.items()}
        assert got == resources.fixed_resources(config, "evaluate", size)


def test_a_word_for_threads_names_its_key():
    config = preset("config.yaml")
    config["resources"]["train"] = {"threads": "two"}
    assert list(resources.resource_errors(config)) == [
        ("resources.train.threads", "must be a positive integer, got 'two'")
    ]


def test_file_arguments_pair_each_benchmark_with_its_outputs():
    files = types.SimpleNamespace(benchmarks=["a b.jsonl", "c.jsonl"])
    outs = types.SimpleNamespace(samples=["s1", "s2", "s3", "s4"], summaries=["m1", "m2", "m3", "m4"])
    wildcards = types.SimpleNamespace(size="small", method="grpo", seed="0")
    got = commands.eval_run_models(wildcards, files, outs, {2: "run/checkpoint-2", 4: "run/checkpoint-4"})
    assert got == (
        "--model-dir run/checkpoint-2 --tag size=small --tag method=grpo --tag seed=0 --tag step=2"
        " --benchmark-file 'a b.jsonl' --out s1 --summary m1 --benchmark-file c.jsonl --out s2 --summary m2"
        " --model-dir run/checkpoint-4 --tag size=small --tag method=grpo --tag seed=0 --tag step=4"
        " --benchmark-file 'a b.jsonl' --out s3 --summary m3 --benchmark-file c.jsonl --out s4 --summary m4"
    )
    assert commands.file_args(("--config", [])) == ""
