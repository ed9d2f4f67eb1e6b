"""The multi-GPU launch plan (command construction only: no GPU here)."""

import pytest

from cwgrpo.configs import ConfigError
from cwgrpo.launch import plan
from cwgrpo.train import TrainJob


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
    assert cmd[-len(argv) :] == argv


def test_plan_without_server_uses_the_first_gpus():
    job = TrainJob(launcher="accelerate", num_processes=2)
    server, _, _, env = plan(["train"], job, ["4", "5", "6"], "m")
    assert server is None
    assert env["CUDA_VISIBLE_DEVICES"] == "4,5"


def test_plan_refuses_too_few_gpus_naming_the_counts():
    job = TrainJob(launcher="accelerate", num_processes=3, vllm_server_gpu=3)
    with pytest.raises(ConfigError, match="need 4 GPUs, but 2 are visible"):
        plan(["train"], job, ["0", "1"], "m")


def test_unknown_accelerate_config_lists_known_ones():
    job = TrainJob(launcher="accelerate", num_processes=1, accelerate_config="zero9")
    with pytest.raises(ConfigError, match="zero9"):
        plan(["train"], job, ["0"], "m")


def test_plan_gives_the_vllm_server_the_released_engine_options():
    """Released: an in-process engine with max_model_len 4096, 0.7 of the GPU, eager mode."""
    job = TrainJob(
        launcher="accelerate",
        num_processes=3,
        vllm_server_gpu=3,
        vllm_max_model_len=4096,
        vllm_gpu_memory_utilization=0.7,
        vllm_enforce_eager=True,
    )
    server, _, _, _ = plan(["train"], job, ["0", "1", "2", "3"], "m")
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
