"""Table 1 as a picture: each method's Avg with its interval, one panel per size, beside the paper's.

Drawn by ``cwgrpo table`` (``--out-avg-pdf`` / ``--out-avg-png``) from the cells it computed, so the dots
are exactly the table's Avg column; the paper's reported Avg (``cwgrpo/resources/reported.json``) of the
paper size a size mirrors is an open diamond on the same row, for the methods the paper ran.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from cwgrpo.paper import SIZE_DISPLAY as PAPER_SIZE_DISPLAY
from cwgrpo.report.load import reported_table1
from cwgrpo.report.options import AVG, TableConfig


def avg_figure(cells: pd.DataFrame, cfg: TableConfig, reported: dict[str, Any], footer: str):
    """The figure (matplotlib); ``cells`` as :func:`cwgrpo.report.table.build_table1` returns them."""
    from matplotlib.lines import Line2D

    from cwgrpo.report.style import apply_style, new_figure

    apply_style()
    avg = cells[cells["benchmark"] == AVG]
    paper = reported_table1(reported)
    paper = paper[paper["benchmark"] == AVG].set_index(["size", "method"])["value"]
    sizes = list(dict.fromkeys(avg["size"]))
    rows = int(avg.groupby("size").size().max())
    fig, axes = new_figure(1, len(sizes), 3.2 * len(sizes) + 2.2, 0.3 * rows + 1.1, footer, sharex=True)
    for ax, size in zip(axes[0], sizes, strict=True):
        sub = avg[avg["size"] == size]
        ys = np.arange(len(sub))[::-1]
        psize = cfg.size_mirror(size)
        for y, (_, r) in zip(ys, sub.iterrows(), strict=True):
            colour = cfg.method_colour(r["method"])
            mean = 100 * r["accuracy"]
            has_ci = np.isfinite(r["ci95_lo"]) and np.isfinite(r["ci95_hi"])
            xerr = [[mean - 100 * r["ci95_lo"]], [100 * r["ci95_hi"] - mean]] if has_ci else None
            ax.errorbar(mean, y, xerr=xerr, fmt="o", color=colour, capsize=2)
            if (psize, r["method"]) in paper.index:
                ax.plot(paper[(psize, r["method"])], y, marker="D", mfc="white", color=colour, ls="none")
        ax.set_yticks(ys, list(sub["method_display"]))
        title = cfg.size_name(size)
        if psize is not None and psize != size:
            title += f"\npaper: {PAPER_SIZE_DISPLAY.get(psize, psize)}"
        ax.set(title=title, xlabel="Avg accuracy (%)")
    step = reported["table1"]["step"]
    handles = [
        Line2D([], [], color="0.2", marker="o", ls="none", label=f"ours, step {cfg.step}:\nmean, 95 % CI"),
        Line2D([], [], color="0.2", marker="D", mfc="white", ls="none", label=f"paper, step {step}"),
    ]
    fig.legend(handles=handles, loc="outside right upper")
    return fig
