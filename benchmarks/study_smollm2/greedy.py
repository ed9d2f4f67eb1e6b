"""The third study's greedy pass: its secondary measures (docs/study/preregistration-smollm2.md, section 3).

The DAG evaluates every checkpoint sampled (the primary measures, ``cwgrpo study``); this evaluates the
same checkpoints, the base model and the same problems greedily (temperature 0, every other option the
preset's), then gives claim 1 and M on greedy Avg as paired effects over seeds. Run after the DAG's runs,
at low priority; a done evaluation is reused, so the same command resumes:

    OMP_NUM_THREADS=1 nice -n 19 python benchmarks/study_smollm2/greedy.py \
        --out benchmarks/results/study_smollm2_greedy.json
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import statistics
import sys
from pathlib import Path

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "study_calibration"))
from calibrate import evaluate_command, run

from cwgrpo.evaluate.options import EvalConfig
from cwgrpo_workflow.report.study import secondary

CONTRASTS = {  # name: (treatment, reference), signed so that a positive value supports the claim
    "claim 1: cw_grpo - grpo": ("cw_grpo", "grpo"),
    "M: cw_grpo_nograd - cw_grpo": ("cw_grpo_nograd", "cw_grpo"),
    "exploratory: cw_grpo_described - cw_grpo": ("cw_grpo_described", "cw_grpo"),
    "exploratory: cw_grpo_described - grpo": ("cw_grpo_described", "grpo"),
}


def evaluate(model: Path, out: Path, data: Path, benchmarks: list[str], options: dict) -> float:
    """Greedy Avg (points) of ``model``: the mean of its benchmarks' accuracy; reused when done."""
    summaries = [out / f"{b}.summary.json" for b in benchmarks]
    if not all(s.exists() for s in summaries):
        if not model.is_dir():
            raise SystemExit(f"{model} does not exist: run the study's DAG first")
        out.mkdir(parents=True, exist_ok=True)
        run(evaluate_command(model, out, data, benchmarks, options), out / "eval.log")
    return 100 * statistics.fmean(json.loads(s.read_text())["pass1"] for s in summaries)


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--preset", type=Path, default=Path("config/study-smollm2.yaml"))
    p.add_argument("--out", type=Path, required=True)
    args = p.parse_args(argv)
    preset = yaml.safe_load(args.preset.read_text())
    res = Path("results") / preset["name"]
    (size,) = preset["sizes"]
    (step,) = preset["study"]["checkpoints"]
    benchmarks = list(preset["data"]["benchmarks"])
    names = {f.name for f in dataclasses.fields(EvalConfig)}  # the options `cwgrpo evaluate` takes
    options = {k: v for k, v in preset["evaluate"].items() if k in names} | {"temperature": 0.0}
    work = res / "greedy"
    base = evaluate(res / "models" / size / "base", work / "base", res / "data", benchmarks, options)
    avg = {
        method: {
            seed: evaluate(
                res / "runs" / size / method / f"seed{seed}" / f"checkpoint-{step}",
                work / method / f"seed{seed}",
                res / "data",
                benchmarks,
                options,
            )
            for seed in preset["seeds"]
        }
        for method in preset["methods"]
    }
    effects = {}
    for name, (t, r) in CONTRASTS.items():
        effects[name] = secondary("avg_last", avg[t], avg[r])  # paired by seed, t - r, as the study's
    out = {"step": step, "options": options, "base_avg": base, "avg": avg, "effects": effects}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(out, indent=1) + "\n")
    for name, e in effects.items():
        print(f"{name}: {e['mean']:+.1f} [{e['ci95'][0]:+.1f}, {e['ci95'][1]:+.1f}], MDE {e['mde_80']:.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
