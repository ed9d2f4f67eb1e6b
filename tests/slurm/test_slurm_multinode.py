"""A 1-node and a 2-node training job on a real (one-node, throwaway) Slurm cluster.

`test_sbatch_lines_of_a_1_node_and_a_2_node_training_job`: the paper preset with the 2-node overlay
(config/paper-7b-2nodes.yaml) submits train_1_5b and train_7b through profiles/slurm and the plugin;
`--verbose` logs each sbatch line. The 1.5B line asks for one node's --gpus=4, the 7B line for --nodes=2,
one task per node and --gres=gpu:4 per node. The test node has no GPU, so sbatch refuses both after that.

`test_two_node_launch_runs_one_srun_step_per_node`: what can run of a 2-node job on one CPU node.
`cwgrpo.launch.multinode.relaunch`, as `cwgrpo train` calls it, runs in the batch step of a real allocation:
the node list from `scontrol` (SLURM_JOB_NODELIST removed, as the Snakemake job-step plugin does), a
port lease, the plan, one real `srun` step per node and the `python -m cwgrpo.launch.multinode --gpus` wrapper.
Two stand-ins: the one node is listed twice (a cluster of one cannot give two), and each step's
`accelerate launch` is replaced by a process that joins a torch.distributed (gloo, CPU) group at the
plan's --main_process_ip:--main_process_port with rank --machine_rank of --num_machines, and all-reduces.
The same path with the real `accelerate launch` and DeepSpeed ZeRO-3: tests/slurm/test_slurm_zero3.py.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import yaml

from tests.slurm import test_slurm
from tests.slurm.slurm_harness import SlurmCluster
from tests.slurm.test_slurm import (
    PAPER,
    REPO,
    _jobs,
    _slurm_env,
)

pytestmark = test_slurm.pytestmark
slurm_cluster = test_slurm.slurm_cluster  # the cluster fixture, started once for this module too
TWO_NODES = REPO / "config" / "paper-7b-2nodes.yaml"


def test_sbatch_lines_of_a_1_node_and_a_2_node_training_job(slurm_cluster: SlurmCluster, tmp_path: Path):
    paper = yaml.safe_load(PAPER.read_text())
    preset, method, seed = paper["name"], next(iter(paper["methods"])), paper["seeds"][0]
    for rel in ["models/1.5b/base.json", "models/7b/base.json", f"data/{paper['data']['train']}.jsonl"]:
        (tmp_path / "results" / preset / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / "results" / preset / rel).touch()
    targets = [f"results/{preset}/runs/{size}/{method}/seed{seed}/run.json" for size in ("1.5b", "7b")]
    returncode, log, calls = test_slurm.submit_verbosely(slurm_cluster, tmp_path, targets, PAPER, TWO_NODES)
    assert sorted(j["rule"] for j in _jobs(log).values()) == ["train_1_5b", "train_7b"], log[-4000:]
    heads = {}
    for rule in ("train_1_5b", "train_7b"):
        call = next(c for c in calls if f"--comment rule_{rule}_" in c)
        heads[rule] = f" {call.split(' --wrap=', 1)[0]} "
        print(f"{rule}: {heads[rule].strip()}")
    one, two = heads["train_1_5b"], heads["train_7b"]
    for option in (" --gpus=4 ", " --cpus-per-task=32 ", " --mem 256000 ", " -t 2880 "):
        assert option in one, (option, one)
    assert " --nodes=" not in one and " --gres=" not in one
    for option in (" --nodes=2 ", " --ntasks=2 ", " --gres=gpu:4 ", " --cpus-per-task=32 ", " --mem 256000 "):
        assert option in two, (option, two)
    assert " --gpus=" not in two and "--ntasks-per-gpu" not in two, two
    # Refused by sbatch (no GPU and one node here), not by Snakemake or the plugin before it.
    assert returncode != 0 and log.count("SLURM sbatch failed. The error message was 'sbatch: error:") == 2, (
        log[-4000:]
    )


DRIVER = """
import json, os, sys
from cwgrpo.launch import multinode
from cwgrpo.train.options import TrainJob

os.environ.pop("SLURM_JOB_NODELIST", None)  # as the Snakemake job-step plugin leaves the environment
real_nodes, real_plan = multinode.allocation_nodes, multinode.plan
STANDIN = [sys.executable, "-c", {standin!r}]

def two_nodes(env):
    nodes = real_nodes(env)
    json.dump(nodes, open({out!r} + "/nodes.json", "w"))
    return nodes * 2  # stand-in: the one node twice

def plan(*args, **kwargs):
    server, steps = real_plan(*args, **kwargs)
    for step in steps:
        launch = step.argv[step.argv.index("--") + 1:]
        opt = {{k: launch[launch.index(k) + 1] for k in ("--machine_rank", "--num_machines",
               "--main_process_ip", "--main_process_port")}}
        step.argv[step.argv.index("--") + 1:] = [*STANDIN, json.dumps(opt), {out!r}]
    json.dump([s.argv for s in steps], open({out!r} + "/steps.json", "w"))
    return server, steps

multinode.allocation_nodes, multinode.plan = two_nodes, plan
job = TrainJob(launcher="accelerate", num_processes=2, num_nodes=2)
sys.exit(multinode.relaunch(["train", "--model-dir", "m"], job, "m", "zero3.yaml", {{}}))
"""

STANDIN = """
import json, os, socket, sys, torch, torch.distributed as dist
opt, out = json.loads(sys.argv[1]), sys.argv[2]
rank, world = int(opt["--machine_rank"]), int(opt["--num_machines"])
dist.init_process_group("gloo", init_method=f"tcp://{opt['--main_process_ip']}:{opt['--main_process_port']}",
                        rank=rank, world_size=world)
total = torch.tensor([rank + 1.0])
dist.all_reduce(total)
record = {"rank": rank, "sum": total.item(), "step": os.environ.get("SLURM_STEP_ID"),
          "gpus": os.environ.get("CUDA_VISIBLE_DEVICES"), "launched": os.environ.get("CWGRPO_LAUNCHED")}
open(f"{out}/rank{rank}.json", "w").write(json.dumps(record))
dist.destroy_process_group()
"""


def test_two_node_launch_runs_one_srun_step_per_node(slurm_cluster: SlurmCluster, tmp_path: Path):
    out = tmp_path / "out"
    out.mkdir()
    out.chmod(0o777)
    driver = tmp_path / "driver.py"
    driver.write_text(DRIVER.format(standin=textwrap.dedent(STANDIN), out=str(out)))
    env = _slurm_env(slurm_cluster)
    env |= {"CUDA_VISIBLE_DEVICES": "5,6", "CWGRPO_LOCK_DIR": str(tmp_path / "locks"), "OMP_NUM_THREADS": "1"}
    proc = subprocess.run(
        ["sbatch", "--wait", "--nodes=1", "--ntasks=1", "-t", "10", "-o", str(tmp_path / "job.log"),
         "-D", str(REPO), "--wrap", f"{sys.executable} {driver}"],
        env=env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    log = (tmp_path / "job.log").read_text(errors="replace") if (tmp_path / "job.log").is_file() else ""
    assert proc.returncode == 0, f"{proc.stdout}{proc.stderr}\n{log[-4000:]}\n{slurm_cluster.diagnostics()}"
    assert json.loads((out / "nodes.json").read_text()) == [slurm_cluster.node]  # from scontrol
    steps = json.loads((out / "steps.json").read_text())
    for argv in steps:
        assert argv[:6] == ["srun", "--nodes=1", "--ntasks=1", f"--nodelist={slurm_cluster.node}", "--overlap",
                            "--kill-on-bad-exit=1"]  # fmt: skip
        print(" ".join(argv[: argv.index("--") + 1]), "<stand-in for accelerate launch>")
    ranks = [json.loads((out / f"rank{r}.json").read_text()) for r in (0, 1)]
    assert [r["sum"] for r in ranks] == [3.0, 3.0]  # 1 + 2: both ranks met at the first node's port
    assert len({r["step"] for r in ranks}) == 2  # one srun step each
    assert [r["gpus"] for r in ranks] == [
        "5",
        "5",
    ]  # position 0 of what the node shows, for 1 process per node
    assert {r["launched"] for r in ranks} == {"1"}
