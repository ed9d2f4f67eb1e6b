"""The paper preset's vLLM server on real vLLM (CPU build): its command line, vLLM's parser, and the
trainer's generation through it.

One server for the module (start-up 40-60 s), started as ``cwgrpo.launch.launcher`` starts it: the command
``launch.plan`` builds from the paper preset's training options, ports claimed through
``cwgrpo.launch.devices`` (in ``SERVER_PORTS``), ``vllm_server.wait_for_server``. Its context is shrunk from 4096 to
``SHRUNK_CONTEXT`` (the tiny model has 256 positions; the bug and its fix do not depend on the size), and
GPU ids are names only (vLLM's CPU build ignores ``CUDA_VISIBLE_DEVICES``).
"""

from __future__ import annotations

import json
import os
import subprocess
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from cwgrpo.launch.devices import PORT_RANGE_ENV, lease
from cwgrpo.launch.launcher import plan
from cwgrpo.launch.multinode import ports_needed
from cwgrpo.launch.vllm_server import wait_for_server
from cwgrpo.train.options import split_options
from tests.vllm.conftest import REPO, run_in_vllm

HERE = Path(__file__).resolve().parent
SHRUNK_CONTEXT = 128
SERVER_PORTS = "31500-31999"
GPUS = ["0", "1", "2", "3"]  # the paper preset's 3 training GPUs + the server's
# Prompts of different lengths in one call: the three training processes' prompts reach the server together.
PROMPTS = ["Compute 2+2.", "What is the sum of the first ten odd numbers?", "Solve x^2 = 49 for x > 0."]


def paper_train_options(**overrides: Any) -> dict[str, Any]:
    """The paper preset's ``train`` section, with ``overrides``."""
    return {**yaml.safe_load((REPO / "config" / "paper.yaml").read_text())["train"], **overrides}


@dataclass
class Server:
    port: int
    train_env: dict[str, str]  # what the launcher gives its training processes (the server's ports)
    command: list[str]


@pytest.fixture(scope="module")
def paper_server(vllm_python, tiny_model_dir, tmp_path_factory):
    job, trl_options = split_options(paper_train_options(vllm_max_model_length=SHRUNK_CONTEXT))
    log = tmp_path_factory.mktemp("vllm-server") / "server.log"
    # a range of its own: tests that stand in for servers on the default range use lock folders of their own
    with lease(0, ports_needed(job), {**os.environ, PORT_RANGE_ENV: SERVER_PORTS}) as held:
        command, server_env, _, train_env = plan(
            ["train"], job, GPUS, str(tiny_model_dir), held.ports, trl_options
        )
        env = {**os.environ, **server_env, "PATH": f"{vllm_python.parent}{os.pathsep}{os.environ['PATH']}"}
        env |= {"VLLM_CPU_KVCACHE_SPACE": "2", "HF_HUB_OFFLINE": "1"}
        port = int(command[command.index("--port") + 1])
        with log.open("w") as out:
            server = subprocess.Popen(command, env=env, stdout=out, stderr=subprocess.STDOUT)
        try:
            try:
                wait_for_server(f"http://localhost:{port}/health", server, timeout_s=600)
            except RuntimeError as err:
                raise AssertionError(f"{err}:\n{log.read_text()[-4000:]}") from err
            yield Server(port, train_env, command)
        finally:
            server.terminate()
            try:
                server.wait(timeout=60)
            except subprocess.TimeoutExpired:
                server.kill()


def test_vllm_parser_accepts_the_launchers_paper_command(vllm_python, tiny_model_dir):
    """The paper preset's full engine options (4096-token context, 0.7 of the GPU, eager), as the launcher
    writes them, through TRL's `vllm-serve` parser and then vLLM's own `vllm serve` parser and checks."""
    job, trl_options = split_options(paper_train_options())
    command, server_env, _, _ = plan(
        ["train"], job, GPUS, str(tiny_model_dir), (29500, 29501, 29502), trl_options
    )
    assert server_env == {"CUDA_VISIBLE_DEVICES": "3"}
    resolved = json.loads(run_in_vllm(vllm_python, HERE / "parse_server_command.py", *command, timeout=300))
    assert resolved["model"] == str(tiny_model_dir)
    assert resolved["port"] == 29501
    assert resolved["max_model_len"] == 4096
    assert resolved["gpu_memory_utilization"] == 0.7
    assert resolved["enforce_eager"] is True


def test_the_server_runs_with_the_engine_options_it_was_given(paper_server):
    """What the started server reports (/server_info, vLLM's resolved config), not what we passed."""
    url = f"http://localhost:{paper_server.port}/server_info?config_format=json"
    with urllib.request.urlopen(url, timeout=30) as answer:
        config = json.load(answer)["vllm_config"]
    assert config["model_config"]["max_model_len"] == SHRUNK_CONTEXT
    assert config["model_config"]["enforce_eager"] is True
    assert config["cache_config"]["gpu_memory_utilization"] == 0.7


def test_training_completions_get_the_rest_of_the_context_not_16_tokens(
    paper_server, vllm_python, tiny_model_dir, tmp_path, monkeypatch
):
    """The paper preset's generation settings (generation_kwargs {max_tokens: null}, temperature 0.7,
    G = 12, max_completion_length 4096) through the trainer's own generation and TRL's client: each
    completion gets the rest of its prompt's context, as the released engine gave it; vLLM's completions
    endpoint turns the null into 16 tokens. ``ignore_eos`` is added so that no completion ends early and
    every length is known (the tiny model often samples EOS)."""
    preset = paper_train_options()
    options = paper_train_options(
        vllm_max_model_length=SHRUNK_CONTEXT,
        generation_kwargs={**preset["generation_kwargs"], "ignore_eos": True},
        max_steps=1,
        bf16=False,  # CPU
        gradient_checkpointing=False,
        model_init_kwargs=None,  # bf16 + flash-attention: the GPU's
    )
    assert options["generation_kwargs"]["max_tokens"] is None
    spec = tmp_path / "spec.json"
    spec.write_text(json.dumps({
        "options": options, "model_dir": str(tiny_model_dir), "run_dir": str(tmp_path / "run"),
        "prompts": PROMPTS,
    }))  # fmt: skip
    for name, value in paper_server.train_env.items():  # the server's ports, as the launcher passes them
        monkeypatch.setenv(name, value)
    out = run_in_vllm(vllm_python, HERE / "trainer_generate.py", str(spec), timeout=600)
    rows = json.loads(out.splitlines()[-1])
    assert len(rows) == len(PROMPTS) * options["num_generations"]
    assert len({row["prompt"] for row in rows}) == len(PROMPTS)  # one call, prompts of different lengths
    lengths = [row["completion"] for row in rows]
    budgets = [SHRUNK_CONTEXT - row["prompt"] for row in rows]  # below max_completion_length (4096)
    assert lengths == budgets, f"completion lengths {lengths}, budgets (context - prompt) {budgets}"


def test_gpu_acceptance_scripts_server_path_runs_on_cpu(paper_server, vllm_python, tiny_model_dir, tmp_path):
    """benchmarks/gpu_acceptance.py's server path (TRL's client as the trainer uses it, the paper's
    generation settings, sampling that ignores EOS) against this module's server: every completion gets
    the rest of its prompt's context. Its colocated path needs a GPU."""
    out = tmp_path / "acceptance.json"
    script = REPO / "benchmarks" / "gpu_acceptance.py"
    url = f"http://localhost:{paper_server.port}"
    run_in_vllm(
        vllm_python, script, "--paths", "server", "--model-dir", str(tiny_model_dir), "--server-url", url,
        "--prompt-tokens", "20", "--completion-tokens", "4096", "--out", str(out), timeout=600,
    )  # fmt: skip
    result = json.loads(out.read_text())
    assert result["server"]["server_context"] == SHRUNK_CONTEXT
    assert result["server"]["budgets"] == [108, 110, 112]  # 128 - prompts of 20, 18 and 16 tokens
    assert result["server"]["completion_lengths"] == [108, 110, 112]
    assert result["passed"] is True
