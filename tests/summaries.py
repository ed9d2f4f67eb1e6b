"""The smallest evaluation summary the report commands read, where they look for it: the report tests'
input files."""

from __future__ import annotations

import json
from pathlib import Path


def write_summary(root: Path, size, method, seed, step, benchmark, acc, n_problems: int = 50) -> Path:
    path = root / "eval" / size / method / f"seed{seed}" / f"step{step}" / f"{benchmark}.summary.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    tags = {"size": size, "method": method, "seed": seed, "step": step}
    path.write_text(
        json.dumps({"benchmark": benchmark, "tags": tags, "k": 1, "pass1": acc, "n_problems": n_problems})
    )
    return path
