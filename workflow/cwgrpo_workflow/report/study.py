"""The pre-registered study's analysis (docs/study/preregistration.md, section 3), as registered.

``cwgrpo claims`` measures the four claims the way Table 1's setting allows; the study registered its
own primary measures, computed here from the same files: Avg at the last checkpoint (claim 1), the
range of the entropy over the whole run (claim 2), best-minus-last over the checkpoints (claim 3), and,
for claim 4, the claims report's own verdict (read from ``claims.json``); claim M, where a study
registered it (the third), is Avg at the last checkpoint of its arm minus CW-GRPO's, under claim 1's
rule. Every effect is a per-seed paired difference with a t-interval over seeds; claims 2 and 3 are
tested only where the regime's precondition holds (GRPO unstable in most seeds). The ablation (each
released-versus-described knob as its own method label) reports the same measures against CW-GRPO as
released, as intervals without verdicts. Measures are pure functions of small frames; the report and its
two figures (the ablation, the power) render only what :func:`analyse` computed.
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from cwgrpo.configs import ConfigError, add_config_arguments, describe_options
from cwgrpo.io import ResultFileError, read_json, write_json, write_text
from cwgrpo.stats import Effect, paired_mde, paired_sd, seed_effect
from cwgrpo_workflow.report.claim_checks import report_record, tail_shares
from cwgrpo_workflow.report.load import (
    add_input_arguments,
    command_options,
    load_summaries,
    metrics_frame,
    per_seed_accuracy,
)
from cwgrpo_workflow.report.options import AVG, ENTROPY_MEANS, ReportConfig, interval, markdown_table, number


@dataclass
class StudyConfig(ReportConfig):
    """Options of ``cwgrpo study``; the defaults are the registration's."""

    treatment_method: str = field(
        default="cw_grpo", metadata={"help": "the treatment T (CW-GRPO as released)"}
    )
    mechanism_method: str | None = field(
        default=None,
        metadata={
            "help": "the arm of claim M (the third study's): Avg(it) - Avg(treatment) at the last checkpoint, "
            "tested with claim 1's rule; None: no claim M"
        },
    )
    variants: list[str] = field(
        default_factory=list,
        metadata={"help": "ablation method labels, each compared with treatment_method (exploratory)"},
    )
    entropy_swing: float = field(
        default=0.5,
        metadata={"help": "precondition: entropy range over the run at least this fraction of its start"},
    )
    drop_points: float = field(
        default=10.0,
        metadata={
            "help": "precondition: Avg at the last checkpoint at least this many points below the best"
        },
    )
    shape_points: float = field(
        default=5.0,
        metadata={
            "help": "the paper's shape of GRPO, reported per seed: its best checkpoint at least this many points "
            "above the base model and its last at least this many below its best (the second study's "
            "learning-rate criterion)"
        },
    )
    tail_top_fraction: float = field(
        default=0.01, metadata={"help": "ablation's claim-4 measure: share of sum |c| of the top fraction"}
    )

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.treatment_method == self.reference_method:
            raise ConfigError("treatment_method and reference_method must differ")
        if self.mechanism_method in (self.treatment_method, self.reference_method):
            raise ConfigError(
                f"mechanism_method {self.mechanism_method!r} must be a third method: claim M compares it "
                f"with the treatment {self.treatment_method!r}, beside the reference {self.reference_method!r}"
            )
        if not self.entropy_swing > 0 or not self.drop_points > 0 or not self.shape_points > 0:
            raise ConfigError(
                "entropy_swing, drop_points and shape_points must be > 0, got "
                f"{self.entropy_swing}, {self.drop_points}, {self.shape_points}"
            )


# measure -> (unit, sign: +1 when "treatment minus reference" supports the claim, -1 when R - T does)
MEASURES: dict[str, tuple[str, int]] = {
    "avg_last": ("points", +1),
    "avg_first": ("points", +1),
    "avg_mean": ("points", +1),
    "entropy_range": ("nats", -1),
    "entropy_sd": ("nats", -1),
    "entropy_mean": ("nats", +1),
    "best_minus_last": ("points", -1),
    "best_minus_last_incl_base": ("points", -1),
    "drop_first_to_last": ("points", -1),
}
PRIMARY = {1: "avg_last", 2: "entropy_range", 3: "best_minus_last"}
SECONDARY = {
    1: ["avg_first", "avg_mean"],
    2: ["entropy_sd"],
    3: ["best_minus_last_incl_base", "drop_first_to_last"],
}
# The claims tested only where GRPO is unstable (the precondition); both registrations report them as
# "precondition failed", with their numbers, when it is not.
GATED = (2, 3)
PRECONDITION_FAILED = "precondition failed"
CLAIM_TEXT: dict[int | str, str] = {
    1: "CW-GRPO is more accurate: Avg(T) - Avg(R) at the last checkpoint",
    2: "CW-GRPO keeps entropy in a band: entropy range over the run, R - T",
    3: "CW-GRPO holds its accuracy: best-minus-last over the checkpoints, R - T",
    4: "a few tokens carry most of the covariance (as `cwgrpo claims`)",
    "M": "the gradient through the weight costs accuracy: Avg(M) - Avg(T) at the last checkpoint",
}


def shown_verdict(claim: Mapping[str, Any], precondition: bool) -> str:
    """A claim's verdict as reported: "precondition failed" for a gated claim of a study whose precondition
    failed (a report written before ``analyse`` said so has "does not hold" there), else its own."""
    return PRECONDITION_FAILED if claim["id"] in GATED and not precondition else claim["verdict"]


def registered_verdict(effect: Effect, precondition: bool, precondition_failed: str) -> tuple[str, str]:
    """The verdict rule as registered (preregistration.md section 3), kept so the study reads as it was
    registered: 'does not hold' for a mean <= 0 or a failed precondition, whatever the interval.
    ``cwgrpo claims`` has its own rule (``claim_checks.decide``)."""
    if not math.isfinite(effect.mean):
        return "inconclusive", "no measurement"
    if effect.mean <= 0:
        below = effect.has_ci and effect.hi < 0
        return "does not hold", "the effect is not positive" + (
            " (the whole 95 % CI is below 0)" if below else ""
        )
    if not precondition:
        return "does not hold", precondition_failed
    if not effect.has_ci:
        return "inconclusive", "the effect is positive but its CI is unavailable (fewer than 2 seeds)"
    if effect.lo > 0:
        return "holds", "the whole 95 % CI is above 0"
    return "inconclusive", "the effect is positive but the 95 % CI includes 0"


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
    top_shares: Mapping[tuple[str, str], Mapping[int, float]],
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
                {s: 100 * x for s, x in top_shares.get((size, v), {}).items()},
                {s: 100 * x for s, x in top_shares.get((size, cfg.treatment_method), {}).items()},
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


ABLATION_PANELS = (  # titles short enough for four panels side by side
    ("avg_last", "Avg, last checkpoint\nV − T (points)"),
    ("entropy_range", "entropy range, run\nT − V (nats)"),
    ("best_minus_last", "best − last\nT − V (points)"),
    ("top_share_pct", "top-1 % share of Σ|c|\nV − T (points)"),
)


def ablation_figure(report: Mapping[str, Any], cfg: Any, pdf: Path, png: Path) -> None:
    """Effect ± 95 % CI of each ablation variant against the treatment, one panel per measure.

    Signs as in the study's tables: a positive value means the variant did *better* than CW-GRPO as
    released on that measure's claim (more accurate, a narrower entropy band, less degradation), except
    the top-share panel, which is the variant's share minus the treatment's.
    """
    from cwgrpo_workflow.report.style import apply_style, new_figure, save_figure

    apply_style()
    variants = list(report["ablation"])
    footer = f"{len(variants)} variants vs {cfg.treatment_method}; paired by seed, t-intervals"
    fig, axes = new_figure(
        1, len(ABLATION_PANELS), 7.2, 0.45 + 0.3 * max(1, len(variants)), footer, sharey=True
    )
    y = np.arange(len(variants))[::-1]
    for ax, (key, title) in zip(axes[0], ABLATION_PANELS, strict=True):
        for yi, v in zip(y, variants, strict=True):
            e = report["ablation"][v][key]
            mean = e.get("mean")
            if mean is None or not math.isfinite(mean):
                continue
            ci = e.get("ci95") or [mean, mean]
            ax.errorbar(
                mean,
                yi,
                xerr=[[mean - ci[0]], [ci[1] - mean]],
                fmt="o",
                color=cfg.method_colour(v),
                capsize=2,
            )
        ax.axvline(0.0, color="0.3", linewidth=0.8)
        ax.set_title(title)
    axes[0][0].set_yticks(y, [cfg.method_name(v) for v in variants])
    save_figure(fig, pdf, png)


def power_figure(
    report: Mapping[str, Any], registered: Mapping[str, Any] | None, pdf: Path, png: Path, max_seeds: int = 30
) -> None:
    """Minimum detectable effect (80 % power, paired two-sided 5 % t-test) over the number of seeds."""
    from cwgrpo_workflow.report.style import apply_style, method_color, new_figure, save_figure

    apply_style()
    fig, axes = new_figure(1, 1, 4.2, 2.8, "MDE = (t.975 + t.8) · sd(paired difference) / √n")
    ax = axes[0][0]
    n = np.arange(3, max_seeds + 1)
    observed_n = None
    for c in report["claims"]:
        if c["id"] not in (1, 3) or c.get("mde_80") is None:
            continue
        e = c["effect"]
        sd = c.get("sd_paired_difference")
        if sd is None:
            continue
        label = f"claim {c['id']} ({c['measure']}), this study's spread"
        colour = method_color("cw_grpo" if c["id"] == 1 else "grpo")
        ax.plot(n, [paired_mde(sd, k) for k in n], label=label, color=colour)
        ax.plot([e["n"]], [c["mde_80"]], "o", color=colour)
        observed_n = e["n"]
    if registered:
        pts = _registered_points(registered.get("mde_points", {}))
        if pts:
            ax.plot(
                [p[0] for p in pts],
                [p[1] for p in pts],
                "s",
                color="0.4",
                label="registration (calibration, k=1)",
            )
    ax.axhline(2.0, color="0.3", linestyle="--", linewidth=0.8, label="2 points (the issue's target)")
    if observed_n:
        ax.axvline(observed_n, color="0.6", linestyle=":", linewidth=0.8)
    ax.set_xlabel("seeds per method")
    ax.set_ylabel("minimum detectable effect (Avg points)")
    ax.legend(loc="upper right")
    save_figure(fig, pdf, png)


def _registered_points(points: Mapping[str, float]) -> Sequence[tuple[int, float]]:
    """``{"n7_P200_k1": 4.83, ...}`` -> [(7, 4.83), ...] for the registered k = 1 design."""
    out = []
    for key, value in points.items():
        parts = dict((p[0], p[1:]) for p in key.split("_"))
        if parts.get("k") == "1" and parts.get("n", "").isdigit():
            out.append((int(parts["n"]), float(value)))
    return sorted(out)


# -- rendering ---------------------------------------------------------------------------------------
def num_text(x: float | None, d: int = 2, sign: bool = True) -> str:
    """A study report's number: ``d`` decimals, signed by default, ``n/a`` when missing."""
    return number(x, d, sign, missing="n/a", minus="-")


def ci_text(e: Mapping[str, Any], d: int = 2) -> str:
    """An effect's 95 % interval as ``[lo, hi]``, or ``n/a`` without one."""
    return interval(e.get("ci95"), d, True, missing="n/a", minus="-") or "n/a"


def _digits(unit: str | None) -> int:
    return 3 if unit == "nats" else 1


def study_markdown(report: Mapping[str, Any], cfg: StudyConfig) -> str:
    """The claims table, the regime check and the ablation, as markdown."""
    reg, reference = report["regime"], cfg.method_name(cfg.reference_method)
    lines = [
        f"# Pre-registered study: {cfg.size_name(report['size'])}",
        "",
        f"T = `{cfg.treatment_method}`, R = `{cfg.reference_method}`; effects are means over seeds of the per-seed "
        "paired difference, signed so that a positive value supports the claim, with a two-sided 95 % "
        "t-interval; *MDE* is the effect a paired t-test over these seeds would detect with 80 % power, from the "
        "observed spread of the differences.",
        "",
        f"## Precondition: is {reference} unstable?",
        "",
        f"{reference} unstable in **{reg['unstable_seeds']} of {len(reg['per_seed'])}** seeds (registered: entropy range ≥ "
        f"{cfg.entropy_swing:.0%} of its start and best − last ≥ {cfg.drop_points:g} points, the base model counted "
        f"as step 0); precondition **{'holds' if reg['precondition'] else 'fails'}**. Over the checkpoints only "
        f"(the criterion as first registered): {reg['unstable_seeds_checkpoints_only']} of {len(reg['per_seed'])}. "
        f"The paper's shape (best checkpoint ≥ base + {cfg.shape_points:g} points, then last ≤ best − "
        f"{cfg.shape_points:g}): {reg['paper_shape_seeds']} of {len(reg['per_seed'])}.",
        "",
    ]
    yes = {True: "yes", False: "no"}
    lines += markdown_table(
        ["seed", "entropy start", "range", "best − last (ckpts)", "best − last (incl. base)", "best − base",
         "unstable", "ckpts only", "paper's shape"],
        [
            [s, num_text(r["entropy_start"], 3, False), num_text(r["entropy_range"], 3, False),
             num_text(r["best_minus_last"], 1, False), num_text(r["best_minus_last_incl_base"], 1, False),
             num_text(r["gain_over_base"], 1), yes[r["unstable"]], yes[r["unstable_checkpoints_only"]],
             yes[r["paper_shape"]]]
            for s, r in reg["per_seed"].items()
        ],
    )  # fmt: skip
    rows = []
    for c in report["claims"]:
        e, d = c["effect"] or {}, _digits(c.get("unit"))
        mde_text = num_text(c.get("mde_80"), d, False) if "mde_80" in c else ""
        rows.append(
            [c["id"], c["claim"], f"{num_text(e.get('mean'), d)} {c.get('unit') or ''}", ci_text(e, d),
             e.get("n", ""), mde_text, shown_verdict(c, reg["precondition"]), c["reason"]]
        )  # fmt: skip
    header = ["#", "claim", "effect", "95 % CI", "n", "MDE", "verdict", "reason"]
    lines += ["", "## Claims", "", *markdown_table(header, rows)]
    rows = []
    for c in report["claims"]:
        for m, e in c.get("secondary", {}).items():
            d = _digits(MEASURES[m][0])
            mde = num_text(e["mde_80"], d, False) if "mde_80" in e else ""
            rows.append(
                [c["id"], f"`{m}`", f"{num_text(e.get('mean'), d)} {MEASURES[m][0]}", ci_text(e, d), mde]
            )
    lines += ["", "Secondary measures (same sign convention):", ""]
    lines += markdown_table(["claim", "measure", "effect", "95 % CI", "MDE"], rows)
    levels = ", ".join(f"`{m}` {v:.3f}" for m, v in report["entropy_level"].items())
    lines += [
        "",
        f"Mean entropy over the run (nats, mean over seeds; a band at a collapsed level is no band): {levels}. "
        f"Entropy here (claim 2, the regime) is `{cfg.entropy_key}`: {ENTROPY_MEANS[cfg.entropy_key]}.",
    ]
    if report["ablation"]:
        rows = []
        for v, row in report["ablation"].items():
            cells = [
                f"{num_text(row[k].get('mean'), _digits(MEASURES[k][0]))} {ci_text(row[k], _digits(MEASURES[k][0]))}"
                for k in PRIMARY.values()
            ]
            tail = row["top_share_pct"]
            rows.append([f"`{v}`", *cells, f"{num_text(tail.get('mean'), 1)} {ci_text(tail, 1)}"])
        header = ["variant", "Avg at last ckpt (points)", "entropy range, T − V (nats)",
                  "best − last, T − V (points)", "top-1 % share (points)"]  # fmt: skip
        lines += [
            "",
            f"## Ablation: each variant minus `{cfg.treatment_method}` (exploratory, no verdicts)",
            "",
            *markdown_table(header, rows),
        ]
    steps = report["steps"]
    rows = [
        [f"`{m}`", f"{report['base_avg']:.1f}",
         *(f"{np.mean([c[str(s)] for c in per_seed.values() if str(s) in c]):.1f}" for s in steps)]
        for m, per_seed in report["curves"].items()
    ]  # fmt: skip
    lines += ["", "## Avg per checkpoint (points, mean over seeds)", ""]
    lines += markdown_table(["method", "base", *steps], rows)
    return "\n".join(lines) + "\n"


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
    cfg = command_options(StudyConfig, args, OUTPUTS)
    methods = [cfg.treatment_method, *cfg.variants]
    report = analyse(
        cfg,
        load_summaries(args.summaries, cfg),
        metrics_frame(args.runs),
        tail_shares(args.runs, methods, cfg.tail_top_fraction)[0],
        read_json(args.claims),
    )
    write_json(args.out_json, report_record(report, cfg, args.summaries, args.runs))
    write_text(args.out_md, study_markdown(report, cfg))
    ablation_figure(report, cfg, args.out_ablation, args.out_ablation_png)
    registered = read_json(args.power) if args.power else None
    power_figure(report, registered, args.out_power, args.out_power_png)
    return 0
