"""The shipped open-r1-style recipe through `python -m cwgrpo train --config`, in one process and under
`accelerate launch -m cwgrpo` with 2 CPU processes (two tiny steps each), on a tiny model given the smoke
preset's warm-up, so that the recipe's rewards and gradients can be nonzero: the recipe must train."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from cwgrpo.launch.devices import lease
from tests.e2e.conftest import cwgrpo

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[2]
RECIPE = REPO / "config/recipes/tiny_open_r1.yaml"


@pytest.fixture(scope="module")
def warmed_model(e2e_inputs, tmp_path_factory) -> Path:
    """The tiny model after the smoke preset's warm-up (125 steps on level 1, config/smoke.yaml: some
    completions right and well formed, some not); a random model's rewards are all 0."""
    smoke = yaml.safe_load((REPO / "config/smoke.yaml").read_text())["sft"]
    out = tmp_path_factory.mktemp("warmed")
    cwgrpo("prepare-data", "--dataset", "syn_dev", "--out", "syn_dev.jsonl", cwd=out)
    sets = [arg for key, value in smoke.items() for arg in ("--set", f"{key}={value}")]
    cwgrpo("sft", "--model-dir", str(e2e_inputs / "model"), "--train-data", str(e2e_inputs / "data/syn_train.jsonl"),
           "--dev-data", "syn_dev.jsonl", "--out-dir", "base", "--marker", "base.json", *sets, cwd=out,
           timeout=1800)  # fmt: skip
    return out / "base"


def _recipe(model: Path, tmp_path: Path, name: str) -> tuple[Path, Path]:
    recipe = yaml.safe_load(RECIPE.read_text())
    run_dir = tmp_path / name
    recipe |= {
        "model_name_or_path": str(model),
        "dataset_name": str(model.parent / "syn_dev.jsonl"),  # level 1, which the warm-up taught
        "output_dir": str(run_dir),
    }
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump(recipe))
    return path, run_dir


def _check_run(run_dir: Path) -> None:
    run = json.loads((run_dir / "run.json").read_text())
    assert run["config"]["trl"]["model_init_kwargs"] == {"dtype": "float32", "attn_implementation": "eager"}
    assert run["config"]["job"]["reward_funcs"] == ["accuracy", "format"]
    steps = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    assert [s["step"] for s in steps if "loss" in s] == [1, 2]
    assert (run_dir / "steps/step2.json").is_file()
    # The recipe trains: some completions end within the budget, earn a reward and move the weights.
    assert min(s["completions/clipped_ratio"] for s in steps if "loss" in s) < 1, steps
    assert max(s["reward"] for s in steps if "loss" in s) > 0, steps
    assert max(s["grad_norm"] for s in steps if "loss" in s) > 0, steps


def _timings(path: Path) -> list[dict]:
    """The wall-clock log: one line per logged step, never a field that metrics.jsonl keeps."""
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    assert lines and all("step" in line and "loss" not in line for line in lines), lines
    return lines


def test_recipe_runs_with_python_m_cwgrpo(warmed_model, tmp_path):
    path, run_dir = _recipe(warmed_model, tmp_path, "one")
    timings = tmp_path / "logs" / "one.timings.jsonl"  # --timings: the wall-clock log goes where it is told
    cmd = [sys.executable, "-m", "cwgrpo", "train", "--config", str(path), "--timings", str(timings)]
    proc = subprocess.run(
        cmd, capture_output=True, text=True, timeout=600, env={**os.environ, "OMP_NUM_THREADS": "1"}
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    _check_run(run_dir)
    assert any("train_runtime" in line for line in _timings(timings))
    assert not (run_dir / "timings.jsonl").exists()


def test_recipe_runs_under_accelerate_launch_with_two_cpu_processes(warmed_model, tmp_path):
    accelerate = shutil.which("accelerate", path=str(Path(sys.executable).parent))
    assert accelerate, "accelerate's launcher is installed with the package"
    path, run_dir = _recipe(warmed_model, tmp_path, "two")
    # `--cpu` would take accelerate's single-process launcher (multi-CPU there needs mpirun); `--multi_gpu` is
    # its torchrun launcher, and with the recipe's use_cpu: true the two processes train on CPU over gloo.
    env = {**os.environ, "OMP_NUM_THREADS": "1", "ACCELERATE_CONFIG_FILE": str(tmp_path / "none.yaml")}
    # The rendezvous port from the package's port lease, as a workflow job gets its own: accelerate's default
    # (29500) is the lease's first port, which a job on the other test worker may hold.
    with lease(0, 1, env) as held:
        cmd = [accelerate, "launch", "--multi_gpu", "--num_processes", "2", "--num_machines", "1",
               "--main_process_port", str(held.ports[0]), "--mixed_precision", "no", "--dynamo_backend", "no",
               "-m", "cwgrpo", "train", "--config", str(path)]  # fmt: skip
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=900, env=env)
    assert proc.returncode == 0, proc.stderr[-4000:]
    _check_run(run_dir)
    _timings(run_dir / "timings.jsonl")  # no --timings: the default, in the run folder
    assert "training process 0 of 2" in proc.stderr and "training process 1 of 2" in proc.stderr
