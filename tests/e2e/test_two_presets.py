"""Two presets run in one folder: each one's figures, tables and claims land in its own folders, and each
one's `snakemake --report` holds only its own files.

The presets are the smoke preset cut to the least that runs every report rule (two methods, two RL steps,
two benchmarks of two problems; the smoke warm-up, so that some groups have a reward spread for the claims),
so the two DAGs together take a few CPU minutes.
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
NAMES = ("duo_a", "duo_b")


def cheap_preset(name: str) -> dict:
    """config/smoke.yaml with a new name and the smallest budgets that still reach every report rule."""
    cfg = yaml.safe_load((REPO / "config" / "smoke.yaml").read_text())
    cfg["name"] = name
    cfg["methods"] = {"grpo": {"cw_method": "grpo"}, "cw_grpo": {"cw_method": "cw_grpo"}}
    cfg["data"]["benchmarks"] = ["syn_math500", "syn_olympiad"]
    cfg["train"] |= {"max_steps": 2, "save_steps": 1}  # the smoke warm-up: the claims need reward spread
    cfg["evaluate"] |= {"limit": 2, "max_new_tokens": 8}
    cfg["report"]["step"] = 1
    cfg["table"] = {"effect_methods": ["cw_grpo"]}
    return cfg


def snakemake(workdir: Path, configfile: Path, *extra: str) -> subprocess.CompletedProcess:
    bin_dir = Path(sys.executable).parent
    exe = shutil.which("snakemake", path=str(bin_dir)) or "snakemake"
    env = {k: v for k, v in os.environ.items() if not k.startswith("SLURM")}
    env["PATH"] = f"{bin_dir}{os.pathsep}{os.environ['PATH']}"
    cmd = [exe, "-s", str(REPO / "Snakefile"), "-d", str(workdir), "--cores", "2",
           "--configfile", str(configfile), *extra]  # fmt: skip
    return subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=2400, env=env)


def test_two_presets_in_one_folder_each_report_holds_only_its_own_files(tmp_path):
    workdir = tmp_path / "run"
    workdir.mkdir()
    reports = {}
    for name in NAMES:
        configfile = tmp_path / f"{name}.yaml"
        configfile.write_text(yaml.safe_dump(cheap_preset(name)))
        proc = snakemake(workdir, configfile)
        assert proc.returncode == 0, (proc.stdout + proc.stderr)[-6000:]
        said = proc.stdout + proc.stderr  # the finished run points to its own outputs and report command
        assert f"Table 1: results/{name}/table1.md\nfigures: figures/{name}/\n" in said, said[-2000:]
        assert f"report: snakemake --report report.html --configfile {configfile}" in said, said[-2000:]
        reports[name] = tmp_path / f"{name}.html"
        proc = snakemake(workdir, configfile, "--report", str(reports[name]))
        assert proc.returncode == 0, (proc.stdout + proc.stderr)[-4000:]
    for name in NAMES:
        figures = sorted(p.name for p in (workdir / "figures" / name).iterdir())
        assert "table1.pdf" in figures and "checkpoints.png" in figures, figures
    assert sorted(p.name for p in (workdir / "figures").iterdir()) == sorted(NAMES)
    for name, other in (NAMES, NAMES[::-1]):
        page = reports[name].read_text(encoding="utf-8")
        for own in (f"figures/{name}/table1.pdf", f"figures/{name}/entropy.png", f"results/{name}/claims.md"):
            assert own in page, (name, own)
        strays = sorted(set(re.findall(rf"(?:figures|results)/{other}/[\w./-]+", page)))
        assert not strays, f"the report of {name} holds {other}'s files: {strays[:5]}"
