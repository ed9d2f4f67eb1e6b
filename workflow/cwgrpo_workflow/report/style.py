"""One plotting style for every figure: seaborn theme, a fixed colour per method label, a provenance footer.

A method keeps its Okabe–Ito colour in every figure; an unlisted label gets one from a hash of its name.
Figures are saved without timestamps, so identical inputs give identical PDFs.
"""

from __future__ import annotations

import logging
import math
import textwrap
import zlib
from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # headless: the report commands never open windows

import matplotlib.pyplot as plt
import numpy as np
import seaborn as sns
from matplotlib.figure import Figure

from cwgrpo.io import atomic_path

# fontTools logs every glyph subset at INFO while matplotlib embeds fonts in a PDF.
logging.getLogger("fontTools").setLevel(logging.WARNING)

METHOD_COLORS: dict[str, str] = {
    "base": "#7F7F7F",  # grey
    "grpo": "#0072B2",  # blue
    "clip_cov": "#E69F00",  # orange
    "kl_cov": "#CC79A7",  # reddish purple
    "cw_grpo": "#D55E00",  # vermillion
    "cw_grpo_described": "#009E73",  # bluish green
}
_SPARE_COLORS = ("#56B4E9", "#000000", "#8C564B", "#BCBD22", "#17BECF", "#9467BD")

METHOD_LABELS: dict[str, str] = {
    "base": "Base",
    "grpo": "GRPO",
    "clip_cov": "Clip-Cov",
    "kl_cov": "KL-Cov",
    "cw_grpo": "CW-GRPO",
    "cw_grpo_described": "CW-GRPO (described)",
}

FOOTER_FONTSIZE = 5.5
FOOTER_COLOR = "0.45"


def method_color(method: str) -> str:
    """The colour of a method label, identical in every figure."""
    return METHOD_COLORS.get(method) or _SPARE_COLORS[zlib.crc32(method.encode()) % len(_SPARE_COLORS)]


def method_label(method: str) -> str:
    """Default display name of a method label (``cw_grpo`` -> ``CW-GRPO``)."""
    return METHOD_LABELS.get(method, method)


def apply_style() -> None:
    """The package's one seaborn/matplotlib style; call before creating figures."""
    sns.set_theme(
        context="paper",
        style="whitegrid",
        rc={
            "font.size": 8,
            "axes.titlesize": 9,
            "axes.labelsize": 8,
            "xtick.labelsize": 7,
            "ytick.labelsize": 7,
            "legend.fontsize": 7,
            "legend.title_fontsize": 7,
            "legend.frameon": False,
            "lines.linewidth": 1.4,
            "lines.markersize": 4,
            "grid.linewidth": 0.5,
            "pdf.fonttype": 42,  # embed TrueType so text stays selectable/searchable in the PDF
            "ps.fonttype": 42,
            "savefig.dpi": 200,
            "figure.dpi": 100,
        },
    )


def wrap_footer(text: str, width_in: float) -> str:
    """Wrap a footer line to the figure width: about 23.5 characters per inch at the footer's size
    (measured on a rendered figure), 22 to keep a margin."""
    return "\n".join(textwrap.wrap(text, width=max(40, int(width_in * 22)), break_on_hyphens=False))


def integer_steps(ax) -> None:
    """Steps are whole numbers: no 2.5 or 7.5 ticks on a short run, and a lone step gets one step of room
    each side (matplotlib's default view of a single point is 1.9–2.1). Call after plotting."""
    from matplotlib.ticker import MaxNLocator

    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    lo, hi = ax.get_xlim()
    if hi - lo < 1:  # a lone step: matplotlib's margins of a span of 0
        centre = round((lo + hi) / 2)
        ax.set_xlim(centre - 1, centre + 1)


def percent_axis(ax) -> None:
    """An accuracy axis spans at least one point and stops at 100 %, with a sliver below 0 (markers at 0
    stay whole) too small for a negative tick: all-zero accuracies read 0–1 %, not −0.04–0.04. Call
    after plotting."""
    top = min(100.0, max(ax.get_ylim()[1], 1.0))
    ax.set_ylim(max(ax.get_ylim()[0], -0.03 * top), top)


def new_figure(nrows: int, ncols: int, width: float, row_height: float, footer: str, **kwargs):
    """A constrained-layout figure with room at the bottom for the provenance footer.

    Returns ``(fig, axes)`` with ``axes`` a 2-D array (``squeeze=False``).
    """
    footer = wrap_footer(footer, width)
    lines = footer.count("\n") + 1 if footer else 0
    footer_h = 0.02 + 0.1 * lines  # inches
    height = nrows * row_height + footer_h
    fig, axes = plt.subplots(
        nrows, ncols, figsize=(width, height), squeeze=False, layout="constrained", **kwargs
    )
    frac = footer_h / height
    fig.get_layout_engine().set(rect=(0, frac, 1, 1 - frac))
    if footer:
        fig.text(0.005, 0.004, footer, fontsize=FOOTER_FONTSIZE, color=FOOTER_COLOR, ha="left", va="bottom")
    return fig, axes


def save_figure(fig: Figure, pdf: str | Path, png: str | Path) -> tuple[Path, Path]:
    """Write ``fig`` to ``pdf`` and ``png`` (atomically, without timestamps) and close it."""
    pdf, png = Path(pdf), Path(png)
    try:
        with atomic_path(pdf, suffix=".pdf") as tmp:
            fig.savefig(tmp, format="pdf", metadata={"CreationDate": None, "Creator": "cwgrpo"})
        fig.set_layout_engine("none")  # keep the layout just computed for the PDF (it is the slow part)
        with atomic_path(png, suffix=".png") as tmp:
            fig.savefig(tmp, format="png", metadata={"Software": "cwgrpo"})
    finally:
        plt.close(fig)
    return pdf, png


def linthresh(cov: np.ndarray) -> float:
    """Linear range of the symlog axis: the power of ten at or below the median |cov| (nonzero)."""
    a = np.abs(cov[np.isfinite(cov) & (cov != 0)])
    if a.size == 0:
        return 1.0
    return float(10 ** math.floor(math.log10(np.median(a))))


def symlog_edges(lt: float, top: float, per_side: int = 28) -> np.ndarray:
    top = max(top * 1.001, lt * 10)
    pos = np.geomspace(lt, top, per_side)
    return np.concatenate([-pos[::-1], np.linspace(-lt, lt, 5)[1:-1], pos])


def symlog_ticks(axis, lt: float, per_side: int) -> None:
    """Few, readable ticks on a symlog axis: 0 and at most ``per_side`` decades each side, all in view."""
    from matplotlib.ticker import FixedLocator, FuncFormatter, NullLocator

    lo, hi = axis.get_view_interval()
    top = max(abs(lo), abs(hi))
    decades = list(
        range(round(math.log10(lt)), math.floor(math.log10(max(top, lt * 10))) + 1)
    )  # within the data
    step = max(1, math.ceil(len(decades) / per_side))
    chosen = decades[::-1][::step][::-1]  # keep the outermost decade

    def label(v: float, _pos: int) -> str:
        if v == 0:
            return "0"
        d = round(math.log10(abs(v)))
        sign = "−" if v < 0 else ""
        return f"{sign}{10.0**d:g}" if -2 <= d <= 2 else f"{sign}$10^{{{d}}}$"

    axis.set_major_locator(
        FixedLocator([-(10.0**d) for d in reversed(chosen)] + [0.0] + [10.0**d for d in chosen])
    )
    axis.set_major_formatter(FuncFormatter(label))
    axis.set_minor_locator(NullLocator())
