"""Power calculation of the study from the calibration's GRPO runs (docs/study/preregistration.md).

Model of one run's Avg (points) at a checkpoint: true value + seed effect (variance s2_seed, independent
between methods: runs of two methods with the same seed diverge after their first step) + evaluation
noise (variance s2_eval(P, k): at most p (1 - p) / (P k) per benchmark of mean accuracy p, averaged over
the 5 benchmarks; see s2_eval). A paired difference over n seeds then has
variance 2 (s2_seed + s2_eval) and the two-sided 5 % t-test's minimum detectable effect at 80 % power is
about (t_{0.975, n-1} + t_{0.8, n-1}) * sqrt(2 (s2_seed + s2_eval) / n).

s2_seed comes from the pairs of calibration seeds at each checkpoint of one setting: var of the
difference / 2, minus the calibration's own s2_eval (P_cal problems, k_cal samples), pooled over
checkpoints. Usage:

    python benchmarks/study_calibration/power.py benchmarks/results/study_calibration.json --lr 1e-3
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
from itertools import combinations
from pathlib import Path

from cwgrpo.stats import paired_mde

N_BENCH = 5


def s2_eval(per_problem: dict[str, list[float]], problems: int, k: int) -> float:
    """Evaluation variance (points^2) of Avg with ``problems`` per benchmark and ``k`` samples each.

    Uses p(1 - p) of each benchmark's mean accuracy p, an upper bound of the mean of pi_p (1 - pi_p)
    over its problems (Jensen), because one sample per problem cannot tell the two apart: conservative.
    """
    total = 0.0
    for rates in per_problem.values():
        p = statistics.fmean(rates)
        total += p * (1 - p) / (problems * k)
    return 1e4 * total / N_BENCH**2


def mde(n: int, s2: float) -> float:
    """Minimum detectable paired difference (two-sided 5 %, power 80 %) over ``n`` seeds."""
    return paired_mde(math.sqrt(2 * s2), n)


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("calibration", type=Path)
    p.add_argument("--lr", type=float, required=True, help="the chosen setting")
    p.add_argument("--seeds", type=int, nargs="+", default=[5, 8, 10, 16])
    p.add_argument("--problems", type=int, nargs="+", default=[50, 100, 200])
    p.add_argument("--k", type=int, nargs="+", default=[1, 2, 4])
    args = p.parse_args(argv)
    cal = json.loads(args.calibration.read_text())
    runs = [r for r in cal["runs"] if math.isclose(r["lr"], args.lr)]
    if len(runs) < 2:
        p.error(f"need >= 2 calibration seeds at lr {args.lr}, found {len(runs)}")
    p_cal, k_cal = cal["settings"]["limit"], cal["settings"]["k"]
    steps = sorted(set(runs[0]["avg_points"]) & set(runs[1]["avg_points"]), key=int)
    # every pair of seeds at every checkpoint: var(diff) / 2 estimates s2_seed + s2_eval(cal)
    diffs = [a["avg_points"][s] - b["avg_points"][s] for a, b in combinations(runs, 2) for s in steps]
    total = statistics.fmean(d * d / 2 for d in diffs)
    e_cal = statistics.fmean(s2_eval(r["per_problem"][s], p_cal, k_cal) for r in runs for s in steps)
    seed = max(total - e_cal, 0.0)
    drops = [r["criterion"]["best_incl_base_minus_last_points"] for r in runs]
    ranges = [r["criterion"]["entropy_swing_share"] * r["criterion"]["entropy_start"] for r in runs]
    out = {
        "lr": args.lr,
        "calibration_seeds": [r["seed"] for r in runs],
        "checkpoints": steps,
        "var_seed_plus_eval_cal": round(total, 3),
        "var_eval_cal": round(e_cal, 3),
        "var_seed": round(seed, 3),
        "sd_seed": round(math.sqrt(seed), 3),
        "grpo_best_incl_base_minus_last_points": drops,
        "grpo_entropy_range_nats": [round(x, 4) for x in ranges],
    }
    per_problem = runs[0]["per_problem"][steps[-1]]
    out["mde_points"] = {
        f"n{n}_P{prob}_k{k}": round(mde(n, seed + s2_eval(per_problem, prob, k)), 2)
        for n in args.seeds
        for prob in args.problems
        for k in args.k
    }
    need = [n for n in range(2, 200) if mde(n, seed + s2_eval(per_problem, 200, 2)) <= 2.0]
    out["seeds_for_2_points_P200_k2"] = need[0] if need else None
    json.dump(out, sys.stdout, indent=1)
    print()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
