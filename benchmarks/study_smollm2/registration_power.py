"""The third study's power calculation from its pilot (docs/study/preregistration-smollm2.md, section 3).

The second study's model (benchmarks/study_calibration/power.py): one run's Avg at a checkpoint is its true
value + a seed effect (variance s2_seed, independent between arms) + evaluation noise; a paired difference
over n seeds has variance 2 (s2_seed + s2_eval), and the two-sided 5 % t-test's minimum detectable
effect at 80 % power is (t_.975 + t_.8) sqrt(2 (s2_seed + s2_eval) / n). Avg is the study's: the mean
over the two held-out benchmarks of their accuracy (what ``cwgrpo study`` computes), here rebuilt from the
pilot's per-problem rows at the chosen rate's two seeds, pooled over the checkpoints. Usage:

    python benchmarks/study_smollm2/registration_power.py benchmarks/results/study_smollm2_pilot.json \
        > benchmarks/results/study_smollm2_power.json
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
from pathlib import Path

from cwgrpo.stats import paired_mde


def avg_points(per_problem: dict[str, dict[str, float]]) -> float:
    """The study's Avg: the unweighted mean over benchmarks of their accuracy, in points."""
    return 100 * statistics.fmean(statistics.fmean(rows.values()) for rows in per_problem.values())


def eval_variance(per_problem: dict[str, dict[str, float]], k: int = 1) -> float:
    """Binomial variance (points^2) of Avg: p (1 - p) / (n k) per benchmark, over the squared count."""
    total = sum(statistics.fmean(r.values()) * (1 - statistics.fmean(r.values())) / (len(r) * k)
                for r in per_problem.values())  # fmt: skip
    return 1e4 * total / len(per_problem) ** 2


def power(pilot: dict, mode: str = "sampled", seeds: tuple[int, ...] = (5, 6, 7, 8, 10, 12)) -> dict:
    """s2_seed from the chosen rate's pairs of pilot seeds (each checkpoint), and the MDE per seed count."""
    runs = [r for r in pilot["runs"] if math.isclose(r["lr"], pilot["chosen_lr"])]
    if len(runs) < 2:
        raise SystemExit(f"need >= 2 pilot seeds at the chosen rate {pilot['chosen_lr']}, found {len(runs)}")
    steps = sorted(runs[0]["per_problem"], key=int)
    halves, evals = [], []
    for s in steps:
        values = [avg_points(r["per_problem"][s][mode]) for r in runs]
        halves += [(a - b) ** 2 / 2 for i, a in enumerate(values) for b in values[i + 1 :]]
        evals += [eval_variance(r["per_problem"][s][mode]) for r in runs]
    total, e_pilot = statistics.fmean(halves), statistics.fmean(evals)
    s2_seed = max(total - e_pilot, 0.0)
    last = [r["per_problem"][steps[-1]][mode] for r in runs]
    s2 = s2_seed + statistics.fmean(eval_variance(p) for p in last)  # the study evaluates the same problems
    problems = sum(len(v) for v in last[0].values())
    return {
        "lr": pilot["chosen_lr"],
        "calibration_seeds": [r["seed"] for r in runs],
        "checkpoints": steps,
        "mode": mode,
        "avg_points_last": [round(avg_points(p), 2) for p in last],
        "var_seed_plus_eval_cal": round(total, 3),
        "var_eval_cal": round(e_pilot, 3),
        "var_seed": round(s2_seed, 3),
        "sd_seed": round(math.sqrt(s2_seed), 3),
        "mde_points": {f"n{n}_P{problems}_k1": round(paired_mde(math.sqrt(2 * s2), n), 2) for n in seeds},
    }


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("pilot", type=Path)
    p.add_argument("--mode", default="sampled", choices=("sampled", "greedy"))
    args = p.parse_args(argv)
    json.dump(power(json.loads(args.pilot.read_text()), args.mode), sys.stdout, indent=1)
    print()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
