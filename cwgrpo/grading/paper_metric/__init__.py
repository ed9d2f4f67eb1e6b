"""The ``paper`` metric from the ``cwgrpo`` side: find the lighteval environment, drive its worker.

lighteval 0.8.1 cannot share an environment with our math-verify 0.9.0, so its metric runs in
``worker.py`` (beside this file) under another interpreter, found by this rule (first that applies):

1. ``--lighteval-python PATH`` (the ``python`` argument of ``find_lighteval_python``);
2. the environment variable ``CWGRPO_LIGHTEVAL_PYTHON``;
3. the active conda environment (``$CONDA_PREFIX/bin/python``) if lighteval is installed in it, as in
   a Snakemake job run with ``--use-conda`` and ``envs/lighteval.yaml``;
4. ``.venv-lighteval/bin/python`` in the repository (``make lighteval`` builds it).

Each answer has a budget of the worker's CPU time, so that its verdict does not depend on how busy the
machine is: the worker gets one line, and if its verdict does not come back in time the worker is killed,
the answer gets a ``timeout`` verdict (``timed_out``), and a fresh worker takes the rest. A worker that uses
no CPU and answers nothing is given up after ``STALL_FACTOR`` budgets of wall-clock time. Several workers
run side by side (``processes``); verdicts come back in input order.
"""

from __future__ import annotations

import concurrent.futures
import json
import os
import selectors
import subprocess
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from cwgrpo.configs import ConfigError

WORKER = Path(__file__).with_name("worker.py")
REPO_ROOT = Path(__file__).resolve().parents[3]
DEFAULT_VENV = REPO_ROOT / ".venv-lighteval"
ENV_VAR = "CWGRPO_LIGHTEVAL_PYTHON"
DEFAULT_TIMEOUT_S = 20.0  # CPU seconds per answer; lighteval's own timeouts are 2-5 s per attempt
STARTUP_TIMEOUT_S = 300.0  # wall-clock; importing lighteval takes ~10 s on a loaded 2-core machine
STALL_FACTOR = 30  # a worker that neither answers nor runs out of CPU time for this many budgets is stuck


def cpu_seconds(pid: int) -> float | None:
    """User + system CPU seconds of process ``pid`` (``/proc``), None where that cannot be read."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _has_lighteval(python: Path) -> bool:
    return any(python.parent.parent.glob("lib/python3*/site-packages/lighteval"))


def find_lighteval_python(python: str | Path | None = None) -> Path:
    """The interpreter of the lighteval environment, by the rule of the module docstring."""
    if python is not None:
        candidates = [("--lighteval-python", Path(python))]
    elif os.environ.get(ENV_VAR):
        candidates = [(ENV_VAR, Path(os.environ[ENV_VAR]))]
    else:
        candidates = []
        prefix = os.environ.get("CONDA_PREFIX")
        if prefix and _has_lighteval(Path(prefix) / "bin" / "python"):
            candidates.append(("the active conda environment", Path(prefix) / "bin" / "python"))
        candidates.append(("the repository default", DEFAULT_VENV / "bin" / "python"))
    source, path = candidates[0]
    if not (path.is_file() and os.access(path, os.X_OK)):
        raise ConfigError(
            f"the paper metric needs lighteval's own environment, and its python ({source}: {path}) "
            f"is missing; build it with `make lighteval` (a venv at {DEFAULT_VENV.name}/), or create "
            f"envs/lighteval.yaml with conda, or point --lighteval-python / {ENV_VAR} at one"
        )
    return path


class _Worker:
    """One worker process, fed one line at a time."""

    def __init__(self, python: Path) -> None:
        self.proc = subprocess.Popen(
            [str(python), str(WORKER)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            env={**os.environ, "PYTHONNOUSERSITE": "1", "OMP_NUM_THREADS": "1"},
        )
        self._buf = b""
        self.eof = False  # the worker closed its output: it died
        ready = self._read_line(STARTUP_TIMEOUT_S, cpu=False)
        if ready is None or not json.loads(ready).get("ready"):
            self.close()
            raise RuntimeError(
                f"the lighteval worker ({python} {WORKER}) did not start; run it by hand to see why"
            )

    def _read_line(self, timeout_s: float, cpu: bool = True) -> bytes | None:
        """The next output line, or None if none comes within ``timeout_s`` of the worker's CPU time (or
        of wall-clock time: not ``cpu``, or where a process's CPU time cannot be read), or the worker died."""
        start = cpu_seconds(self.proc.pid) if cpu else None
        deadline = time.monotonic() + (timeout_s if start is None else STALL_FACTOR * timeout_s)
        fd = self.proc.stdout.fileno()
        with selectors.DefaultSelector() as sel:
            sel.register(fd, selectors.EVENT_READ)
            while b"\n" not in self._buf:
                left = deadline - time.monotonic()
                if start is not None:  # the worker's CPU time never runs faster than the wall clock
                    used = cpu_seconds(self.proc.pid)
                    left = min(left, timeout_s - (used - start) if used is not None else 0.0)
                if left <= 0:
                    return None
                if not sel.select(left):
                    continue
                chunk = os.read(fd, 1 << 16)
                if not chunk:
                    self.eof = True
                    return None
                self._buf += chunk
        line, _, self._buf = self._buf.partition(b"\n")
        return line

    def ask(self, item: dict[str, Any], timeout_s: float) -> dict[str, Any] | None:
        try:
            self.proc.stdin.write(json.dumps(item, ensure_ascii=False).encode() + b"\n")
            self.proc.stdin.flush()
        except BrokenPipeError:
            self.eof = True
            return None
        line = self._read_line(timeout_s)
        return None if line is None else json.loads(line)

    def exit_status(self) -> int | None:
        """The exit status of a worker that closed its output (None if it is somehow still running)."""
        try:
            return self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            return None

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()


def _score_chunk(python: Path, items: Sequence[dict[str, Any]], timeout_s: float) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    worker: _Worker | None = None
    try:
        for item in items:
            if worker is None:
                worker = _Worker(python)
            verdict = worker.ask(item, timeout_s)
            if verdict is None:
                died = worker.exit_status() if worker.eof else None
                worker.close()
                worker = None
                reason = (
                    f"timeout: no verdict within the budget of {timeout_s:g} s of CPU time"
                    if died is None
                    else f"the lighteval worker died (exit status {died}) on this answer"
                )
                verdict = {
                    "correct": False,
                    "pred": [],
                    "gold": [],
                    "reason": reason,
                    "timed_out": died is None,
                }
            out.append(verdict)
    finally:
        if worker is not None:
            worker.close()
    return out


def score_paper(
    items: Sequence[dict[str, Any]],
    python: Path,
    processes: int = 2,
    timeout_s: float = DEFAULT_TIMEOUT_S,
) -> list[dict[str, Any]]:
    """Paper-metric verdicts of ``{completion, gold, gold_kind}`` items, in order (see ``worker.py``)."""
    if not items:
        return []
    n = max(1, min(processes, len(items)))
    size = -(-len(items) // n)
    chunks = [items[i : i + size] for i in range(0, len(items), size)]
    with concurrent.futures.ThreadPoolExecutor(max_workers=len(chunks)) as pool:
        results = pool.map(_score_chunk, [python] * len(chunks), chunks, [timeout_s] * len(chunks))
        return [v for chunk in results for v in chunk]
