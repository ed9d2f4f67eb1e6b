"""``cwgrpo table``: Table 1 (PDF, CSV, TeX, Markdown) and the paper's numbers beside ours.

Rows per size: the base model (method ``base`` at step 0), then GRPO, Clip-Cov, CW-GRPO (the
``methods`` option) and any other method label present at the configured step. Columns: the benchmarks,
``Avg`` (the mean of the benchmark accuracies, per seed, then over seeds) and ``Δ Avg`` (the method's
Avg minus GRPO's, paired by seed). The metric is the summaries' avg@k (pass@1 when k = 1), graded by
the summaries' primary metric (``primary_metric``: strict, or paper for the paper preset). A cell is
the mean over seeds; with two or more seeds it shows ``± the 95 % t-interval half-width`` over seeds,
with one seed and k > 1 the summary's own interval over problems. Bold: best in its column within a
size, judged on the displayed (rounded) values, so ties are all bold.

Outputs::

    OUT_DIR/table1.csv              long format, one row per (size, method, benchmark|avg), fractions
                                    exactly as the summaries store them, plus CI, best flag and Δ
    OUT_DIR/table1.tex, table1.md   the typeset table (booktabs) and its Markdown twin
    OUT_DIR/reported_vs_ours.{csv,md}  the paper's numbers and ours side by side, in percent
    OUT_DIR/metric_sensitivity.{csv,md}  each cell under the strict and the paper metric, their
                                    difference and the share of samples that disagree
    OUT_DIR/table1.provenance.json  the run identity of this table and of every input file
    OUT_PDF                         the table drawn with matplotlib on one page, with a provenance footer

Example::

    cwgrpo table --summaries results/tiny/eval/*/*/*/step*/*.summary.json \\
        --out-pdf figures/table1.pdf --out-dir results/tiny --set preset=tiny --set step=100
"""

from __future__ import annotations

import argparse
import dataclasses
import logging
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from cwgrpo.configs import ConfigError, add_config_arguments, config_from_args, config_hash, describe_options
from cwgrpo.io import ResultFileError, atomic_path, check_outputs_not_inputs, write_json, write_text
from cwgrpo.report.results import (
    AVG,
    Effect,
    ReportConfig,
    footer_text,
    input_identity,
    load_reported,
    mean_ci,
    per_seed_accuracy,
    reported_table1,
    seed_effect,
    summaries_frame,
)
from cwgrpo.report.sensitivity import sensitivity_frame, sensitivity_markdown

log = logging.getLogger(__name__)
Z95 = 1.959963984540054  # normal quantile for a 95 % interval from a standard error


@dataclass
class TableConfig(ReportConfig):
    decimals: int = field(
        default=1, metadata={"help": "decimals of the percentages shown (the paper uses 1)"}
    )
    effect_methods: list[str] = field(
        default_factory=lambda: ["cw_grpo", "clip_cov"],
        metadata={
            "help": "methods whose effect (method minus reference_method) is compared with the paper's"
        },
    )

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.decimals < 0:
            raise ConfigError(f"decimals: expected an integer >= 0, got {self.decimals}")


# -- computing the table -----------------------------------------------------------------------------
def _single_seed_ci(sel: pd.DataFrame, benchmarks: list[str], col: str) -> tuple[float, float]:
    """CI of one seed's cell from the summaries' own interval over problems (k > 1); NaN if none."""
    rows = sel.set_index("benchmark")
    if col != AVG:
        lo, hi = rows.loc[col, "accuracy_ci_lo"], rows.loc[col, "accuracy_ci_hi"]
        if np.isfinite(lo) and np.isfinite(hi):
            return float(lo), float(hi)
        se = rows.loc[col, "accuracy_se"]
        acc = rows.loc[col, "accuracy"]
        return (acc - Z95 * se, acc + Z95 * se) if np.isfinite(se) else (math.nan, math.nan)
    se = rows.loc[benchmarks, "accuracy_se"].to_numpy(dtype=float)
    if not np.all(np.isfinite(se)):
        return (math.nan, math.nan)
    avg = float(rows.loc[benchmarks, "accuracy"].mean())
    half = Z95 * math.sqrt(float(np.sum(se**2))) / len(benchmarks)  # benchmarks are independent samples
    return (avg - half, avg + half)


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


# -- formatting --------------------------------------------------------------------------------------
def _pct(x: float, d: int, sign: bool = False) -> str:
    if not np.isfinite(x):
        return "—"
    s = f"{100 * x:+.{d}f}" if sign else f"{100 * x:.{d}f}"
    return s.replace("-", "−")


def format_cell(mean: float, lo: float, hi: float, d: int, sign: bool = False) -> str:
    """``84.0 ± 9.9`` (percent; the half-width of the interval) or ``84.0`` without an interval."""
    text = _pct(mean, d, sign)
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


def table_grid(cells: pd.DataFrame, cfg: TableConfig) -> Grid:
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
    if cfg.preset == "tiny":
        notes.append(
            "Tiny preset: synthetic benchmarks (named after the paper benchmark each stands in for) and "
            "1–2.4M-parameter models; the numbers are not comparable with the paper's."
        )
    if cfg.preset == "real":
        notes.append(
            "Real preset: a small pretrained chat model (SmolLM2-135M-Instruct) trained for a few steps and "
            "evaluated on a sample of CHAMP; it checks the pipeline on a real model, and its accuracies say "
            "nothing about the paper's claims."
        )
    title = f"Table 1: accuracy (%) at step {cfg.step}"
    return Grid(header, sections, notes, title)


def grid_markdown(grid: Grid) -> str:
    def cell(text: str, bold: bool) -> str:
        return f"**{text}**" if bold else text

    lines = [f"# {grid.title}", "", "| Size | " + " | ".join(grid.header) + " |"]
    lines.append("|---|" + "|".join(["---"] + ["---:"] * (len(grid.header) - 1)) + "|")
    for size, rows in grid.sections:
        for i, row in enumerate(rows):
            lines.append(
                "| " + (size if i == 0 else "") + " | " + " | ".join(cell(t, b) for t, b in row) + " |"
            )
    lines += ["", *grid.notes, ""]
    return "\n".join(lines)


_TEX_SUBS = {
    "\\": r"\textbackslash{}", "&": r"\&", "%": r"\%", "$": r"\$", "#": r"\#", "_": r"\_", "{": r"\{",
    "}": r"\}", "~": r"\textasciitilde{}", "^": r"\textasciicircum{}", "≈": r"$\approx$", "±": r"$\pm$",
    "Δ": r"$\Delta$", "−": r"$-$", "–": "--", "—": "---",
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

    from cwgrpo.report.style import FOOTER_COLOR, FOOTER_FONTSIZE, apply_style, wrap_footer

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
    ``cfg.effect_methods`` (both presets). ``comparison == "absolute"``: every cell (paper preset only;
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

        if cfg.preset == "paper":  # tiny and real: effects only
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


def _fmt_pp(x: Any, sign: bool = False) -> str:
    if x is None or (isinstance(x, float) and not np.isfinite(x)):
        return "—"
    return (f"{x:+.1f}" if sign else f"{x:.1f}").replace("-", "−")


def reported_markdown(cmp: pd.DataFrame, cfg: TableConfig) -> str:
    lines = ["# The paper's reported numbers and ours", ""]
    lines.append(
        f"Paper: Table 1 of Wang et al., ACL 2026 (arXiv 2605.11538), step {int(cmp['paper_step'].iloc[0])}. "
        f"Ours: step {cfg.step}, accuracy in percent, mean over seeds with the 95 % t-interval over seeds "
        "(effects paired by seed)."
    )
    lines.append("")
    if cfg.preset == "tiny":
        lines.append(
            "**Tiny preset: only effects are compared.** The tiny preset trains 1–2.4M-parameter models on "
            "synthetic arithmetic benchmarks that stand in for the paper's; their absolute accuracies are "
            "not comparable with the paper's, so this table compares *effects* — a method's accuracy "
            f"minus {cfg.method_name(cfg.reference_method)}'s, in points — and whether each has the same "
            "sign as the paper's."
        )
        lines.append("")
    elif cfg.preset == "real":
        lines.append(
            "**Real preset: only effects are compared.** A 135M-parameter pretrained model trained for a few "
            "steps and evaluated on a sample of CHAMP problems stands in for the paper's runs; its effects are "
            "noise-sized, so a matching or opposite sign means nothing."
        )
        lines.append("")
    else:
        lines.append(
            "The paper scores one sample per problem (its 1.5B base row averages several, from Open-RS); "
            "ours use the metric named in table1.md (avg@k), so small differences are expected from sampling."
        )
        lines.append("")
    eff = cmp[cmp["comparison"] == "effect"]
    if not eff.empty:
        lines += [
            "## Effects (method minus reference, points)",
            "",
            "| Size | Effect | Benchmark (ours ≙ paper) | Paper | Ours (95 % CI) | Ours − paper | Same sign |",
            "|---|---|---|---:|---:|---:|---|",
        ]
        for _, r in eff.iterrows():
            ci = (
                f" [{_fmt_pp(r['ours_ci95_lo_pct'], True)}, {_fmt_pp(r['ours_ci95_hi_pct'], True)}]"
                if np.isfinite(r["ours_ci95_lo_pct"])
                else " (CI unavailable)"
            )
            same = {True: "yes", False: "**no**", None: "—"}[r["same_sign"]]
            size = r["size_display"] + (f" (≙ {r['paper_size']})" if r["size"] != r["paper_size"] else "")
            bench = r["benchmark_display"] + (
                f" ≙ {r['paper_benchmark']}" if r["benchmark"] != r["paper_benchmark"] else ""
            )
            lines.append(
                f"| {size} | {r['method_display']} | {bench} | {_fmt_pp(r['paper_pct'], True)} | "
                f"{_fmt_pp(r['ours_pct'], True)}{ci} | {_fmt_pp(r['difference_pct'], True)} | {same} |"
            )
        lines.append("")
    absolute = cmp[cmp["comparison"] == "absolute"]
    if not absolute.empty:
        lines += [
            "## Absolute accuracy (%)",
            "",
            "| Size | Method | Benchmark | Paper | Ours (95 % CI) | Ours − paper |",
            "|---|---|---|---:|---:|---:|",
        ]
        for _, r in absolute.iterrows():
            ci = (
                f" [{_fmt_pp(r['ours_ci95_lo_pct'])}, {_fmt_pp(r['ours_ci95_hi_pct'])}]"
                if np.isfinite(r["ours_ci95_lo_pct"])
                else ""
            )
            lines.append(
                f"| {r['size_display']} | {r['method_display']} | {r['benchmark_display']} | "
                f"{_fmt_pp(r['paper_pct'])} | {_fmt_pp(r['ours_pct'])}{ci} | {_fmt_pp(r['difference_pct'], True)} |"
            )
        lines.append("")
    notes = sorted({n for n in cmp["note"] if n})
    if notes:
        lines += ["Notes: " + "; ".join(notes) + ".", ""]
    return "\n".join(lines)


# -- command -----------------------------------------------------------------------------------------
def configure_parser(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--summaries",
        nargs="+",
        action="extend",
        required=True,
        type=Path,
        help="evaluation *.summary.json files; repeatable",
    )
    parser.add_argument(
        "--out-pdf", required=True, type=Path, help="the typeset table, e.g. figures/table1.pdf"
    )
    parser.add_argument(
        "--out-dir", required=True, type=Path, help="folder for table1.* and reported_vs_ours.*"
    )
    parser.add_argument(
        "--reported",
        type=Path,
        default=None,
        help="the paper's numbers (default: cwgrpo/resources/reported.json)",
    )
    add_config_arguments(parser)
    parser.epilog = describe_options(TableConfig)


TABLE_FILES = (
    "table1.csv",
    "table1.tex",
    "table1.md",
    "reported_vs_ours.csv",
    "reported_vs_ours.md",
    "table1.provenance.json",
)


def write_table(
    cfg: TableConfig, summaries: list[Path], out_pdf: Path, out_dir: Path, reported_path: Path | None = None
) -> dict[str, Path]:
    """Compute and write every output of ``cwgrpo table``; returns their paths by name."""
    from cwgrpo.provenance import provenance

    frame = summaries_frame(summaries)
    cells, per_seed = build_table1(frame, cfg)
    grid = table_grid(cells, cfg)
    reported = load_reported(reported_path)
    cmp = reported_vs_ours(cells, per_seed, cfg, reported)
    identity = input_identity(summary_paths=summaries)
    chash = config_hash(cfg)
    out = {
        "csv": out_dir / "table1.csv",
        "tex": out_dir / "table1.tex",
        "md": out_dir / "table1.md",
        "cmp_csv": out_dir / "reported_vs_ours.csv",
        "cmp_md": out_dir / "reported_vs_ours.md",
        "sens_csv": out_dir / "metric_sensitivity.csv",
        "sens_md": out_dir / "metric_sensitivity.md",
        "provenance": out_dir / "table1.provenance.json",
        "pdf": out_pdf,
    }
    write_text(out["csv"], cells.to_csv(index=False))
    write_text(out["tex"], grid_latex(grid))
    write_text(out["md"], grid_markdown(grid))
    write_text(out["cmp_csv"], cmp.to_csv(index=False))
    write_text(out["cmp_md"], reported_markdown(cmp, cfg))
    sens = sensitivity_frame(summaries, cfg)
    write_text(out["sens_csv"], sens.to_csv(index=False))
    write_text(out["sens_md"], sensitivity_markdown(sens, cfg))
    write_json(
        out["provenance"],
        {
            "command": "table",
            "config": dataclasses.asdict(cfg),
            "config_hash": chash,
            "provenance": provenance(config_hash=chash),
            "inputs": identity,
        },
    )
    grid_pdf(grid, out_pdf, footer_text(identity, chash))
    return out


def run(args: argparse.Namespace) -> int:
    cfg = config_from_args(TableConfig, args)
    outputs = [args.out_pdf, *(args.out_dir / n for n in TABLE_FILES)]
    check_outputs_not_inputs([*args.summaries, *([args.reported] if args.reported else [])], outputs)
    out = write_table(cfg, list(args.summaries), args.out_pdf, args.out_dir, args.reported)
    log.info("wrote %s", ", ".join(str(p) for p in out.values()))
    return 0
