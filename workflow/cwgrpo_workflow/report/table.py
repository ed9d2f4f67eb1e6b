"""``cwgrpo table``: Table 1 (PDF, CSV, TeX, Markdown) and the paper's numbers beside ours.

Rows per size: the base model (method ``base`` at step 0), then the ``methods`` option and any other method
label present at the configured step. A cell is the mean over seeds of the summaries' avg@k (pass@1 when
k = 1) under their primary metric; the table's notes (:func:`table_render.table_grid`) say how intervals,
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
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from cwgrpo.configs import ConfigError, add_config_arguments, config_hash, describe_options
from cwgrpo.io import ResultFileError, atomic_path, write_csv, write_json, write_text
from cwgrpo.stats import Effect, mean_ci, mean_normal_ci, normal_ci, seed_effect
from cwgrpo_workflow.report.claim_checks import report_record, silent_runs
from cwgrpo_workflow.report.load import (
    add_input_arguments,
    command_options,
    load_reported,
    load_summaries,
    per_seed_accuracy,
)
from cwgrpo_workflow.report.options import AVG, TableConfig
from cwgrpo_workflow.report.provenance import footer_text, input_identity
from cwgrpo_workflow.report.table_paper import avg_figure, reported_markdown, reported_vs_ours
from cwgrpo_workflow.report.table_render import grid_latex, grid_markdown, grid_pdf, table_grid
from cwgrpo_workflow.report.table_sensitivity import sensitivity_frame, sensitivity_markdown

log = logging.getLogger(__name__)


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
# Optional, both or neither: each method's Δ Avg vs GRPO beside the paper's (cwgrpo_workflow.report.table_paper).
PICTURE_OUTPUTS = {
    "avg_pdf": "Table 1's Δ Avg (effects) as a figure, beside the paper's, e.g. figures/tiny/table1_avg.pdf",
    "avg_png": "the same as PNG",
}


def mark_silent_rows(grid: Any, cfg: TableConfig, runs: list[Path]) -> Any:
    """Rows of a method whose runs had no learning signal (``claim_checks.silent_runs``) get a dagger
    and a note saying which run and why: they measure a policy that training did not move."""
    silent = silent_runs(runs)
    if not silent:
        return grid
    marked = {(cfg.size_name(size), cfg.method_name(method)) for size, method in silent}
    sections = [
        (size, [[(f"{r[0][0]} †", r[0][1]) if (size, r[0][0]) in marked else r[0], *r[1:]] for r in rows])
        for size, rows in grid.sections
    ]
    why = "; ".join(
        f"{cfg.size_name(size)} {cfg.method_name(method)} ({', '.join(texts)})"
        for (size, method), texts in sorted(silent.items())
    )
    note = f"† No learning signal in training: {why}."
    return dataclasses.replace(grid, sections=sections, notes=[*grid.notes, note])


def write_table(
    cfg: TableConfig,
    summaries: list[Path],
    out: dict[str, Path],
    reported_path: Path | None = None,
    runs: list[Path] | None = None,
) -> dict[str, Path]:
    """Compute and write every output of ``cwgrpo table`` to ``out`` (keys: :data:`TABLE_OUTPUTS`)."""
    missing = sorted(set(TABLE_OUTPUTS) - set(out))
    if missing:
        raise ValueError(f"write_table: no path given for output(s) {missing}")
    if len(set(PICTURE_OUTPUTS) & set(out)) == 1:
        raise ConfigError("--out-avg-pdf and --out-avg-png go together: give both or neither")
    frame = load_summaries(summaries, cfg)
    cells, per_seed = build_table1(frame, cfg)
    reported = load_reported(reported_path)
    grid = mark_silent_rows(table_grid(cells, cfg, reported), cfg, list(runs or []))
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

        save_figure(avg_figure(cells, cfg, reported, footer), out["avg_pdf"], out["avg_png"])
    return dict(out)


# every other path argument is read (cwgrpo.cli)
OUTPUTS = tuple(f"out_{name}" for name in {**TABLE_OUTPUTS, **PICTURE_OUTPUTS, **COPY_OUTPUTS})


def run(args: argparse.Namespace) -> int:
    cfg = command_options(TableConfig, args, OUTPUTS)
    outputs = {name: getattr(args, f"out_{name}") for name in TABLE_OUTPUTS}
    outputs |= {
        name: getattr(args, f"out_{name}")
        for name in (*PICTURE_OUTPUTS, *COPY_OUTPUTS)
        if getattr(args, f"out_{name}")
    }
    out = write_table(cfg, list(args.summaries), outputs, args.reported, list(args.runs))
    log.info("wrote %s", ", ".join(str(p) for p in out.values()))
    return 0
