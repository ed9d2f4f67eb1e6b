"""One place that seeds every random source of a command (``train``, ``sft``, ``evaluate``).

``PYTHONHASHSEED`` fixes the string hashes of the interpreters started later (the grading workers,
whose sympy set order follows them, and vLLM's engine), not of this one.
"""

from __future__ import annotations

import os
import random


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
