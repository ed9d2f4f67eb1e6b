"""Two presets run in one folder: each one's figures, tables and claims land in its own folders, each
finished run points to its own outputs, and each one's `snakemake --report` holds only its own files.

The first preset is the smoke run (the shared `smoke_run` fixture, copied); the second, `second`, is a
real-kind preset of another name on the smoke run's warmed-up model (a local model folder, fetched in a
second), trained on the level-1 split that model partly solves (so that groups have a reward spread for
the claims), with two methods, two RL steps and two benchmarks of two problems: a few CPU minutes.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[2]


def second_preset(model_dir: Path) -> dict:
    """The smoke preset's training and evaluation, cut down, on ``model_dir`` under another name."""
    smoke = yaml.safe_load((REPO / "config" / "smoke.yaml").read_text())
    return {
        "name": "second",
        "kind": "real",
        "seeds": [0],
        "sizes": {"small": {"model": str(model_dir)}},
        "methods": {"grpo": {"cw_method": "grpo"}, "cw_grpo": {"cw_method": "cw_grpo"}},
        "data": {"train": "syn_dev", "benchmarks": ["syn_math500", "syn_olympiad"], "retries": 0},
        "train": {**smoke["train"], "max_steps": 2, "save_steps": 1},
        "evaluate": {**smoke["evaluate"], "limit": 2, "max_new_tokens": 8},
        "report": {"step": 1, "size_display": {"small": "Warmed-up small"}},
        "table": {"effect_methods": ["cw_grpo"]},
        "figure": {},
        "claims": {},
        "resources": smoke["resources"],
    }


def snakemake(workdir: Path, configfile: Path, *extra: str) -> subprocess.CompletedProcess:
    bin_dir = Path(sys.executable).parent
    exe = shutil.which("snakemake", path=str(bin_dir)) or "snakemake"
    env = {k: v for k, v in os.environ.items() if not k.startswith("SLURM")}
    env["PATH"] = f"{bin_dir}{os.pathsep}{os.environ['PATH']}"
    cmd = [exe, "-s", str(REPO / "Snakefile"), "-d", str(workdir), "--cores", "2",
           "--configfile", str(configfile), *extra]  # fmt: skip
    return subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=2400, env=env)


def test_two_presets_in_one_folder_each_report_holds_only_its_own_files(smoke_run, tmp_path):
    workdir = tmp_path / "run"
    shutil.copytree(smoke_run, workdir, symlinks=True)  # the shared run is read only
    check_a_second_preset_beside(workdir, "smoke", REPO / "config" / "smoke.yaml", tmp_path)


def check_a_second_preset_beside(workdir: Path, first: str, first_config: Path, scratch: Path) -> None:
    """Run `second` in ``workdir``, where preset ``first`` has run, on ``first``'s warmed-up model; check
    the outputs' folders, the finished run's message and both presets' reports."""
    configs = {first: first_config, "second": scratch / "second.yaml"}
    model = workdir / "results" / first / "models" / "small" / "base"
    configs["second"].write_text(yaml.safe_dump(second_preset(model)))
    proc = snakemake(workdir, configs["second"])
    said = proc.stdout + proc.stderr
    assert proc.returncode == 0, said[-6000:]
    # the finished run points to its own outputs and to the report command with its --configfile
    shown = "Table 1: results/second/table1.md\nTable 1 of preset second: figures/table1.pdf\nfigures: figures/second/\n"
    assert shown in said, said[-2000:]
    assert (
        f"report: snakemake --report figures/second/report.html --configfile {configs['second']}" in said
    ), said[-2000:]
    # each preset's figures in its own folder; figures/table1.pdf is the last run's table (its preset's)
    assert sorted(p.name for p in (workdir / "figures").iterdir()) == sorted([*configs, "table1.pdf"])
    shown = (workdir / "figures" / "table1.pdf").read_bytes()
    assert shown == (workdir / "figures" / "second" / "table1.pdf").read_bytes()
    for name in configs:
        figures = {p.name for p in (workdir / "figures" / name).iterdir()}
        assert {"table1.pdf", "table1_avg.png", "entropy.png", "checkpoints.png"} <= figures, (name, figures)
    for name, other in ((first, "second"), ("second", first)):
        report = scratch / f"{name}.html"
        proc = snakemake(workdir, configs[name], "--report", str(report))
        assert proc.returncode == 0, (proc.stdout + proc.stderr)[-4000:]
        page = report.read_text(encoding="utf-8")
        for own in (f"figures/{name}/table1.pdf", f"figures/{name}/entropy.png", f"results/{name}/claims.md"):
            assert own in page, (name, own)
        strays = sorted(set(re.findall(rf"(?:figures|results)/{other}/[\w./-]+", page)))
        assert not strays, f"the report of {name} holds {other}'s files: {strays[:5]}"
