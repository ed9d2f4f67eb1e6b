"""Why CW-GRPO lost in the first study's regime: the size of each method's update, and a control
(issue 27, item 2; exploratory: no registration, no verdicts).

In the first study (config/study.yaml: lr 2e-4 constant, no KL) CW-GRPO as released ended 4.6 points
below GRPO. One explanation: the released normaliser (Z = B*T / N) makes the mean weight over valid tokens
>= 1, so CW-GRPO may take larger steps than GRPO at the same learning rate, and larger steps are what
collapse GRPO in that regime. This script measures, per optimiser step and for both methods on the first
study's settings: the gradient norm (TRL's `grad_norm`, before clipping), the KL between consecutive
policies on a fixed probe set (`probe/kl_consecutive`, 32 prompts: cwgrpo.trainer.probe_kl) and the mean CW weight
(`cw/weight_mean`). Then the control, fixed here before any run:

    s = sqrt(geometric mean over seeds of  mean_{steps 1-8} KL_cw / mean_{steps 1-8} KL_grpo)

(KL grows with the square of a small step, and Adam's step with the learning rate; steps 1-8 are where
the first study's collapse happens, before the first checkpoint), and GRPO is rerun at lr 2e-4 * s on
the same seeds. If CW-GRPO's deficit is its effective step size, the control's Avg at step 48 is near
CW-GRPO's, not GRPO's. Every checkpoint is evaluated on all 200 problems of each split (k 1).

    nice -n 5 python benchmarks/update_size/control.py --out benchmarks/results/update_size_control.json

Needs the first study's base model and data (results/study/..., as calibrate.py). Runs resume: a finished
run's result.json under --work is reused.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "study_calibration"))
from calibrate import (
    avg_points,
    base_accuracy,
    check_study_inputs,
    evaluate_checkpoints,
    logged_steps,
    parse_or_print_table,
    study_arguments,
    study_train_options,
    train,
)

from cwgrpo.stats import seed_effect

PROBES = 32
KEYS = {"grad_norm": "grad_norm", "kl": "probe/kl_consecutive", "weight_mean": "cw/weight_mean"}
EARLY = 8  # steps 1..EARLY: the span of the effective-step ratio


def one_run(args: argparse.Namespace, label: str, method: str, lr: float, seed: int) -> dict:
    """Train and evaluate one run (reused if done); its per-step measures and checkpoint Avgs."""
    rd = args.work / f"{label}_seed{seed}"
    if (rd / "result.json").exists():
        return json.loads((rd / "result.json").read_text())
    rd.mkdir(parents=True, exist_ok=True)
    opts = study_train_options(args.preset, "small", method) | {
        "learning_rate": lr,
        "seed": seed,
        "cw_probe_prompts": PROBES,
    }
    train_s = train(args.base, args.data, rd, opts)
    rows = logged_steps(rd)
    steps = range(opts["save_steps"], opts["max_steps"] + 1, opts["save_steps"])
    acc = evaluate_checkpoints(rd, steps, args.data, args.limit, 1)
    result = {
        "label": label,
        "method": method,
        "lr": lr,
        "seed": seed,
        "train_wall_s": round(train_s, 1),
        **{name: [float(r.get(key, math.nan)) for r in rows] for name, key in KEYS.items()},
        "avg_points": {str(s): round(avg_points(a), 2) for s, a in acc.items()},
    }
    (rd / "result.json").write_text(json.dumps(result))
    return result


def step_ratio(runs: list[dict], seeds: list[int]) -> float:
    """s: the square root of the geometric mean over seeds of CW-GRPO's early KL over GRPO's."""
    by = {(r["label"], r["seed"]): r for r in runs}
    logs = [
        math.log(
            statistics.fmean(by["cw_grpo", s]["kl"][:EARLY]) / statistics.fmean(by["grpo", s]["kl"][:EARLY])
        )
        for s in seeds
    ]
    return math.sqrt(math.exp(statistics.fmean(logs)))


def finite_mean(values) -> float:
    """The mean of the finite values (NaN: a measure the method does not log, e.g. GRPO's weights)."""
    kept = [x for x in values if not math.isnan(x)]
    return statistics.fmean(kept) if kept else math.nan


def summary(runs: list[dict], labels: list[str], seeds: list[int]) -> dict:
    """Per label: per-step measures (mean over seeds, early and whole run) and Avg at the last checkpoint;
    paired differences of the last checkpoint's Avg."""
    by = {(r["label"], r["seed"]): r for r in runs}
    last = {lab: {s: list(by[lab, s]["avg_points"].values())[-1] for s in seeds} for lab in labels}
    out: dict = {"per_label": {}, "differences_at_last_checkpoint": {}}
    for lab in labels:
        rs = [by[lab, s] for s in seeds]
        out["per_label"][lab] = {
            "lr": rs[0]["lr"],
            **{
                f"{name}_{span}": finite_mean(
                    finite_mean(r[name][:EARLY] if span == "early" else r[name]) for r in rs
                )
                for name in KEYS
                for span in ("early", "run")
            },
            "avg_curve": {
                st: statistics.fmean(r["avg_points"][st] for r in rs) for st in rs[0]["avg_points"]
            },
            "avg_last": last[lab],
        }
    for a, b in (("cw_grpo", "grpo"), ("grpo_control", "grpo"), ("grpo_control", "cw_grpo")):
        if a in labels and b in labels:
            out["differences_at_last_checkpoint"][f"{a} - {b}"] = seed_effect(last[a], last[b]).as_dict()
    return out


def strict(value):
    """``value`` with NaN as null, so that the output is strict JSON."""
    if isinstance(value, float) and math.isnan(value):
        return None
    if isinstance(value, dict):
        return {k: strict(v) for k, v in value.items()}
    if isinstance(value, list):
        return [strict(v) for v in value]
    return value


def markdown(out: dict) -> str:
    """The control's table (docs/study/README.md): per label, the update-size measures and the accuracy."""
    rows = [
        "| run | lr | grad norm, steps 1–8 / run | probe KL per step, steps 1–8 / run | mean CW weight, steps 1–8 / run "
        "| Avg at steps 8 / 48 (mean over seeds) |",
        "|---|---|---|---|---|---|",
    ]
    for lab, v in out["summary"]["per_label"].items():
        curve = v["avg_curve"]
        rows.append(
            f"| {lab} | {v['lr']:.3g} | {v['grad_norm_early']:.2f} / {v['grad_norm_run']:.2f} "
            f"| {v['kl_early']:.4f} / {v['kl_run']:.4f} | {v['weight_mean_early']:.3f} / {v['weight_mean_run']:.3f} "
            f"| {curve['8']:.1f} / {curve['48']:.1f} |"
        )
    rows += ["", "| paired difference at step 48 (points) | mean | 95 % CI |", "|---|---|---|"]
    for name, e in out["summary"]["differences_at_last_checkpoint"].items():
        rows.append(f"| {name} | {e['mean']:+.1f} | [{e['ci95'][0]:+.1f}, {e['ci95'][1]:+.1f}] |")
    return "\n".join(rows)


def main(argv: list[str]) -> int:
    p = study_arguments("results/update_size_control", __doc__)
    p.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2, 3])
    p.add_argument("--limit", type=int, default=200)
    args = parse_or_print_table(p, argv, markdown)
    if args is None:
        return 0
    check_study_inputs(p, args)
    lr = float(study_train_options(args.preset, "small")["learning_rate"])
    base = base_accuracy(args.base, args.work, args.data, args.limit, 1)
    jobs = [(m, m, lr, s) for m in ("grpo", "cw_grpo") for s in args.seeds]
    with ThreadPoolExecutor(2) as pool:
        runs = list(pool.map(lambda a: one_run(args, *a), jobs))
    s = step_ratio(runs, args.seeds)
    with ThreadPoolExecutor(2) as pool:
        runs += list(pool.map(lambda seed: one_run(args, "grpo_control", "grpo", lr * s, seed), args.seeds))
    out = {
        "exploratory": True,
        "preset": str(args.preset),
        "seeds": args.seeds,
        "probes": PROBES,
        "early_steps": EARLY,
        "base_avg_points": round(avg_points(base), 2),
        "step_ratio": s,
        "control_lr": lr * s,
        "summary": summary(runs, ["grpo", "cw_grpo", "grpo_control"], args.seeds),
        "runs": runs,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(strict(out), indent=1) + "\n")
    print(json.dumps({k: out[k] for k in ("step_ratio", "control_lr", "base_avg_points")}))
    print(json.dumps(out["summary"], indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
