"""The third study's pilot: GRPO alone on SmolLM2-135M-Instruct, to choose its learning rate (issue 35).

Criterion and design: docs/study/pilot-smollm2.md, committed before any pilot run. Nothing here runs
CW-GRPO. One process, one torch thread, runs one after another:

    OMP_NUM_THREADS=1 nohup nice -n 19 python benchmarks/study_smollm2/pilot.py \
        --out benchmarks/results/study_smollm2_pilot.json > results/smollm2/pilot.log 2>&1 &

It needs the base model and data (``--base``, ``--data``; made once by the commands in the criterion's
page). Every piece resumes: a run rerun with the same command continues from its newest checkpoint
(``cwgrpo train``'s own resume), an evaluation with a summary is not redone, and a finished run leaves
``result.json`` in its folder under ``--work``; so after a kill the same command continues.
"""

from __future__ import annotations

import argparse
import json
import math
import re
import statistics
import sys
import time
from pathlib import Path

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "study_calibration"))
from calibrate import evaluate_command, logged_steps, parse_or_print_table, run

from cwgrpo.data.registry import load_records
from cwgrpo.data.synthetic import level
from cwgrpo.grading.scoring import plain_number

SYSTEM = "Compute the expression. Reply with the number only."  # config/real.yaml's training system turn
LEVEL = 1  # the only level where the base model has a signal under the number-only reward
BENCHMARKS = ("syn_math500", "syn_dev")  # held out from syn_train, level 1: 200 + 100 problems
LIMIT = 200  # every problem of each: n = 300
MODES = {"sampled": {"temperature": 0.6, "top_p": 0.95}, "greedy": {"temperature": 0.0}}
GRID = (3e-6, 1e-5, 3e-5)
GRID_SEED = 100
CONFIRM_SEED = 101  # a second seed at the chosen rate: the spread for the registration's power
STEPS, SAVE = 24, 8
MAX_TOKENS = 24
TRAIN = {  # the second study's regime on SmolLM2 (docs/study/pilot-smollm2.md, "Design")
    "cw_method": "grpo",
    "reward_funcs": ["number_accuracy"],
    "reward_weights": [1.0],
    "prompt_set": "tiny",
    "system_prompt": SYSTEM,
    "use_cpu": True,
    "bf16": False,
    "gradient_checkpointing": False,
    "lr_scheduler_type": "cosine_with_min_lr",
    "lr_scheduler_kwargs": {"min_lr_rate": 0.1},
    "warmup_steps": 0.1,
    "beta": 0.04,
    "use_bias_correction_kl": False,
    "loss_type": "grpo",
    "temperature": 0.7,
    "cw_logprob_temperature": 1.0,
    "num_generations": 8,
    "per_device_train_batch_size": 8,
    "steps_per_generation": 1,
    "cw_one_group_per_micro_batch": True,
    "gradient_accumulation_steps": 4,  # 4 prompts x 8 completions a step
    "max_completion_length": MAX_TOKENS,
    "max_steps": STEPS,
    "save_steps": SAVE,
    "logging_steps": 1,
}
# The criterion (docs/study/pilot-smollm2.md): sigma_d = sqrt(2 p0 (1 - p0) / n), the binomial s.d. of
# the difference of two checkpoints' accuracies at the base model's sampled accuracy p0 over n problems.
GAIN_SDS = 2.0  # last checkpoint >= base + GAIN_SDS * sigma_d
FALL_SDS = 1.0  # every checkpoint >= base - FALL_SDS * sigma_d


def logged_cpu(log: Path) -> float:
    """CPU seconds of every call that finished, from the package's ``resource use: ... s CPU`` lines (a
    killed call's CPU is not logged, so a resumed piece's cost is a lower bound)."""
    found = re.findall(r"resource use: [^:]*: ([0-9.]+) s CPU", log.read_text())
    return round(sum(float(x) for x in found), 1)


def evaluate(model: Path, out: Path, data: Path) -> dict:
    """Per-problem accuracy (:func:`per_problem`) of ``model`` in each mode, reused if done."""
    result = {}
    for mode, sets in MODES.items():
        folder = out / mode
        done = folder / "accuracy.json"
        if not done.exists():
            options = {"backend": "transformers", "prompt_set": "tiny", "system_prompt": SYSTEM, "k": 1}
            options |= {"max_new_tokens": MAX_TOKENS, "limit": LIMIT, "batch_size": 32, "cpu_threads": 1}
            folder.mkdir(parents=True, exist_ok=True)
            run(evaluate_command(model, folder, data, BENCHMARKS, options | sets), folder / "eval.log")
            acc = {b: per_problem(folder / f"{b}.jsonl") for b in BENCHMARKS}
            done.write_text(json.dumps({"cpu_s": logged_cpu(folder / "eval.log"), "per_problem": acc}))
        result[mode] = json.loads(done.read_text())
    return result


def per_problem(path: Path) -> dict[str, float]:
    """1.0 per problem graded correct with a plain-number answer (the ``number_accuracy`` reward's rule;
    these rows were evaluated with ``answer_form: any``)."""
    rows = [json.loads(x) for x in path.read_text().splitlines()]
    return {str(r["id"]): float(bool(r["correct"]) and plain_number(r["extracted"])) for r in rows}


def points(acc: dict[str, dict[str, float]]) -> float:
    """Accuracy over all held-out problems, in points."""
    return 100 * statistics.fmean(v for b in acc.values() for v in b.values())


def train_data(data: Path) -> Path:
    """Level-1 problems of syn_train (written once)."""
    out = data / "syn_train_l1.jsonl"
    if not out.exists():
        rows = [r for r in load_records(data / "syn_train.jsonl") if level(r["problem"]) == LEVEL]
        out.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return out


def one_run(args: argparse.Namespace, lr: float, seed: int) -> dict:
    """One GRPO run and the evaluation of its checkpoints; resumes where a killed call stopped."""
    rd = args.work / f"lr{lr:g}_seed{seed}"
    if (rd / "result.json").exists():
        return json.loads((rd / "result.json").read_text())
    rd.mkdir(parents=True, exist_ok=True)
    (rd / "train.yaml").write_text(yaml.safe_dump(TRAIN | {"learning_rate": lr, "seed": seed}))
    if not (rd / "run" / "run.json").exists():
        run(
            ["cwgrpo", "train", "--model-dir", str(args.base), "--train-data", str(train_data(args.data)),
             "--run-dir", str(rd / "run"), "--config", str(rd / "train.yaml")],
            rd / "train.log",
        )  # fmt: skip
    rows = logged_steps(rd)
    evals = {s: evaluate(rd / "run" / f"checkpoint-{s}", rd / f"eval{s}", args.data) for s in steps()}
    result = {
        "lr": lr,
        "seed": seed,
        "train_cpu_s": logged_cpu(rd / "train.log"),
        "reward": [round(float(m["reward"]), 4) for m in rows],
        "kl": [round(float(m.get("kl", math.nan)), 5) for m in rows],
        "entropy": [round(float(m["entropy"]), 4) for m in rows],
        "points": {
            mode: {s: round(points(e[mode]["per_problem"]), 2) for s, e in evals.items()} for mode in MODES
        },
        "eval_cpu_s": round(sum(e[m]["cpu_s"] for e in evals.values() for m in MODES), 1),
        "per_problem": {s: {m: e[m]["per_problem"] for m in MODES} for s, e in evals.items()},
    }
    (rd / "result.json").write_text(json.dumps(result))
    return json.loads(json.dumps(result))  # string step keys, as a reused result


def steps() -> range:
    return range(SAVE, STEPS + 1, SAVE)


def sigma_d(p0: float, n: int) -> float:
    """Binomial s.d. of the difference of two independent accuracies at p0 over n problems, in points."""
    return 100 * math.sqrt(2 * p0 * (1 - p0) / n)


def verdict(curve: list[float], base: float, sd: float) -> dict:
    """The criterion on one run's checkpoints (points): a clear gain by the last, no fall at any."""
    gain, low = curve[-1] - base, min(curve) - base
    ok = gain >= GAIN_SDS * sd and low >= -FALL_SDS * sd
    return {"gain_last": round(gain, 2), "lowest_minus_base": round(low, 2), "qualifies": bool(ok)}


def chosen(runs: list[dict], rates: tuple[float, ...]) -> float | None:
    """The qualifying rate with the largest mean gain (ties: the smaller rate)."""
    ok = []
    for lr in rates:
        at = [r for r in runs if r["lr"] == lr]
        if at and all(r["criterion"]["qualifies"] for r in at):
            ok.append((-statistics.fmean(r["criterion"]["gain_last"] for r in at), lr))
    return min(ok)[1] if ok else None


def markdown_table(out: dict) -> str:
    """The pilot's table: each run's sampled and greedy accuracy at each checkpoint."""
    b = out["base"]["points"]
    head = (
        "| lr | seed | sampled: base / " + " / ".join(str(s) for s in steps()) + " | greedy: same | gain ≥ "
    )
    lines = [
        head + f"{GAIN_SDS * out['sigma_d']:.1f}, fall ≤ {FALL_SDS * out['sigma_d']:.1f} | qualifies |",
        "|---|---|---|---|---|---|",
    ]
    for r in sorted(out["runs"], key=lambda r: (r["lr"], r["seed"])):
        s = " / ".join(f"{v:.1f}" for v in [b["sampled"], *r["points"]["sampled"].values()])
        g = " / ".join(f"{v:.1f}" for v in [b["greedy"], *r["points"]["greedy"].values()])
        c = r["criterion"]
        lines.append(
            f"| {r['lr']:g} | {r['seed']} | {s} | {g} | {c['gain_last']:+.1f}, {c['lowest_minus_base']:+.1f} "
            f"| {'yes' if c['qualifies'] else 'no'} |"
        )
    return "\n".join(lines)


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--base", type=Path, default=Path("results/smollm2/base"))
    p.add_argument("--data", type=Path, default=Path("results/smollm2/data"))
    p.add_argument("--work", type=Path, default=Path("results/smollm2/pilot"))
    p.add_argument("--out", type=Path, required=True)
    args = parse_or_print_table(p, argv, markdown_table)
    if args is None:
        return 0
    for path in (args.base, *(args.data / f"{b}.jsonl" for b in (*BENCHMARKS, "syn_train"))):
        if not path.exists():
            p.error(f"{path} does not exist (docs/study/pilot-smollm2.md, 'Commands', makes it)")
    start = time.time()
    runs = [one_run(args, lr, GRID_SEED) for lr in GRID]  # first: a bad training option shows at once
    base = evaluate(args.base, args.work / "base_eval", args.data)
    base_points = {m: round(points(base[m]["per_problem"]), 2) for m in MODES}
    n = sum(len(v) for v in base["sampled"]["per_problem"].values())
    sd = sigma_d(base_points["sampled"] / 100, n)
    for r in runs:
        r["criterion"] = verdict(list(r["points"]["sampled"].values()), base_points["sampled"], sd)
    pick = chosen(runs, GRID)
    if pick is not None:  # the confirming seed; the rate stays chosen only if it qualifies there too
        extra = one_run(args, pick, CONFIRM_SEED)
        extra["criterion"] = verdict(list(extra["points"]["sampled"].values()), base_points["sampled"], sd)
        runs.append(extra)
        pick = pick if extra["criterion"]["qualifies"] else None
    out = {
        "train": TRAIN,
        "grid": list(GRID),
        "criterion": {"gain_sds": GAIN_SDS, "fall_sds": FALL_SDS, "mode": "sampled", "n": n},
        "sigma_d": round(sd, 3),
        "base": {"points": base_points, "per_problem": {m: base[m]["per_problem"] for m in MODES}},
        "runs": runs,
        "chosen_lr": pick,
        "cpu_s": round(sum(r["train_cpu_s"] + r["eval_cpu_s"] for r in runs), 1),
        "wall_s_this_call": round(time.time() - start, 1),
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(out, indent=1) + "\n")
    print(markdown_table(out))
    print("chosen learning rate:", pick)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
