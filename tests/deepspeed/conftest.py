"""Real trainings on the paper preset's launch path, on CPU: `cwgrpo train` → cwgrpo.launch.launcher →
`accelerate launch` (through cwgrpo.launch.workers) with the bundled zero2.yaml / zero3.yaml unchanged, 2
processes, DeepSpeed's CPU accelerator over gloo, `use_cpu: true`, bf16, a reference model, the tiny model.

They run in the training environment with DeepSpeed (`make deepspeed`: .venv-deepspeed, DeepSpeed's CPU op
compiled into it), the repository first on PYTHONPATH; ``CWGRPO_DEEPSPEED_PYTHON`` names another
interpreter. Where the environment is absent the tests skip, saying so; with ``CWGRPO_REQUIRE_DEEPSPEED=1``
(set by `make test` and `.ci/run`) a missing environment fails them instead.

``SLOW_RNG_SAVE``: a test-only ``sitecustomize`` (tests/deepspeed/slow_rng_save/) that makes one process
save its RNG state some seconds late, through transformers' own save: it holds open the window in which
the other process finishes the checkpoint, which a real run hits now and then.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.conftest import built_once, side_env_or_skip, side_env_python

REPO = Path(__file__).resolve().parents[2]
SLOW_RNG_SAVE = Path(__file__).with_name("slow_rng_save")
STEPS, SAVE_STEPS = 6, 2

# The paper preset's training options (config/paper.yaml), shrunk to the tiny model; on CPU use_cpu and
# sdpa attention. bf16 and the reference model (beta > 0) as the paper's.
OPTIONS = {
    "launcher": "accelerate",
    "num_processes": "2",
    "use_cpu": "true",
    "bf16": "true",
    "gradient_checkpointing": "false",
    "model_init_kwargs": "{attn_implementation: sdpa}",
    "loss_type": "grpo",
    "beta": "0.04",
    "learning_rate": "1e-4",
    "num_generations": "4",
    "per_device_train_batch_size": "4",
    "max_completion_length": "8",
    "temperature": "1.0",
    "max_steps": str(STEPS),
    "save_steps": str(SAVE_STEPS),
    "reward_funcs": "[accuracy,tests.deepspeed.rewards:digits]",
    "seed": "0",
}


def find_deepspeed_python() -> Path:
    """The DeepSpeed environment's interpreter: $CWGRPO_DEEPSPEED_PYTHON, else the repository's one."""
    return side_env_python("DeepSpeed", "deepspeed")


@pytest.fixture(scope="session")
def deepspeed_python() -> Path:
    return side_env_or_skip("DeepSpeed", "deepspeed")


@pytest.fixture(scope="session")
def ds_inputs(tmp_path_factory, deepspeed_python) -> Path:
    """A folder with ``model/`` (the random tiny model) and ``data/syn_train.jsonl``, built once per test
    run (shared by the xdist workers)."""

    def build(root: Path) -> None:
        for args in (
            ["build-tiny", "--size", "small", "--out-dir", "model", "--marker", "model.json"],
            ["prepare-data", "--dataset", "syn_train", "--out", "data/syn_train.jsonl"],
        ):
            cmd = [sys.executable, "-m", "cwgrpo.cli", *args]
            subprocess.run(cmd, cwd=root, check=True, capture_output=True)

    return built_once(tmp_path_factory, "ds-inputs", build)


class Job:
    """One `cwgrpo train` of the DeepSpeed path in ``folder`` (its run folder ``folder/run``), started in a
    process group of its own, as Snakemake starts a job."""

    def __init__(self, python: Path, inputs: Path, folder: Path, stage: int, slow_rank: int | None = None):
        self.folder, self.run_dir, self.locks = folder, folder / "run", folder / "locks"
        options = {**OPTIONS, "accelerate_config": f"zero{stage}"}
        self.argv = [str(python), "-m", "cwgrpo.cli", "train", "--model-dir", str(inputs / "model")]
        self.argv += [
            "--train-data",
            str(inputs / "data" / "syn_train.jsonl"),
            "--run-dir",
            str(self.run_dir),
        ]
        self.argv += [item for k, v in options.items() for item in ("--set", f"{k}={v}")]
        path = [str(REPO), *([str(SLOW_RNG_SAVE)] if slow_rank is not None else [])]
        self.env = {
            **os.environ,
            "PYTHONPATH": os.pathsep.join(path),
            "CWGRPO_LOCK_DIR": str(self.locks),
            "HF_HUB_OFFLINE": "1",
        }
        if slow_rank is not None:
            self.env |= {"CWGRPO_TEST_SLOW_RNG_RANK": str(slow_rank), "CWGRPO_TEST_SLOW_RNG_S": "4"}
        self.proc: subprocess.Popen | None = None
        self.log = folder / "train.log"

    def start(self) -> subprocess.Popen:
        self.folder.mkdir(parents=True, exist_ok=True)
        with open(self.log, "ab") as log:
            self.proc = subprocess.Popen(
                self.argv, env=self.env, cwd=self.folder, stdout=log, stderr=subprocess.STDOUT,
                start_new_session=True,
            )  # fmt: skip
        return self.proc

    def run(self, timeout: float = 600) -> subprocess.CompletedProcess:
        self.start()
        self.proc.wait(timeout=timeout)
        return subprocess.CompletedProcess(self.argv, self.proc.returncode, self.tail(), "")

    def wait_until(self, ready: Callable[[], bool], timeout: float = 420) -> None:
        """Poll ``ready`` until it holds; fail, with the log's tail, if the job ends or time runs out."""
        deadline = time.monotonic() + timeout
        while not ready():
            assert self.proc.poll() is None, f"the job ended ({self.proc.returncode}):\n{self.tail()}"
            assert time.monotonic() < deadline, f"not reached within {timeout} s:\n{self.tail()}"
            time.sleep(0.05)

    def kill_group(self, sig: int = signal.SIGKILL) -> None:
        os.killpg(self.proc.pid, sig)
        self.proc.wait(timeout=60)

    def processes(self) -> list[int]:
        """Every live process of this job: its command line names this job's run folder."""
        return processes_naming(str(self.run_dir))

    def tail(self) -> str:
        return self.log.read_text(errors="replace")[-4000:] if self.log.is_file() else ""


def processes_naming(text: str) -> list[int]:
    """Pids of the live (not zombie) processes whose command line contains ``text``."""
    found = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit() or int(proc.name) == os.getpid():
            continue
        try:
            cmdline = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            state = (proc / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if text in cmdline and state != "Z":
            found.append(int(proc.name))
    return found


def logged_steps(path: Path) -> list[int]:
    if not path.is_file():
        return []
    steps = []
    for line in path.read_text().splitlines():
        try:
            steps.append(json.loads(line)["step"])
        except (ValueError, KeyError):
            continue
    return steps


@pytest.fixture
def ds_job(deepspeed_python, ds_inputs, tmp_path) -> Callable[..., Job]:
    """``ds_job(stage, slow_rank=None, name="job")``: a Job in ``tmp_path/name``; every process of each
    is killed at teardown, whatever the test did."""
    jobs: list[Job] = []

    def make(stage: int, slow_rank: int | None = None, name: str = "job") -> Job:
        jobs.append(Job(deepspeed_python, ds_inputs, tmp_path / name, stage, slow_rank))
        return jobs[-1]

    yield make
    for job in jobs:
        for pid in job.processes():
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)


def checkpoint_files(ckpt: Path) -> list[str]:
    """A checkpoint's files, relative, its step written ``{step}``, cwgrpo's own flags left out: the layout
    the recorded files of tests/fixtures/checkpoint_layouts hold."""
    from cwgrpo.train.runguard import COMPLETE_FLAG, PRUNED_FLAG

    step = ckpt.name.split("-")[1]
    return sorted(
        p.relative_to(ckpt).as_posix().replace(f"global_step{step}", "global_step{step}")
        for p in ckpt.rglob("*")
        if p.is_file() and p.name not in (COMPLETE_FLAG, PRUNED_FLAG)
    )


@pytest.fixture(scope="session")
def uninterrupted(deepspeed_python, ds_inputs, tmp_path_factory) -> Callable[[int], Path]:
    """``uninterrupted(stage)``: the run folder of a whole run (``STEPS`` steps, a checkpoint every
    ``SAVE_STEPS``) under ZeRO-``stage``, its rank 1 saving its RNG state late; trained once per test run
    (shared by the xdist workers)."""

    def get(stage: int) -> Path:
        def build(folder: Path) -> None:
            job = Job(deepspeed_python, ds_inputs, folder, stage, slow_rank=1)
            result = job.run()
            assert result.returncode == 0, result.stdout

        return built_once(tmp_path_factory, f"ds-zero{stage}-whole", build) / "run"

    return get
