"""Rendering of Table 1: Markdown, LaTeX and a one-page PDF (the paper's own rows as notes beneath).

Pure formatting of frames that :mod:`cwgrpo_workflow.report.table` computed; nothing here reads a result file.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from cwgrpo.io import (
    atomic_path,
)
from cwgrpo_workflow.report.options import AVG, TableConfig, markdown_table, number


# -- formatting --------------------------------------------------------------------------------------
def format_cell(mean: float, lo: float, hi: float, d: int, sign: bool = False) -> str:
    """``84.0 ± 9.9`` (percent; the half-width of the interval) or ``84.0`` without an interval."""
    text = number(mean, d, sign, percent=True)
    if np.isfinite(lo) and np.isfinite(hi):
        text += f" ± {100 * (hi - lo) / 2:.{d}f}"
    return text


@dataclass
class Grid:
    """The table as text: header, and per size a title plus rows of (text, bold) cells."""

    header: list[str]
    sections: list[tuple[str, list[list[tuple[str, bool]]]]]
    notes: list[str] = dataclasses.field(default_factory=list)
    title: str = ""


def paper_rows(reported: Mapping[str, Any], cfg: TableConfig, sizes: Iterable[str], other: bool) -> list[str]:
    """The paper's Table 1 rows as notes, for the paper sizes that ``sizes`` mirror (all if none does),
    marked as other models and benchmarks when ``other`` (a stand-in preset)."""
    table = reported["table1"]
    mirrored = {cfg.size_mirror(s) for s in sizes} - {None}
    cols = [*reported["benchmark_order"], AVG]
    names = [reported["benchmark_display"].get(b, "Avg") for b in cols]
    which = (
        "other models and benchmarks, so not comparable cell by cell; its effects over GRPO are beside ours "
        "in reported_vs_ours.md and table1_avg.png"
        if other
        else "the same models and benchmarks, one sample per problem"
    )
    notes = [f"The paper's Table 1 (step {table['step']}; {which}), {', '.join(names)}:"]
    for psize, display in reported["size_display"].items():
        if mirrored and psize not in mirrored:
            continue
        rows = [r for r in table["rows"] if r["size"] == psize]
        text = "; ".join(
            f"{cfg.method_name(r['method'])} " + " / ".join(f"{r[c]:.1f}" for c in cols) for r in rows
        )
        notes.append(f"Paper, {display}: {text}.")
    return notes


def table_grid(cells: pd.DataFrame, cfg: TableConfig, reported: Mapping[str, Any] | None = None) -> Grid:
    benchmarks = [b for b in dict.fromkeys(cells["benchmark"]) if b != AVG]
    ref_name = cfg.method_name(cfg.reference_method)
    header = ["Method", *[cfg.benchmark_name(b) for b in benchmarks], "Avg", f"Δ Avg vs {ref_name}"]
    sections = []
    d = cfg.decimals
    for size in dict.fromkeys(cells["size"]):
        rows = []
        sub = cells[cells["size"] == size]
        for method in dict.fromkeys(sub["method"]):
            m = sub[sub["method"] == method].set_index("benchmark")
            label = m["method_display"].iloc[0]
            if int(m["step"].iloc[0]) != cfg.step:
                label += f" (step {int(m['step'].iloc[0])})"
            row = [(label, False)]
            for b in [*benchmarks, AVG]:
                r = m.loc[b]
                row.append((format_cell(r["accuracy"], r["ci95_lo"], r["ci95_hi"], d), bool(r["is_best"])))
            a = m.loc[AVG]
            row.append(
                (
                    "—"
                    if method == cfg.reference_method
                    else format_cell(a["delta"], a["delta_ci95_lo"], a["delta_ci95_hi"], d, sign=True),
                    False,
                )
            )
            rows.append(row)
        sections.append((cfg.size_name(size), rows))
    metrics = "/".join(sorted(set(cells["metric"])))
    lo, hi = int(cells["n_seeds"].min()), int(cells["n_seeds"].max())
    seeds = f"{lo} seed{'s' if lo > 1 else ''}" if lo == hi else f"{lo}–{hi} seeds"
    notes = [
        f"Accuracy (%) at step {cfg.step} (the base model at step {cfg.base_step}); metric {metrics} per seed; "
        f"{seeds} per row (table1.csv lists them).",
        "Cells: mean over seeds ± half-width of the 95 % t-interval over seeds (one seed with k > 1: the "
        "summary's interval over problems; no ± when no interval is available).",
        f"Avg: mean of the benchmark accuracies. Δ Avg: Avg minus {ref_name}'s, paired by seed. "
        "Bold: best in its column within a size.",
    ]
    stand_in = cfg.stand_in_note(benchmarks, dict.fromkeys(cells["size"]))
    if stand_in:
        notes.append(stand_in)
    if reported is not None:
        notes += paper_rows(reported, cfg, dict.fromkeys(cells["size"]), other=bool(stand_in))
    title = f"Table 1: accuracy (%) at step {cfg.step}"
    return Grid(header, sections, notes, title)


def grid_markdown(grid: Grid) -> str:
    rows = [
        [size if i == 0 else "", *(f"**{text}**" if bold else text for text, bold in row)]
        for size, section in grid.sections
        for i, row in enumerate(section)
    ]
    table = markdown_table(["Size", *grid.header], rows, "ll" + "r" * len(grid.header))
    return "\n".join([f"# {grid.title}", "", *table, "", *grid.notes, ""])


_TEX_SUBS = {
    "\\": r"\textbackslash{}", "&": r"\&", "%": r"\%", "$": r"\$", "#": r"\#", "_": r"\_", "{": r"\{",
    "}": r"\}", "~": r"\textasciitilde{}", "^": r"\textasciicircum{}", "≈": r"$\approx$", "±": r"$\pm$",
    "Δ": r"$\Delta$", "−": r"$-$", "–": "--", "—": "---", "†": r"$\dagger$",
}  # fmt: skip


def tex_escape(text: str) -> str:
    """Escape LaTeX specials and map the few Unicode symbols the tables use to math mode."""
    return "".join(_TEX_SUBS.get(ch, ch) for ch in text)


def grid_latex(grid: Grid) -> str:
    ncol = len(grid.header)
    lines = [
        "% Generated by `cwgrpo table`; needs \\usepackage{booktabs}.",
        "\\begin{table*}[t]",
        "\\centering",
        "\\small",
        "\\begin{tabular}{l" + "r" * (ncol - 1) + "}",
        "\\toprule",
        " & ".join(tex_escape(h) for h in grid.header) + " \\\\",
    ]
    for size, rows in grid.sections:
        lines += ["\\midrule", f"\\multicolumn{{{ncol}}}{{l}}{{\\textit{{{tex_escape(size)}}}}} \\\\"]
        for row in rows:
            cells = [f"\\textbf{{{tex_escape(t)}}}" if b else tex_escape(t) for t, b in row]
            lines.append(" & ".join(cells) + " \\\\")
    lines += ["\\bottomrule", "\\end{tabular}"]
    lines.append("\\caption{" + tex_escape(grid.title + ". " + " ".join(grid.notes)) + "}")
    lines += ["\\label{tab:table1}", "\\end{table*}", ""]
    return "\n".join(lines)


def grid_pdf(grid: Grid, path: str | Path, footer: str) -> None:
    """Draw the table on one page with matplotlib (booktabs look: three rules, italic size titles).

    Written as PDF, or as PNG when ``path`` ends in ``.png``; the page is sized to the table.
    """
    import matplotlib.pyplot as plt
    from matplotlib.lines import Line2D

    from cwgrpo_workflow.report.style import FOOTER_COLOR, FOOTER_FONTSIZE, apply_style, wrap_footer

    apply_style()
    fs = 8.0
    fig = plt.figure(figsize=(8, 4))
    renderer = fig.canvas.get_renderer()

    def width(text: str, bold: bool = False, size: float = fs) -> float:
        t = fig.text(0, 0, text, fontsize=size, fontweight="bold" if bold else "normal")
        w = t.get_window_extent(renderer).width / fig.dpi
        t.remove()
        return w

    cols = [width(h) for h in grid.header]
    for _, rows in grid.sections:
        for row in rows:
            cols = [max(c, width(t, b)) for c, (t, b) in zip(cols, row, strict=True)]
    pad, margin, row_h = 0.14, 0.3, 0.2
    table_w = sum(cols) + pad * (len(cols) - 1)
    fig_w = max(table_w + 2 * margin, 6.0)
    notes = [ln for note in grid.notes for ln in wrap_footer(note, max(table_w, 4.0) * 0.72).split("\n")]
    footer = wrap_footer(footer, max(table_w, 4.0))
    n_rows = 1 + sum(1 + len(rows) for _, rows in grid.sections)
    fig_h = 0.35 + 0.3 + n_rows * row_h + 0.15 + 0.15 * len(notes) + 0.12 * (footer.count("\n") + 1) + 0.25
    fig.set_size_inches(fig_w, fig_h)
    x0 = (fig_w - table_w) / 2
    xs = [x0 + sum(cols[:i]) + pad * i for i in range(len(cols))]

    def put(x_in: float, y_in: float, text: str, **kw: Any) -> None:
        fig.text(x_in / fig_w, 1 - y_in / fig_h, text, va="center", **kw)

    def rule(y_in: float, lw: float) -> None:
        y = 1 - y_in / fig_h
        fig.add_artist(Line2D([x0 / fig_w, (x0 + table_w) / fig_w], [y, y], color="black", lw=lw))

    def put_row(y: float, row: list[tuple[str, bool]]) -> None:
        for i, (text, bold) in enumerate(row):
            weight = "bold" if bold else "normal"
            if i == 0:
                put(xs[0], y, text, fontsize=fs, fontweight=weight, ha="left")
            else:
                put(xs[i] + cols[i], y, text, fontsize=fs, fontweight=weight, ha="right")

    y = 0.35
    put(fig_w / 2, y, grid.title, fontsize=fs + 2, ha="center")
    y += 0.3
    rule(y - row_h / 2, 1.0)
    put_row(y, [(h, False) for h in grid.header])
    y += row_h
    for size, rows in grid.sections:
        rule(y - row_h / 2, 0.5)
        put(xs[0], y, size, fontsize=fs, style="italic", ha="left")
        y += row_h
        for row in rows:
            put_row(y, row)
            y += row_h
    rule(y - row_h / 2, 1.0)
    y += 0.15
    for line in notes:
        put(x0, y, line, fontsize=fs - 1, ha="left")
        y += 0.15
    fig.text(
        x0 / fig_w, 0.06 / fig_h, footer, fontsize=FOOTER_FONTSIZE, color=FOOTER_COLOR, ha="left", va="bottom"
    )
    fmt = "png" if str(path).lower().endswith(".png") else "pdf"
    meta = {"Software": "cwgrpo"} if fmt == "png" else {"CreationDate": None, "Creator": "cwgrpo"}
    try:
        with atomic_path(path, suffix=f".{fmt}") as tmp:
            fig.savefig(tmp, format=fmt, metadata=meta)
    finally:
        plt.close(fig)
