"""Does the calibration's path compute what the second study's DAG computes? (issue 35)

The calibration (calibrate_regime.py) trains and evaluates GRPO with its own calls of `cwgrpo train` and
`cwgrpo evaluate`; the study ran the same commands from the workflow with the options files of
config/study-regime.yaml. This script runs one seed through the calibration's path on the DAG's base model
and data and compares it with the DAG's run of the same seed: every per-step training metric (timings
aside), each checkpoint's weights and each checkpoint's evaluated completions, and both Avg curves.

    python benchmarks/study_calibration/paths_agree.py config --seeds 100 > grpo-only.yaml
    nice -n 10 snakemake --cores 1 --configfile grpo-only.yaml \\
        results/study-regime/eval/small/grpo/seed100/step48/syn_olympiad.summary.json
    nice -n 10 python benchmarks/study_calibration/paths_agree.py compare --seed 100

`config` writes the study preset without its `study` section (which admits only the registered seeds),
with the given seeds and GRPO alone, so the DAG builds the base model and data and runs those seeds.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

import yaml
from calibrate import BENCHMARKS
from calibrate_regime import one_run

from cwgrpo.models.hub import file_sha256

PRESET = Path("config/study-regime.yaml")
STEPS = (8, 16, 24, 32, 40, 48)


def grpo_only(preset: Path, seeds: list[int]) -> dict:
    """The preset as the DAG runs it, for ``seeds`` and GRPO only, without the registration's checks."""
    cfg = yaml.safe_load(preset.read_text())
    cfg.pop("study")
    cfg["seeds"] = seeds
    cfg["methods"] = {"grpo": cfg["methods"]["grpo"]}
    cfg["report"]["methods"] = ["base", "grpo"]
    return cfg


def samples(folder: Path) -> dict[str, list[tuple]]:
    """benchmark -> (id, completion, correct) of each sample."""
    rows = {b: [json.loads(x) for x in (folder / f"{b}.jsonl").read_text().splitlines()] for b in BENCHMARKS}
    return {b: [(r["id"], r["completion"], r["correct"]) for r in v] for b, v in rows.items()}


def avg(s: dict[str, list[tuple]]) -> float:
    return 100 * statistics.fmean(statistics.fmean(float(c) for *_, c in v) for v in s.values())


def metrics(run: Path) -> list[dict]:
    """A run folder's per-step training metrics (TRL's logs: rows with an entropy), timings left out."""
    rows = [json.loads(x) for x in (run / "metrics.jsonl").read_text().splitlines()]
    return [
        {k: v for k, v in m.items() if "time" not in k and "per_second" not in k}
        for m in rows
        if "entropy" in m
    ]


def compare(dag_run: Path, dag_eval: Path, cal: Path) -> list[str]:
    """One line per thing compared: the metrics, then each checkpoint's weights, completions and Avg."""
    a, b = metrics(dag_run), metrics(cal / "run")
    lines = [f"per-step metrics ({len(a)} and {len(b)} steps, every key): {'same' if a == b else 'DIFFER'}"]
    for s in STEPS:
        w = file_sha256(dag_run / f"checkpoint-{s}" / "model.safetensors")
        same_w = w == file_sha256(cal / "run" / f"checkpoint-{s}" / "model.safetensors")
        x, y = samples(dag_eval / f"step{s}"), samples(cal / f"eval{s}")
        lines.append(
            f"step {s}: weights {'same' if same_w else 'DIFFER'} ({w[:12]}), completions "
            f"{'same' if x == y else 'DIFFER'}, Avg {avg(x):.1f} (DAG) / {avg(y):.1f} (calibration path)"
        )
    return lines


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("what", choices=("config", "compare"))
    p.add_argument("--seeds", type=int, nargs="+", default=[100])
    p.add_argument("--seed", type=int, default=100)
    p.add_argument("--results", type=Path, default=Path("results/study-regime"), help="the DAG's results")
    p.add_argument(
        "--work", type=Path, default=Path("results/paths_agree"), help="the calibration path's runs"
    )
    args = p.parse_args(argv)
    if args.what == "config":
        print(yaml.safe_dump(grpo_only(PRESET, args.seeds), sort_keys=False), end="")
        return 0
    res = args.results
    cal_args = argparse.Namespace(
        work=args.work,
        preset=Path("config/study.yaml"),
        base=res / "models/small/base",
        data=res / "data",
        limit=200,
    )
    one_run(cal_args, 2e-4, args.seed)  # the calibration's own call, reused if already run
    dag = res / "runs/small/grpo" / f"seed{args.seed}"
    print(
        "\n".join(
            compare(
                dag, res / "eval/small/grpo" / f"seed{args.seed}", args.work / f"lr0.0002_seed{args.seed}"
            )
        )
    )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
