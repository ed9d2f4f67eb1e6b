"""The paper's numbers beside ours, as ``cwgrpo table`` writes them.

The reported-vs-ours table
(:func:`reported_vs_ours`, :func:`reported_markdown`) and Table 1's Avg column as a picture of effects
(:func:`avg_figure`).

The table puts each of our cells, or each effect (a method minus the reference, paired by seed), beside
the paper's number at the paper size and benchmark it mirrors, in percent. The figure shows each method's
Avg minus the reference's (GRPO), ours beside the paper's, one panel per size (``--out-avg-pdf`` /
``--out-avg-png``), from the cells the table computed, so our dots are exactly the table's ``Δ Avg``
column: a 95 % t-interval over seeds where there are two or more, else an open dot marked "one seed".
Only effects share an axis: the paper's accuracies are of other models and benchmarks (for the stand-in
presets), but its effect of a method over GRPO is a claim ours can be set against. The paper's effect is
the difference of two Avg rows of its Table 1 (``workflow/cwgrpo_workflow/resources/reported.json``) at the paper size a
size mirrors; an open diamond.
"""

from __future__ import annotations

import logging
import math
from typing import Any

import numpy as np
import pandas as pd

from cwgrpo.io import ResultFileError
from cwgrpo.paper import SIZE_DISPLAY as PAPER_SIZE_DISPLAY
from cwgrpo.stats import Effect, seed_effect
from cwgrpo_workflow.report.load import reported_table1
from cwgrpo_workflow.report.options import AVG, TableConfig, interval, markdown_table, number

log = logging.getLogger(__name__)


# -- the paper's numbers beside ours -------------------------------------------------------------------
def _cmp_row(
    base: dict[str, Any], ours: Effect | tuple[float, float, float, int], paper_val: float, **kw: Any
) -> dict[str, Any]:
    """One row of reported_vs_ours: ours (fractions or an Effect of fractions) converted to percent."""
    m, lo, hi, n = (ours.mean, ours.lo, ours.hi, ours.n) if isinstance(ours, Effect) else ours
    ours_pct = 100 * m
    return {
        **base,
        **kw,
        "paper_pct": paper_val,
        "ours_pct": ours_pct,
        "ours_ci95_lo_pct": 100 * lo,
        "ours_ci95_hi_pct": 100 * hi,
        "n_seeds": n,
        "difference_pct": ours_pct - paper_val,
    }


def reported_vs_ours(
    cells: pd.DataFrame,
    per_seed: dict[tuple[str, str], pd.DataFrame],
    cfg: TableConfig,
    reported: dict[str, Any],
) -> pd.DataFrame:
    """Rows comparing the paper with us, in percent (points).

    ``comparison == "effect"``: (method - reference) per benchmark and Avg, ours paired by seed, for
    ``cfg.effect_methods`` (every kind). ``comparison == "absolute"``: every cell (kind paper only;
    tiny accuracies on synthetic data are not comparable with the paper's).
    """
    paper = reported_table1(reported).set_index(["size", "method", "benchmark"])["value"]
    paper_methods = set(reported["method_display"])
    paper_step = int(reported["table1"]["step"])
    benchmarks = [b for b in dict.fromkeys(cells["benchmark"]) if b != AVG]
    ref = cfg.reference_method
    rows: list[dict[str, Any]] = []
    for size in dict.fromkeys(cells["size"]):
        psize = cfg.size_mirror(size)
        if psize is None:
            log.info("size %s mirrors no paper size; left out of reported_vs_ours", size)
            continue
        cols = [(b, cfg.mirror(b)) for b in benchmarks if cfg.mirror(b)] + [(AVG, AVG)]
        avg_note = "" if len(benchmarks) == 5 else f"ours: mean of our {len(benchmarks)} benchmarks"
        base = {"size": size, "size_display": cfg.size_name(size), "paper_size": psize}

        if cfg.kind == "paper":  # tiny and real: effects only
            for method in dict.fromkeys(cells.loc[cells["size"] == size, "method"]):
                if method not in paper_methods:
                    continue
                for b, pb in cols:
                    r = cells[
                        (cells["size"] == size) & (cells["method"] == method) & (cells["benchmark"] == b)
                    ].iloc[0]
                    rows.append(
                        _cmp_row(
                            base,
                            (r["accuracy"], r["ci95_lo"], r["ci95_hi"], int(r["n_seeds"])),
                            float(paper[(psize, method, pb)]),
                            comparison="absolute",
                            method=method,
                            method_display=cfg.method_name(method),
                            benchmark=b,
                            benchmark_display=cfg.benchmark_name(b),
                            paper_benchmark=pb,
                            same_sign=None,
                            note=(avg_note if b == AVG else ""),
                        )
                    )
        for method in cfg.effect_methods:
            if (size, method) not in per_seed or method not in paper_methods:
                continue
            for b, pb in cols:
                eff = seed_effect(per_seed[(size, method)][b].to_dict(), per_seed[(size, ref)][b].to_dict())
                p = float(paper[(psize, method, pb)] - paper[(psize, ref, pb)])
                same = np.sign(eff.mean) == np.sign(p) if np.isfinite(eff.mean) and p != 0 else None
                row = _cmp_row(
                    base,
                    eff,
                    round(p, 6),
                    comparison="effect",
                    method=f"{method} - {ref}",
                    method_display=f"{cfg.method_name(method)} − {cfg.method_name(ref)}",
                    benchmark=b,
                    benchmark_display=cfg.benchmark_name(b),
                    paper_benchmark=pb,
                    same_sign=None if same is None else bool(same),
                    note="; ".join(x for x in (eff.note, avg_note if b == AVG else "") if x),
                )
                rows.append(row)
    out = pd.DataFrame.from_records(rows)
    if out.empty:
        raise ResultFileError(
            "nothing to compare with the paper: no size mirrors a paper size (size_mirrors)"
        )
    pct = [c for c in out.columns if c.endswith("_pct")]
    out[pct] = out[pct].round(10)  # percent of a fraction: drop float noise such as 78.99999999999999
    out.insert(0, "paper_step", paper_step)
    out.insert(1, "our_step", cfg.step)
    return out


def reported_markdown(cmp: pd.DataFrame, cfg: TableConfig) -> str:
    lines = ["# The paper's reported numbers and ours", ""]
    lines.append(
        f"Paper: Table 1 of Wang et al., ACL 2026 (arXiv 2605.11538), step {int(cmp['paper_step'].iloc[0])}. "
        f"Ours: step {cfg.step}, accuracy in percent, mean over seeds with the 95 % t-interval over seeds "
        "(effects paired by seed)."
    )
    lines.append("")
    if cfg.kind != "paper":
        benchmarks = [b for b in dict.fromkeys(cmp["benchmark"]) if b != AVG]
        stand_in = cfg.stand_in_note(benchmarks, dict.fromkeys(cmp["size"]))
        lines.append(
            f"**Only effects are compared.** {stand_in} This table compares *effects* — a method's accuracy "
            f"minus {cfg.method_name(cfg.reference_method)}'s, in points — and whether each has the same sign "
            "as the paper's."
        )
        lines.append("")
    else:
        lines.append(
            "The paper scores one sample per problem (its 1.5B base row averages several, from Open-RS); "
            "ours use the metric named in table1.md (avg@k), so small differences are expected from sampling."
        )
        lines.append("")
    lines += _section(
        "Effects (method minus reference, points)",
        [
            "Size",
            "Effect",
            "Benchmark (ours ≙ paper)",
            "Paper",
            "Ours (95 % CI)",
            "Ours − paper",
            "Same sign",
        ],
        [_effect_row(r) for _, r in cmp[cmp["comparison"] == "effect"].iterrows()],
    )
    lines += _section(
        "Absolute accuracy (%)",
        ["Size", "Method", "Benchmark", "Paper", "Ours (95 % CI)", "Ours − paper"],
        [_absolute_row(r) for _, r in cmp[cmp["comparison"] == "absolute"].iterrows()],
    )
    notes = sorted({n for n in cmp["note"] if n})
    if notes:
        lines += ["Notes: " + "; ".join(notes) + ".", ""]
    return "\n".join(lines)


def _section(title: str, header: list[str], rows: list[list[str]]) -> list[str]:
    """A titled Markdown table (the numbers right-aligned), or nothing without rows."""
    return [f"## {title}", "", *markdown_table(header, rows, "lllrrr"), ""] if rows else []


def _ours(r: pd.Series, sign: bool, unavailable: str) -> str:
    """Our number in points with its 95 % interval (``unavailable`` in its place when there is none)."""
    lo, hi = r["ours_ci95_lo_pct"], r["ours_ci95_hi_pct"]
    ci = " " + interval((lo, hi), 1, sign) if np.isfinite(lo) else unavailable
    return number(r["ours_pct"], 1, sign) + ci


def _effect_row(r: pd.Series) -> list[str]:
    same = {True: "yes", False: "**no**", None: "—"}[r["same_sign"]]
    size = r["size_display"] + (f" (≙ {r['paper_size']})" if r["size"] != r["paper_size"] else "")
    bench = r["benchmark_display"] + (
        f" ≙ {r['paper_benchmark']}" if r["benchmark"] != r["paper_benchmark"] else ""
    )
    return [size, r["method_display"], bench, number(r["paper_pct"], 1, True),
            _ours(r, True, " (CI unavailable)"), number(r["difference_pct"], 1, True), same]  # fmt: skip


def _absolute_row(r: pd.Series) -> list[str]:
    return [r["size_display"], r["method_display"], r["benchmark_display"], number(r["paper_pct"]),
            _ours(r, False, ""), number(r["difference_pct"], 1, True)]  # fmt: skip


# -- the Avg-effect figure ---------------------------------------------------------------------------
def avg_effects(cells: pd.DataFrame, cfg: TableConfig, reported: dict[str, Any]) -> pd.DataFrame:
    """One row per (size, method other than the reference), in the table's order, in points: our effect
    (``ours``, ``ours_lo``, ``ours_hi``: NaN where one seed gives no interval; ``one_seed``) and the paper's
    (``paper``: NaN where the size mirrors no paper size or the paper has no such method)."""
    paper = reported_table1(reported)
    paper = paper[paper["benchmark"] == AVG].set_index(["size", "method"])["value"]
    ref = cfg.reference_method
    rows = []
    for _, r in cells[(cells["benchmark"] == AVG) & (cells["method"] != ref)].iterrows():
        psize = cfg.size_mirror(r["size"])
        has = psize is not None and (psize, r["method"]) in paper.index and (psize, ref) in paper.index
        lo, hi = float(r["delta_ci95_lo"]), float(r["delta_ci95_hi"])
        one_seed = not (math.isfinite(lo) and math.isfinite(hi))
        rows.append(
            {
                "size": r["size"],
                "method": r["method"],
                "method_display": r["method_display"],
                "ours": 100 * float(r["delta"]),
                "ours_lo": math.nan if one_seed else 100 * lo,
                "ours_hi": math.nan if one_seed else 100 * hi,
                "one_seed": one_seed,
                "paper_size": psize,
                "paper": round(float(paper[(psize, r["method"])] - paper[(psize, ref)]), 6)
                if has
                else math.nan,
            }
        )
    return pd.DataFrame.from_records(rows)


def avg_figure(cells: pd.DataFrame, cfg: TableConfig, reported: dict[str, Any], footer: str):
    """The figure (matplotlib); ``cells`` as :func:`cwgrpo_workflow.report.table.build_table1` returns them."""
    from matplotlib.lines import Line2D

    from cwgrpo_workflow.report.style import apply_style, new_figure

    apply_style()
    effects = avg_effects(cells, cfg, reported)
    sizes = list(dict.fromkeys(effects["size"]))
    rows = int(effects.groupby("size").size().max())
    fig, axes = new_figure(1, len(sizes), 3.2 * len(sizes) + 2.6, 0.3 * rows + 1.3, footer, sharex=True)
    for ax, size in zip(axes[0], sizes, strict=True):
        sub = effects[effects["size"] == size]
        ys = np.arange(len(sub))[::-1]
        for y, (_, r) in zip(ys, sub.iterrows(), strict=True):
            colour = cfg.method_colour(r["method"])
            if r["one_seed"]:
                ax.plot(r["ours"], y, marker="o", mfc="white", color=colour, ls="none")
            else:
                xerr = [[r["ours"] - r["ours_lo"]], [r["ours_hi"] - r["ours"]]]
                ax.errorbar(r["ours"], y, xerr=xerr, fmt="o", color=colour, capsize=2)
            if np.isfinite(r["paper"]):
                ax.plot(r["paper"], y, marker="D", mfc="white", color=colour, ls="none", alpha=0.8)
        ax.axvline(0, color="0.6", lw=0.8, zorder=0)
        ax.set_yticks(ys, list(sub["method_display"]))
        psize = sub["paper_size"].iloc[0]
        title = cfg.size_name(size)
        if psize is not None and psize != size:
            title += f"\npaper: {PAPER_SIZE_DISPLAY.get(psize, psize)}"
        ax.set(title=title, xlabel=f"Δ Avg vs {cfg.method_name(cfg.reference_method)} (points)")
    step = reported["table1"]["step"]
    other = " (other models,\nbenchmarks)" if cfg.kind != "paper" else ""
    handles = [
        Line2D(
            [], [], color="0.2", marker="o", ls="-", label=f"ours, step {cfg.step}:\nmean, 95 % CI over seeds"
        ),
        Line2D(
            [], [], color="0.2", marker="o", mfc="white", ls="none", label="ours, one seed\n(no interval)"
        ),
        Line2D([], [], color="0.2", marker="D", mfc="white", ls="none", label=f"paper{other},\nstep {step}"),
    ]
    fig.legend(handles=handles, loc="outside right upper")
    return fig
