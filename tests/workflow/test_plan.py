"""`cwgrpo plan`: a preset's jobs from Snakemake's dry run, priced with workflow/cwgrpo_workflow/resources/budgets.yaml;
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
from cwgrpo.seeding import cpuinfo
from cwgrpo_workflow.dag.plan import (
    Job,
    brief,
    load_budgets,
    makespan_hours,
    parse_dry_run,
    plan_markdown,
    wall_hours,
)

DRY_RUN = """\
[Tue Dec  1 22:28:28 2026]
rule train_1_5b:
    input: results/paper/models/1.5b/base.json, results/paper/data/open_rs.jsonl
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


def plan(*presets: str | Path, workdir: Path) -> str:
    """`cwgrpo plan` of presets (names in config/, or files; later ones merged over earlier ones) run in
    ``workdir``, as a user would run it where the workflow runs (its dry run writes there, never into the
    repository)."""
    files = [REPO / "config" / f"{p}.yaml" if isinstance(p, str) else p for p in presets]
    proc = subprocess.run(
        [sys.executable, "-m", "cwgrpo.cli", "plan", "--configfile", *map(str, files),
         "--snakefile", str(REPO / "Snakefile")],
        cwd=workdir, capture_output=True, text=True, timeout=300,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc.stdout.replace(str(REPO / "config"), "config")  # as run from the checkout


def table_rows(out: str) -> set[tuple[str, ...]]:
    return {tuple(c.strip() for c in line.strip("|").split("|")) for line in out.splitlines() if "|" in line}


@pytest.fixture(scope="module")
def paper_plan(tmp_path_factory) -> str:
    return plan("paper", workdir=tmp_path_factory.mktemp("plan"))


def test_parse_dry_run_reads_each_jobs_rule_wildcards_resources_and_files():
    train, end = parse_dry_run(DRY_RUN)
    assert train == Job(
        "train_1_5b",
        {"size": "1.5b", "method": "grpo", "seed": "2025"},
        {"tmpdir": "/tmp", "runtime": "2880", "gpu": "4", "cpus_per_task": "32", "mem_mb": "256000",
         "mem": "256 GB"},
        ("results/paper/models/1.5b/base.json", "results/paper/data/open_rs.jsonl"),
        ("results/paper/runs/1.5b/grpo/seed2025/run.json",),
    )  # fmt: skip
    assert (train.kind, train.gpus, train.cpus, train.runtime_h) == ("train", 4, 32, 48)
    assert end == Job("all", {}, {"tmpdir": "/tmp"}, ("results/paper/table1.md",))
    two_nodes = Job("train_7b", resources={"gres": "gpu:4", "nodes": "2", "cpus_per_task": "32"})
    assert (two_nodes.gpus, two_nodes.nodes) == (8, 2)  # Slurm gets --gres per node


def test_wall_time_of_a_greedy_schedule_by_hand():
    """Two 2-GPU trainings of 10 GPU-hours (5 h each), each with evaluations at steps 1 and 2 (1 h, 1 GPU)."""
    budgets = {"s": {"train": {"gpu_hours": 10}, "evaluate": {"gpu_hours": 1}}}
    jobs = []
    for method in ("a", "b"):
        run = {"size": "s", "method": method, "seed": "0"}
        jobs += [Job("train_s", run, {"gpu": "2"})]
        jobs += [Job("evaluate", {**run, "step": str(s)}, {"gpu": "1"}) for s in (1, 2)]
    assert wall_hours(jobs, budgets, 4) == pytest.approx(6.0)  # both train 0-5; 4 evaluations 5-6
    assert wall_hours(jobs, budgets, 2) == pytest.approx(12.0)  # a 0-5, b 5-10, then 2 x 2 evaluations
    with pytest.raises(ConfigError, match=r"a job needs 2 GPUs, more than 1: plan for 2 or more \(--gpus\)"):
        wall_hours(jobs, budgets, 1)
    without = {"t": budgets["s"]}
    with pytest.raises(
        ConfigError, match=r"no budget for (evaluate|train) jobs of size 's'.*add its gpu_hours"
    ):
        plan_markdown("x.yaml", jobs, without, [4])


def test_expected_time_on_cores_waits_for_inputs_by_hand():
    """a (1 h) makes x; b (2 h) and c (1 h) read x; d (1 h) reads nothing: on 2 cores a+d, then b+c: 3 h."""
    budgets = {"any": {k: {"hours": h} for k, h in (("a", 1), ("b", 2), ("c", 1), ("d", 1))}}
    jobs = [Job("a", outputs=("x",)), Job("b", inputs=("x",)), Job("c", inputs=("x",)), Job("d")]
    assert makespan_hours(jobs, budgets, 2) == pytest.approx(3.0)
    assert makespan_hours(jobs, budgets, 1) == pytest.approx(5.0)
    assert brief(jobs, budgets, 2, load=0.5) == (
        "4 jobs to run: about 3 h on 2 idle cores (per-job estimates: workflow/cwgrpo_workflow/resources/budgets.yaml, "
        "measured in docs/performance.md).\n"
    )
    busy = brief(jobs, budgets, 2, load=6.0).splitlines()
    assert (
        busy[1]
        == "This machine is busy (load average 6.0 on 2 cores): expect about 4x as long, 12 h or more."
    )
    assert brief([], budgets, 2, load=0.0) == "Nothing to run: every output is up to date.\n"


@pytest.mark.skipif("avx2" not in (cpuinfo("flags") or "").split(), reason="an x86 CPU with AVX2")
def test_make_tiny_says_when_this_machine_may_not_give_the_tiny_results(tmp_path):
    """`make tiny`'s first line (`cwgrpo plan --brief`) says when this machine's CPU numerics differ from those
    docs/tiny-results was made with (here: the user chose ATen's scalar kernels), and nothing otherwise."""

    def brief_plan(**env: str) -> str:
        proc = subprocess.run(
            [sys.executable, "-m", "cwgrpo.cli", "plan", "--brief", "--configfile", str(REPO / "config/config.yaml"),
             "--snakefile", str(REPO / "Snakefile")],
            cwd=tmp_path, capture_output=True, text=True, timeout=300,
            env={**os.environ, "PYTHONPATH": str(REPO), **env},
        )  # fmt: skip
        assert proc.returncode == 0, proc.stderr[-3000:]
        return proc.stdout

    assert "docs/tiny-results" not in brief_plan()  # this machine's own choice
    said = brief_plan(ATEN_CPU_CAPABILITY="default")
    assert (
        "Note: ATEN_CPU_CAPABILITY=default is set: docs/tiny-results was made with ATen's AVX2 kernels"
        in said
    )


def test_paper_plan_prices_every_job_of_the_preset(paper_plan):
    table = table_rows(paper_plan)
    assert (
        "jobs", "size", "count", "GPUs each", "GPU memory (GB, est.)", "CPUs", "RAM (GB)", "runtime asked",
        "estimate per job", "GPU-hours", "disk (GB)",
    ) in table  # fmt: skip
    # 3 runs x 96 GPU-hours on 4 GPUs (24 h each, of the 48 h asked), 3 x 46 GB
    assert ("train", "1.5b", "3", "4", "30", "32", "256", "48 h", "24 h", "288", "138") in table
    assert ("train", "7b", "3", "4", "80", "32", "256", "48 h", "50 h", "600", "456") in table
    assert (
        "evaluate",
        "1.5b",
        "95",
        "1",
        "24",
        "8",
        "64",
        "8 h",
        "12 min",
        "19",
        "0",
    ) in table  # 19 x 5 x 0.2
    assert ("evaluate", "7b", "50", "1", "40", "8", "64", "4 h", "2 min", "2", "0") in table
    assert ("grade", "1.5b", "95", "0", "—", "4", "16", "1 h", "6 min", "0", "0") in table  # the paper metric
    assert ("report", "—", "7", "0", "—", "1", "8", "30 min", "36 s", "0", "0") in table  # table, figures...
    assert (
        "**total**",
        "",
        "**311**",
        "",
        "",
        "",
        "",
        "",
        "",
        "**909**",
        "**613**",
    ) in table  # 909 GPU-hours
    assert "9.5 days on 4 GPUs, 5.2 days on 8 GPUs, 3.1 days on 16 GPUs." in paper_plan


def test_the_7b_training_estimate_above_its_runtime_is_a_warning_naming_the_fix(paper_plan):
    (warning,) = [line for line in paper_plan.splitlines() if line.startswith("warning:")]
    assert warning.startswith("warning: train 7b jobs take about 50 h each, more than the 48 h they ask for")
    assert "Set sizes.7b.resources.train.runtime: 3000 or more" in warning and warning.endswith("when rerun.")


def test_the_readme_overlay_is_planned_merged_over_the_preset(tmp_path):
    """`--configfile config/paper.yaml config/paper-7b-2nodes.yaml`, as the README runs it: the 7B trains on
    2 nodes of 4 GPUs (8 in all: 25 h, within its 48 h), with ZeRO-3's GPU memory."""
    out = plan("paper", "paper-7b-2nodes", workdir=tmp_path)
    assert out.startswith("Plan of `config/paper.yaml config/paper-7b-2nodes.yaml`")
    row = (
        "train",
        "7b",
        "3",
        "8 (2 nodes)",
        "43",
        "32 per node",
        "256 per node",
        "48 h",
        "25 h",
        "600",
        "456",
    )
    assert row in table_rows(out)
    assert ("train", "1.5b", "3", "4", "30", "32", "256", "48 h", "24 h", "288", "138") in table_rows(out)
    assert "warning:" not in out


def test_a_runtime_below_the_estimate_warns_for_that_kind_of_job(tmp_path):
    short = tmp_path / "short.yaml"
    short.write_text(yaml.safe_dump({"resources": {"grade": {"runtime": 2}}}))
    out = plan("paper", short, workdir=tmp_path)
    warnings = [line for line in out.splitlines() if line.startswith("warning:")]
    assert len(warnings) == 3, warnings  # grade of each size, and the 7B training
    assert any(
        line.startswith("warning: grade 1.5b jobs take about 6 min each, more than the 2 min they ask for")
        and "Set sizes.1.5b.resources.grade.runtime: 60 or more" in line
        for line in warnings
    ), warnings


def test_paper_1gpu_plan_trains_on_one_gpu(tmp_path):
    out = plan("paper-1gpu", workdir=tmp_path)
    assert any(r[:4] == ("train", "1.5b", "3", "1") for r in table_rows(out)) and "| train | 7b" not in out
    assert "on 1 GPU, " in out  # the preset's own widest job sets the first count


def test_hardware_page_table_is_the_plan_of_the_paper_preset(paper_plan):
    page = (REPO / "docs" / "hardware.md").read_text()
    block = re.search(
        r"<!-- cwgrpo plan --configfile config/paper.yaml -->\n(.*?)<!-- end of cwgrpo plan -->", page, re.S
    )
    assert block, "docs/hardware.md has no block of `cwgrpo plan --configfile config/paper.yaml`"
    assert block.group(1) == paper_plan, "regenerate it: cwgrpo plan --configfile config/paper.yaml"


def test_hardware_page_states_the_budgets_the_plan_uses():
    page, b = (REPO / "docs" / "hardware.md").read_text(), load_budgets("paper")
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
    out = plan(configfile, workdir=tmp_path)
    assert any(r[:2] == ("prepare_data", "—") and int(r[2]) > 0 for r in table_rows(out)), out
