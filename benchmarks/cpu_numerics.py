"""Which CPU settings a training step's bytes depend on: three optimiser steps of a tiny model, hashed, in a
fresh process per setting (each forced lower than this CPU's own choice, then cwgrpo's portable pair).

    python benchmarks/cpu_numerics.py MODEL_DIR    # e.g. results/tiny/models/small/init

A setting whose hash differs from the first line's changes results; docs/usage.md ("Determinism") has the
measured table and what the jobs set.
"""

from __future__ import annotations

import os
import subprocess
import sys

STEP = """
import hashlib, sys, torch
from transformers import AutoModelForCausalLM
torch.manual_seed(0)
torch.set_num_threads(1)
model = AutoModelForCausalLM.from_pretrained(sys.argv[1], dtype=torch.float32)
ids = torch.randint(0, model.config.vocab_size, (8, 64), generator=torch.Generator().manual_seed(1))
opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
for _ in range(3):
    model(input_ids=ids, labels=ids).loss.backward()
    opt.step()
    opt.zero_grad()
digest = hashlib.sha256(b"".join(p.detach().numpy().tobytes() for p in model.parameters())).hexdigest()
print(torch.backends.cpu.get_cpu_capability(), digest[:16])
"""

SETTINGS = [
    {},
    {"ATEN_CPU_CAPABILITY": "avx2"},
    {"ATEN_CPU_CAPABILITY": "default"},
    {"MKL_CBWR": "AVX2"},
    {"MKL_CBWR": "COMPATIBLE"},
    {"ONEDNN_MAX_CPU_ISA": "AVX2"},
    {"ONEDNN_MAX_CPU_ISA": "SSE41"},
    {"ATEN_CPU_CAPABILITY": "avx2", "MKL_CBWR": "COMPATIBLE"},  # what cwgrpo's commands set
]
CPU_VARIABLES = ("ATEN_CPU_CAPABILITY", "MKL_CBWR", "ONEDNN_MAX_CPU_ISA")


def main() -> int:
    base = {k: v for k, v in os.environ.items() if k not in CPU_VARIABLES}
    print("| setting | ATen kernels | parameters after 3 steps (sha256) |\n|---|---|---|")
    for setting in SETTINGS:
        env = {**base, **setting}
        done = subprocess.run(
            [sys.executable, "-c", STEP, sys.argv[1]], env=env, capture_output=True, text=True
        )
        capability, digest = done.stdout.split() if done.returncode == 0 else ("error", done.stderr[-200:])
        name = " ".join(f"{k}={v}" for k, v in setting.items()) or "(this CPU's own choice)"
        print(f"| {name} | {capability} | `{digest}` |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
