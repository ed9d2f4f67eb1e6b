"""Table 1's Avg column as a figure of effects against GRPO, ours beside the paper's.

Table 1's Avg column as a picture of effects: each method's Avg minus the reference's (GRPO), ours beside
the paper's, one panel per size.

Drawn by ``cwgrpo table`` (``--out-avg-pdf`` / ``--out-avg-png``) from the cells it computed, so our dots
are exactly the table's ``Δ Avg`` column: a 95 % t-interval over seeds where there are two or more, else an
open dot marked "one seed". Only effects share an axis: the paper's accuracies are of other models and
benchmarks (for the stand-in presets), but its effect of a method over GRPO is a claim ours can be set
against. The paper's effect is the difference of two Avg rows of its Table 1
(``cwgrpo/resources/reported.json``) at the paper size a size mirrors; an open diamond.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pandas as pd

from cwgrpo.paper import SIZE_DISPLAY as PAPER_SIZE_DISPLAY
from cwgrpo.report.load import reported_table1
from cwgrpo.report.options import AVG, TableConfig


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
    """The figure (matplotlib); ``cells`` as :func:`cwgrpo.report.table.build_table1` returns them."""
    from matplotlib.lines import Line2D

    from cwgrpo.report.style import apply_style, new_figure

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
