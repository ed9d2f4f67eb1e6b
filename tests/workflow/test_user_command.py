"""The README's command, exactly as a user types it in a checkout: `snakemake --cores all --use-conda
figures/table1.pdf`, with or without a `--configfile` (tiny without). Every shipped preset and overlay
plans it (dry run, with the conda stand-in of tests/workflow/standin_conda.py where the preset deploys
with conda), the Slurm profile plans it, and the tiny preset runs it to the end (without `--use-conda`:
conda cannot run here).

Each test works in its own copy of the checkout (``checkout``): the command is run from the copy's root,
as typed, and nothing lands in the repository.
"""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
COMMAND = ["snakemake", "--cores", "all", "--use-conda", "figures/table1.pdf"]
SHOWN = "figures/table1.pdf"

# Every file in config/ (a new one must be added here): the --configfile arguments of each way to run it,
# and its preset's name. An overlay is given after the preset it changes.
PRESETS: dict[str, tuple[tuple[str, ...], str]] = {
    "config.yaml": ((), "tiny"),
    "smoke.yaml": (("config/smoke.yaml",), "smoke"),
    "real.yaml": (("config/real.yaml",), "real"),
    "study.yaml": (("config/study.yaml",), "study"),
    "study-regime.yaml": (("config/study-regime.yaml",), "study-regime"),
    "study-smollm2.yaml": (("config/study-smollm2.yaml",), "study-smollm2"),
    "paper.yaml": (("config/paper.yaml",), "paper"),
    "paper-1gpu.yaml": (("config/paper-1gpu.yaml",), "paper-1gpu"),
    "paper-7b-2nodes.yaml": (("config/paper.yaml", "config/paper-7b-2nodes.yaml"), "paper"),
    "rehearsal.yaml": (("config/paper.yaml", "config/rehearsal.yaml"), "paper-rehearsal"),
    "rehearsal.yaml after the 2-node overlay": (
        ("config/paper.yaml", "config/paper-7b-2nodes.yaml", "config/rehearsal.yaml"),
        "paper-rehearsal",
    ),
}
# config/byo.yaml is a template: its placeholder paths are refused until filled in (tests/workflow/test_byo.py
# runs it filled in).
TEMPLATES = {"byo.yaml"}
# Presets of the real kind bring their own Python environment: `--use-conda` is refused for them at parse
# time, in one line (cwgrpo_workflow.dag.preset_rules), so a user runs them without it.
WITHOUT_CONDA = {"real", "study-smollm2"}
IGNORED = shutil.ignore_patterns(".git", ".venv*", "results", "figures", "logs", ".snakemake", "__pycache__")


def checkout(tmp_path: Path) -> Path:
    """A copy of the checkout's files (no environments, results or Git folder) to run commands in."""
    folder = tmp_path / "checkout"
    shutil.copytree(REPO, folder, ignore=IGNORED, symlinks=True)
    (folder / "figures").mkdir()
    return folder


def conda_standin(folder: Path) -> Path:
    """A folder holding an executable `conda`: the stand-in, run by this interpreter."""
    bin_dir = folder / "standin-bin"
    bin_dir.mkdir()
    script = bin_dir / "conda"
    standin = REPO / "tests" / "workflow" / "standin_conda.py"
    script.write_text(f'#!/bin/sh\nexec "{sys.executable}" "{standin}" "$@"\n')
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    return bin_dir


def user_env(*extra_bin: Path) -> dict[str, str]:
    """The environment of a user with .venv active (its bin first on PATH), no Slurm variables and not the
    tests' one torch thread."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("SLURM") and k != "OMP_NUM_THREADS"}
    path = [*map(str, extra_bin), str(Path(sys.executable).parent), os.environ.get("PATH", "")]
    env["PATH"] = os.pathsep.join(path)
    return env


def typed(configfiles: tuple[str, ...], conda: bool = True) -> list[str]:
    """The README's command for a preset, as a user types it."""
    command = [c for c in COMMAND if conda or c != "--use-conda"]
    return [*command, *(["--configfile", *configfiles] if configfiles else [])]


def run(command: list[str], folder: Path, env: dict[str, str], timeout: int = 600) -> str:
    """Run ``command`` in ``folder``; what it printed, after checking it succeeded."""
    proc = subprocess.run(command, cwd=folder, env=env, capture_output=True, text=True, timeout=timeout)
    said = proc.stdout + proc.stderr
    assert proc.returncode == 0, f"{' '.join(command)}:\n{said[-6000:]}"
    return said


def table_job_outputs(said: str) -> list[str]:
    """The `output:` line of the dry run's `table` job, split into paths."""
    lines = said.splitlines()
    start = lines.index("rule table:")
    output = next(line for line in lines[start:] if line.strip().startswith("output:"))
    return [p.strip() for p in output.split("output:", 1)[1].split(",")]


def test_every_config_file_is_planned():
    named = {files[-1].removeprefix("config/") for files, _ in PRESETS.values() if files} | {"config.yaml"}
    assert sorted(named | TEMPLATES) == sorted(p.name for p in (REPO / "config").glob("*.yaml"))


@pytest.mark.parametrize("name", sorted(PRESETS))
def test_the_readme_command_plans_table1_for_every_preset(name, tmp_path):
    configfiles, preset = PRESETS[name]
    folder = checkout(tmp_path)
    conda = preset not in WITHOUT_CONDA
    said = run([*typed(configfiles, conda), "-n"], folder, user_env(conda_standin(tmp_path)))
    outputs = table_job_outputs(said)
    assert SHOWN in outputs and f"figures/{preset}/table1.pdf" in outputs, outputs
    assert not (folder / SHOWN).exists()


@pytest.mark.parametrize("preset", sorted(WITHOUT_CONDA))
def test_a_real_kind_preset_under_use_conda_is_refused_in_one_line(preset, tmp_path):
    folder = checkout(tmp_path)
    configfiles = next(files for files, name in PRESETS.values() if name == preset)
    proc = subprocess.run(
        [*typed(configfiles), "-n"],
        cwd=folder,
        env=user_env(conda_standin(tmp_path)),
        capture_output=True,
        text=True,
        timeout=600,
    )
    said = proc.stdout + proc.stderr
    assert proc.returncode != 0
    assert "--use-conda" in said and "Traceback" not in said, said[-3000:]


@pytest.mark.parametrize("overlay", [(), ("config/paper-7b-2nodes.yaml",)])
def test_the_slurm_profile_plans_table1(overlay, tmp_path):
    folder = checkout(tmp_path)
    command = [*typed(("config/paper.yaml", *overlay)), "--profile", "profiles/slurm", "-n"]
    said = run(command, folder, user_env(conda_standin(tmp_path)))
    assert SHOWN in table_job_outputs(said)


@pytest.mark.slow
def test_the_readme_command_builds_the_tiny_table(tmp_path):
    """The tiny preset to the end, from the checkout's root (`--use-conda` left out: conda cannot run here).
    figures/table1.pdf is the tiny preset's own table, and its provenance names the preset."""
    folder = checkout(tmp_path)
    said = run(typed((), conda=False), folder, user_env(), timeout=3000)
    assert (folder / SHOWN).read_bytes() == (folder / "figures/tiny/table1.pdf").read_bytes()
    provenance = json.loads((folder / "results/tiny/table1.provenance.json").read_text())
    assert provenance["config"]["preset"] == "tiny"
    assert f"Table 1 of preset tiny: {SHOWN}" in said
    # docs/usage.md's kept-share command, as typed there, on this run
    (command,) = [ln for ln in (REPO / "docs/usage.md").read_text().splitlines() if "--kind kept_share" in ln]
    done = subprocess.run(command, shell=True, cwd=folder, env=user_env(), capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert (folder / "kept.pdf").stat().st_size > 0 and (folder / "kept.png").stat().st_size > 0
