"""The four claims of ``cwgrpo claims`` as measured effects per size, their options and the verdict rule.

The claims and the verdict rule in words: :mod:`cwgrpo_workflow.report.claims`.
"""

from __future__ import annotations

import dataclasses
import logging
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from cwgrpo.configs import ConfigError, config_hash
from cwgrpo.io import ResultFileError, read_json
from cwgrpo.stats import Effect, mean_ci, seed_effect
from cwgrpo.trainer.learning_signal import describe, no_signal
from cwgrpo_workflow.report.load import cov_samples, need_columns, per_seed_accuracy, run_info
from cwgrpo_workflow.report.options import AVG, ReportConfig
from cwgrpo_workflow.report.provenance import input_identity

log = logging.getLogger(__name__)
NO_EFFECT = Effect(math.nan, math.nan, math.nan, 0, False, (), "not measured")
HOLDS, FAILS, INCONCLUSIVE, NOT_TESTABLE = "holds", "does not hold", "inconclusive", "not testable"
ENTROPY_STATS = ("std", "range")
VERDICT_RULE = (
    "Each effect is signed so that a positive value supports the claim. Verdict per size: 'holds' if the "
    "whole 95 % t-interval over seeds lies above 0; 'does not hold' if it lies below 0 (so it needs at least "
    "2 seeds); 'inconclusive' otherwise (the interval reaches 0, or fewer than 2 seeds give no interval, "
    "whatever the sign of the mean); 'not testable' if a precondition cannot be met: the claim's own (claim 3: "
    "GRPO degrades, and a later checkpoint exists), a run it needs had no learning signal (zero reward spread "
    "or zero gradient; run.json's learning_signal), or only zero covariances were logged. Overall: 'holds' "
    "if it holds for every size, 'does not hold' if it fails for any size, 'not testable' if no size is "
    "testable, else 'inconclusive'."
)


@dataclass
class ClaimsConfig(ReportConfig):
    treatment_method: str = field(default="cw_grpo", metadata={"help": "the method the claims are about (T)"})
    entropy_window: float = field(
        default=0.5,
        metadata={
            "help": "claim 2: fraction of each run's last steps whose entropy is summarised (0.5 = second half)"
        },
    )
    entropy_stat: str = field(
        default="std", metadata={"help": "claim 2: std (sample standard deviation) or range (max - min)"}
    )
    late_step: int | None = field(
        default=None,
        metadata={"help": "claim 3: the late checkpoint (default: the last step evaluated for both methods)"},
    )
    late_benchmarks: list[str] | None = field(
        default=None, metadata={"help": "claim 3: benchmarks averaged (default: the same as claim 1)"}
    )
    tail_method: str = field(
        default="grpo", metadata={"help": "claim 4: method whose logged covariances are tested"}
    )
    tail_top_fraction: float = field(
        default=0.01, metadata={"help": "claim 4: the top share of tokens by |c| (0.01 = top 1 %)"}
    )
    tail_share_min: float = field(
        default=0.10,
        metadata={
            "help": "claim 4: the share of total |c| those tokens must carry for 'dominates' (0.10; a "
            "Gaussian gives 0.036 for the top 1 %, a product of two independent Gaussians 0.071)"
        },
    )

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.entropy_stat not in ENTROPY_STATS:
            raise ConfigError(
                f"entropy_stat: expected one of {list(ENTROPY_STATS)}, got {self.entropy_stat!r}"
            )
        if not 0 < self.entropy_window <= 1:
            raise ConfigError(f"entropy_window: expected a fraction in (0, 1], got {self.entropy_window}")
        if not 0 < self.tail_top_fraction < 1:
            raise ConfigError(
                f"tail_top_fraction: expected a fraction in (0, 1), got {self.tail_top_fraction}"
            )
        if self.treatment_method == self.reference_method:
            raise ConfigError("treatment_method and reference_method must differ")


# -- verdicts ----------------------------------------------------------------------------------------
def decide(effect: Effect, untestable: str = "") -> tuple[str, str]:
    """The verdict of one effect under :data:`VERDICT_RULE`, with the reason in words.

    ``untestable`` names a precondition that is not met (the verdict is then 'not testable'). Only an
    interval over at least two seeds decides either way: one seed's effect, even 0 or negative, cannot
    tell a method's effect from the spread between seeds.
    """
    if untestable:
        return NOT_TESTABLE, untestable
    if not math.isfinite(effect.mean):
        return INCONCLUSIVE, "no measurement"
    if effect.n < 2 or not effect.has_ci:
        return (
            INCONCLUSIVE,
            "fewer than 2 seeds: no 95 % CI over seeds, so the sign of one seed's effect decides nothing",
        )
    if effect.lo > 0:
        return HOLDS, "the whole 95 % CI is above 0"
    if effect.hi < 0:
        return FAILS, "the whole 95 % CI is below 0"
    return INCONCLUSIVE, "the 95 % CI includes 0"


def overall(verdicts: Sequence[str]) -> str:
    if verdicts and all(v == HOLDS for v in verdicts):
        return HOLDS
    if any(v == FAILS for v in verdicts):
        return FAILS
    if verdicts and all(v == NOT_TESTABLE for v in verdicts):
        return NOT_TESTABLE
    return INCONCLUSIVE


def silent_runs(runs: Sequence[Path]) -> dict[tuple[str, str], list[str]]:
    """(size, method) -> what each of its runs' ``run.json`` recorded as no learning signal
    (``cwgrpo.trainer.learning_signal.no_signal``), e.g. ``seed 0: zero reward spread, steps 1-20``. A run.json
    without ``learning_signal``, or with only notices (every completion clipped), counts as learning."""
    silent: dict[tuple[str, str], list[str]] = {}
    for run_dir in runs:
        info = run_info(run_dir)
        path = Path(run_dir) / "run.json"
        recorded = read_json(path).get("learning_signal") or []
        keys = ("cause", "from_step", "to_step")
        if not isinstance(recorded, list) or not all(
            isinstance(f, dict) and all(k in f for k in keys) and isinstance(f["cause"], str)
            for f in recorded
        ):
            raise ResultFileError(
                f"{path}: 'learning_signal' must be a list of {{cause, from_step, to_step}} records "
                "(cwgrpo train writes them); restore the run's own run.json"
            )
        for found in filter(no_signal, recorded):
            key = (info["size"], info["method"])
            silent.setdefault(key, []).append(f"seed {info['seed']}: {describe(found)}")
    return silent


def mark_untestable(per_size: list[dict[str, Any]], runs: Sequence[Path], methods: Sequence[str]) -> None:
    """A size whose runs of ``methods`` recorded no learning signal is 'not testable', saying which run
    and why; its measurements stay in the record."""
    silent: dict[str, list[str]] = {}
    for (size, method), texts in silent_runs(runs).items():
        if method in methods:
            silent.setdefault(size, []).extend(f"{method} {t}" for t in texts)
    for result in per_size:
        if result["size"] in silent and result["verdict"] != NOT_TESTABLE:
            why = "no learning signal in training (" + "; ".join(silent[result["size"]]) + ")"
            result["verdict"], result["reason"] = decide(NO_EFFECT, untestable=why)


def _scaled(e: Effect, k: float) -> Effect:
    return dataclasses.replace(e, mean=e.mean * k, lo=e.lo * k, hi=e.hi * k)


def _ci_dict(values: Mapping[int, float], k: float = 1.0) -> dict[str, Any]:
    m, lo, hi = mean_ci(values.values())
    out = {"mean": m * k, "ci95": [lo * k, hi * k] if math.isfinite(lo) else None, "n": len(values)}
    out["per_seed"] = {str(s): v * k for s, v in sorted(values.items())}
    return _clean(out)


def _sides(cfg: ClaimsConfig, name: str, per: Mapping[str, Mapping[int, float]], k: float = 1.0) -> dict:
    """Details ``treatment_<name>`` and ``reference_<name>``: each method's per-seed values and their CI."""
    return {
        f"{side}_{name}": _ci_dict(per[method], k)
        for side, method in (("treatment", cfg.treatment_method), ("reference", cfg.reference_method))
    }


def _clean(obj: Any) -> Any:
    """NaN -> None, numpy scalars -> Python, recursively (JSON has no NaN)."""
    if isinstance(obj, dict):
        return {str(k): _clean(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_clean(v) for v in obj]
    if isinstance(obj, (np.floating, float)):
        return None if not math.isfinite(float(obj)) else float(obj)
    if isinstance(obj, np.integer):
        return int(obj)
    return obj


def report_record(
    report: Mapping[str, Any], cfg: Any, summaries: Sequence[Path], runs: Sequence[Path]
) -> dict[str, Any]:
    """A report as written to its JSON file: the report, the command's config and its hash, the
    provenance, and who produced the inputs; NaN -> None (``cwgrpo claims`` and ``cwgrpo study``)."""
    from cwgrpo.provenance import provenance

    chash = config_hash(cfg)
    return _clean(
        {
            **report,
            "config": dataclasses.asdict(cfg),
            "config_hash": chash,
            "provenance": provenance(config_hash=chash),
            "inputs": input_identity(summaries, runs),
        }
    )


def _size_result(
    cfg: ClaimsConfig, size: str, effect: Effect, unit: str, verdict: tuple[str, str], **details: Any
) -> dict[str, Any]:
    return _clean(
        {
            "size": size,
            "size_display": cfg.size_name(size),
            "effect": effect.as_dict(),
            "unit": unit,
            "verdict": verdict[0],
            "reason": verdict[1],
            "details": details,
        }
    )


# -- claims 1-4 --------------------------------------------------------------------------------------
def claim_accuracy(frame: pd.DataFrame, cfg: ClaimsConfig, sizes: Sequence[str]) -> list[dict[str, Any]]:
    """Claim 1: Avg(T) - Avg(R) at ``cfg.step``, in accuracy points, paired by seed."""
    benchmarks = cfg.order_benchmarks(frame["benchmark"])
    out = []
    for size in sizes:
        avg = {
            m: per_seed_accuracy(frame, size, m, cfg.step, benchmarks)[AVG].to_dict()
            for m in (cfg.treatment_method, cfg.reference_method)
        }
        eff = _scaled(seed_effect(avg[cfg.treatment_method], avg[cfg.reference_method]), 100)
        details = _sides(cfg, "avg", avg, 100) | {"benchmarks": benchmarks, "step": cfg.step}
        out.append(_size_result(cfg, size, eff, "accuracy points", decide(eff), **details))
    return out


def _window(series: pd.Series, window: float) -> pd.Series:
    """The last ``window`` of a run's steps: steps > (1 - window) * last step (all of them at 1)."""
    return series[series.index > (1 - window) * series.index.max()] if window < 1 else series


def entropy_stat(series: pd.Series, window: float, stat: str) -> float:
    """``stat`` of a run's entropy over its last ``window`` of (logged) steps."""
    tail = _window(series.dropna(), window)
    if tail.size < 2:
        return math.nan
    return float(tail.std(ddof=1)) if stat == "std" else float(tail.max() - tail.min())


def claim_entropy(metrics: pd.DataFrame, cfg: ClaimsConfig, sizes: Sequence[str]) -> list[dict[str, Any]]:
    """Claim 2: stat(R) - stat(T) of per-step entropy (``cfg.entropy_key``) over the window, paired by seed."""
    key = cfg.entropy_key
    need_columns(metrics, key)
    out = []
    for size in sizes:
        per: dict[str, dict[int, float]] = {}
        level: dict[str, dict[int, float]] = {}
        for method in (cfg.treatment_method, cfg.reference_method):
            sel = metrics[(metrics["size"] == size) & (metrics["method"] == method)]
            if sel.empty:
                raise ResultFileError(f"no run folders (metrics.jsonl) for size={size} method={method}")
            per[method], level[method] = {}, {}
            for seed, run in sel.groupby("seed"):
                series = run.set_index("step")[key].astype(float)
                per[method][int(seed)] = entropy_stat(series, cfg.entropy_window, cfg.entropy_stat)
                level[method][int(seed)] = float(_window(series, cfg.entropy_window).mean())
        eff = seed_effect(per[cfg.reference_method], per[cfg.treatment_method])
        details = _sides(cfg, "stat", per) | _sides(cfg, "mean_entropy", level)
        out.append(_size_result(cfg, size, eff, "nats / token", decide(eff), **details))
    return out


def _late_step(frame: pd.DataFrame, cfg: ClaimsConfig, size: str, benchmarks: Sequence[str]) -> int | None:
    """The last step at which both methods have every benchmark for every seed (None if none after ``step``)."""
    if cfg.late_step is not None:
        return cfg.late_step
    steps = None
    for method in (cfg.treatment_method, cfg.reference_method):
        sel = frame[
            (frame["size"] == size) & (frame["method"] == method) & frame["benchmark"].isin(benchmarks)
        ]
        counts = sel.groupby(["step", "seed"])["benchmark"].nunique()
        full = {int(s) for (s, _), n in counts.items() if n == len(benchmarks)}
        steps = full if steps is None else steps & full
    later = sorted(s for s in (steps or set()) if s > cfg.step)
    return later[-1] if later else None


def claim_degradation(frame: pd.DataFrame, cfg: ClaimsConfig, sizes: Sequence[str]) -> list[dict[str, Any]]:
    """Claim 3: drop(R) - drop(T), drop = Avg(step) - Avg(late), in points; needs drop(R) > 0."""
    benchmarks = (
        list(cfg.late_benchmarks) if cfg.late_benchmarks else cfg.order_benchmarks(frame["benchmark"])
    )
    out = []
    for size in sizes:
        late = _late_step(frame, cfg, size, benchmarks)
        if late is None or late <= cfg.step:
            eff = dataclasses.replace(NO_EFFECT, note=f"no checkpoint after step {cfg.step}")
            verdict = decide(eff, untestable=eff.note)
            out.append(_size_result(cfg, size, eff, "accuracy points", verdict, late_step=None))
            continue
        drop: dict[str, dict[int, float]] = {}
        for method in (cfg.treatment_method, cfg.reference_method):
            at = per_seed_accuracy(frame, size, method, cfg.step, benchmarks)[AVG]
            later = per_seed_accuracy(frame, size, method, late, benchmarks)[AVG]
            seeds = sorted(set(at.index) & set(later.index))
            drop[method] = {int(s): float(at[s] - later[s]) for s in seeds}
        eff = _scaled(seed_effect(drop[cfg.reference_method], drop[cfg.treatment_method]), 100)
        ref_drop = float(np.mean(list(drop[cfg.reference_method].values())))
        ref_name = cfg.method_name(cfg.reference_method)
        no_drop = f"{ref_name} does not degrade (mean drop {100 * ref_drop:+.2f} points ≤ 0)"
        verdict = decide(eff, untestable="" if ref_drop > 0 else no_drop)
        details = {"step": cfg.step, "late_step": late, "benchmarks": benchmarks} | _sides(
            cfg, "drop", drop, 100
        )
        out.append(_size_result(cfg, size, eff, "accuracy points", verdict, **details))
    return out


# Claim 4. A run whose every sampled covariance is 0 (every group had zero reward spread, so every advantage
# is 0) says nothing about the tail: its size is "not testable", not an error that stops the report.
QUANTILE_KEYS = ("cw/cov_q0.0001", "cw/cov_q0.4", "cw/cov_q0.6", "cw/cov_q0.9999")
ALL_ZERO = "no learning signal: every sampled covariance is 0 (seeds {seeds}), so there is no tail to measure"


def top_share(cov: Sequence[float] | np.ndarray, fraction: float) -> float:
    """Share of sum |c| carried by the ceil(fraction * n) tokens of largest |c| (NaN if sum |c| = 0)."""
    c = np.asarray(cov, dtype=float)
    a = np.abs(c[np.isfinite(c)])
    total = a.sum()
    if a.size == 0 or total == 0:
        return math.nan
    k = max(1, math.ceil(fraction * a.size - 1e-9))
    return float(np.sort(a)[::-1][:k].sum() / total)


def gaussian_top_share(fraction: float) -> float:
    """The same share for a zero-mean Gaussian: exp(-z^2 / 2) with z = Phi^-1(1 - fraction / 2)."""
    from scipy import stats

    z = float(stats.norm.ppf(1 - fraction / 2))
    return math.exp(-(z**2) / 2)


def tail_shares(
    runs: Sequence[Path], methods: Sequence[str], fraction: float
) -> tuple[dict[tuple[str, str], dict[int, float]], dict[str, list[int]]]:
    """(size, method) -> seed -> mean over sampled steps of :func:`top_share`, for the runs of ``methods``;
    and size -> the seeds whose samples hold no nonzero covariance."""
    shares: dict[tuple[str, str], dict[int, float]] = {}
    all_zero: dict[str, list[int]] = {}
    for run_dir in runs:
        info = run_info(run_dir)
        if info["method"] not in methods:
            continue
        samples = cov_samples(run_dir)
        per_step = [top_share(r["cov"], fraction) for r in samples]
        per_step = [v for v in per_step if math.isfinite(v)]  # a step with every c = 0 has no share
        if per_step:
            shares.setdefault((info["size"], info["method"]), {})[info["seed"]] = float(np.mean(per_step))
        else:
            log.warning("%s/cov_samples.jsonl has no step with a nonzero covariance", run_dir)
            if samples:
                all_zero.setdefault(info["size"], []).append(info["seed"])
    return shares, all_zero


def claim_heavy_tail(
    runs: Sequence[Path], metrics: pd.DataFrame, cfg: ClaimsConfig, sizes: Sequence[str]
) -> list[dict[str, Any]]:
    """Claim 4: top-share of |c| of ``tail_method``'s runs minus ``tail_share_min``, in percentage points."""
    shares, all_zero = tail_shares(runs, [cfg.tail_method], cfg.tail_top_fraction)
    ratio = quantile_ratio(metrics)
    out = []
    for size in sizes:
        values = shares.get((size, cfg.tail_method))
        if not values and size in all_zero:
            seeds = tuple(sorted(all_zero[size]))
            eff = dataclasses.replace(NO_EFFECT, n=len(seeds), seeds=seeds)
            reason = ALL_ZERO.format(seeds=", ".join(map(str, seeds)))
            out.append(_tail_result(cfg, size, eff, decide(eff, untestable=reason), None, None))
            continue
        if not values:
            raise ResultFileError(
                f"no covariance samples for size={size} method={cfg.tail_method}: no such run in --runs, "
                "or its cov_samples.jsonl is empty"
            )
        above = [v - cfg.tail_share_min for v in mean_ci(values.values())]
        note = f"t-interval over seeds of {cfg.tail_method}'s runs"
        eff = _scaled(Effect(*above, len(values), False, tuple(sorted(values)), note), 100.0)
        quantiles = ratio.get((size, cfg.tail_method))
        out.append(_tail_result(cfg, size, eff, decide(eff), _ci_dict(values, 100.0), quantiles))
    return out


def _tail_result(
    cfg: ClaimsConfig, size: str, eff: Effect, verdict: tuple[str, str], shares: Any, quantiles: Any
) -> dict[str, Any]:
    return _size_result(
        cfg,
        size,
        eff,
        "points above the threshold",
        verdict,
        top_share_pct=shares,
        threshold_pct=cfg.tail_share_min * 100.0,
        gaussian_share_pct=gaussian_top_share(cfg.tail_top_fraction) * 100.0,
        quantile_ratio=quantiles,
    )


def quantile_ratio(metrics: pd.DataFrame) -> dict[tuple[str, str], dict[str, Any]]:
    """(q0.9999 - q0.0001) / (q0.6 - q0.4) of the logged per-step quantiles, mean over steps, per run.

    For reference: a Gaussian gives 14.7; the paper's quantiles (±12 vs ±0.3) give about 40.
    """
    if not all(k in metrics.columns for k in QUANTILE_KEYS):
        return {}
    q = metrics[list(QUANTILE_KEYS)].astype(float)
    centre = q[QUANTILE_KEYS[2]] - q[QUANTILE_KEYS[1]]
    r = ((q[QUANTILE_KEYS[3]] - q[QUANTILE_KEYS[0]]) / centre).where(centre > 0)
    per_run = metrics.assign(ratio=r).groupby(["size", "method", "seed"])["ratio"].mean()
    out: dict[tuple[str, str], dict[str, Any]] = {}
    for (size, method), group in per_run.groupby(level=["size", "method"]):
        values = {int(s): float(v) for (_, _, s), v in group.items() if math.isfinite(v)}
        if values:
            out[(size, method)] = {**_ci_dict(values), "gaussian": 14.67, "paper_approx": 40.0}
    return out
