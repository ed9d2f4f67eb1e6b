"""Time ``cwgrpo.weighting.cw_weights`` on one 144 x 4096 micro-batch on one CPU core.

Run from the repository root::

    python benchmarks/bench_weighting.py                      # writes benchmarks/results/weighting.json
    python benchmarks/bench_weighting.py --runs 50 --out /tmp/weighting.json

Inputs: float32 logps in (-8, 0), right padding with lengths uniform in [1, T] (so about half the
tokens are padding), an int64 0/1 mask as TRL builds it, and normalised advantages; everything seeded.
Each row times one call (median and min wall time, and median process CPU time, of ``--runs`` calls
after ``--warmup`` calls) with ``torch.set_num_threads(1)``. Rows: ``released`` and ``described`` forward
only, ``released`` forward with ``logps.requires_grad`` (what training records for autograd) and forward +
backward. There is no time goal.

Allocator: every (B, T) float32 temporary is 2.4 MB, above glibc's mmap threshold, so with the default
``malloc`` settings many temporaries are fresh ``mmap``s whose page faults can cost more than the
arithmetic. Each case is therefore timed in two fresh child processes: ``default`` (the environment as
given) and ``no-mmap`` (glibc's ``MALLOC_MMAP_THRESHOLD_``/``MALLOC_TRIM_THRESHOLD_``/``MALLOC_TOP_PAD_``
raised, so freed blocks are reused, roughly what jemalloc/tcmalloc or PyTorch's CUDA caching allocator
give). The variables are ignored where the C library is not glibc.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import torch
from bench_common import write_report

from cwgrpo.weighting import cw_weights

ALLOCATORS = {
    "default": {},
    "no-mmap": {
        "MALLOC_MMAP_THRESHOLD_": str(1 << 30),
        "MALLOC_TRIM_THRESHOLD_": str(1 << 40),
        "MALLOC_TOP_PAD_": str(1 << 27),
    },
}


def make_batch(b: int, t: int, seed: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Random ``(logps, advantages, mask)`` for a ``(b, t)`` micro-batch."""
    g = torch.Generator().manual_seed(seed)
    logps = -8 * torch.rand(b, t, generator=g)
    lengths = torch.randint(1, t + 1, (b,), generator=g)
    mask = (torch.arange(t)[None, :] < lengths[:, None]).long()
    adv = torch.randn(b, generator=g)
    return logps, (adv - adv.mean()) / adv.std(), mask


def time_ms(fn: Callable[[], object], runs: int, warmup: int) -> dict[str, float]:
    """Wall time (median, min, max) and process CPU time (median: unlike wall time, it does not grow when
    other processes compete for the cores) of ``fn()`` in milliseconds."""
    for _ in range(warmup):
        fn()
    wall, cpu = [], []
    for _ in range(runs):
        start, start_cpu = time.perf_counter(), time.process_time()
        fn()
        wall.append((time.perf_counter() - start) * 1e3)
        cpu.append((time.process_time() - start_cpu) * 1e3)
    return {
        "median_ms": statistics.median(wall),
        "min_ms": min(wall),
        "max_ms": max(wall),
        "cpu_median_ms": statistics.median(cpu),
    }


def cases(logps: torch.Tensor, adv: torch.Tensor, mask: torch.Tensor) -> dict[str, Callable[[], object]]:
    lp_grad = logps.clone().requires_grad_(True)

    def fwd_bwd() -> None:
        cw_weights(lp_grad, adv, mask, variant="released").sum().backward()
        lp_grad.grad = None

    return {
        "released": lambda: cw_weights(logps, adv, mask, variant="released"),
        "described": lambda: cw_weights(logps, adv, mask, variant="described"),
        "released (logps.requires_grad)": lambda: cw_weights(lp_grad, adv, mask, variant="released"),
        "released forward+backward": fwd_bwd,
    }


def measure(args: argparse.Namespace) -> dict[str, dict[str, float]]:
    torch.set_num_threads(1)
    logps, adv, mask = make_batch(args.batch, args.length, args.seed)
    return {name: time_ms(fn, args.runs, args.warmup) for name, fn in cases(logps, adv, mask).items()}


def measure_in_child(args: argparse.Namespace, env: dict[str, str]) -> dict[str, dict[str, float]]:
    """Run :func:`measure` in a fresh interpreter with ``env`` added (malloc settings apply at start)."""
    cmd = [sys.executable, __file__, "--child", "--runs", str(args.runs), "--warmup", str(args.warmup)]
    cmd += ["--batch", str(args.batch), "--length", str(args.length), "--seed", str(args.seed)]
    res = subprocess.run(cmd, env={**os.environ, **env}, capture_output=True, text=True, check=True)
    return json.loads(res.stdout)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path("benchmarks/results/weighting.json"))
    parser.add_argument("--runs", type=int, default=30)
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--batch", type=int, default=144)
    parser.add_argument("--length", type=int, default=4096)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(measure(args)))
        return

    results = {alloc: measure_in_child(args, env) for alloc, env in ALLOCATORS.items()}
    n_valid = int(make_batch(args.batch, args.length, args.seed)[2].sum())
    load = os.getloadavg()[0]
    print(f"cw_weights, B x T = {args.batch} x {args.length}, {n_valid} valid tokens, 1 thread")
    print(f"{'case':32s} {'allocator':>9s} {'median ms':>10s} {'min ms':>8s} {'cpu median ms':>14s}")
    for alloc, rows in results.items():
        for name, r in rows.items():
            print(
                f"{name:32s} {alloc:>9s} {r['median_ms']:10.2f} {r['min_ms']:8.2f} {r['cpu_median_ms']:14.2f}"
            )
    print(f"1-min load average {load:.2f} on {os.cpu_count()} CPUs")

    record = {
        "shape": [args.batch, args.length],
        "valid_tokens": n_valid,
        "dtype": "torch.float32",
        "mask_dtype": "torch.int64",
        "threads": 1,
        "runs": args.runs,
        "warmup": args.warmup,
        "seed": args.seed,
        "allocators": ALLOCATORS,
        "torch": torch.__version__,
        "python": platform.python_version(),
        "machine": platform.machine(),
        "cpu_count": os.cpu_count(),
        "load_average_1min": load,
        "results": results,
    }
    write_report(args.out, record)


if __name__ == "__main__":
    main()
