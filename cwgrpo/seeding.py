"""One place for what makes a command's numbers repeatable: its seeds and the CPU's numerics.

``portable_cpu_numerics`` pins the CPU's kernels before torch loads (its docstring says which and why).

``PYTHONHASHSEED`` fixes the string hashes of the interpreters started later (the grading workers,
whose sympy set order follows them, and vLLM's engine), not of this one.
"""

from __future__ import annotations

import os
import platform
import random
from pathlib import Path

# What the CPU's numerics are pinned to (``portable_cpu_numerics``), unless the user set the variable.
PORTABLE_CPU_NUMERICS = {"ATEN_CPU_CAPABILITY": "avx2", "MKL_CBWR": "COMPATIBLE"}


def cpuinfo(field: str) -> str | None:
    """The first CPU's ``field`` in Linux's ``/proc/cpuinfo`` (None elsewhere)."""
    try:
        lines = Path("/proc/cpuinfo").read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        return None
    return next(
        (line.split(":", 1)[1].strip() for line in lines if line.split(":")[0].strip() == field), None
    )


def portable_cpu_numerics() -> None:
    """Give a CPU job the same numbers on any x86-64 CPU with AVX2, before torch loads.

    Two choices made per CPU change the bytes of a training step (each forced lower on an AVX-512 Xeon
    changes them; oneDNN's ISA does not, docs/usage.md "Determinism"): ATen's kernels (AVX-512 ones add in
    another order than AVX2 ones) and MKL's code branch (MKL picks per CPU model and vendor). So ATen runs
    its AVX2 kernels, the widest that AMD's and Intel's CPUs of the last decade share, and MKL its
    ``COMPATIBLE`` branch, the one Intel documents as giving the same results on Intel and other CPUs.
    A variable the user set is kept; a CPU without AVX2 (or not x86) keeps its own kernels, which the
    provenance records. GPU computations are not affected."""
    os.environ.setdefault("MKL_CBWR", PORTABLE_CPU_NUMERICS["MKL_CBWR"])
    has_avx2 = "avx2" in (cpuinfo("flags") or "").split()  # ATen would run AVX2 code on a CPU without it
    if "ATEN_CPU_CAPABILITY" not in os.environ and has_avx2:
        os.environ["ATEN_CPU_CAPABILITY"] = PORTABLE_CPU_NUMERICS["ATEN_CPU_CAPABILITY"]


def numerics_note() -> str | None:
    """Why this machine's CPU numbers may differ from docs/tiny-results (made with the portable pair), or
    None where its commands run the same kernels and MKL branch."""
    reasons = []
    if "avx2" not in (cpuinfo("flags") or "").split():
        reasons.append(f"this CPU ({cpuinfo('model name') or platform.machine()}) has no AVX2")
    for name, value in PORTABLE_CPU_NUMERICS.items():
        if os.environ.get(name, value) != value:  # as torch reads it: case counts
            reasons.append(f"{name}={os.environ[name]} is set")
    if not reasons:
        return None
    return (
        f"{' and '.join(reasons)}: docs/tiny-results was made with ATen's AVX2 kernels and MKL's COMPATIBLE "
        "branch, so this machine's numbers may differ from it (docs/usage.md, Determinism)"
    )


def cpu_numerics() -> dict[str, str | None]:
    """What this process's CPU numbers depend on: the CPU model, ATen's kernels (once torch is loaded),
    MKL's branch."""
    import sys

    torch = sys.modules.get("torch")
    return {
        "cpu_model": cpuinfo("model name") or platform.processor() or None,
        "aten_cpu_capability": torch.backends.cpu.get_cpu_capability() if torch is not None else None,
        "mkl_cbwr": os.environ.get("MKL_CBWR"),
    }


def seed_everything(seed: int, deterministic: bool = False) -> None:
    """Seed python, numpy, torch and child interpreters' string hashes (and kernels: ``deterministic``)."""
    random.seed(seed)
    os.environ["PYTHONHASHSEED"] = str(seed)  # for child interpreters only (module docstring)
    import numpy as np
    import torch

    np.random.seed(seed)
    torch.manual_seed(seed)
    if torch.cuda.is_available():
        torch.cuda.manual_seed_all(seed)
    if deterministic:
        os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
        torch.backends.cudnn.deterministic = True
        torch.backends.cudnn.benchmark = False
        torch.use_deterministic_algorithms(True, warn_only=True)
