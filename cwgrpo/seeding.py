"""One place that seeds every random source of a command (``train``, ``sft``, ``evaluate``).

``seed_everything`` seeds Python's, NumPy's and torch's generators (CPU and CUDA) in this process and,
through ``PYTHONHASHSEED``, the string hashing of the Python processes started after it. Python reads
that variable once, at interpreter start, so setting it cannot change this process's hashes (they stay
as the process started; start the command with ``PYTHONHASHSEED`` set to fix them too). It matters for
the fresh interpreters that inherit the environment later: the forkserver of ``cwgrpo.grading.scoring``'s
grading workers (math-verify and sympy, whose set iteration order follows string hashes) and vLLM's
engine processes. Plain forks (``fork``) keep their parent's hashes whatever the variable says.
"""

from __future__ import annotations

import os
import random


def seed_everything(seed: int, deterministic: bool = False) -> None:
    """Seed python, numpy and torch (CPU and CUDA), and the string hashes of later child interpreters;
    ``deterministic=True`` also asks for deterministic kernels (before the first CUDA matrix product).
    """
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
