"""cwgrpo.launch.launcher: the multi-GPU launch plan (command construction only: no GPU here)."""

from pathlib import Path
from types import SimpleNamespace

import pytest

from cwgrpo.configs import ConfigError
from cwgrpo.launch.launcher import accelerate_config_path, plan, relaunch
from cwgrpo.launch.vllm_server import apply_endpoints
from cwgrpo.launch.workers import op_cache_env
from cwgrpo.train.options import TrainJob


def test_plan_pins_vllm_server_and_training_to_disjoint_gpus():
    job = TrainJob(launcher="accelerate", num_processes=3, vllm_server_gpu=3)
    argv = ["train", "--model-dir", "m", "--train-data", "d", "--run-dir", "r"]
    server, server_env, cmd, env = plan(argv, job, ["0", "1", "2", "3"], "m")
    assert server == ["trl", "vllm-serve", "--model", "m"]
    assert server_env == {"CUDA_VISIBLE_DEVICES": "3"}
    assert env["CUDA_VISIBLE_DEVICES"] == "0,1,2"
    assert env["CWGRPO_LAUNCHED"] == "1"
    assert cmd[cmd.index("--num_processes") + 1] == "3"
    assert cmd[cmd.index("--config_file") + 1].endswith("accelerate/zero2.yaml")
    assert cmd[1:3] == ["-m", "cwgrpo.launch.workers"]  # accelerate launch, each worker tied to the job
    assert cmd[-len(argv) :] == argv


def test_training_processes_find_the_op_compiled_into_their_environment_unless_told(tmp_path):
    """`make deepspeed` compiles DeepSpeed's CPU op into <env>/torch_extensions; a user's
    TORCH_EXTENSIONS_DIR wins, and an environment without that folder changes nothing."""
    assert op_cache_env({}, str(tmp_path)) == {}
    (tmp_path / "torch_extensions").mkdir()
    assert op_cache_env({}, str(tmp_path)) == {"TORCH_EXTENSIONS_DIR": str(tmp_path / "torch_extensions")}
    assert op_cache_env({"TORCH_EXTENSIONS_DIR": "/elsewhere"}, str(tmp_path)) == {}


def test_plan_without_server_uses_the_first_gpus():
    job = TrainJob(launcher="accelerate", num_processes=2)
    server, _, _, env = plan(["train"], job, ["4", "5", "6"], "m")
    assert server is None
    assert env["CUDA_VISIBLE_DEVICES"] == "4,5"


def test_a_cpu_run_claims_no_gpu_and_hides_them_from_its_processes(monkeypatch, tmp_path):
    from cwgrpo.launch.launcher import gpus_needed

    job = TrainJob(launcher="accelerate", num_processes=2)
    assert gpus_needed(job, {"use_cpu": True}) == 0 and gpus_needed(job, {}) == 2
    _, _, command, env = plan(["train"], job, [], "m", trl_options={"use_cpu": True})
    assert env["CUDA_VISIBLE_DEVICES"] == "" and command[command.index("--num_processes") + 1] == "2"
    with pytest.raises(ConfigError, match="need 2 GPUs, but 0 are visible"):
        plan(["train"], job, [], "m")


def test_plan_refuses_too_few_gpus_naming_the_counts():
    job = TrainJob(launcher="accelerate", num_processes=3, vllm_server_gpu=3)
    with pytest.raises(ConfigError, match="need 4 GPUs, but 2 are visible"):
        plan(["train"], job, ["0", "1"], "m")


def test_unknown_accelerate_config_lists_known_ones():
    job = TrainJob(launcher="accelerate", num_processes=1, accelerate_config="zero9")
    with pytest.raises(
        ConfigError, match=r"accelerate_config='zero9': no bundled config; known: \['zero2', 'zero3'\]"
    ):
        plan(["train"], job, ["0"], "m")


def test_plan_gives_the_vllm_server_the_released_engine_options():
    """Released: an in-process engine with max_model_len 4096, 0.7 of the GPU, eager mode."""
    job = TrainJob(launcher="accelerate", num_processes=3, vllm_server_gpu=3, vllm_enforce_eager=True)
    trl_options = {"vllm_max_model_length": 4096, "vllm_gpu_memory_utilization": 0.7}  # TRL's names
    server, _, _, _ = plan(["train"], job, ["0", "1", "2", "3"], "m", trl_options=trl_options)
    assert server == [
        "trl", "vllm-serve", "--model", "m", "--max_model_len", "4096",
        "--gpu_memory_utilization", "0.7", "--enforce_eager", "true",
    ]  # fmt: skip
    # ... and TRL's own `vllm-serve` parser turns them into the vLLM engine's flags
    from trl.scripts.vllm_serve import build_command, make_parser

    script_args, extra = make_parser().parse_args_and_config(args=server[2:], return_remaining_strings=True)
    vllm_cmd = build_command(script_args)
    assert extra == []
    assert vllm_cmd[vllm_cmd.index("--max-model-len") + 1] == "4096"
    assert vllm_cmd[vllm_cmd.index("--gpu-memory-utilization") + 1] == "0.7"
    assert "--enforce-eager" in vllm_cmd


def test_plan_with_claimed_ports_gives_each_process_its_own():
    job = TrainJob(launcher="accelerate", num_processes=3, vllm_server_gpu=3)
    server, _, cmd, env = plan(["train"], job, ["4", "5", "6", "7"], "m", ports=(29500, 29501, 29502))
    assert server[-2:] == ["--port", "29501"]
    assert cmd[cmd.index("--main_process_port") + 1] == "29500"
    assert env["CWGRPO_VLLM_SERVER_PORT"] == "29501" and env["CWGRPO_VLLM_GROUP_PORT"] == "29502"
    with pytest.raises(ValueError, match="needs 3 ports"):
        plan(["train"], job, ["0", "1", "2", "3"], "m", ports=(1, 2))


def test_apply_endpoints_points_the_trainer_at_its_server_and_refuses_a_base_url():
    config = SimpleNamespace(vllm_server_base_url=None, vllm_server_port=8000, vllm_group_port=51216)
    apply_endpoints(config, {})
    assert (config.vllm_server_port, config.vllm_group_port) == (8000, 51216)
    apply_endpoints(config, {"CWGRPO_VLLM_SERVER_PORT": "29501", "CWGRPO_VLLM_GROUP_PORT": "29502"})
    assert (config.vllm_server_port, config.vllm_group_port) == (29501, 29502)
    config.vllm_server_base_url = "http://elsewhere:8000"
    with pytest.raises(ConfigError, match="starts the vLLM server itself"):
        apply_endpoints(config, {"CWGRPO_VLLM_SERVER_PORT": "1", "CWGRPO_VLLM_GROUP_PORT": "2"})
    job = TrainJob(launcher="accelerate", num_processes=1, vllm_server_gpu=1)
    with pytest.raises(ConfigError, match="vllm_server_base_url is set"):
        relaunch(["train"], job, Path("m"), {"vllm_server_base_url": "http://x:1"})


def test_accelerate_config_by_path_or_bundled_name(tmp_path, monkeypatch):
    assert accelerate_config_path("zero3").name == "zero3.yaml"
    own = tmp_path / "fsdp.yaml"
    own.write_text("distributed_type: FSDP\n")
    monkeypatch.chdir(tmp_path)
    assert accelerate_config_path("fsdp.yaml") == own.resolve()
    assert accelerate_config_path(str(own)) == own
    with pytest.raises(ConfigError, match=r"'missing/zero2\.yaml': no such file"):
        accelerate_config_path("missing/zero2.yaml")


def test_relaunch_refuses_a_missing_accelerate_config_before_claiming_gpus(tmp_path, monkeypatch):
    monkeypatch.setenv("CWGRPO_LOCK_DIR", str(tmp_path / "locks"))
    job = TrainJob(launcher="accelerate", num_processes=1, accelerate_config="nowhere/ds.yaml")
    with pytest.raises(ConfigError, match="no such file"):
        relaunch(["train"], job, Path("m"))
    assert not (tmp_path / "locks").exists()


def test_train_gives_relaunch_plain_values_with_the_folders_a_recipe_names(tmp_path, monkeypatch):
    """`cwgrpo train --config recipe.yaml` with launcher accelerate: relaunch gets the recipe's model folder
    as a value, and the children's command names every folder (the recipe's too) and this call's options,
    whatever `sys.argv` holds (here pytest's: no --model-dir there to read back)."""
    import yaml

    from cwgrpo import cli
    from cwgrpo.launch import launcher as launch

    seen = {}

    def record(command, job, model_dir, trl_options=None):
        seen.update(command=command, job=job, model_dir=model_dir, trl_options=trl_options)
        return 0

    monkeypatch.setattr(launch, "relaunch", record)
    monkeypatch.delenv("CWGRPO_LAUNCHED", raising=False)
    monkeypatch.chdir(tmp_path)
    recipe = tmp_path / "recipe.yaml"
    recipe.write_text(
        yaml.safe_dump(
            {"model_name_or_path": "m", "dataset_name": "d.jsonl", "output_dir": "o", "use_cpu": True,
             "bf16": False, "max_steps": 2, "launcher": "accelerate", "num_processes": 2}
        )
    )  # fmt: skip
    assert cli.main(["train", "--config", str(recipe), "--set", "seed=3", "--tag", "seed=3"]) == 0
    assert seen["model_dir"] == Path("m")
    assert seen["command"] == [
        "train", "--model-dir", "m", "--train-data", "d.jsonl", "--run-dir", "o",
        "--timings", str(Path("o") / "timings.jsonl"), "--tag", "seed=3", "--config", str(recipe),
        "--set", "seed=3",
    ]  # fmt: skip
    assert seen["job"].num_processes == 2 and seen["trl_options"]["seed"] == 3
    assert cli.main(["train", "--config", str(recipe), "--model-dir", "other", "--timings", "t.jsonl"]) == 0
    assert seen["model_dir"] == Path("other")  # a flag on the command line wins over the recipe
    assert seen["command"][:4] == ["train", "--model-dir", "other", "--train-data"]
    assert seen["command"][seen["command"].index("--timings") + 1] == "t.jsonl"


def test_a_workflow_jobs_options_file_reaches_every_launched_process_unchanged(tmp_path, monkeypatch):
    """The workflow gives `cwgrpo train` one options file (cwgrpo_workflow.dag.options) and no --set: the accelerate
    and multi-node launchers pass that file on as it is, with no --set round trip."""
    from cwgrpo import cli
    from cwgrpo.configs import options_text
    from cwgrpo.launch import launcher as launch
    from cwgrpo.launch import multinode
    from cwgrpo_workflow.dag.options import write_option_files

    seen = {}
    monkeypatch.setattr(
        launch, "relaunch", lambda command, job, *a, **k: seen.update(command=command, job=job)
    )
    monkeypatch.delenv("CWGRPO_LAUNCHED", raising=False)
    monkeypatch.chdir(tmp_path)
    options = tmp_path / "options" / "train" / "small" / "grpo" / "seed0.yaml"
    opts = {"use_cpu": True, "bf16": False, "max_steps": 2, "learning_rate": 1e-06, "launcher": "accelerate",
            "num_processes": 6, "num_nodes": 2, "seed": 0}  # fmt: skip
    assert write_option_files([(options, options_text(opts))]) == []
    argv = ["train", "--model-dir", "m", "--train-data", "d.jsonl", "--run-dir", "o", "--timings", "t.jsonl",
            "--tag", "size=small", "--tag", "method=grpo", "--tag", "seed=0", "--config", str(options)]  # fmt: skip
    cli.main(argv)
    assert seen["command"] == argv and "--set" not in seen["command"]
    assert seen["job"].num_nodes == 2
    _, steps = multinode.plan(seen["command"], seen["job"], ["a", "b"], (29500,), "m", "z.yaml")
    assert all(step.argv[-len(argv) :] == argv for step in steps)


def test_a_training_process_killed_alone_is_named_with_the_way_forward(tmp_path, caplog, capfd):
    """Weak spot: a rank killed alone ended the job in torch's ChildFailedError traceback with no line of
    ours. Real torchrun, two processes, rank 1 killed by SIGKILL: its output still reaches the job's log,
    and one line says which process died, how, and that a rerun resumes."""
    import logging
    import sys

    from cwgrpo.launch.launcher import _run

    script = tmp_path / "one_rank_dies.py"
    script.write_text(
        "import os, signal, time\n"
        "if os.environ['RANK'] == '1':\n"
        "    os.kill(os.getpid(), signal.SIGKILL)\n"
        "time.sleep(60)\n"
    )
    command = [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--standalone",
        "--nproc-per-node",
        "2",
        str(script),
    ]
    with caplog.at_level(logging.ERROR, logger="cwgrpo.launch.launcher"):
        code = _run(None, {}, command, {})
    assert code != 0
    assert "Root Cause (first observed failure)" in capfd.readouterr().err  # torch's own summary, relayed
    assert (
        "training process of rank 1 (local rank 1) ended (killed by SIGKILL), and the job with it; rerun the "
        "same command: it resumes from the newest complete checkpoint"
    ) in caplog.text


def test_the_failed_rank_is_read_from_torchs_own_summary_header():
    """Campaign #59: a log line mentioning a root cause before the summary named the wrong process."""
    from cwgrpo.launch.launcher import failed_rank

    summary = (
        b"ValueError: Root Cause of divergence unknown\n"
        b"Failures:\n[1]:\n  rank      : 0 (local_rank: 0)\n  exitcode  : 1 (pid: 10)\n"
        b"Root Cause (first observed failure):\n[0]:\n  rank      : 3 (local_rank: 1)\n  exitcode  : -9 (pid: 12)\n"
    )
    assert failed_rank(summary).startswith(
        "training process of rank 3 (local rank 1) ended (killed by SIGKILL)"
    )
    assert failed_rank(b"ValueError: Root Cause of divergence unknown\n") is None
