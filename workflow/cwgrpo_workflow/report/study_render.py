"""The study's report as markdown and its two figures: the released-versus-described ablation and power.

It renders only what :func:`cwgrpo_workflow.report.study.analyse` computed (no statistics here).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from cwgrpo.stats import paired_mde
from cwgrpo_workflow.report.options import ENTROPY_MEANS, interval, markdown_table, number
from cwgrpo_workflow.report.study import MEASURES, PRIMARY, StudyConfig, shown_verdict
from cwgrpo_workflow.report.style import apply_style, method_color, new_figure, save_figure

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
