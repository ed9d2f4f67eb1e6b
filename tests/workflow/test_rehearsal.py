"""config/rehearsal.yaml: the paper preset's rules and options with only the listed CPU deviations, its dry
runs (alone after config/paper.yaml, and after the 2-node overlay with the Slurm profile), and the runs it
refuses before any job: the overlay without the paper preset, more processes than cores, no DeepSpeed or
no compiler. The rehearsal itself runs in docs/hardware.md's command (minutes, DeepSpeed's env)."""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from test_workflow import REPO, jobs, run_snakemake

from cwgrpo.configs import build_config
from cwgrpo.launch.launcher import plan
from cwgrpo.train.options import TrainJob

PAPER = REPO / "config" / "paper.yaml"
TWO_NODES = REPO / "config" / "paper-7b-2nodes.yaml"
REHEARSAL = REPO / "config" / "rehearsal.yaml"
# Train options the rehearsal changes (every other one is the paper's): the header of rehearsal.yaml says why.
TRAIN_DEVIATIONS = {
    "prompt_set": "tiny",
    "model_init_kwargs": {"dtype": "bfloat16", "attn_implementation": "sdpa"},
    "use_cpu": True,
    "max_prompt_length": 128,
    "max_completion_length": 64,
    "vllm_max_model_length": None,
    "generation_kwargs": None,
    "use_vllm": False,
    "vllm_server_gpu": None,
    "save_steps": 2,
    "num_processes": 2,
    "max_steps": 2,
}
REWARDS = {"1.5b": ["accuracy", "format"], "7b": ["accuracy"]}  # synthetic records have no `solution`


def planned(
    workdir: Path, *configfiles: Path, profile: str | None = None
) -> tuple[list[dict], list[list[str]]]:
    """(jobs, shell commands) of a dry run of the workflow with ``configfiles`` merged in order."""
    args = ["-n", "-p", *(["--profile", str(REPO / "profiles" / profile)] if profile else [])]
    proc, out = run_snakemake(workdir, *args, "--configfile", *map(str, configfiles))
    assert proc.returncode == 0, out[-3000:]
    prefix = "Shell command: "
    return jobs(out), [
        shlex.split(line[len(prefix) :]) for line in out.splitlines() if line.startswith(prefix)
    ]


def options_of(workdir: Path, command: list[str]) -> dict:
    return yaml.safe_load((workdir / command[command.index("--config") + 1]).read_text())


def run_of(train_command: list[str]) -> str:
    """runs/<size>/<method>/seed<seed> of a train command (the same in every preset's results folder)."""
    return train_command[train_command.index("--run-dir") + 1].split("/", 2)[2]


def commands(all_commands: list[list[str]], sub: str) -> list[list[str]]:
    return [c for c in all_commands if c[:2] == ["cwgrpo", sub]]


@pytest.fixture(scope="module")
def paper_plan(tmp_path_factory) -> tuple[Path, list[list[str]]]:
    workdir = tmp_path_factory.mktemp("paper")
    return workdir, planned(workdir, PAPER)[1]


def test_rehearsal_plans_the_paper_rules_with_only_its_cpu_deviations(tmp_path, paper_plan):
    rehearsal_jobs, planned_commands = planned(tmp_path, PAPER, REHEARSAL)
    paper_dir, paper_commands = paper_plan
    rules = {j["rule"] for j in rehearsal_jobs}
    assert {"train_1_5b", "train_7b", "evaluate", "grade_paper", "table"} <= rules
    assert {"build_tiny", "sft"} <= rules and "fetch_model" not in rules  # tiny models built here
    builds = {c[c.index("--size") + 1] for c in commands(planned_commands, "build-tiny")}
    assert builds == {"small", "large"}

    trains = commands(planned_commands, "train")
    assert len(trains) == 6  # 2 sizes x the paper's 3 methods
    paper_trains = {run_of(c): c for c in commands(paper_commands, "train")}
    for command in trains:
        got = options_of(tmp_path, command)
        want = options_of(paper_dir, paper_trains[run_of(command)])
        changed = {*TRAIN_DEVIATIONS, "reward_funcs"}
        assert {k: v for k, v in got.items() if k not in changed} == {
            k: v for k, v in want.items() if k not in changed
        }
        assert got["reward_funcs"] == REWARDS[run_of(command).split("/")[1]]
        assert {k: got.get(k) for k in TRAIN_DEVIATIONS} == TRAIN_DEVIATIONS
        assert (got["launcher"], got["accelerate_config"], got["bf16"], got["beta"]) == (
            "accelerate",
            "zero2",
            True,
            0.04,
        )
        # the launcher's own plan of this job: accelerate launch, the bundled zero2.yaml, 2 processes
        job = build_config(
            TrainJob, overrides={k: v for k, v in got.items() if k in TrainJob.__dataclass_fields__}
        )
        _, _, train_cmd, _ = plan(["train"], job, ["0", "1"], "model")
        assert train_cmd[1:3] == ["-m", "cwgrpo.launch.workers"]  # accelerate launch, tied to cwgrpo train
        assert Path(train_cmd[train_cmd.index("--config_file") + 1]).name == "zero2.yaml"
        assert train_cmd[train_cmd.index("--num_processes") + 1] == "2"

    evaluations = commands(planned_commands, "evaluate")
    assert evaluations and all(options_of(tmp_path, c)["backend"] == "vllm" for c in evaluations)
    # vLLM's CPU build reserves this share of the machine's RAM and refuses to start when less is free (the
    # paper's 0.9 failed the rehearsal): two engines side by side (--cores 2) must fit with room to spare.
    assert all(2 * options_of(tmp_path, c)["gpu_memory_utilization"] <= 0.5 for c in evaluations)
    grades = commands(planned_commands, "grade")
    assert len(grades) == len(evaluations) and all(c[2:4] == ["--metric", "paper"] for c in grades)
    assert all(c[c.index("--primary") + 1] == "paper" for c in grades)


def test_two_node_rehearsal_plans_zero3_for_the_7b_under_the_slurm_profile(tmp_path):
    _, planned_commands = planned(tmp_path, PAPER, TWO_NODES, REHEARSAL, profile="slurm")
    by_size = {}
    for command in commands(planned_commands, "train"):
        size = command[command.index("--run-dir") + 1].split("/")[3]
        by_size.setdefault(size, []).append(options_of(tmp_path, command))
    layouts = {
        size: {
            (o["accelerate_config"], o["num_processes"], o.get("num_nodes", 1), o["use_cpu"]) for o in opts
        }
        for size, opts in by_size.items()
    }
    assert layouts == {"1.5b": {("zero2", 2, 1, True)}, "7b": {("zero3", 2, 2, True)}}


def _refusal(tmp_path: Path, *configfiles: Path, env: dict | None = None, dry: bool = True) -> str:
    """The output of a run that must stop before any job, with no result written."""
    target = "results/paper-rehearsal/data/syn_dev.jsonl"  # a cheap job, if the refusal did not come
    args = ["-n"] if dry else ["--cores", "1", target]
    proc, out = run_snakemake(tmp_path, *args, "--configfile", *map(str, configfiles), env=env)
    assert proc.returncode != 0, out[-2000:]
    assert "Job stats" not in out or not dry
    assert not (tmp_path / target).exists(), out[-2000:]
    return out


@pytest.mark.parametrize(
    "files",
    [(REHEARSAL,), (REPO / "config" / "config.yaml", REHEARSAL), (TWO_NODES,), (TWO_NODES, REHEARSAL)],
    ids=["alone", "after the tiny preset", "2-node overlay alone", "both overlays without paper"],
)
def test_an_overlay_without_the_paper_preset_is_refused_naming_the_file_to_put_first(tmp_path, files):
    out = _refusal(tmp_path, *files)
    assert "an overlay of the paper preset, given without it" in out, out[-2000:]
    assert "--configfile config/paper.yaml" in out
    assert "additionalProperties" not in out and "required" not in out  # that line, not the schema's list


def test_more_training_processes_than_cores_is_refused(tmp_path):
    more = tmp_path / "more.yaml"
    n = (os.cpu_count() or 1) + 1
    more.write_text(yaml.safe_dump({"sizes": {"7b": {"train": {"num_processes": n}}}}))
    out = _refusal(tmp_path, PAPER, REHEARSAL, more)
    assert f"sizes.7b.train.num_processes: {n} training processes a node on CPU" in out, out[-2000:]


@pytest.fixture
def bare_python(tmp_path) -> Path:
    """A real interpreter without DeepSpeed: a new venv with nothing installed."""
    folder = tmp_path / "bare-venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(folder)], check=True)
    return folder / "bin" / "python"


def test_a_run_without_deepspeed_stops_before_any_job(tmp_path, bare_python):
    out = _refusal(tmp_path, PAPER, REHEARSAL, env={"CWGRPO_TRAIN_PYTHON": str(bare_python)}, dry=False)
    assert f"{bare_python} has no DeepSpeed: build `make deepspeed`" in out, out[-2000:]


def test_a_run_without_a_compiler_stops_before_any_job(tmp_path):
    out = _refusal(tmp_path, PAPER, REHEARSAL, env={"CXX": "no-such-compiler"}, dry=False)
    assert "compiles its CPU op with g++ at the first start, and no g++ is on PATH" in out, out[-2000:]
