"""``cwgrpo table``: Table 1 (PDF, CSV, TeX, Markdown) and the paper's numbers beside ours.

Rows per size: the base model (method ``base`` at step 0), then the ``methods`` option and any other method
label present at the configured step. A cell is the mean over seeds of the summaries' avg@k (pass@1 when
k = 1) under their primary metric; the table's notes (:func:`table_grid`) say how intervals,
``Avg``, ``Δ Avg`` and bold are computed. Each output is its own flag (:data:`TABLE_OUTPUTS`); example
(``R=results/tiny``)::

    cwgrpo table --summaries $R/eval/*/*/*/step*/*.summary.json --out-pdf figures/tiny/table1.pdf \\
        --out-csv $R/table1.csv --out-tex $R/table1.tex --out-md $R/table1.md \\
        --out-reported-csv $R/reported_vs_ours.csv --out-reported-md $R/reported_vs_ours.md \\
        --out-sensitivity-csv $R/metric_sensitivity.csv --out-sensitivity-md $R/metric_sensitivity.md \\
        --out-provenance $R/table1.provenance.json --set kind=tiny --set step=100
"""

from __future__ import annotations

import argparse
import dataclasses
import logging
import math
import re
import shutil
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from cwgrpo.configs import ConfigError, add_config_arguments, config_hash, describe_options
from cwgrpo.io import ResultFileError, atomic_path, read_json, write_csv, write_json, write_text
from cwgrpo.paper import SIZE_DISPLAY as PAPER_SIZE_DISPLAY
from cwgrpo.stats import Effect, mean_ci, mean_normal_ci, normal_ci, seed_effect
from cwgrpo_workflow.report.claim_checks import report_record, silent_runs
from cwgrpo_workflow.report.load import (
    add_input_arguments,
    command_options,
    load_reported,
    load_summaries,
    per_seed_accuracy,
    reported_table1,
)
from cwgrpo_workflow.report.options import AVG, ReportConfig, TableConfig, interval, markdown_table, number
from cwgrpo_workflow.report.provenance import footer_text, input_identity

log = logging.getLogger(__name__)


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
        "Bold: best in its column within a size (every tied best is bold).",
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
    "Δ": r"$\Delta$", "−": r"$-$", "–": "--", "—": "---", "†": r"$\dagger$", "‡": r"$\ddagger$",
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
    by_cell = cells.set_index(["size", "method", "benchmark"])
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
                    r = by_cell.loc[(size, method, b)]
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


def avg_figure(
    cells: pd.DataFrame,
    cfg: TableConfig,
    reported: dict[str, Any],
    footer: str,
    silent: set[tuple[str, str]] = frozenset(),
):
    """Each method's Δ Avg beside the paper's, one panel per size (``cells`` as :func:`build_table1` returns
    them). Only effects share an axis: a stand-in preset's accuracies are of other models and benchmarks.
    A method whose runs had no learning signal (``silent``: (size, method)) is marked † as in Table 1."""
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
        ax.set_yticks(
            ys,
            [
                f"{r['method_display']} †" if (size, r["method"]) in silent else r["method_display"]
                for _, r in sub.iterrows()
            ],
        )
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
    if silent:
        handles.append(Line2D([], [], ls="none", label="† no learning signal\nin training"))
    fig.legend(handles=handles, loc="outside right upper")
    return fig


# the metric-sensitivity table (each Table 1 cell under the strict and the paper metric)
COLUMNS = ["size", "method", "benchmark", "seeds", "strict", "paper", "paper_minus_strict", "disagree"]


def _accuracy(block: dict[str, Any] | None, k: int) -> float:
    if not block:
        return math.nan
    value = block.get("avg_k") if k > 1 else block.get("pass1")
    return math.nan if value is None else float(value)


def sensitivity_frame(summaries: Sequence[str | Path], cfg: ReportConfig) -> pd.DataFrame:
    """One row per (size, method, benchmark) at the reported step (fractions in [0, 1])."""
    rows = []
    for path in summaries:
        s = read_json(path)
        tags = s.get("tags") or {}
        method, step = str(tags.get("method")), int(tags.get("step", -1))
        if step != (cfg.base_step if method == cfg.base_method else cfg.step):
            continue
        k = int(s.get("k") or 1)
        by = dict(s.get("by_metric") or {})
        if "strict" not in by and s.get("primary_metric", "strict") == "strict":
            by["strict"] = s  # a summary written before by_metric: its accuracy is the strict one
        n = int(s.get("n_samples") or 0)
        disagree = s.get("n_disagree")
        rows.append(
            {
                "size": str(tags.get("size")),
                "method": method,
                "benchmark": str(s.get("benchmark")),
                "strict": _accuracy(by.get("strict"), k),
                "paper": _accuracy(by.get("paper"), k),
                "disagree": disagree / n if disagree is not None and n else math.nan,
            }
        )
    if not rows:
        return pd.DataFrame(columns=COLUMNS)
    frame = pd.DataFrame(rows)
    out = (
        frame.groupby(["size", "method", "benchmark"], sort=False)
        .agg(
            seeds=("strict", "size"),
            strict=("strict", "mean"),
            paper=("paper", "mean"),
            disagree=("disagree", "mean"),
        )
        .reset_index()
    )
    out["paper_minus_strict"] = out["paper"] - out["strict"]
    orders = {"size": cfg.order_sizes, "method": cfg.order_methods, "benchmark": cfg.order_benchmarks}
    rank = {c: {v: i for i, v in enumerate(order(out[c].unique()))} for c, order in orders.items()}
    out = out.sort_values(list(orders), key=lambda column: column.map(rank[column.name]))
    return out[COLUMNS].reset_index(drop=True)


def sensitivity_markdown(frame: pd.DataFrame, cfg: ReportConfig) -> str:
    """The table in Markdown, accuracies and differences in percent."""
    lines = [
        "# Metric sensitivity",
        "",
        "Accuracy (%) of each Table 1 cell under our strict grader and under the paper's metric "
        "(lighteval 0.8.1, the released configuration), their difference (points), and the share of "
        "samples (%) whose two verdicts differ; means over seeds.",
        "",
    ]
    if frame.empty:
        return "\n".join([*lines, "No summary at the reported step.", ""])
    if frame["paper"].isna().all():
        lines += ["The paper metric was not scored (evaluate.paper_metric: false): strict only.", ""]
    pct = {"percent": True, "minus": "-"}
    rows = [
        [cfg.size_name(r.size), cfg.method_name(r.method), cfg.benchmark_name(r.benchmark), r.seeds,
         number(r.strict, **pct), number(r.paper, **pct), number(r.paper_minus_strict, sign=True, **pct),
         number(r.disagree, **pct)]
        for r in frame.itertuples(index=False)
    ]  # fmt: skip
    header = ["size", "method", "benchmark", "seeds", "strict", "paper", "paper − strict", "disagree"]
    lines += markdown_table(header, rows, "lllrrrrr")
    return "\n".join([*lines, ""])


# -- computing the table -----------------------------------------------------------------------------
def _single_seed_ci(sel: pd.DataFrame, benchmarks: list[str], col: str) -> tuple[float, float]:
    """CI of one seed's cell from the summaries' own interval over problems (k > 1); NaN if none."""
    rows = sel.set_index("benchmark")
    if col != AVG:
        lo, hi = rows.loc[col, "accuracy_ci_lo"], rows.loc[col, "accuracy_ci_hi"]
        if np.isfinite(lo) and np.isfinite(hi):
            return float(lo), float(hi)
        return normal_ci(rows.loc[col, "accuracy"], rows.loc[col, "accuracy_se"])
    se = rows.loc[benchmarks, "accuracy_se"].to_numpy(dtype=float)  # benchmarks are independent samples
    return mean_normal_ci(float(rows.loc[benchmarks, "accuracy"].mean()), se)


def _row_methods(frame: pd.DataFrame, cfg: TableConfig, size: str) -> list[str]:
    """Required methods (cfg.methods) plus other labels that have summaries at the table's step."""
    sub = frame[frame["size"] == size]
    extra = set()
    for m in set(sub["method"]) - set(cfg.methods):
        step = cfg.base_step if m == cfg.base_method else cfg.step
        if (sub.loc[sub["method"] == m, "step"] == step).any():
            extra.add(m)
        else:
            log.info("method %s (size %s) has no summaries at step %s; left out of Table 1", m, size, step)
    return list(cfg.methods) + sorted(extra)


def build_table1(
    frame: pd.DataFrame, cfg: TableConfig
) -> tuple[pd.DataFrame, dict[tuple[str, str], pd.DataFrame]]:
    """Table 1 as a long frame plus the per-seed matrices it was computed from.

    Returns ``(cells, per_seed)``: ``cells`` has one row per (size, method, benchmark or ``avg``);
    ``per_seed[(size, method)]`` is seeds x (benchmarks + ``avg``) of accuracies (fractions).
    """
    benchmarks = cfg.order_benchmarks(frame["benchmark"])
    sizes = cfg.order_sizes(frame["size"])
    if cfg.reference_method not in cfg.methods:
        raise ResultFileError(
            f"reference_method {cfg.reference_method!r} must be one of methods {cfg.methods}"
        )
    per_seed: dict[tuple[str, str], pd.DataFrame] = {}
    records: list[dict[str, Any]] = []
    for size in sizes:
        methods = _row_methods(frame, cfg, size)
        for method in methods:
            step = cfg.base_step if method == cfg.base_method else cfg.step
            per_seed[(size, method)] = per_seed_accuracy(frame, size, method, step, benchmarks)
        ref = per_seed[(size, cfg.reference_method)]
        for method in methods:
            step = cfg.base_step if method == cfg.base_method else cfg.step
            wide = per_seed[(size, method)]
            sel = frame[(frame["size"] == size) & (frame["method"] == method) & (frame["step"] == step)]
            metric = "/".join(sorted(set(sel["metric"])))
            seeds = [int(s) for s in wide.index]
            for col in [*benchmarks, AVG]:
                values = wide[col].to_numpy(dtype=float)
                mean, lo, hi = mean_ci(values)
                kind = f"t-interval over {len(seeds)} seeds" if len(seeds) >= 2 else "unavailable (1 seed)"
                if len(seeds) == 1 and int(sel["k"].max()) > 1:
                    lo, hi = _single_seed_ci(sel[sel["seed"] == seeds[0]], benchmarks, col)
                    if np.isfinite(lo):
                        kind = "summary interval over problems (1 seed)"
                if method == cfg.reference_method:
                    eff = Effect(math.nan, math.nan, math.nan, 0, False, (), "reference")
                else:
                    eff = seed_effect(wide[col].to_dict(), ref[col].to_dict())
                records.append(
                    {
                        "size": size,
                        "size_display": cfg.size_name(size),
                        "method": method,
                        "method_display": cfg.method_name(method),
                        "step": step,
                        "benchmark": col,
                        "benchmark_display": cfg.benchmark_name(col),
                        "paper_benchmark": AVG if col == AVG else cfg.mirror(col),
                        "metric": metric,
                        "n_seeds": len(seeds),
                        "seeds": ";".join(str(s) for s in seeds),
                        "accuracy": mean,
                        "ci95_lo": lo,
                        "ci95_hi": hi,
                        "ci95_half": (hi - lo) / 2 if np.isfinite(lo) else math.nan,
                        "ci_kind": kind if np.isfinite(lo) else "unavailable",
                        "reference_method": cfg.reference_method,
                        "delta": eff.mean,
                        "delta_ci95_lo": eff.lo,
                        "delta_ci95_hi": eff.hi,
                        "delta_note": eff.note,
                    }
                )
    cells = pd.DataFrame.from_records(records)
    shown = (cells["accuracy"] * 100).round(cfg.decimals)
    best = shown.groupby([cells["size"], cells["benchmark"]]).transform("max")
    cells.insert(cells.columns.get_loc("ci95_lo"), "is_best", shown == best)
    return cells, per_seed


# -- command -----------------------------------------------------------------------------------------
def configure_parser(parser: argparse.ArgumentParser) -> None:
    add_input_arguments(parser, runs=False)
    parser.add_argument(
        "--runs", nargs="*", action="extend", type=Path, default=[],
        help="run folders; a method whose run.json records no learning signal is marked in the table",
    )  # fmt: skip
    for name, help_text in {**TABLE_OUTPUTS, **PICTURE_OUTPUTS, **COPY_OUTPUTS}.items():
        parser.add_argument(
            f"--out-{name.replace('_', '-')}",
            dest=f"out_{name}",
            required=name in TABLE_OUTPUTS,
            type=Path,
            help=help_text,
        )
    parser.add_argument(
        "--reported",
        type=Path,
        default=None,
        help="the paper's numbers (default: workflow/cwgrpo_workflow/resources/reported.json)",
    )
    add_config_arguments(parser)
    parser.epilog = describe_options(TableConfig)


# Output name -> help; each is the flag --out-NAME (underscores as dashes) and a key of write_table's `out`.
TABLE_OUTPUTS = {
    "pdf": "the typeset table, e.g. figures/tiny/table1.pdf",
    "csv": "Table 1 in long format (table1.csv)",
    "tex": "Table 1 in LaTeX (table1.tex)",
    "md": "Table 1 in Markdown (table1.md)",
    "reported_csv": "the paper's numbers beside ours (reported_vs_ours.csv)",
    "reported_md": "the same in Markdown (reported_vs_ours.md)",
    "sensitivity_csv": "each cell under the strict and the paper metric (metric_sensitivity.csv)",
    "sensitivity_md": "the same in Markdown (metric_sensitivity.md)",
    "provenance": "the run identity of the table and its inputs (table1.provenance.json)",
}
# Optional: the same PDF again where the README's `snakemake ... figures/table1.pdf` asks for it (its footer
# names the preset, so the copy cannot pass as another preset's).
COPY_OUTPUTS = {"copy_pdf": "a copy of the typeset table, e.g. figures/table1.pdf"}
# Optional, both or neither: each method's Δ Avg vs GRPO beside the paper's (cwgrpo_workflow.report.table).
PICTURE_OUTPUTS = {
    "avg_pdf": "Table 1's Δ Avg (effects) as a figure, beside the paper's, e.g. figures/tiny/table1_avg.pdf",
    "avg_png": "the same as PNG",
}


def _mark_rows(grid: Any, marked: set[tuple[str, str]], sign: str, note: str) -> Any:
    """``grid`` with ``sign`` after the label of each (size, method) row in ``marked``, and ``note``."""

    def bare(label: str) -> str:  # the label without the marks given before
        return re.sub(r"( [†‡])+$", "", label)

    sections = [
        (
            size,
            [
                [(f"{r[0][0]} {sign}", r[0][1]) if (size, bare(r[0][0])) in marked else r[0], *r[1:]]
                for r in rows
            ],
        )
        for size, rows in grid.sections
    ]
    return dataclasses.replace(grid, sections=sections, notes=[*grid.notes, note])


def mark_silent_rows(grid: Any, cfg: TableConfig, silent: Mapping[tuple[str, str], list[str]]) -> Any:
    """Rows of a method whose runs had no learning signal (``claim_checks.silent_runs``) get a dagger
    and a note saying which run and why: they measure a policy that training did not move."""
    if not silent:
        return grid
    why = "; ".join(
        f"{cfg.size_name(size)} {cfg.method_name(method)} ({', '.join(texts)})"
        for (size, method), texts in sorted(silent.items())
    )
    marked = {(cfg.size_name(size), cfg.method_name(method)) for size, method in silent}
    return _mark_rows(grid, marked, "†", f"† No learning signal in training: {why}.")


def row_counts(frame: pd.DataFrame, cells: pd.DataFrame, columns: list[str]) -> pd.DataFrame:
    """The summaries' ``columns`` summed per Table 1 row (size, method), each at the step the row shows."""
    shown = frame.merge(cells[["size", "method", "step"]].drop_duplicates(), on=["size", "method", "step"])
    return shown.groupby(["size", "method"], sort=False)[columns].sum()


def note_all_truncated(grid: Any, cfg: TableConfig, frame: pd.DataFrame, cells: pd.DataFrame) -> Any:
    """A note naming the rows whose every evaluation sample was cut at max_new_tokens: no answer finished,
    so their accuracy says nothing of the method (raise evaluate's max_new_tokens)."""
    sums = row_counts(frame, cells, ["n_truncated", "n_samples"])
    cut = sums[(sums["n_samples"] > 0) & (sums["n_truncated"] == sums["n_samples"])]
    if cut.empty:
        return grid
    names = "; ".join(f"{cfg.size_name(s)} {cfg.method_name(m)}" for s, m in cut.index)
    note = f"Every evaluation sample of {names} was cut at max_new_tokens: no answer finished (raise evaluate's max_new_tokens)."
    return dataclasses.replace(grid, notes=[*grid.notes, note])


def mark_timed_out_rows(grid: Any, cfg: TableConfig, frame: pd.DataFrame, cells: pd.DataFrame) -> Any:
    """Rows holding answers whose grading ran out of its CPU-time budget (graded wrong) get a double
    dagger and a note with the counts: cells a larger budget could change."""
    late = row_counts(frame, cells, ["n_timed_out"])["n_timed_out"]
    late = late[late > 0]
    if late.empty:
        return grid
    counts = "; ".join(f"{cfg.size_name(s)} {cfg.method_name(m)}: {int(n)}" for (s, m), n in late.items())
    note = (
        f"‡ Answers whose grading ran out of its budget of CPU time, counted wrong: {counts} (evaluate's "
        "grading_timeout_s sets the budget)."
    )
    return _mark_rows(grid, {(cfg.size_name(s), cfg.method_name(m)) for s, m in late.index}, "‡", note)


def write_table(
    cfg: TableConfig,
    summaries: list[Path],
    out: dict[str, Path],
    reported_path: Path | None = None,
    runs: list[Path] | None = None,
) -> dict[str, Path]:
    """Compute and write every output of ``cwgrpo table`` to ``out`` (keys: :data:`TABLE_OUTPUTS`)."""
    if len(set(PICTURE_OUTPUTS) & set(out)) == 1:
        raise ConfigError("--out-avg-pdf and --out-avg-png go together: give both or neither")
    frame = load_summaries(summaries, cfg)
    cells, per_seed = build_table1(frame, cfg)
    reported = load_reported(reported_path)
    silent = silent_runs(list(runs or []))
    grid = mark_silent_rows(table_grid(cells, cfg, reported), cfg, silent)
    grid = mark_timed_out_rows(grid, cfg, frame, cells)
    grid = note_all_truncated(grid, cfg, frame, cells)
    cmp = reported_vs_ours(cells, per_seed, cfg, reported)
    footer = footer_text(input_identity(summaries), config_hash(cfg), preset=cfg.preset)
    write_csv(out["csv"], cells)
    write_text(out["tex"], grid_latex(grid))
    write_text(out["md"], grid_markdown(grid))
    write_csv(out["reported_csv"], cmp)
    write_text(out["reported_md"], reported_markdown(cmp, cfg))
    sens = sensitivity_frame(summaries, cfg)
    write_csv(out["sensitivity_csv"], sens)
    write_text(out["sensitivity_md"], sensitivity_markdown(sens, cfg))
    write_json(out["provenance"], report_record({"command": "table"}, cfg, summaries, []))
    grid_pdf(grid, out["pdf"], footer)
    if "copy_pdf" in out:
        with atomic_path(out["copy_pdf"], suffix=".pdf") as tmp:
            shutil.copyfile(out["pdf"], tmp)
    if "avg_png" in out:
        from cwgrpo_workflow.report.style import save_figure

        save_figure(avg_figure(cells, cfg, reported, footer, set(silent)), out["avg_pdf"], out["avg_png"])
    return dict(out)


# every other path argument is read (cwgrpo.cli)
OUTPUTS = tuple(f"out_{name}" for name in {**TABLE_OUTPUTS, **PICTURE_OUTPUTS, **COPY_OUTPUTS})


def run(args: argparse.Namespace) -> int:
    cfg = command_options(TableConfig, args, OUTPUTS)
    outputs = {name[4:]: path for name in OUTPUTS if (path := getattr(args, name))}
    out = write_table(cfg, list(args.summaries), outputs, args.reported, list(args.runs))
    log.info("wrote %s", ", ".join(str(p) for p in out.values()))
    return 0
