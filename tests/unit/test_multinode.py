"""The multi-node launch plan (command construction and checks only: no GPU, no Slurm here)."""

import os
from pathlib import Path

import pytest

from cwgrpo.configs import ConfigError
from cwgrpo.launch import multinode
from cwgrpo.launch.launcher import relaunch
from cwgrpo.launch.vllm_server import apply_endpoints
from cwgrpo.train.options import TrainJob

ARGV = ["train", "--model-dir", "m", "--train-data", "d", "--run-dir", "r"]


def _job(**kw) -> TrainJob:
    return TrainJob(launcher="accelerate", **kw)


def _opt(argv: list[str], name: str) -> str:
    return argv[argv.index(name) + 1]


def test_two_nodes_one_srun_each_with_machine_rank_and_the_first_node_as_rendezvous():
    job = _job(num_processes=6, num_nodes=2, vllm_server_gpu=3)
    server, steps = multinode.plan(ARGV, job, ["gpu-a", "gpu-b"], (29500, 29501, 29502), "m", "/c/zero3.yaml")
    assert [s.name for s in steps] == ["train-node0", "train-node1"]
    for rank, (step, node) in enumerate(zip(steps, ["gpu-a", "gpu-b"], strict=True)):
        assert step.argv[:6] == ["srun", "--nodes=1", "--ntasks=1", f"--nodelist={node}", "--overlap",
                                 "--kill-on-bad-exit=1"]  # fmt: skip
        launch = step.argv[step.argv.index("--", 6) + 1 :]
        assert launch[1:3] == ["-m", "cwgrpo.launch.workers"]
        assert _opt(launch, "--num_processes") == "6" and _opt(launch, "--num_machines") == "2"
        assert _opt(launch, "--machine_rank") == str(rank)
        assert _opt(launch, "--main_process_ip") == "gpu-a" and _opt(launch, "--main_process_port") == "29500"
        assert _opt(launch, "--config_file") == "/c/zero3.yaml"
        assert _opt(launch, "--deepspeed_multinode_launcher") == "standard"
        assert launch[-len(ARGV) :] == ARGV
        assert step.env["CWGRPO_VLLM_SERVER_HOST"] == "gpu-a"
    # node 0: GPUs 0-2 train, 3 serves; node 1: GPUs 0-2 train
    assert _opt(steps[0].argv, "--gpus") == "0,1,2" and _opt(steps[1].argv, "--gpus") == "0,1,2"
    assert _opt(server.argv, "--gpus") == "3" and "--nodelist=gpu-a" in server.argv
    serve = server.argv[server.argv.index("--", 6) + 1 :]
    assert serve[:4] == ["trl", "vllm-serve", "--model", "m"] and serve[-4:] == [
        "--host",
        "0.0.0.0",
        "--port",
        "29501",
    ]
    assert multinode.gpus_per_node(job) == 4 and multinode.nodes_needed(job) == 2


def test_server_on_a_node_of_its_own_is_the_allocations_last():
    job = _job(num_processes=8, num_nodes=2, vllm_server_gpu=0, vllm_server_node=True)
    server, steps = multinode.plan(ARGV, job, ["a", "b", "c"], (1, 2, 3), "m", "z.yaml")
    assert "--nodelist=c" in server.argv and _opt(server.argv, "--gpus") == "0"
    assert [_opt(s.argv, "--gpus") for s in steps] == ["0,1,2,3", "0,1,2,3"]
    assert steps[1].env["CWGRPO_VLLM_SERVER_HOST"] == "c"
    assert multinode.nodes_needed(job) == 3 and multinode.gpus_per_node(job) == 4


def test_too_few_nodes_in_the_allocation_is_refused_naming_the_count():
    job = _job(num_processes=6, num_nodes=2, vllm_server_gpu=3)
    with pytest.raises(ConfigError, match="need 2 nodes, but the Slurm allocation has 1"):
        multinode.plan(ARGV, job, ["a"], (1, 2, 3), "m", "z.yaml")


def test_pick_gpus_narrows_what_slurm_shows_and_refuses_a_node_with_fewer():
    assert multinode.pick_gpus("4,5,6,7", [0, 1, 2], "n1") == "4,5,6"
    assert multinode.pick_gpus("4,5,6,7", [3], "n1") == "7"
    with pytest.raises(
        ConfigError, match=r"node n1: this step needs GPU positions \[0, 1, 2, 3\].*shows 2 GPUs"
    ):
        multinode.pick_gpus("0,1", [0, 1, 2, 3], "n1")
    with pytest.raises(ConfigError, match="shows 0 GPUs"):
        multinode.pick_gpus(None, [0], "n1")


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"num_processes": 6, "num_nodes": 4}, "does not split evenly"),
        ({"num_processes": 2, "num_nodes": 0}, "num_nodes=0"),
        ({"num_processes": 2, "vllm_server_node": True}, "needs vllm_server_gpu"),
    ],
)
def test_bad_multinode_options_fail_at_config_time(options, message):
    with pytest.raises(ConfigError, match=message):
        _job(**options)
    with pytest.raises(ConfigError, match="launcher=accelerate"):
        TrainJob(num_nodes=2, num_processes=2)


def test_a_multinode_job_outside_slurm_fails_before_claiming_anything(tmp_path, monkeypatch):
    monkeypatch.setenv("CWGRPO_LOCK_DIR", str(tmp_path / "locks"))
    monkeypatch.delenv("SLURM_JOB_ID", raising=False)
    job = _job(num_processes=2, num_nodes=2)
    with pytest.raises(ConfigError, match="runs inside a Slurm allocation, and SLURM_JOB_ID is not set"):
        relaunch(ARGV, job, Path("m"))
    assert not (tmp_path / "locks").exists()


def test_the_wrapper_execs_the_command_on_the_picked_gpus(tmp_path, monkeypatch):
    out = tmp_path / "seen"
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "2,3,5")
    pid = os.fork()
    if pid == 0:  # the child becomes the command
        try:
            multinode.main(["--gpus", "1,2", "--", "sh", "-c", f'printf %s "$CUDA_VISIBLE_DEVICES" > {out}'])
        finally:
            os._exit(99)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    assert out.read_text() == "3,5"
    assert multinode.main(["--gpus", "0,1,2,3", "--", "true"]) == 2  # the node shows 3: refused, no exec


def test_apply_endpoints_points_the_trainer_at_a_server_on_another_node():
    from types import SimpleNamespace

    config = SimpleNamespace(vllm_server_base_url=None, vllm_server_host="0.0.0.0", vllm_server_port=8000,
                             vllm_group_port=51216)  # fmt: skip
    env = {
        "CWGRPO_VLLM_SERVER_PORT": "29501",
        "CWGRPO_VLLM_GROUP_PORT": "29502",
        "CWGRPO_VLLM_SERVER_HOST": "c",
    }
    apply_endpoints(config, env)
    assert (config.vllm_server_host, config.vllm_server_port, config.vllm_group_port) == ("c", 29501, 29502)


def test_run_steps_returns_the_first_failure_and_stops_the_other_nodes():
    import time

    steps = [
        multinode.Step("train-node0", ["sh", "-c", "sleep 0.2; exit 3"]),
        multinode.Step("train-node1", ["sleep", "60"]),  # would wait for node 0 forever
    ]
    started = time.monotonic()
    assert multinode.run_steps(None, steps) == 3
    assert time.monotonic() - started < 30


def test_allocation_nodes_from_scontrol_when_the_job_step_plugin_removed_the_node_list(tmp_path):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "srun").write_text("#!/bin/sh\nexit 0\n")
    (bin_dir / "scontrol").write_text(
        '#!/bin/sh\ncase "$2" in\n'
        '  job) echo "JobId=$4 JobName=x NodeList=gpu[01-02] BatchHost=gpu01" ;;\n'
        '  hostnames) [ "$3" = "gpu[01-02]" ] && printf "gpu01\\ngpu02\\n" ;;\nesac\n'
    )
    for tool in ("srun", "scontrol"):
        (bin_dir / tool).chmod(0o755)
    env = {"SLURM_JOB_ID": "42", "PATH": f"{bin_dir}:{os.environ['PATH']}"}
    assert multinode.allocation_nodes(env) == ["gpu01", "gpu02"]
    with pytest.raises(ConfigError, match="needs Slurm's `srun` on PATH"):
        multinode.allocation_nodes({"SLURM_JOB_ID": "42", "PATH": str(tmp_path / "empty")})
