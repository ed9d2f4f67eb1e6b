"""Each job's options file (cwgrpo_workflow.dag.options) under dry runs, edits and reruns: a planned job's file never
changes, an edit is a new file, and Snakemake reruns a job exactly when its options change."""

from __future__ import annotations

import copy
import re
from pathlib import Path

import yaml
from test_gpu_box import _fake_cwgrpo
from test_workflow import PRESETS, run_snakemake

TRAINS = ["results/real/runs/135m/grpo/seed0/run.json", "results/real/runs/135m/cw_grpo/seed0/run.json"]


def _preset(tmp_path: Path, name: str, edit=None) -> Path:
    """The real preset, edited by ``edit(config)``, written to ``tmp_path/name``."""
    config = copy.deepcopy(yaml.safe_load(PRESETS["real"].read_text()))
    if edit:
        edit(config)
    path = tmp_path / name
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    return path


def _configs(out: str) -> dict[str, str]:
    """Each planned job's output -> the `--config` file its command names, from a dry run with -p."""
    found = {}
    for command in re.findall(r"^Shell command: (.+)$", out, re.M):
        config = re.search(r"--config (\S+)", command)
        target = re.search(r"--(?:run-dir|out|marker|summary) (\S+)", command)
        if config and target:
            found[target.group(1)] = config.group(1)
    return found


def _planned(out: str) -> list[str]:
    return sorted(re.findall(r"^(?:local)?rule (\w+):$", out, re.M))


def test_a_dry_run_of_an_edited_preset_changes_no_file_a_planned_job_reads(tmp_path):
    """The bug: a dry run of an edited preset rewrote the options file a running job was about to read."""
    work = tmp_path / "work"
    proc, out = run_snakemake(work, "-n", "-p", configfile=_preset(tmp_path, "a.yaml"))
    assert proc.returncode == 0, out[-3000:]
    planned_a = _configs(out)
    before = {path: (work / path).read_bytes() for path in planned_a.values()}
    assert len(before) >= 3

    def faster(config):
        config["methods"]["cw_grpo"]["learning_rate"] = 5.0e-4

    proc, out = run_snakemake(work, "-n", "-p", configfile=_preset(tmp_path, "b.yaml", faster))
    assert proc.returncode == 0, out[-3000:]
    planned_b = _configs(out)
    assert {path: (work / path).read_bytes() for path in planned_a.values()} == before
    changed = [job for job in planned_a if planned_a[job] != planned_b[job]]
    assert changed == ["results/real/runs/135m/cw_grpo/seed0"]  # a new, named file for the edited job only
    assert yaml.safe_load((work / planned_b[changed[0]]).read_text())["learning_rate"] == 5.0e-4

    def renamed(config):
        config["name"] = "real-renamed"

    proc, out = run_snakemake(work, "-n", "-p", configfile=_preset(tmp_path, "c.yaml", renamed))
    assert proc.returncode == 0, out[-3000:]
    assert all(path.startswith("results/real-renamed/options/") for path in _configs(out).values())
    assert {path: (work / path).read_bytes() for path in planned_a.values()} == before


def test_snakemake_reruns_a_job_exactly_when_its_options_change(tmp_path):
    bin_dir, records = _fake_cwgrpo(tmp_path)
    work = tmp_path / "work"

    def snakemake(configfile, *args):
        proc, out = run_snakemake(
            work,
            *args,
            *TRAINS,
            configfile=configfile,
            path_prefix=bin_dir,
            env={"RECORD_DIR": str(records), "CWGRPO_LOCK_DIR": str(tmp_path), "CUDA_VISIBLE_DEVICES": "0"},
        )
        assert proc.returncode == 0, out[-3000:]
        return out

    def lr(value):
        return lambda config: config["methods"]["cw_grpo"].update(learning_rate=value)

    first = _preset(tmp_path, "first.yaml")
    snakemake(first, "--cores", "1")
    assert _planned(snakemake(first, "-n")) == []  # parsed again: nothing to do
    edited = _preset(tmp_path, "edited.yaml", lr(5.0e-4))
    assert _planned(snakemake(edited, "-n")) == ["train_135m"]  # only the edited method's run
    assert _planned(snakemake(first, "-n")) == []  # a dry run of an edit made no finished job stale
    snakemake(edited, "--cores", "1")
    assert _planned(snakemake(edited, "-n")) == []
    # Back to the first options: their file is older than the outputs, but it is another input of the job.
    assert _planned(snakemake(first, "-n")) == ["train_135m"]


def test_an_options_folder_that_cannot_be_written_stops_the_dry_run_in_one_line(tmp_path):
    work = tmp_path / "work"
    (work / "results" / "real").mkdir(parents=True)
    (work / "results" / "real" / "options").write_text("")  # a file where the folder goes
    proc, out = run_snakemake(work, "-n", configfile=_preset(tmp_path, "a.yaml"))
    assert proc.returncode != 0
    assert "Traceback" not in out and "cannot write this job's options file" in out, out[-3000:]
    assert not [p for p in work.rglob("*.tmp")]
