"""Calibrate the study regime on GRPO alone (issue 16; docs/study/preregistration.md).

Trains GRPO with the `study` preset's `train` settings (config/study.yaml, size `small`, method `grpo`)
at each learning rate of the grid and each calibration seed, evaluates every saved checkpoint and the
base model, and writes the raw numbers and the criterion's verdict to a JSON file. Nothing here runs
CW-GRPO. Run it from the repository root after the study's base model and data exist:

    snakemake --cores 2 --configfile config/study.yaml results/study/models/small/base.json \
        results/study/data/syn_math500.jsonl   # ... and the other benchmarks
    nice -n 15 python benchmarks/study_calibration/calibrate.py --out benchmarks/results/study_calibration.json

Each job gets one torch thread (OMP_NUM_THREADS=1); --jobs of them run at once. A finished run leaves
result.json in its folder under --work and is reused by a later call (so a call after an interruption
only runs what is missing).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import yaml

from cwgrpo_workflow.dag.options import train_options

BENCHMARKS = ("syn_aime24", "syn_math500", "syn_amc23", "syn_minerva", "syn_olympiad")

# The criterion, fixed before the first calibration run (preregistration, "Criterion").
ENTROPY_SWING = 0.5  # (max - min) of GRPO's per-step entropy >= this share of its starting entropy
DROP_POINTS = 10.0  # GRPO's Avg at the last checkpoint >= this many points below its best checkpoint
# Amendment after the first grid (lr 3e-4, 1e-3: collapsed before the first checkpoint; 1e-4: no drop),
# made before the lr 2e-4 runs: the base model counts as the step-0 checkpoint in "best". The verdict
# without it is kept next to it ("unstable_checkpoints_only").
BASE_IS_STEP_0 = True


def study_train_options(preset: Path, size: str, method: str = "grpo") -> dict:
    """The preset's `train` options for ``method`` on ``size``, as the workflow merges them."""
    return train_options(yaml.safe_load(preset.read_text()), size, method)


def run(cmd: list[str], log: Path) -> float:
    """Run ``cmd`` with one torch thread, output appended to ``log``; its wall seconds. Raises on failure."""
    env = {**os.environ, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
    start = time.time()
    with log.open("a") as fh:
        done = subprocess.run(cmd, stdout=fh, stderr=subprocess.STDOUT, env=env, check=False)
    if done.returncode:
        raise RuntimeError(f"{' '.join(cmd)} failed (rc {done.returncode}); see {log}")
    return time.time() - start


def evaluate_command(model: Path, out: Path, data: Path, benchmarks, options: dict) -> list[str]:
    """``cwgrpo evaluate`` of ``model`` on each benchmark's file under ``data``, its outputs under ``out``."""
    args = ["cwgrpo", "evaluate", "--model-dir", str(model)]
    for b in benchmarks:
        args += ["--benchmark-file", str(data / f"{b}.jsonl"), "--out", str(out / f"{b}.jsonl")]
        args += ["--summary", str(out / f"{b}.summary.json")]
    return args + [f"--set={key}={json.dumps(value)}" for key, value in options.items()]


def evaluate(model: Path, out: Path, data: Path, limit: int, k: int) -> dict[str, list[float]]:
    """Per-problem mean correctness of ``model`` on every benchmark (first ``limit`` problems, k samples)."""
    sets = {"backend": "transformers", "prompt_set": "tiny", "k": k, "temperature": 0.6, "top_p": 0.95}
    sets |= {"max_new_tokens": 64, "limit": limit}
    out.mkdir(parents=True, exist_ok=True)
    run(evaluate_command(model, out, data, BENCHMARKS, sets), out / "eval.log")
    return {b: per_problem(out / f"{b}.jsonl") for b in BENCHMARKS}


def per_problem(path: Path) -> list[float]:
    """Mean correctness per problem from an evaluation's per-sample JSONL."""
    by: dict[str, list[float]] = {}
    for line in path.read_text().splitlines():
        row = json.loads(line)
        by.setdefault(str(row["id"]), []).append(float(row["correct"]))
    return [statistics.fmean(v) for v in by.values()]


def avg_points(acc: dict[str, list[float]]) -> float:
    """The claims' Avg: mean over benchmarks of each benchmark's mean accuracy, in points."""
    return 100 * statistics.fmean(statistics.fmean(v) for v in acc.values())


def train(base: Path, data: Path, rd: Path, opts: dict) -> float:
    """Train one run into ``rd/run`` with ``opts`` (written to ``rd/train.yaml``); its wall seconds."""
    (rd / "train.yaml").write_text(yaml.safe_dump(opts))
    return run(
        ["cwgrpo", "train", "--model-dir", str(base), "--train-data", str(data / "syn_train.jsonl"),
         "--run-dir", str(rd / "run"), "--config", str(rd / "train.yaml")],
        rd / "train.log",
    )  # fmt: skip


def logged_steps(rd: Path) -> list[dict]:
    """The run's per-step metric rows (those with an entropy: TRL's training logs)."""
    metrics = [json.loads(x) for x in (rd / "run" / "metrics.jsonl").read_text().splitlines()]
    return [m for m in metrics if "entropy" in m]


def evaluate_checkpoints(rd: Path, steps: range, data: Path, limit: int, k: int) -> dict:
    """Per-problem accuracies of each saved checkpoint of the run, keyed by step."""
    return {s: evaluate(rd / "run" / f"checkpoint-{s}", rd / f"eval{s}", data, limit, k) for s in steps}


def base_accuracy(base: Path, work: Path, data: Path, limit: int, k: int) -> dict[str, list[float]]:
    """The base model's per-problem accuracies, evaluated once into ``work/base_eval`` and reused."""
    base_file = work / "base_eval" / "result.json"
    if not base_file.exists():
        acc = evaluate(base, work / "base_eval", data, limit, k)  # evaluate creates the folder
        base_file.write_text(json.dumps(acc))
    return json.loads(base_file.read_text())


def one_run(args: argparse.Namespace, lr: float, seed: int) -> dict:
    """One GRPO calibration run and the evaluation of its checkpoints (reused if already done)."""
    rd = args.work / f"lr{lr:g}_seed{seed}"
    if (rd / "result.json").exists():
        return json.loads((rd / "result.json").read_text())
    rd.mkdir(parents=True, exist_ok=True)
    opts = study_train_options(args.preset, "small") | {"learning_rate": lr, "seed": seed}
    opts |= {"max_steps": args.steps, "save_steps": args.save_steps}
    if (rd / "run").exists():  # trained (or being trained) by an earlier call: wait for its run.json
        deadline = time.time() + args.wait_s
        while not (rd / "run" / "run.json").exists():
            if time.time() > deadline:
                raise RuntimeError(
                    f"{rd / 'run'} has no run.json after {args.wait_s} s; see {rd / 'train.log'}"
                )
            time.sleep(20)
        train_s = (rd / "run" / "run.json").stat().st_mtime - (rd / "train.yaml").stat().st_mtime
    else:
        train_s = train(args.base, args.data, rd, opts)
    rows = logged_steps(rd)
    start = time.time()
    steps = range(args.save_steps, args.steps + 1, args.save_steps)
    acc = evaluate_checkpoints(rd, steps, args.data, args.limit, args.k)
    eval_s = time.time() - start
    result = {
        "lr": lr,
        "seed": seed,
        "train_wall_s": round(train_s, 1),
        "eval_wall_s": round(eval_s, 1),
        "entropy": [round(float(m["entropy"]), 4) for m in rows],
        "reward": [round(float(m["reward"]), 4) for m in rows],
        "avg_points": {s: round(avg_points(a), 2) for s, a in acc.items()},
        "per_problem": {s: a for s, a in acc.items()},
    }
    (rd / "result.json").write_text(json.dumps(result))
    return json.loads(json.dumps(result))  # the same types as a reused result (string step keys)


def verdict(r: dict, base_avg: float) -> dict:
    """The criterion on one run: entropy swing and best-minus-last accuracy (base = step 0, amended)."""
    ent = r["entropy"]
    start = statistics.fmean(ent[:2])
    swing = (max(ent) - min(ent)) / start
    avg = list(r["avg_points"].values())
    drop = max(avg) - avg[-1]
    drop0 = max([base_avg, *avg]) - avg[-1]
    return {
        "entropy_start": round(start, 4),
        "entropy_swing_share": round(swing, 3),
        "best_minus_last_points": round(drop, 2),
        "best_incl_base_minus_last_points": round(drop0, 2),
        "unstable_checkpoints_only": bool(swing >= ENTROPY_SWING and drop >= DROP_POINTS),
        "unstable": bool(swing >= ENTROPY_SWING and (drop0 if BASE_IS_STEP_0 else drop) >= DROP_POINTS),
    }


def study_arguments(work: str, doc: str | None = __doc__) -> argparse.ArgumentParser:
    """The parser the study scripts share: the preset, the first study's base model and data, a work
    folder for the runs (``work``), the output file; ``doc`` is the script's description."""
    p = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--preset", type=Path, default=Path("config/study.yaml"))
    p.add_argument("--base", type=Path, default=Path("results/study/models/small/base"))
    p.add_argument("--data", type=Path, default=Path("results/study/data"))
    p.add_argument("--work", type=Path, default=Path(work))
    p.add_argument("--out", type=Path, required=True)
    return p


def parse_or_print_table(
    p: argparse.ArgumentParser, argv: list[str], render: Callable[[dict], str]
) -> argparse.Namespace | None:
    """Add ``--table`` and parse; with it, print ``render`` of ``--out``'s JSON and return None."""
    p.add_argument("--table", action="store_true", help="print --out's table (markdown) and exit")
    args = p.parse_args(argv)
    if args.table:
        print(render(json.loads(args.out.read_text())))
        return None
    return args


def check_study_inputs(p: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """Refuse to start without the base model and data (the study preset's first jobs build them)."""
    for path in (args.base, args.data):
        if not path.exists():
            p.error(f"{path} does not exist (build the study's base model and data first)")


def main(argv: list[str]) -> int:
    p = study_arguments("results/study_calibration")
    p.add_argument("--lr", type=float, nargs="+", default=[3e-4, 1e-3])
    p.add_argument("--seeds", type=int, nargs="+", default=[100, 101])
    p.add_argument("--steps", type=int, default=48)
    p.add_argument("--save-steps", type=int, default=8)
    p.add_argument("--limit", type=int, default=60, help="problems per benchmark in calibration")
    p.add_argument("--k", type=int, default=1)
    p.add_argument("--jobs", type=int, default=2)
    p.add_argument("--wait-s", type=float, default=3600, help="how long to wait for a run trained elsewhere")
    args = p.parse_args(argv)
    check_study_inputs(p, args)
    start = time.time()
    base = base_accuracy(args.base, args.work, args.data, args.limit, args.k)
    grid = [(lr, s) for lr in args.lr for s in args.seeds]
    with ThreadPoolExecutor(args.jobs) as pool:
        runs = list(pool.map(lambda a: one_run(args, *a), grid))
    for r in runs:
        r["criterion"] = verdict(r, avg_points(base))
    out = {
        "criterion": {"entropy_swing_share_min": ENTROPY_SWING, "best_minus_last_points_min": DROP_POINTS},
        "settings": {k: str(v) if isinstance(v, Path) else v for k, v in vars(args).items()},
        "base": {"avg_points": round(avg_points(base), 2), "per_problem": base},
        "runs": runs,
        "wall_s": round(time.time() - start, 1),
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(out, indent=1) + "\n")
    for r in runs:
        print(r["lr"], r["seed"], r["avg_points"], r["criterion"])
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
