"""Typos in a copied profile fail the dry run, naming the key and the nearest known one; a Slurm run says
in one line which account, partitions and GPU model its jobs get (the profile's values as Snakemake parsed
them: default-resources, set-resources, resources)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from cwgrpo_workflow.dag import profile as pc
from tests.workflow.test_workflow import PRESETS, REPO, run_snakemake


def _copy(profile: str, tmp_path: Path, *edits: tuple[str, str]) -> Path:
    folder = tmp_path / "profiles" / profile
    shutil.copytree(REPO / "profiles" / profile, folder)
    text = (folder / "config.yaml").read_text()
    for old, new in edits:
        assert old in text, old
        text = text.replace(old, new)
    (folder / "config.yaml").write_text(text)
    return folder


def test_slurm_profile_typos_fail_the_dry_run_one_line_each(tmp_path):
    profile = _copy(
        "slurm",
        tmp_path,
        ('  slurm_partition: ""         # SITE: partition of CPU', '  slurm_partiton: ""         # SITE: partition of CPU'),
        ("  train_7b: *gpu_job", "  train_7B: *gpu_job"),
    )  # fmt: skip
    proc, out = run_snakemake(tmp_path / "w", "-n", "--profile", str(profile), configfile=PRESETS["paper"])
    assert proc.returncode != 0
    assert "2 config errors:" in out, out[-3000:]
    assert "set-resources.train_7B: no rule of this workflow has that name (Snakemake ignores it); " \
           "did you mean 'train_7b'?" in out  # fmt: skip
    assert "default-resources.slurm_partiton: unknown resource (it would be passed on and ignored); " \
           "did you mean 'slurm_partition'?" in out  # fmt: skip


def test_a_gpu_box_cap_on_a_resource_no_job_asks_for_fails(tmp_path):
    profile = _copy("gpu-box", tmp_path, ("  gpu: 8  ", "  gpus: 8 "))
    proc, out = run_snakemake(tmp_path / "w", "-n", "--profile", str(profile), configfile=PRESETS["paper"])
    assert proc.returncode != 0
    assert (
        "resources.gpus: no job asks for this resource, so the cap limits nothing; did you mean 'gpu'?" in out
    )


@pytest.mark.parametrize("preset", ["paper", "smoke"])
def test_the_shipped_slurm_profile_passes_and_summarises_the_run(preset, tmp_path):
    """The profile serves every preset (its paper rule names are no typo with the smoke preset)."""
    proc, out = run_snakemake(
        tmp_path, "-n", "--profile", str(REPO / "profiles" / "slurm"), configfile=PRESETS[preset]
    )
    assert proc.returncode == 0, out[-3000:]
    (summary,) = [line for line in out.splitlines() if line.startswith("Slurm run: ")]
    assert summary.startswith("Slurm run: account none (-A not given); ")
    if preset == "paper":
        assert "GPU jobs (evaluate, train_1_5b, train_7b) on the default partition" in summary
        assert summary.endswith("GPU model any (gpu_model unset)")


def test_the_summary_shows_the_sites_account_partitions_and_gpu_model(tmp_path):
    profile = _copy(
        "slurm",
        tmp_path,
        ('slurm_account: ""  ', 'slurm_account: "proj42"'),
        ('    slurm_partition: ""       # SITE: partition with GPUs', "    slurm_partition: gpu  #"),
        ('    gpu_model: ""  ', "    gpu_model: h100"),
    )
    proc, out = run_snakemake(tmp_path / "w", "-n", "--profile", str(profile), configfile=PRESETS["paper"])
    assert proc.returncode == 0, out[-3000:]
    (summary,) = [line for line in out.splitlines() if line.startswith("Slurm run: ")]
    assert summary.startswith(
        "Slurm run: account proj42; GPU jobs (evaluate, train_1_5b, train_7b) on partition gpu; "
    )
    assert "CPU jobs (claims, " in summary and summary.endswith("GPU model h100")


def test_a_local_run_prints_no_slurm_summary(tmp_path):
    proc, out = run_snakemake(tmp_path, "-n", configfile=PRESETS["smoke"])
    assert proc.returncode == 0 and "Slurm run:" not in out


def test_executor_from_the_command_line_or_the_profile(tmp_path):
    (tmp_path / "p").mkdir()
    (tmp_path / "p" / "config.yaml").write_text("executor: slurm\n")
    env = {"PWD": str(tmp_path), "HOME": str(tmp_path)}
    assert pc.executor_name(["-n", "--profile", "p"], env) == "slurm"
    assert pc.executor_name(["--profile=p", "-e", "local"], env) == "local"
    assert pc.executor_name(["-n"], {**env, "SNAKEMAKE_PROFILE": str(tmp_path / "p")}) == "slurm"
    assert pc.executor_name(["-n"], env) == "local"


def test_a_duplicate_key_in_the_profile_is_named(tmp_path):
    """Snakemake reads a profile with PyYAML's rules: the second `cores:` would replace the first silently."""
    profile = _copy("gpu-box", tmp_path, ("printshellcmds: true", "printshellcmds: true\ncores: 4"))
    proc, out = run_snakemake(tmp_path / "w", "-n", "--profile", str(profile), configfile=PRESETS["paper"])
    assert proc.returncode != 0
    assert f"{profile / 'config.yaml'}:" in out and ": cores: duplicate key (first at line" in out
