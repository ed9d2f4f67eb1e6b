"""The pre-registered study's analysis (docs/study/preregistration.md, section 3), as registered.

``cwgrpo claims`` measures the four claims the way Table 1's setting allows; the study registered its
own primary measures, computed here from the same files: Avg at the last checkpoint (claim 1), the
range of the entropy over the whole run (claim 2), best-minus-last over the checkpoints (claim 3), and,
for claim 4, the claims report's own verdict (read from ``claims.json``); claim M, where a study
registered it (the third), is Avg at the last checkpoint of its arm minus CW-GRPO's, under claim 1's
rule. Every effect is a per-seed paired difference with a t-interval over seeds; claims 2 and 3 are
tested only where the regime's precondition holds (GRPO unstable in most seeds). The ablation (each
released-versus-described knob as its own method label) reports the same measures against CW-GRPO as
released, as intervals without verdicts. Measures are pure functions of small frames; the command does
the reading and writing.
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from cwgrpo.configs import add_config_arguments, describe_options
from cwgrpo.io import ResultFileError, read_json, write_json, write_text
from cwgrpo.stats import Effect, paired_mde, paired_sd, seed_effect
from cwgrpo_workflow.report.claim_tail import top_share
from cwgrpo_workflow.report.load import (
    add_input_arguments,
    command_options,
    cov_samples,
    load_summaries,
    metrics_frame,
    per_seed_accuracy,
    run_info,
)
from cwgrpo_workflow.report.options import AVG
from cwgrpo_workflow.report.study_design import (
    CLAIM_TEXT,
    GATED,
    MEASURES,
    PRECONDITION_FAILED,
    PRIMARY,
    SECONDARY,
    StudyConfig,
    registered_verdict,
)


# -- per-run measures (pure) -------------------------------------------------------------------------
def entropy_start(entropy: pd.Series) -> float:
    """The run's starting entropy: the mean of its first two logged steps (registration, section 1)."""
    return float(entropy.sort_index().iloc[:2].mean())


def entropy_range(entropy: pd.Series) -> float:
    """Max minus min of the per-step entropy over the whole run, in nats."""
    return float(entropy.max() - entropy.min())


def best_minus_last(curve: Mapping[int, float], base: float | None = None) -> float:
    """Best Avg over the checkpoints (and the base model as step 0 when given) minus the last one's."""
    values = [curve[s] for s in sorted(curve)]
    best = max(values if base is None else [base, *values])
    return float(best - values[-1])


def unstable(
    entropy: pd.Series, curve: Mapping[int, float], swing: float, drop: float, base: float | None
) -> bool:
    """The registered criterion: entropy range >= swing x start, and best - last >= drop points."""
    return entropy_range(entropy) >= swing * entropy_start(entropy) and best_minus_last(curve, base) >= drop


def paper_shape(curve: Mapping[int, float], base: float, points: float) -> bool:
    """The paper's shape of a run: a gain (best checkpoint >= base + points), then a drift (last <= best - points)."""
    return max(curve.values()) - base >= points and best_minus_last(curve) >= points


# -- frames -> per-seed measures ---------------------------------------------------------------------
def avg_curves(
    frame: pd.DataFrame, size: str, method: str, benchmarks: Sequence[str]
) -> dict[int, dict[int, float]]:
    """seed -> {step: Avg in points} of one method, over every step its summaries have."""
    steps = sorted(set(frame.loc[(frame["size"] == size) & (frame["method"] == method), "step"]))
    if not steps:
        raise ResultFileError(f"no evaluation summaries for size={size} method={method}")
    curves: dict[int, dict[int, float]] = {}
    for step in steps:
        wide = per_seed_accuracy(frame, size, method, step, benchmarks)
        for seed, value in wide[AVG].items():
            curves.setdefault(int(seed), {})[int(step)] = 100.0 * float(value)
    return curves


def entropy_series(metrics: pd.DataFrame, size: str, method: str, key: str) -> dict[int, pd.Series]:
    """seed -> per-step entropy (the metrics.jsonl column ``key``) of one method's runs."""
    sel = metrics[(metrics["size"] == size) & (metrics["method"] == method)]
    if sel.empty or key not in sel:
        raise ResultFileError(f"no logged {key!r} for size={size} method={method}")
    return {int(seed): g.set_index("step")[key].astype(float) for seed, g in sel.groupby("seed")}


def run_measures(
    curves: Mapping[int, Mapping[int, float]],
    entropy: Mapping[int, pd.Series],
    base: float,
    last_step: int,
    first_step: int,
) -> dict[str, dict[int, float]]:
    """measure name -> seed -> value, for one method (the registered primary and secondary measures)."""
    seeds = sorted(set(curves) & set(entropy))
    missing = sorted(set(curves) ^ set(entropy))
    if missing:
        raise ResultFileError(f"seeds {missing} have evaluations but no training log, or the reverse")
    out: dict[str, dict[int, float]] = {k: {} for k in MEASURES}
    for s in seeds:
        c, e = curves[s], entropy[s]
        if last_step not in c or first_step not in c:
            raise ResultFileError(
                f"seed {s}: no evaluation at step {first_step} or {last_step} (has {sorted(c)})"
            )
        out["avg_last"][s] = c[last_step]
        out["avg_first"][s] = c[first_step]
        out["avg_mean"][s] = float(np.mean([c[k] for k in sorted(c)]))
        out["entropy_range"][s] = entropy_range(e)
        out["entropy_sd"][s] = float(e.std(ddof=1))
        out["entropy_mean"][s] = float(e.mean())
        out["best_minus_last"][s] = best_minus_last(c)
        out["best_minus_last_incl_base"][s] = best_minus_last(c, base)
        out["drop_first_to_last"][s] = c[first_step] - c[last_step]
    return out


def signed_effect(measure: str, treatment: Mapping[int, float], reference: Mapping[int, float]) -> Effect:
    """The paired effect of ``measure``, signed so that a positive value supports the claim."""
    _, sign = MEASURES[measure]
    return seed_effect(treatment, reference) if sign > 0 else seed_effect(reference, treatment)


def secondary(measure: str, treatment: Mapping[int, float], reference: Mapping[int, float]) -> dict[str, Any]:
    """A secondary measure's signed effect with its MDE (80 % power), as the primary ones report."""
    eff = signed_effect(measure, treatment, reference)
    return {**eff.as_dict(), "mde_80": paired_mde(paired_sd(treatment, reference), eff.n)}


def mde_from_interval(effect: Mapping[str, Any]) -> float:
    """The MDE of a one-sample t-interval given only as mean, 95 % interval and n (claim 4, from
    ``claims.json``): its spread is the half-width over t_{0.975, n-1}, times sqrt(n)."""
    from scipy import stats

    n, ci = int(effect.get("n") or 0), effect.get("ci95")
    if n < 2 or not ci or ci[0] is None or ci[1] is None:
        return math.nan
    sd = (ci[1] - ci[0]) / 2 / stats.t.ppf(0.975, n - 1) * math.sqrt(n)
    return paired_mde(sd, n)


# -- the analysis ------------------------------------------------------------------------------------
def analyse(
    cfg: StudyConfig,
    frame: pd.DataFrame,
    metrics: pd.DataFrame,
    tail_shares: Mapping[str, Mapping[int, float]],
    claims_report: Mapping[str, Any],
) -> dict[str, Any]:
    """The registered analysis of one size; returns the JSON report (without provenance)."""
    sizes = cfg.order_sizes(set(frame["size"]))
    if len(sizes) != 1:
        raise ResultFileError(f"the study analyses one size; the inputs have {sizes} (set `sizes`)")
    size = sizes[0]
    benchmarks = cfg.order_benchmarks(set(frame["benchmark"]))
    base_rows = per_seed_accuracy(frame, size, cfg.base_method, cfg.base_step, benchmarks)
    base = 100.0 * float(base_rows[AVG].iloc[0])
    arms = [cfg.reference_method, cfg.treatment_method, *cfg.variants, cfg.mechanism_method]
    methods = [m for m in dict.fromkeys(arms) if m]
    curves = {m: avg_curves(frame, size, m, benchmarks) for m in methods}
    steps = sorted({s for c in curves[cfg.reference_method].values() for s in c})
    first, last = (cfg.step if cfg.step in steps else steps[0]), steps[-1]
    entropy = {m: entropy_series(metrics, size, m, cfg.entropy_key) for m in methods}
    measures = {m: run_measures(curves[m], entropy[m], base, last, first) for m in methods}

    ref = cfg.reference_method
    regime = {
        s: {
            "entropy_start": entropy_start(entropy[ref][s]),
            "entropy_range": entropy_range(entropy[ref][s]),
            "best_minus_last": best_minus_last(curves[ref][s]),
            "best_minus_last_incl_base": best_minus_last(curves[ref][s], base),
            "unstable": unstable(entropy[ref][s], curves[ref][s], cfg.entropy_swing, cfg.drop_points, base),
            "unstable_checkpoints_only": unstable(
                entropy[ref][s], curves[ref][s], cfg.entropy_swing, cfg.drop_points, None
            ),
            "gain_over_base": max(curves[ref][s].values()) - base,
            "paper_shape": paper_shape(curves[ref][s], base, cfg.shape_points),
        }
        for s in sorted(curves[ref])
    }
    n_unstable = sum(r["unstable"] for r in regime.values())
    n_unstable_ckpts = sum(r["unstable_checkpoints_only"] for r in regime.values())
    n_shape = sum(r["paper_shape"] for r in regime.values())
    precondition = n_unstable > len(regime) / 2
    tested: list[tuple[int | str, str, str, str]] = [  # (id, measure, treatment, reference)
        (cid, measure, cfg.treatment_method, ref) for cid, measure in PRIMARY.items()
    ]
    if cfg.mechanism_method:
        tested.insert(1, ("M", PRIMARY[1], cfg.mechanism_method, cfg.treatment_method))
    claims = []
    for cid, measure, treatment, reference in tested:
        t, r = measures[treatment][measure], measures[reference][measure]
        eff = signed_effect(measure, t, r)
        gated = cid in GATED
        why_not = (
            f"{cfg.method_name(ref)} unstable in {n_unstable} of {len(regime)} seeds"
            if gated and not precondition
            else ""
        )
        verdict, reason = registered_verdict(eff, precondition or not gated, why_not)
        if why_not:  # reported as "precondition failed", with its numbers, as registered
            verdict = PRECONDITION_FAILED
            reason = why_not if reason == why_not else f"{why_not}; {reason}"
        claims.append(
            {
                "id": cid,
                "claim": CLAIM_TEXT[cid],
                "measure": measure,
                "unit": MEASURES[measure][0],
                "effect": eff.as_dict(),
                "verdict": verdict,
                "reason": reason,
                "sd_paired_difference": paired_sd(t, r),
                "mde_80": paired_mde(paired_sd(t, r), eff.n),
                "secondary": {
                    m: secondary(m, measures[treatment][m], measures[reference][m])
                    for m in SECONDARY[cid if cid in SECONDARY else 1]
                },
            }
        )
    claims.append(_claim4(claims_report, size))
    ablation = {
        v: {
            **{
                PRIMARY[c]: signed_effect(
                    PRIMARY[c], measures[v][PRIMARY[c]], measures[cfg.treatment_method][PRIMARY[c]]
                ).as_dict()
                for c in PRIMARY
            },
            "top_share_pct": seed_effect(
                {s: 100 * x for s, x in tail_shares.get(v, {}).items()},
                {s: 100 * x for s, x in tail_shares.get(cfg.treatment_method, {}).items()},
            ).as_dict(),
        }
        for v in cfg.variants
    }
    return {
        "size": size,
        "benchmarks": benchmarks,
        "steps": steps,
        "first_step": first,
        "last_step": last,
        "base_avg": base,
        "regime": {
            "per_seed": regime,
            "unstable_seeds": n_unstable,
            "unstable_seeds_checkpoints_only": n_unstable_ckpts,
            "paper_shape_seeds": n_shape,
            "precondition": bool(precondition),
        },
        "entropy_level": {m: float(np.mean(list(measures[m]["entropy_mean"].values()))) for m in methods},
        "claims": claims,
        "ablation": ablation,
        "curves": {
            m: {str(s): {str(k): v for k, v in c.items()} for s, c in curves[m].items()} for m in methods
        },
        "measures": {
            m: {k: {str(s): v for s, v in vals.items()} for k, vals in measures[m].items()} for m in methods
        },
    }


def _claim4(claims_report: Mapping[str, Any], size: str) -> dict[str, Any]:
    """Claim 4 as ``cwgrpo claims`` measured it (the registration's measure for claim 4)."""
    for c in claims_report.get("claims", []):
        if c.get("id") == 4:
            for r in c.get("per_size", []):
                if r.get("size") == size:
                    return {
                        "id": 4,
                        "claim": CLAIM_TEXT[4],
                        "measure": "top_share (claims.json)",
                        "unit": r.get("unit"),
                        "effect": r.get("effect"),
                        "mde_80": mde_from_interval(r.get("effect") or {}),
                        "verdict": r.get("verdict"),
                        "reason": r.get("reason"),
                        "secondary": {},
                    }
    raise ResultFileError(f"claims report has no claim 4 for size {size!r}")


def tail_shares(runs: Sequence[Path], methods: Sequence[str], fraction: float) -> dict[str, dict[int, float]]:
    """method -> seed -> mean over sampled steps of the top-``fraction`` share of sum |c| (claim 4's measure)."""
    out: dict[str, dict[int, float]] = {}
    for run_dir in runs:
        info = run_info(run_dir)
        if info["method"] not in methods:
            continue
        shares = [top_share(r["cov"], fraction) for r in cov_samples(run_dir)]
        shares = [v for v in shares if math.isfinite(v)]
        if shares:
            out.setdefault(info["method"], {})[info["seed"]] = float(np.mean(shares))
    return out


# -- command -----------------------------------------------------------------------------------------
def configure_parser(parser: argparse.ArgumentParser) -> None:
    add_input_arguments(parser)
    parser.add_argument("--claims", required=True, type=Path, help="the preset's claims.json (claim 4)")
    parser.add_argument("--out-json", required=True, type=Path, help="e.g. results/study/study.json")
    parser.add_argument("--out-md", required=True, type=Path, help="e.g. results/study/study.md")
    parser.add_argument("--out-ablation", required=True, type=Path, help="ablation figure (.pdf)")
    parser.add_argument("--out-ablation-png", required=True, type=Path, help="the same figure as .png")
    parser.add_argument(
        "--power", type=Path, default=None, help="the registration's power file (study_power.json)"
    )
    parser.add_argument("--out-power", required=True, type=Path, help="power figure (.pdf)")
    parser.add_argument("--out-power-png", required=True, type=Path, help="the same figure as .png")
    add_config_arguments(parser)
    parser.epilog = describe_options(StudyConfig)


OUTPUTS = ("out_json", "out_md", "out_ablation", "out_ablation_png", "out_power", "out_power_png")


def run(args: argparse.Namespace) -> int:
    from cwgrpo_workflow.report.claim_checks import report_record
    from cwgrpo_workflow.report.study_render import ablation_figure, power_figure, study_markdown

    cfg = command_options(StudyConfig, args, OUTPUTS)
    methods = [cfg.treatment_method, *cfg.variants]
    report = analyse(
        cfg,
        load_summaries(args.summaries, cfg),
        metrics_frame(args.runs),
        tail_shares(args.runs, methods, cfg.tail_top_fraction),
        read_json(args.claims),
    )
    write_json(args.out_json, report_record(report, cfg, args.summaries, args.runs))
    write_text(args.out_md, study_markdown(report, cfg))
    ablation_figure(report, cfg, args.out_ablation, args.out_ablation_png)
    registered = read_json(args.power) if args.power else None
    power_figure(report, registered, args.out_power, args.out_power_png)
    return 0
