"""Provenance: what produced a result (seeding is ``cwgrpo.seeding``).

No timing enters it, so two identical runs give byte-identical result files.
"""

from __future__ import annotations

import contextlib
import functools
import importlib.metadata
import os
import platform
import subprocess
import sys
from pathlib import Path
from typing import Any

LIBRARIES = ("torch", "transformers", "trl", "accelerate", "datasets", "math-verify", "vllm", "deepspeed")


@functools.cache
def git_state() -> dict[str, Any]:
    """Commit of the checkout the package runs from and whether it had uncommitted changes."""
    here = Path(__file__).resolve().parent

    def git(*args: str) -> str:
        return subprocess.run(
            ["git", *args], cwd=here, capture_output=True, text=True, check=True, timeout=10
        ).stdout.strip()

    try:
        return {
            "commit": git("rev-parse", "HEAD"),
            "dirty": bool(git("status", "--porcelain", "--untracked-files=no")),
        }
    except (OSError, subprocess.SubprocessError):
        return {"commit": None, "dirty": None}


def library_versions() -> dict[str, str | None]:
    out: dict[str, str | None] = {}
    for name in LIBRARIES:
        try:
            out[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            out[name] = None
    return out


def hardware() -> dict[str, Any]:
    from cwgrpo.seeding import cpu_numerics

    info: dict[str, Any] = {
        "machine": platform.machine(),
        "cpus": os.cpu_count(),
        "python": platform.python_version(),
        **cpu_numerics(),
    }
    torch = sys.modules.get("torch")  # only if the command loaded it: provenance never pays for the import
    info["gpus"] = None
    if torch is not None:
        with contextlib.suppress(RuntimeError):  # a broken CUDA setup must not break provenance
            n = torch.cuda.device_count() if torch.cuda.is_available() else 0
            info["gpus"] = [torch.cuda.get_device_name(i) for i in range(n)]
    return info


def provenance(**extra: Any) -> dict[str, Any]:
    """The identity block stored in every result file (deterministic for a given checkout and machine)."""
    from cwgrpo import __version__

    return {
        "package": "cwgrpo",
        "version": __version__,
        "git": git_state(),
        "libraries": library_versions(),
        "hardware": hardware(),
        **extra,
    }
