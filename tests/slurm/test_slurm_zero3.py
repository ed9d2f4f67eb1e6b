"""The 7B two-node overlay's ZeRO-3 training, run for real through a real (one-node, throwaway) Slurm cluster.

`cwgrpo train` with the options the workflow gives the 7B run under `config/paper.yaml
config/paper-7b-2nodes.yaml config/rehearsal.yaml` (zero3, num_nodes 2, 2 processes: 1 a node, use_cpu,
bf16, the reference model, 2 steps, a checkpoint at step 2) runs in the batch step of a real allocation
under the training interpreter (`CWGRPO_TRAIN_PYTHON`, the DeepSpeed environment), as the train rule's
command does. From there everything is the package's and the libraries' own: `cwgrpo.launch.multinode.relaunch`
reads the node list from `scontrol`, claims the rendezvous port, starts one real `srun` step per node,
each running `accelerate launch` with the bundled zero3.yaml, `--num_machines 2 --machine_rank I`, which
starts one training process that joins DeepSpeed ZeRO-3 over gloo (DeepSpeed's CPU accelerator).

The closest the harness allows, and what differs from two real nodes: the cluster has one node, listed
twice (tests/slurm/nodes_twice/sitecustomize.py doubles what `scontrol` returns), so both srun steps
land on that node and rendezvous at its address; the CUDA_VISIBLE_DEVICES ids are fake (the torch is CPU
only); the model is the tiny one built here without its warm-up, and the rollouts are shrunk (SHRUNK).

Needs Slurm (tests/slurm/slurm_harness.py) and the DeepSpeed environment (`CWGRPO_DEEPSPEED_PYTHON`, else
.venv-deepspeed); skips without either, fails instead with CWGRPO_REQUIRE_SLURM=1 /
CWGRPO_REQUIRE_DEEPSPEED=1.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from cwgrpo_workflow.dag.options import train_options
from tests.conftest import side_env_or_skip
from tests.slurm import test_slurm
from tests.slurm.slurm_harness import SlurmCluster
from tests.slurm.test_slurm import PAPER, REPO, _slurm_env

pytestmark = test_slurm.pytestmark
slurm_cluster = test_slurm.slurm_cluster  # the cluster fixture, started once for this module too
OVERLAYS = (PAPER, REPO / "config" / "paper-7b-2nodes.yaml", REPO / "config" / "rehearsal.yaml")
ZERO3 = REPO / "cwgrpo" / "resources" / "accelerate" / "zero3.yaml"  # the bundled file, unchanged
NODES_TWICE = Path(__file__).with_name("nodes_twice")
# The rehearsal's 7B options shrunk further, for time only: 4 completions of 8 tokens a prompt.
SHRUNK = {"num_generations": 4, "per_device_train_batch_size": 4, "max_completion_length": 8}


@pytest.fixture(scope="module")
def deepspeed_python() -> Path:
    python = side_env_or_skip("DeepSpeed", "deepspeed")
    if not (python.parent.parent / "torch_extensions").is_dir():
        pytest.fail(f"{python}: its environment has no compiled op in torch_extensions/ (`make deepspeed`)")
    return python


def two_node_options() -> dict:
    """The 7B run's options as the workflow writes them for the three files (Snakemake's key-by-key
    merge), then SHRUNK."""
    from snakemake.utils import update_config

    config: dict = {}
    for path in OVERLAYS:
        update_config(config, yaml.safe_load(path.read_text()))
    method = next(iter(config["methods"]))
    return {**train_options(config, "7b", method, config["seeds"][0]), **SHRUNK}


def test_two_node_zero3_trains_through_srun_steps(
    deepspeed_python: Path, slurm_cluster: SlurmCluster, tmp_path: Path
):
    options = two_node_options()
    assert (options["accelerate_config"], options["num_nodes"], options["num_processes"]) == ("zero3", 2, 2)
    assert options["use_cpu"] and options["bf16"] and options["beta"] > 0 and options["max_steps"] == 2
    (tmp_path / "options.yaml").write_text(yaml.safe_dump(options))
    for args in (["build-tiny", "--size", "small", "--out-dir", "model", "--marker", "model.json"],
                 ["prepare-data", "--dataset", "syn_train", "--out", "syn_train.jsonl"]):  # fmt: skip
        subprocess.run(
            [sys.executable, "-m", "cwgrpo.cli", *args], cwd=tmp_path, check=True, capture_output=True
        )
    records = tmp_path / "records"
    records.mkdir()
    train = [sys.executable, "-m", "cwgrpo.cli", "train", "--model-dir", "model", "--train-data",
             "syn_train.jsonl", "--run-dir", "run", "--config", "options.yaml"]  # fmt: skip
    env = _slurm_env(slurm_cluster) | {
        "CWGRPO_TRAIN_PYTHON": str(deepspeed_python),
        "PYTHONPATH": os.pathsep.join([str(REPO), str(NODES_TWICE)]),
        "CWGRPO_TEST_NODES_TWICE": "1",
        "CWGRPO_TEST_RECORD_DIR": str(records),
        "CUDA_VISIBLE_DEVICES": "0,1",  # fake ids: the torch is CPU only
        "CWGRPO_LOCK_DIR": str(tmp_path / "locks"),
        "HF_HUB_OFFLINE": "1",
        "OMP_NUM_THREADS": "1",
        "XDG_CACHE_HOME": str(tmp_path / "cache"),  # no op compiled in torch's default cache
    }
    log = tmp_path / "job.log"
    proc = subprocess.run(
        ["sbatch", "--wait", "--nodes=1", "--ntasks=1", "-t", "15", "-o", str(log), "-D", str(tmp_path),
         "--wrap", " ".join(train)],
        env=env, capture_output=True, text=True, timeout=900,
    )  # fmt: skip
    text = log.read_text(errors="replace") if log.is_file() else ""
    assert proc.returncode == 0, f"{proc.stdout}{proc.stderr}\n{text[-6000:]}\n{slurm_cluster.diagnostics()}"

    # One real srun step per "node", each with one training process of the two.
    launched = dict(re.findall(r"launching train-node(\d): (srun .*)", text))
    assert sorted(launched) == ["0", "1"], text[-6000:]
    for rank, line in launched.items():
        print(line)
        assert line.startswith(f"srun --nodes=1 --ntasks=1 --nodelist={slurm_cluster.node} --overlap "), line
        # accelerate launch through cwgrpo.launch.workers (its agent tied to the step, as on one node)
        launch = f"{deepspeed_python} -m cwgrpo.launch.workers --config_file {ZERO3} --num_processes 2"
        assert (
            f" {launch} --num_machines 2 --machine_rank {rank} --main_process_ip {slurm_cluster.node} "
            in line
        )
    ranks = [json.loads((records / f"rank{r}.json").read_text()) for r in (0, 1)]
    assert [(r["group_rank"], r["world_size"]) for r in ranks] == [("0", "2"), ("1", "2")]
    assert len({r["slurm_step"] for r in ranks}) == 2 and None not in {r["slurm_step"] for r in ranks}
    assert ranks[0]["master"] == ranks[1]["master"] and ranks[0]["master"].startswith(slurm_cluster.node)
    assert [r["gpus"] for r in ranks] == ["0", "0"]  # position 0 of each node's (fake) devices
    # The op compiled into the DeepSpeed environment, not the (here empty) default cache.
    assert {r["op_cache"] for r in ranks} == {str(deepspeed_python.parent.parent / "torch_extensions")}
    # accelerate and DeepSpeed: 2 processes, ZeRO stage 3, over gloo.
    for rank in (0, 1):
        print(re.search(f".*training process {rank} of .*", text)[0])
        assert f"training process {rank} of 2 (DEEPSPEED, ZeRO-3, backend gloo)" in text, text[-6000:]

    run = tmp_path / "run"
    assert [json.loads(line)["step"] for line in (run / "metrics.jsonl").read_text().splitlines()] == [1, 2]
    assert json.loads((run / "run.json").read_text())
    assert (run / "steps" / "step2.json").is_file()
    ckpt = run / "checkpoint-2"
    names = sorted(p.relative_to(ckpt).as_posix() for p in ckpt.rglob("*") if p.is_file())
    for rank in (0, 1):
        assert f"rng_state_{rank}.pth" in names, names
        assert f"global_step2/zero_pp_rank_{rank}_mp_rank_00_model_states.pt" in names, names
        assert f"global_step2/bf16_zero_pp_rank_{rank}_mp_rank_00_optim_states.pt" in names, names
    assert "model.safetensors" in names  # zero3_save_16bit_model: whole weights, which evaluation reads
