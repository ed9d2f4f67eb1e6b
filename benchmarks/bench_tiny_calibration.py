"""Calibrate the tiny preset's supervised warm-up: parameters, warm-up steps and time, greedy accuracy.

Run from the repository root::

    python benchmarks/bench_tiny_calibration.py --size small --seed 0 \\
        --set lr=3e-3 --out benchmarks/results/tiny_calibration_small_s0.json
    python benchmarks/bench_tiny_calibration.py --size large --seed 0 --set lr=1e-3 ...

For one size and seed: builds the initial model (``cwgrpo build-tiny``), runs ``cwgrpo sft`` through the
command line with the given ``--set`` overrides (``torch_threads=1`` unless overridden), then measures
greedy accuracy of the initial and of the warmed-up model on ``syn_dev`` and on every benchmark split
(all rows). Writes one JSON record with wall and CPU seconds of the warm-up (CPU seconds are the ones to
trust on a shared machine). Docs: docs/tiny-calibration.md.
"""

from __future__ import annotations

import json
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench_common import command_line, cpu_s, write_report


def main() -> None:
    parser = command_line(__doc__)
    parser.add_argument("--size", default="small")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--set", dest="overrides", action="append", default=[], help="cwgrpo sft option")
    parser.add_argument("--threads", type=int, default=1, help="torch threads of the accuracy measurement")
    parser.add_argument("--out", type=Path, default=None, help="JSON output (default: print only)")
    args = parser.parse_args()

    import torch
    from transformers import AutoModelForCausalLM

    from cwgrpo.data.synthetic import BENCHMARKS, generate_split
    from cwgrpo.io import read_json, write_jsonl
    from cwgrpo.models.sft import greedy_accuracy
    from cwgrpo.models.tiny import load_tokenizer

    torch.set_num_threads(args.threads)
    overrides = list(args.overrides)
    if not any(o.startswith("torch_threads=") for o in overrides):
        overrides.append("torch_threads=1")
    splits = ["syn_dev", *BENCHMARKS]
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        for name in ["syn_train", *splits]:
            write_jsonl(root / f"{name}.jsonl", generate_split(name))
        cli = [sys.executable, "-m", "cwgrpo.cli"]
        init, base = root / "init", root / "base"
        build = ["build-tiny", "--size", args.size, "--out-dir", init, "--marker", root / "init.json"]
        subprocess.run([*cli, *build, "--set", f"seed={args.seed}"], check=True)
        sets = [x for o in [f"seed={args.seed}", *overrides] for x in ("--set", o)]
        cpu0, t0 = cpu_s(resource.RUSAGE_CHILDREN), time.perf_counter()
        data = ["--train-data", root / "syn_train.jsonl", "--dev-data", root / "syn_dev.jsonl"]
        outs = ["--out-dir", base, "--marker", root / "base.json"]
        subprocess.run([*cli, "sft", "--model-dir", init, *data, *outs, *sets], check=True)
        wall, cpu = time.perf_counter() - t0, cpu_s(resource.RUSAGE_CHILDREN) - cpu0
        marker = read_json(root / "base.json")
        accuracy = {}
        for label, path in (("init", init), ("base", base)):
            tok, model = load_tokenizer(path), AutoModelForCausalLM.from_pretrained(path)
            accuracy[label] = {
                s: greedy_accuracy(model, tok, generate_split(s), max_new_tokens=96) for s in splits
            }
        record = {
            "size": args.size,
            "seed": args.seed,
            "params": read_json(root / "init.json")["params"],
            "overrides": overrides,
            "sft_steps": marker["steps"],
            "sft_dev_accuracy": marker["dev_accuracy"],
            "sft_evals": [(e["step"], e["dev_accuracy"]) for e in marker["evals"]],
            "sft_wall_s": round(wall, 1),
            "sft_cpu_s": round(cpu, 1),
            "accuracy": accuracy,
        }
    print(json.dumps(record, indent=2))
    if args.out:
        write_report(args.out, record)


if __name__ == "__main__":
    main()
