"""`cwgrpo plan`: a preset's jobs from Snakemake's dry run, priced with cwgrpo/resources/budgets.yaml;
docs/hardware.md holds its output for the paper preset and agrees with the budgets."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from test_workflow import REPO

from cwgrpo.cli import main
from cwgrpo.configs import ConfigError
from cwgrpo.plan import Job, load_budgets, parse_dry_run, plan_markdown, wall_hours

DRY_RUN = """\
[Tue Dec  1 22:28:28 2026]
rule train_1_5b:
    output: results/paper/runs/1.5b/grpo/seed2025/run.json
    wildcards: size=1.5b, method=grpo, seed=2025
    priority: 1
    resources: tmpdir=/tmp, runtime=2880, gpu=4, cpus_per_task=32, mem_mb=256000, mem=256 GB
[Tue Dec  1 22:28:28 2026]
localrule all:
    input: results/paper/table1.md
    jobid: 0
    resources: tmpdir=/tmp
Job stats:
job                       count
"""


def plan(preset: str | Path, workdir: Path) -> str:
    """`cwgrpo plan` of a preset (a name in config/, or a file) run in ``workdir``, as a user would run it
    where the workflow runs (its dry run writes there, never into the repository)."""
    configfile = REPO / "config" / f"{preset}.yaml" if isinstance(preset, str) else preset
    proc = subprocess.run(
        [sys.executable, "-m", "cwgrpo.cli", "plan", "--configfile", str(configfile),
         "--snakefile", str(REPO / "Snakefile")],
        cwd=workdir, capture_output=True, text=True, timeout=300,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc.stdout.replace(str(REPO / "config"), "config")  # as run from the checkout


@pytest.fixture(scope="module")
def paper_plan(tmp_path_factory) -> str:
    return plan("paper", tmp_path_factory.mktemp("plan"))


def test_parse_dry_run_reads_each_jobs_rule_wildcards_and_gpus():
    assert parse_dry_run(DRY_RUN) == [
        Job("train_1_5b", {"size": "1.5b", "method": "grpo", "seed": "2025"}, 4),
        Job("all", {}, 0),
    ]


def test_wall_time_of_a_greedy_schedule_by_hand():
    """Two 2-GPU trainings of 10 GPU-hours (5 h each), each with evaluations at steps 1 and 2 (1 h, 1 GPU)."""
    budgets = {"s": {"train": {"gpu_hours": 10}, "evaluate": {"gpu_hours": 1}}}
    jobs = []
    for method in ("a", "b"):
        run = {"size": "s", "method": method, "seed": "0"}
        jobs += [Job("train_s", run, 2), *(Job("evaluate", {**run, "step": str(s)}, 1) for s in (1, 2))]
    assert wall_hours(jobs, budgets, 4) == pytest.approx(6.0)  # both train 0-5; 4 evaluations 5-6
    assert wall_hours(jobs, budgets, 2) == pytest.approx(12.0)  # a 0-5, b 5-10, then 2 x 2 evaluations
    with pytest.raises(ConfigError, match=r"a job needs 2 GPUs, more than 1: plan for 2 or more \(--gpus\)"):
        wall_hours(jobs, budgets, 1)
    without = {"t": budgets["s"]}
    with pytest.raises(
        ConfigError, match=r"no budget for (evaluate|train) jobs of size 's'.*add its gpu_hours"
    ):
        plan_markdown("x.yaml", jobs, without, [4])


def test_paper_plan_prices_every_job_of_the_preset(paper_plan):
    rows = {tuple(c.strip() for c in line.strip("|").split("|")) for line in paper_plan.splitlines()}
    assert ("train", "1.5b", "4", "3", "288", "138") in rows  # 3 runs x 96 GPU-hours, 3 x 46 GB
    assert ("train", "7b", "4", "3", "600", "456") in rows
    assert ("evaluate", "1.5b", "1", "95", "19", "0") in rows  # 19 models x 5 benchmarks x 0.2
    assert ("evaluate", "7b", "1", "50", "2", "0") in rows
    assert ("**total**", "", "", "**311**", "**909**", "**613**") in rows  # docs/hardware.md: 909 GPU-hours
    assert "9.5 days on 4 GPUs, 5.2 days on 8 GPUs, 3.1 days on 16 GPUs." in paper_plan


def test_paper_1gpu_plan_trains_on_one_gpu(tmp_path):
    out = plan("paper-1gpu", tmp_path)
    assert "| train | 1.5b | 1 | 3 | 288 | 138 |" in out and "| train | 7b" not in out
    assert "on 1 GPU, " in out  # the preset's own widest job sets the first count


def test_hardware_page_table_is_the_plan_of_the_paper_preset(paper_plan):
    page = (REPO / "docs" / "hardware.md").read_text()
    block = re.search(
        r"<!-- cwgrpo plan --configfile config/paper.yaml -->\n(.*?)<!-- end of cwgrpo plan -->", page, re.S
    )
    assert block, "docs/hardware.md has no block of `cwgrpo plan --configfile config/paper.yaml`"
    assert block.group(1) == paper_plan, "regenerate it: cwgrpo plan --configfile config/paper.yaml"


def test_hardware_page_states_the_budgets_the_plan_uses():
    page, b = (REPO / "docs" / "hardware.md").read_text(), load_budgets()
    one, seven = b["1.5b"], b["7b"]
    assert f"| 1.5B training run (4 GPUs) | up to {one['train']['gpu_hours']:g} A40 GPU-hours" in page
    assert f"| 7B training run (4 GPUs) | 100–{seven['train']['gpu_hours']:g} GPU-hours" in page
    assert f"(5 jobs, 1 GPU each) | 0.5–{5 * one['evaluate']['gpu_hours']:g} GPU-hour" in page
    assert f"| 7B evaluation of one checkpoint | 0.1–{5 * seven['evaluate']['gpu_hours']:g} GPU-hour" in page
    assert f"= {one['train']['disk_gb']:g} GB | 122 + 2 x 15 = {seven['train']['disk_gb']:g} GB |" in page
    assert (
        f"the base models ({one['fetch_model']['disk_gb']:g} + {seven['fetch_model']['disk_gb']:g} GB)"
        in page
    )


def test_plan_names_what_the_schema_refuses_in_a_preset(tmp_path, capsys):
    preset = tmp_path / "odd.yaml"
    preset.write_text("name: p1\nkind: paper\nsizes: {1.5b: {}}\n")  # no methods
    assert main(["plan", "--configfile", str(preset)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "methods: missing (required)" in err[0] and "data: missing (required)" in err[0]


def test_plan_a_folder_as_configfile_is_called_a_folder(tmp_path, capsys):
    assert main(["plan", "--configfile", str(tmp_path)]) == 2
    assert f"--configfile {tmp_path}: a folder, not a file" in capsys.readouterr().err


def test_a_preset_whose_data_paths_are_relative_to_the_working_folder_is_planned_there(tmp_path):
    """Relative paths are the working folder's, for the plan as for the run (not an empty folder's)."""
    (tmp_path / "data").mkdir()
    rows = [{"question": f"{i}+1", "gold": str(i + 1)} for i in range(4)]
    (tmp_path / "data" / "train.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    config = yaml.safe_load((REPO / "config" / "real.yaml").read_text())
    config["datasets"] = {"my_train": {"path": "data/train.jsonl", "problem": "question", "answer": "gold"}}
    config["data"]["train"] = "my_train"
    configfile = tmp_path / "mine.yaml"
    configfile.write_text(yaml.safe_dump(config, sort_keys=False))
    out = plan(configfile, tmp_path)
    assert re.search(r"\| CPU jobs \| — \| 0 \| [1-9]", out), out
