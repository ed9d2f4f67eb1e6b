"""CPU seconds per job kind of a tiny-preset DAG run, against the floor of each kind.

Every ``cwgrpo`` command logs one line when it finishes (``resource use: cwgrpo <command>: <s> s CPU``:
user+sys since the process started, imports and finished grading workers included), and every rule
writes its command's log under ``logs/<preset>/``. This script sums those lines per kind, then measures
in this process the floor of each kind: what the job could not do without (a bare ``import torch``; a
bare ``generate`` of the job's sequences at full length; a bare forward/backward and AdamW step of the
training micro-batches), single-threaded like the DAG's jobs. The ratio job/floor says how much of a
job is overhead; compare it before and after a change, on an idle machine.

    snakemake --cores 2                                      # the tiny preset (or `make tiny`)
    python benchmarks/bench_tiny_jobs.py --logs logs/tiny --results results/tiny \\
        --out benchmarks/results/tiny_jobs.json

CPU seconds, not wall: a loaded machine stretches wall time; CPU time much less (not at all only on an
idle one). The floors use the preset's shapes (config/config.yaml) with every completion at its maximum
length, so they are upper bounds and the ratios lower bounds of the overhead.
"""

from __future__ import annotations

import json
import re
import resource
import statistics
import subprocess
import sys
import time
from collections import defaultdict
from pathlib import Path

from bench_common import command_line, cpu_s

from cwgrpo.generation import encode_prompt
from cwgrpo.io import write_json

LINE = re.compile(r"resource use: cwgrpo (\S+): ([0-9.]+) s CPU")
# The tiny preset's shapes (config/config.yaml, cwgrpo.models.sft defaults).
EVAL = {"benchmarks": 5, "problems": 50, "k": 2, "batch": 32, "new_tokens": 64}
TRAIN = {"steps": 16, "completions": 128, "micro_batch": 8, "new_tokens": 64}
SFT = {"batch": 32, "dev": 100, "dev_tokens": 96, "eval_every": 25}


def job_cpu(logs: Path) -> dict[str, list[float]]:
    """Command -> CPU seconds of each finished job, from the logs."""
    kinds: dict[str, list[float]] = defaultdict(list)
    for log in sorted(logs.rglob("*.log")):
        for match in LINE.finditer(log.read_text(errors="replace")):
            kinds[match[1]].append(float(match[2]))
    return dict(kinds)


def subprocess_cpu(code: str, reps: int = 3) -> float:
    """Median CPU seconds of a fresh interpreter running ``code``."""
    samples = []
    for _ in range(reps):
        before = cpu_s(resource.RUSAGE_CHILDREN)
        subprocess.run([sys.executable, "-c", code], check=True)
        samples.append(cpu_s(resource.RUSAGE_CHILDREN) - before)
    return statistics.median(samples)


def floors(model_dir: Path, problem: str, sft_steps: int, sft_evals: int) -> dict[str, float]:
    """CPU seconds of the bare work of one job of each kind (single thread)."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer, GenerationConfig

    torch.set_num_threads(1)
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32)
    ids = encode_prompt(tokenizer, [{"role": "user", "content": problem}])

    def generate(n: int, batch: int, tokens: int) -> float:
        config = GenerationConfig(
            max_new_tokens=tokens, min_new_tokens=tokens, do_sample=False, pad_token_id=0, eos_token_id=None
        )
        start = cpu_s()
        with torch.inference_mode():
            for first in range(0, n, batch):
                rows = min(batch, n - first)
                x = torch.tensor([ids] * rows)
                model.generate(input_ids=x, attention_mask=torch.ones_like(x), generation_config=config)
        return cpu_s() - start

    def train_steps(steps: int, micro_batches: int, batch: int, length: int) -> float:
        optimizer = torch.optim.AdamW(model.parameters(), lr=1e-9)
        x = torch.randint(0, model.config.vocab_size, (batch, length))
        start = cpu_s()
        for _ in range(steps):
            for _ in range(micro_batches):
                model(input_ids=x, labels=x).loss.backward()
            optimizer.step()
            optimizer.zero_grad()
        return cpu_s() - start

    import_torch = subprocess_cpu("import torch")
    n_eval = EVAL["benchmarks"] * EVAL["problems"] * EVAL["k"]
    # One step's cost measured on 2 steps, scaled: the floors are ratios' denominators, not results.
    train_step = train_steps(2, TRAIN["completions"] // TRAIN["micro_batch"], TRAIN["micro_batch"],
                             len(ids) + TRAIN["new_tokens"]) / 2  # fmt: skip
    gen_step = generate(TRAIN["completions"], TRAIN["micro_batch"], TRAIN["new_tokens"])
    sft_step = train_steps(2, 1, SFT["batch"], len(ids) + 20) / 2
    dev_check = generate(SFT["dev"], SFT["dev"], SFT["dev_tokens"])
    model.train(False)
    return {
        "python": subprocess_cpu("pass"),
        "import_torch": import_torch,
        "evaluate": import_torch + generate(n_eval, EVAL["batch"], EVAL["new_tokens"]),
        "train": import_torch + TRAIN["steps"] * (gen_step + train_step),
        "sft": import_torch + sft_steps * sft_step + sft_evals * dev_check,
    }


# job kind -> the floor it is compared with; any other kind (prepare-data, the reports) with "python"
FLOOR_OF = {"build-tiny": "import_torch", "sft": "sft", "train": "train", "evaluate": "evaluate"}


def main(argv: list[str] | None = None) -> int:
    parser = command_line(__doc__)
    parser.add_argument("--logs", type=Path, default=Path("logs/tiny"), help="a DAG run's log folder")
    parser.add_argument("--results", type=Path, default=Path("results/tiny"), help="its results folder")
    parser.add_argument("--size", default="small", help="the size whose base model the floors run on")
    parser.add_argument("--out", type=Path, help="JSON report to write")
    args = parser.parse_args(argv)

    jobs = job_cpu(args.logs)
    if not jobs:
        parser.error(f"no 'resource use' lines under {args.logs}: run the DAG first")
    marker = json.loads((args.results / "models" / args.size / "base.json").read_text())
    data = args.results / "data" / "syn_math500.jsonl"
    problem = json.loads(data.read_text().splitlines()[0])["problem"]
    sft_steps = int(marker.get("steps", len(marker.get("evals", [])) * SFT["eval_every"]))
    start = time.time()
    floor = floors(
        args.results / "models" / args.size / "base", problem, sft_steps, len(marker.get("evals", []))
    )
    report = {"floors_cpu_s": floor, "floor_measured_in_s": round(time.time() - start, 1), "kinds": {}}
    print(f"{'kind':<13} {'jobs':>4} {'CPU s':>8} {'per job':>8} {'floor':>7} {'ratio':>6}")
    for kind, samples in sorted(jobs.items(), key=lambda kv: -sum(kv[1])):
        per_job = statistics.mean(samples)
        base = floor[FLOOR_OF.get(kind, "python")]
        ratio = per_job / base if base > 0 else float("inf")
        report["kinds"][kind] = {"jobs": len(samples), "cpu_s": sum(samples), "per_job": per_job,
                                 "floor": base, "floor_kind": FLOOR_OF.get(kind, "python"), "ratio": ratio}  # fmt: skip
        print(f"{kind:<13} {len(samples):>4} {sum(samples):>8.1f} {per_job:>8.2f} {base:>7.2f} {ratio:>6.1f}")
    print(f"{'all':<13} {sum(map(len, jobs.values())):>4} {sum(map(sum, jobs.values())):>8.1f}")
    if args.out:
        write_json(args.out, report)
    return 0


if __name__ == "__main__":
    sys.exit(main())
