"""``cwgrpo figure``: the entropy, checkpoint, covariance, training-curve and kept-share figures (PDF + PNG).

``entropy`` and ``training`` (``--runs``): per-step curves, mean over seeds with a band; ``checkpoints``
(``--summaries``): accuracy at every evaluated step of two benchmarks, the paper's overlaid with
``show_reported``; ``covariance`` (``--runs``): the sampled token covariances pooled over steps and seeds
(histogram, quantiles, kernel weight); ``kept_share`` (``--runs``): the share of each outcome's push the
kernel keeps, against the group's success count. Example::

    cwgrpo figure --kind entropy --runs results/tiny/runs/*/*/seed* \\
        --out-pdf figures/tiny/entropy.pdf --out-png figures/tiny/entropy.png
"""

from __future__ import annotations

import argparse
import dataclasses
import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from cwgrpo.configs import ConfigError, add_config_arguments, config_hash, describe_options
from cwgrpo.io import ResultFileError, read_json
from cwgrpo.stats import t_band
from cwgrpo_workflow.report.load import (
    add_input_arguments,
    command_options,
    cov_samples,
    load_reported,
    load_summaries,
    metrics_frame,
    need_columns,
    reported_checkpoints,
    run_info,
)
from cwgrpo_workflow.report.options import PAPER_BENCHMARKS, ReportConfig
from cwgrpo_workflow.report.provenance import footer_text, input_identity

log = logging.getLogger(__name__)
KINDS = ("entropy", "checkpoints", "covariance", "training", "kept_share")
BANDS = ("minmax", "ci95")
BAND_TEXT = {"minmax": "band: min–max\nover seeds", "ci95": "band: 95 % t-interval\nover seeds"}
# The paper's covariance quantiles (1.5B): about ±12 at the 0.01 % tails and ±0.3 at the 40 % quantile.
PAPER_COV_QUANTILES = ((1e-4, -12.0), (0.4, -0.3), (0.6, 0.3), (1 - 1e-4, 12.0))


@dataclass
class FigureConfig(ReportConfig):
    band: str = field(default="minmax", metadata={"help": "band over seeds: minmax or ci95 (t-interval)"})
    smooth: int = field(
        default=1,
        metadata={"help": "moving-average window (steps) applied per seed to per-step curves; 1 = none"},
    )
    checkpoint_benchmarks: list[str] = field(
        default_factory=lambda: ["math500", "olympiadbench"],
        metadata={
            "help": "paper benchmarks of the checkpoint figure; ours are found through their mirrors "
            "(carried by the summaries from the data manifests, or benchmark_mirrors)"
        },
    )
    max_scatter_points: int = field(
        default=2000, metadata={"help": "(cov, weight) samples drawn per method and size in the scatter"}
    )
    sample_seed: int = field(default=0, metadata={"help": "seed of the scatter's subsample"})
    show_reported: bool | None = field(
        default=None, metadata={"help": "overlay the paper's numbers (default: only for preset kind paper)"}
    )

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.band not in BANDS:
            raise ConfigError(f"band: expected one of {list(BANDS)}, got {self.band!r}")
        if self.smooth < 1:
            raise ConfigError(f"smooth: expected a window of at least 1 step, got {self.smooth}")
        bad = [b for b in self.checkpoint_benchmarks if b not in PAPER_BENCHMARKS]
        if bad:
            raise ConfigError(f"checkpoint_benchmarks: {bad} not among {list(PAPER_BENCHMARKS)}")
        if self.show_reported is None:
            self.show_reported = self.kind == "paper"


# -- helpers -----------------------------------------------------------------------------------------
def seed_band(sub: pd.DataFrame, column: str, cfg: FigureConfig) -> pd.DataFrame:
    """Per step: mean over seeds and the band (columns ``step, mean, lo, hi, n``) of one method's runs."""
    piv = sub.pivot(index="step", columns="seed", values=column).sort_index().astype(float)
    if cfg.smooth > 1:
        piv = piv.rolling(cfg.smooth, min_periods=1).mean()
    n = piv.notna().sum(axis=1)
    mean = piv.mean(axis=1)
    if cfg.band == "minmax":
        lo, hi = piv.min(axis=1), piv.max(axis=1)
    else:
        lo, hi = t_band(piv)
    out = pd.DataFrame({"mean": mean, "lo": lo, "hi": hi, "n": n}).reset_index()
    return out[out["n"] > 0]


def _band_title(cfg: FigureConfig, frame: pd.DataFrame) -> str:
    """The legend's note on the band, or nothing when every line is one seed (there is no band)."""
    several = frame.groupby(["size", "method"])["seed"].nunique().max() > 1
    return BAND_TEXT[cfg.band] if several else ""


def _legend(fig, axes: np.ndarray, title: str = "") -> None:
    """One legend for the whole figure, outside on the right; entries deduplicated by label."""
    handles: dict[str, object] = {}
    for ax in axes.flat:
        for h, label in zip(*ax.get_legend_handles_labels(), strict=True):
            handles.setdefault(label, h)
    if handles:
        fig.legend(list(handles.values()), list(handles), loc="outside right upper", title=title or None)


def _footer(cfg: FigureConfig, kind: str, summaries: Sequence[Path] = (), runs: Sequence[Path] = ()) -> str:
    identity = input_identity(summaries, runs)
    return footer_text(identity, config_hash(cfg), extra=f"figure {kind}", preset=cfg.preset)


def _curves(ax, frame: pd.DataFrame, column: str, cfg: FigureConfig) -> None:
    for method in cfg.order_methods(frame["method"]):
        sub = frame[frame["method"] == method]
        if sub[column].isna().all():
            continue
        agg = seed_band(sub, column, cfg)
        color = cfg.method_colour(method)
        n_seeds = sub["seed"].nunique()
        label = f"{cfg.method_name(method)} ({n_seeds} seed{'s' if n_seeds != 1 else ''})"
        ax.plot(agg["step"], agg["mean"], color=color, label=label)
        ax.fill_between(agg["step"], agg["lo"], agg["hi"], color=color, alpha=0.2, lw=0)


# -- the four kinds ----------------------------------------------------------------------------------
def _plot_steps(
    cfg: FigureConfig,
    runs: Sequence[Path],
    panels: Sequence[tuple[str, str]],
    what: str,
    label_of_size: Mapping[str, str] | None = None,
):
    """Per-step curves of each ``(column, y label)`` in ``panels``, one row per size; one panel puts the
    sizes side by side instead. ``label_of_size`` replaces the first panel's label per size."""
    from cwgrpo_workflow.report.style import integer_steps, new_figure

    m = metrics_frame(runs)
    need_columns(m, *(column for column, _ in panels))
    sizes = cfg.order_sizes(m["size"])
    footer = _footer(cfg, what, runs=runs)
    if len(panels) == 1:
        fig, axes = new_figure(1, len(sizes), 3.2 * len(sizes) + 1.6, 2.6, footer)
        axes = axes.T
    else:
        fig, axes = new_figure(len(sizes), len(panels), 8.0, 2.4, footer)
    for row, size in zip(axes, sizes, strict=True):
        for i, (ax, (column, ylabel)) in enumerate(zip(row, panels, strict=True)):
            _curves(ax, m[m["size"] == size], column, cfg)
            if i == 0 and label_of_size and size in label_of_size:
                ylabel = label_of_size[size]
            ax.set(title=cfg.size_name(size), xlabel="optimiser step", ylabel=ylabel)
            integer_steps(ax)
    _legend(fig, axes, _band_title(cfg, m))
    return fig


def plot_entropy(cfg: FigureConfig, runs: Sequence[Path]):
    panel = (cfg.entropy_key, "policy entropy (nats / token)")
    return _plot_steps(cfg, runs, [panel], f"entropy ({cfg.entropy_key})")


BOUNDED_REWARDS = ("accuracy", "accuracy_released", "format", "number_accuracy")  # each 0 or 1


def reward_labels(runs: Sequence[Path]) -> dict[str, str]:
    """Per size, what its reward axis holds: the weighted sum of the runs' reward functions, with its range
    where every one is a 0/1 reward (accuracy + format reaches 2 where accuracy alone reaches 1)."""
    makeup: dict[str, set[tuple[tuple[str, float], ...]]] = {}
    for run in runs:
        info = read_json(Path(run) / "run.json")
        config = info.get("config") or {}
        funcs = list((config.get("job") or {}).get("reward_funcs") or [])
        weights = list((config.get("trl") or {}).get("reward_weights") or [1.0] * len(funcs))
        makeup.setdefault(run_info(run)["size"], set()).add(tuple(zip(funcs, weights, strict=False)))
    labels = {}
    for size, found in makeup.items():
        if len(found) != 1 or not next(iter(found)):
            continue
        parts = next(iter(found))
        names = " + ".join(name if w == 1 else f"{w:g}×{name}" for name, w in parts)
        top = sum(w for _, w in parts) if all(n in BOUNDED_REWARDS and w >= 0 for n, w in parts) else None
        labels[size] = f"mean reward: {names}" + (f" (0 to {top:g})" if top is not None else "")
    return labels


def plot_training(cfg: FigureConfig, runs: Sequence[Path]):
    panels = [
        ("reward", "mean reward (per completion)"),
        ("completions/mean_length", "mean completion length (tokens)"),
    ]
    return _plot_steps(cfg, runs, panels, "training", reward_labels(runs))


def _mirror_of(cfg: FigureConfig, present: Sequence[str], key: str) -> str:
    hits = [b for b in sorted(set(present)) if cfg.mirror(b) == key]
    if not hits:
        raise ResultFileError(
            f"no summaries for a benchmark mirroring {key!r} (benchmarks present: {sorted(set(present))}; "
            "a benchmark's mirror comes from its data manifest, or set benchmark_mirrors)"
        )
    return hits[0]


def plot_checkpoints(cfg: FigureConfig, summaries: Sequence[Path]):
    from cwgrpo_workflow.report.style import integer_steps, new_figure, percent_axis

    frame = load_summaries(summaries, cfg)
    sizes = cfg.order_sizes(frame["size"])
    keys = list(cfg.checkpoint_benchmarks)
    ours = {k: _mirror_of(cfg, frame["benchmark"], k) for k in keys}
    reported = reported_checkpoints(load_reported()) if cfg.show_reported else None
    fig, axes = new_figure(
        len(sizes), len(keys), 3.2 * len(keys) + 1.8, 2.8, _footer(cfg, "checkpoints", summaries=summaries)
    )
    for row, size in enumerate(sizes):
        for col, key in enumerate(keys):
            ax = axes[row, col]
            sel = frame[(frame["size"] == size) & (frame["benchmark"] == ours[key])]
            if sel.empty:
                raise ResultFileError(f"no summaries for size={size} benchmark={ours[key]}")
            _checkpoint_panel(ax, sel, cfg)
            if reported is not None:
                _overlay_reported(ax, reported, cfg, size, key)
            ax.axvline(cfg.step, color="0.55", ls=":", lw=0.8, label=f"Table 1 step ({cfg.step})")
            ax.set(
                title=f"{cfg.size_name(size)}\n{cfg.benchmark_name(ours[key])}",
                xlabel="training step",
                ylabel="accuracy (%)",
            )
            integer_steps(ax)
            percent_axis(ax)
    bars = _band_title(cfg, frame).replace("band", "bars")
    _legend(fig, axes, f"mean over seeds;\n{bars}" if bars else "one seed: no bars")
    return fig


def _checkpoint_panel(ax, sel: pd.DataFrame, cfg: FigureConfig) -> None:
    methods = cfg.order_methods(sel["method"])
    for method in [m for m in methods if m != cfg.base_method]:
        sub = sel[sel["method"] == method].assign(pct=lambda f: 100 * f["accuracy"])
        color = cfg.method_colour(method)
        agg = seed_band(sub, "pct", dataclasses.replace(cfg, smooth=1))  # never smooth across checkpoints
        yerr = np.vstack([agg["mean"] - agg["lo"], agg["hi"] - agg["mean"]])
        yerr = np.nan_to_num(yerr)  # one seed: no bar
        # Bars without a label and the line with one: the legend lists lines in plotting order.
        ax.errorbar(agg["step"], agg["mean"], yerr=yerr, color=color, fmt="none", capsize=2, label="_bars")
        ax.plot(agg["step"], agg["mean"], color=color, marker="o", label=cfg.method_name(method))
    if cfg.base_method in methods:  # after the methods, so that the legend lists them first
        base = 100 * sel.loc[sel["method"] == cfg.base_method, "accuracy"].mean()
        label = f"{cfg.method_name(cfg.base_method)} (step {cfg.base_step})"
        ax.axhline(base, color=cfg.method_colour(cfg.base_method), ls=":", lw=1.2, label=label)


def _overlay_reported(ax, reported: pd.DataFrame, cfg: FigureConfig, size: str, key: str) -> None:
    psize = cfg.size_mirror(size)
    rep = reported[(reported["size"] == psize) & (reported["benchmark"] == key)]
    for method in cfg.order_methods(rep["method"]):
        r = rep[rep["method"] == method].sort_values("step")
        ax.plot(
            r["step"], r["value"], color=cfg.method_colour(method), ls="--", marker="o", mfc="white", lw=1.0,
            label=f"{cfg.method_name(method)} (paper)",
        )  # fmt: skip


def _pooled_cov(runs: Sequence[Path]) -> dict[tuple[str, str], tuple[np.ndarray, np.ndarray]]:
    """(size, method) -> (cov, weight) pooled over the steps and seeds of ``cov_samples.jsonl``."""
    parts: dict[tuple[str, str], list[tuple[np.ndarray, np.ndarray]]] = {}
    for run_dir in runs:
        info = run_info(run_dir)
        records = cov_samples(run_dir)
        if not records:
            log.warning("%s/cov_samples.jsonl is empty; run left out of the covariance figure", run_dir)
        for rec in records:
            parts.setdefault((info["size"], info["method"]), []).append((rec["cov"], rec["weight"]))
    if not parts:
        raise ResultFileError(f"every cov_samples.jsonl of the runs {[str(r) for r in runs]} is empty")
    return {
        k: (np.concatenate([c for c, _ in v]), np.concatenate([w for _, w in v])) for k, v in parts.items()
    }


def plot_covariance(cfg: FigureConfig, runs: Sequence[Path]):
    from scipy.special import expit, logit

    from cwgrpo_workflow.report.style import linthresh, new_figure, symlog_edges, symlog_ticks

    pooled = _pooled_cov(runs)
    sizes = cfg.order_sizes({s for s, _ in pooled})
    rng = np.random.default_rng(cfg.sample_seed)
    levels = expit(np.linspace(logit(1e-4), logit(1 - 1e-4), 201))
    fig, axes = new_figure(len(sizes), 3, 10.5, 2.8, _footer(cfg, "covariance", runs=runs))
    for row, size in enumerate(sizes):
        methods = cfg.order_methods(m for s, m in pooled if s == size)
        all_cov = np.concatenate([pooled[(size, m)][0] for m in methods])
        lt = linthresh(all_cov)
        edges = symlog_edges(lt, float(np.nanmax(np.abs(all_cov))))
        ax_h, ax_q, ax_w = axes[row]
        for method in methods:
            cov, weight = pooled[(size, method)]
            color, label = cfg.method_colour(method), cfg.method_name(method)
            counts, _ = np.histogram(cov, bins=edges)
            share = counts / max(cov.size, 1)
            ax_h.stairs(np.where(share > 0, share, np.nan), edges, color=color, label=label)
            ax_q.plot(levels, np.quantile(cov, levels), color=color, label=label)
            ok = np.isfinite(weight)
            idx = np.flatnonzero(ok)
            if idx.size > cfg.max_scatter_points:
                idx = rng.choice(idx, cfg.max_scatter_points, replace=False)
            ax_w.scatter(
                cov[idx], weight[idx], s=3, alpha=0.35, color=color, lw=0, rasterized=True, label=label
            )
        if cfg.show_reported and cfg.size_mirror(size) == "1.5b":
            q, v = zip(*PAPER_COV_QUANTILES, strict=True)
            ax_q.scatter(q, v, marker="x", color="black", zorder=5, label="paper, 1.5B (approx.)")
        ax_h.set_xscale("symlog", linthresh=lt)
        symlog_ticks(ax_h.xaxis, lt, per_side=2)
        ax_h.set_yscale("log")
        ax_q.set_xscale("logit")
        ax_q.set_yscale("symlog", linthresh=lt)
        symlog_ticks(ax_q.yaxis, lt, per_side=3)
        ax_w.set_xscale("symlog", linthresh=lt)
        symlog_ticks(ax_w.xaxis, lt, per_side=2)
        for ax, part, xlabel, ylabel in (
            (ax_h, "distribution", f"token covariance c (symlog, linear within ±{lt:g})", "share of sampled tokens per bin"),
            (ax_q, "quantiles (both tails)", "quantile level (logit scale)", "covariance quantile c_q (symlog)"),
            (ax_w, "kernel weight", "token covariance c (symlog)", "kernel weight w̃ (dimensionless)"),
        ):  # fmt: skip
            ax.set(title=f"{cfg.size_name(size)} · {part}", xlabel=xlabel, ylabel=ylabel)
    _legend(fig, axes, "samples pooled\nover steps and seeds")
    return fig


def plot_kept_share(cfg: FigureConfig, runs: Sequence[Path]):
    """The share of each outcome's push the CW kernel keeps against the group's success count (the
    ``cw/kept_{positive,negative}_k{k}`` of each run's metrics, mean over its steps, then over seeds), one
    panel per size and outcome: below 1 the kernel cuts that outcome, above 1 it hands it weight. Which side
    a run sits on is what tells whether the kernel cuts its rare successes (cwgrpo.weighting.kept_share)."""
    from cwgrpo_workflow.report.style import integer_steps, new_figure

    m = metrics_frame(runs)
    columns = [c for c in m.columns if c.startswith(("cw/kept_positive_k", "cw/kept_negative_k"))]
    if not columns:
        raise ResultFileError(
            "no cw/kept_positive_k* metrics in these runs' metrics.jsonl (cw_diagnostics off?)"
        )
    long = m.melt(id_vars=["size", "method", "seed"], value_vars=columns, var_name="key").dropna(
        subset=["value"]
    )
    long["outcome"] = np.where(long["key"].str.contains("positive"), "successes", "failures")
    long["k"] = long["key"].str.rsplit("_k", n=1).str[1].astype(int)
    if long.empty:
        raise ResultFileError("no group with some but not all successes in these runs: no kept share to draw")
    per_seed = long.groupby(["size", "method", "seed", "outcome", "k"], as_index=False)["value"].mean()
    means = per_seed.groupby(["size", "method", "outcome", "k"], as_index=False)["value"].mean()
    sizes = cfg.order_sizes(means["size"])
    fig, axes = new_figure(len(sizes), 2, 7.0, 2.4, _footer(cfg, "kept share", runs=runs))
    for row, size in zip(axes, sizes, strict=True):
        for ax, outcome in zip(row, ("successes", "failures"), strict=True):
            sub = means[(means["size"] == size) & (means["outcome"] == outcome)]
            for method, line in sub.groupby("method", sort=False):
                ax.plot(
                    line["k"],
                    line["value"],
                    marker="o",
                    color=cfg.method_colour(method),
                    label=cfg.method_name(method),
                )
            ax.axhline(1.0, color="0.6", lw=0.8, zorder=0)
            integer_steps(ax)  # success counts are whole
            ax.set(
                title=f"{cfg.size_name(size)} · {outcome}",
                xlabel="successes in the group",
                ylabel="share of the push kept",
            )
    _legend(fig, axes)
    return fig


PLOTTERS = {
    "entropy": plot_entropy,
    "training": plot_training,
    "covariance": plot_covariance,
    "kept_share": plot_kept_share,
}


def make_figure(kind: str, cfg: FigureConfig, runs: Sequence[Path], summaries: Sequence[Path]):
    """Build one figure; ``checkpoints`` needs summaries, the other kinds need run folders."""
    if kind == "checkpoints":
        if not summaries:
            raise ResultFileError("--kind checkpoints needs evaluation summaries (--summaries)")
        return plot_checkpoints(cfg, summaries)
    if not runs:
        raise ResultFileError(f"--kind {kind} needs run folders (--runs)")
    return PLOTTERS[kind](cfg, runs)


# -- command -----------------------------------------------------------------------------------------
def configure_parser(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--kind", required=True, choices=KINDS, help="which figure")
    add_input_arguments(parser, required=False)
    for ext in ("pdf", "png"):
        help_ = f"the figure as {ext.upper()}, e.g. figures/PRESET/NAME.{ext}"
        parser.add_argument(f"--out-{ext}", required=True, type=Path, help=help_)
    add_config_arguments(parser)
    parser.epilog = describe_options(FigureConfig)


OUTPUTS = ("out_pdf", "out_png")  # every other path argument is read (cwgrpo.cli)


def run(args: argparse.Namespace) -> int:
    from cwgrpo_workflow.report.style import apply_style, save_figure

    cfg = command_options(FigureConfig, args, OUTPUTS)
    apply_style()
    fig = make_figure(args.kind, cfg, list(args.runs), list(args.summaries))
    pdf, png = save_figure(fig, args.out_pdf, args.out_png)
    log.info("wrote %s and %s", pdf, png)
    return 0
