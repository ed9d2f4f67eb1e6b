"""Load result files into tidy pandas frames, grouped by the ``tags`` they carry (never by their paths).

Three sources, with the formats of ``docs/architecture.md``:

- evaluation summaries (``*.summary.json``) -> :func:`summaries_frame`, one row per file;
- run folders (``run.json`` + ``metrics.jsonl``) -> :func:`metrics_frame`, one row per logged step;
- ``cov_samples.jsonl`` -> :func:`cov_samples`, the sampled token covariances and kernel weights.

It also holds what the report commands share: :class:`ReportConfig` (names, display labels and the
mapping of tiny synthetic benchmarks onto the paper's), the seed statistics (:func:`mean_ci`,
:func:`seed_effect`: a t-interval over seeds, paired by seed where possible), the paper's reported
numbers (:func:`load_reported`) and the provenance of the inputs (:func:`input_identity`).

Accuracies in frames are fractions in [0, 1], exactly as the summaries store them; the tables and
figures convert to percent only for display and for comparison with the paper.
"""

from __future__ import annotations

import dataclasses
import hashlib
import itertools
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from cwgrpo.configs import ConfigError
from cwgrpo.io import ResultFileError, read_json, read_jsonl

PAPER_BENCHMARKS: tuple[str, ...] = ("aime24", "math500", "amc23", "minerva", "olympiadbench")
PAPER_SIZES: tuple[str, ...] = ("1.5b", "7b")
PRESETS: tuple[str, ...] = ("tiny", "paper", "real")
# Sizes in the order the architecture names them; any other size follows, alphabetically.
SIZE_ORDER: tuple[str, ...] = ("small", "large", "1.5b", "7b")
AVG = "avg"  # the pseudo-benchmark "mean of the benchmark accuracies"
# Built-in display names of the paper's own benchmark and size names (the options override them).
PAPER_BENCHMARK_DISPLAY = {
    "aime24": "AIME24", "math500": "MATH-500", "amc23": "AMC23", "minerva": "Minerva", "olympiadbench": "OlympiadBench",
}  # fmt: skip
PAPER_SIZE_DISPLAY = {"1.5b": "1.5B", "7b": "7B"}
REPORTED_PATH = Path(__file__).resolve().parent.parent / "resources" / "reported.json"


def _help(text: str) -> dict[str, str]:
    return {"help": text}


@dataclass
class ReportConfig:
    """Options shared by ``cwgrpo table``, ``cwgrpo figure`` and ``cwgrpo claims``."""

    preset: str = field(
        default="paper",
        metadata=_help(
            "'paper' (real benchmarks: absolute numbers are compared with the paper), 'tiny' "
            "(synthetic stand-ins: only effects, e.g. CW-GRPO minus GRPO, are compared) or 'real' (a small "
            "pretrained model, a few steps, CHAMP: only effects are compared)"
        ),
    )
    step: int = field(
        default=100, metadata=_help("training step of Table 1 and of claim 1 (the paper reports step 100)")
    )
    base_method: str = field(default="base", metadata=_help("method label of the untrained model"))
    base_step: int = field(default=0, metadata=_help("step tag of the untrained model's summaries"))
    reference_method: str = field(
        default="grpo", metadata=_help("method that changes (Δ) and effects are measured against")
    )
    methods: list[str] = field(
        default_factory=lambda: ["base", "grpo", "clip_cov", "cw_grpo"],
        metadata=_help(
            "method labels in row/legend order; `table` requires each for every size; labels present "
            "in the inputs but not listed follow them, alphabetically"
        ),
    )
    sizes: list[str] | None = field(
        default=None, metadata=_help("sizes to report, in order (default: every size in the inputs)")
    )
    benchmarks: list[str] | None = field(
        default=None,
        metadata=_help(
            "benchmark names (the summaries' `benchmark` field) in column order; default: every "
            "benchmark in the inputs, in the paper's order of their mirrors"
        ),
    )
    benchmark_display: dict[str, str] = field(
        default_factory=dict,
        metadata=_help(
            "benchmark name -> display name, e.g. {syn_math500: 'Syn-L1'}; default: the name itself (the "
            "paper's spelling for its own benchmarks, math500 -> MATH-500); a stand-in's name gets "
            "' (≈MATH-500)' etc. appended unless it already names its mirror"
        ),
    )
    benchmark_mirrors: dict[str, str] = field(
        default_factory=dict,
        metadata=_help(
            "benchmark name -> the paper benchmark it stands in for (aime24|math500|amc23|minerva|"
            "olympiadbench); a paper benchmark name mirrors itself"
        ),
    )
    size_display: dict[str, str] = field(
        default_factory=dict,
        metadata=_help(
            "size -> display name, e.g. {small: 'Tiny-S'}; default: the name (1.5b -> 1.5B); a stand-in "
            "size gets ' (≈1.5B)' etc. appended unless its name already says it"
        ),
    )
    size_mirrors: dict[str, str] = field(
        default_factory=lambda: {"small": "1.5b", "large": "7b"},
        metadata=_help("size -> the paper size (1.5b|7b) it stands in for; a paper size mirrors itself"),
    )
    method_display: dict[str, str] = field(
        default_factory=dict, metadata=_help("method label -> display name (overrides the defaults)")
    )

    def __post_init__(self) -> None:
        if self.preset not in PRESETS:
            raise ConfigError(f"preset: expected one of {list(PRESETS)}, got {self.preset!r}")
        for name in (
            "benchmark_display",
            "benchmark_mirrors",
            "size_display",
            "size_mirrors",
            "method_display",
        ):
            value = getattr(self, name)
            if not isinstance(value, Mapping):
                raise ConfigError(f"{name}: expected a mapping name -> value, got {value!r}")
            setattr(self, name, {str(k): str(v) for k, v in value.items()})
        bad = {k: v for k, v in self.benchmark_mirrors.items() if v not in PAPER_BENCHMARKS}
        if bad:
            raise ConfigError(
                f"benchmark_mirrors: {bad} not among the paper's benchmarks {list(PAPER_BENCHMARKS)}"
            )
        bad = {k: v for k, v in self.size_mirrors.items() if v not in PAPER_SIZES}
        if bad:
            raise ConfigError(f"size_mirrors: {bad} not among the paper's sizes {list(PAPER_SIZES)}")

    # -- names ---------------------------------------------------------------------------------------
    def mirror(self, benchmark: str) -> str | None:
        """The paper benchmark that ``benchmark`` stands in for, or None."""
        if benchmark in self.benchmark_mirrors:
            return self.benchmark_mirrors[benchmark]
        return benchmark if benchmark in PAPER_BENCHMARKS else None

    def size_mirror(self, size: str) -> str | None:
        if size in self.size_mirrors:
            return self.size_mirrors[size]
        return size if size in PAPER_SIZES else None

    def benchmark_name(self, benchmark: str) -> str:
        """Display name; a stand-in names the paper benchmark it mirrors: ``Syn-L1 (≈MATH-500)``."""
        if benchmark == AVG:
            return "Avg"
        name = self.benchmark_display.get(benchmark) or PAPER_BENCHMARK_DISPLAY.get(benchmark, benchmark)
        return _with_mirror(name, benchmark, self.mirror(benchmark), PAPER_BENCHMARK_DISPLAY)

    def size_name(self, size: str) -> str:
        """Display name; a stand-in size names the paper size it mirrors: ``small (≈1.5B)``."""
        name = self.size_display.get(size) or PAPER_SIZE_DISPLAY.get(size, size)
        return _with_mirror(name, size, self.size_mirror(size), PAPER_SIZE_DISPLAY)

    def method_name(self, method: str) -> str:
        from cwgrpo.report.style import method_label

        return self.method_display.get(method) or method_label(method)

    def order_methods(self, present: Iterable[str]) -> list[str]:
        present = set(present)
        return [m for m in self.methods if m in present] + sorted(present - set(self.methods))

    def order_sizes(self, present: Iterable[str]) -> list[str]:
        present = set(present)
        if self.sizes is not None:
            missing = [s for s in self.sizes if s not in present]
            if missing:
                raise ResultFileError(f"no results for size(s) {missing}; the inputs have {sorted(present)}")
            return list(self.sizes)
        known = list(self.size_display) + [s for s in SIZE_ORDER if s not in self.size_display]
        return [s for s in known if s in present] + sorted(present - set(known))

    def order_benchmarks(self, present: Iterable[str]) -> list[str]:
        present = set(present)
        if self.benchmarks is not None:
            missing = [b for b in self.benchmarks if b not in present]
            if missing:
                raise ResultFileError(
                    f"no summaries for benchmark(s) {missing}; the inputs have {sorted(present)}"
                )
            return list(self.benchmarks)

        def key(b: str) -> tuple[int, str]:
            m = self.mirror(b)
            return (PAPER_BENCHMARKS.index(m) if m else len(PAPER_BENCHMARKS), b)

        return sorted(present, key=key)


def _with_mirror(name: str, key: str, mirror: str | None, paper_names: Mapping[str, str]) -> str:
    """Append ``(≈PAPER)`` unless ``key`` is the paper's own or ``name`` already names the paper's."""
    if mirror is None or mirror == key:
        return name
    paper = paper_names[mirror]
    return name if paper.lower() in name.lower() else f"{name} (≈{paper})"


# -- statistics over seeds ---------------------------------------------------------------------------
def mean_ci(values: Iterable[float], level: float = 0.95) -> tuple[float, float, float]:
    """Mean and two-sided t-interval over seeds: ``mean ± t_{n-1, (1+level)/2} · sd / sqrt(n)``.

    :func:`cwgrpo.stats.mean_ci_over_seeds` after dropping missing values (None, NaN). Returns
    ``(mean, lo, hi)``; ``lo`` and ``hi`` are NaN with fewer than two values (the CI is unavailable),
    and everything is NaN with none.
    """
    from cwgrpo.stats import mean_ci_over_seeds

    x = [float(v) for v in values if v is not None and np.isfinite(v)]
    return mean_ci_over_seeds(x, confidence=level)


@dataclass(frozen=True)
class Effect:
    """A difference ``treatment - reference`` over seeds with its 95 % CI (NaN when unavailable)."""

    mean: float
    lo: float
    hi: float
    n: int  # pairs when paired, else the smaller group size
    paired: bool
    seeds: tuple[int, ...]
    note: str = ""

    @property
    def has_ci(self) -> bool:
        return not (math.isnan(self.lo) or math.isnan(self.hi))

    @property
    def half(self) -> float:
        return (self.hi - self.lo) / 2 if self.has_ci else math.nan

    def as_dict(self) -> dict[str, Any]:
        out = dataclasses.asdict(self)
        out["seeds"] = list(self.seeds)
        out["ci95"] = [self.lo, self.hi] if self.has_ci else None
        return {k: (None if isinstance(v, float) and math.isnan(v) else v) for k, v in out.items()}


def seed_effect(treatment: Mapping[int, float], reference: Mapping[int, float]) -> Effect:
    """``treatment - reference`` over seeds, paired by seed where the seeds allow.

    Paired (t-interval of the per-seed differences) when both have the same seeds, or at least two
    seeds in common (the others are dropped and the note says so). Otherwise unpaired: difference of
    the means with a Welch t-interval when both sides have two or more seeds, else no CI.
    """
    if not treatment or not reference:
        return Effect(math.nan, math.nan, math.nan, 0, False, (), "no values")
    common = sorted(set(treatment) & set(reference))
    if common and (set(treatment) == set(reference) or len(common) >= 2):
        dropped = sorted(set(treatment) ^ set(reference))
        m, lo, hi = mean_ci(treatment[s] - reference[s] for s in common)
        note = f"paired by seed; seeds without a partner dropped: {dropped}" if dropped else "paired by seed"
        return Effect(m, lo, hi, len(common), True, tuple(common), note)
    a = np.array(list(treatment.values()), dtype=float)
    b = np.array(list(reference.values()), dtype=float)
    m = float(a.mean() - b.mean())
    seeds = tuple(sorted(set(treatment) | set(reference)))
    if a.size < 2 or b.size < 2:
        return Effect(m, math.nan, math.nan, min(a.size, b.size), False, seeds, "unpaired; CI unavailable")
    from scipy import stats

    va, vb = a.var(ddof=1) / a.size, b.var(ddof=1) / b.size
    se = math.sqrt(va + vb)
    if se == 0:
        return Effect(m, m, m, min(a.size, b.size), False, seeds, "unpaired (Welch); zero variance")
    df = (va + vb) ** 2 / (va**2 / (a.size - 1) + vb**2 / (b.size - 1))
    half = float(stats.t.ppf(0.975, df) * se)
    return Effect(m, m - half, m + half, min(a.size, b.size), False, seeds, "unpaired (Welch t-interval)")


# -- the paper's numbers ----------------------------------------------------------------------------
def load_reported(path: str | Path | None = None) -> dict[str, Any]:
    """The paper's reported numbers (``cwgrpo/resources/reported.json`` unless ``path`` is given)."""
    return read_json(path or REPORTED_PATH)


def reported_table1(reported: Mapping[str, Any]) -> pd.DataFrame:
    """Reported Table 1 as a long frame: size, method, step, benchmark (incl. ``avg``), value (percent)."""
    rows = []
    for row in reported["table1"]["rows"]:
        for b in (*PAPER_BENCHMARKS, AVG):
            rows.append(
                {
                    "size": row["size"],
                    "method": row["method"],
                    "step": row["step"],
                    "benchmark": b,
                    "value": row[b],
                }
            )
    return pd.DataFrame(rows)


def reported_checkpoints(reported: Mapping[str, Any]) -> pd.DataFrame:
    """Reported checkpoint study: size, method, step, benchmark, value (percent)."""
    block = reported["checkpoints"]
    rows = []
    for row in block["rows"]:
        for b in block["benchmarks"]:
            rows.append(
                {
                    "size": block["size"],
                    "method": row["method"],
                    "step": row["step"],
                    "benchmark": b,
                    "value": row[b],
                }
            )
    return pd.DataFrame(rows)


# -- evaluation summaries ---------------------------------------------------------------------------
SUMMARY_COLUMNS = [
    "size", "method", "seed", "step", "benchmark", "accuracy", "accuracy_se", "accuracy_ci_lo",
    "accuracy_ci_hi", "metric", "k", "n_problems", "pass1", "avg_k", "path",
]  # fmt: skip


def _tag(tags: Mapping[str, Any], key: str, path: Path, kind: type) -> Any:
    if key not in tags:
        raise ResultFileError(f"{path}: tags lack {key!r} (have {sorted(tags)})")
    try:
        return kind(tags[key])
    except (TypeError, ValueError) as err:
        raise ResultFileError(f"{path}: tag {key}={tags[key]!r} is not {kind.__name__}") from err


def _check_fraction(path: Path, key: str, value: Any, upper: float = 1.0) -> None:
    """An accuracy-like field, when present, is a finite number in [0, ``upper``]."""
    if value is None:
        return
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise ResultFileError(f"{path}: {key} must be a finite number, got {value!r}")
    if not 0 <= value <= upper:
        raise ResultFileError(f"{path}: {key}={value} is outside [0, {upper:g}] (a fraction, not a percent)")


def _check_summary_values(path: Path, s: Mapping[str, Any]) -> None:
    k = s.get("k", 1)
    if k is not None and (isinstance(k, bool) or not isinstance(k, int) or k < 1):
        raise ResultFileError(f"{path}: k must be an integer >= 1, got {k!r}")
    for key in ("pass1", "avg_k"):
        _check_fraction(path, key, s.get(key))
    _check_fraction(path, "avg_k_se", s.get("avg_k_se"), upper=0.5)
    ci = s.get("avg_k_ci95")
    if isinstance(ci, list):
        for i, x in enumerate(ci):
            _check_fraction(path, f"avg_k_ci95[{i}]", x)


def _summary_row(path: Path, s: Mapping[str, Any]) -> dict[str, Any]:
    if not isinstance(s, Mapping) or "benchmark" not in s or not isinstance(s.get("tags"), Mapping):
        raise ResultFileError(f"{path}: not an evaluation summary (needs 'benchmark' and a 'tags' mapping)")
    _check_summary_values(path, s)
    tags = s["tags"]
    k = int(s.get("k") or 1)
    # avg@k is the metric; with k == 1 it is pass@1. Fall back to whichever the file has.
    use_avg = k > 1 and s.get("avg_k") is not None
    acc = s.get("avg_k") if use_avg else s.get("pass1", s.get("avg_k"))
    if acc is None:
        raise ResultFileError(f"{path}: summary has neither 'pass1' nor 'avg_k'")
    ci = s.get("avg_k_ci95") if use_avg else None
    if not ci or len(ci) != 2 or any(x is None for x in ci):  # evaluate writes None for a NaN bound
        ci = None
    return {
        "size": _tag(tags, "size", path, str),
        "method": _tag(tags, "method", path, str),
        "seed": _tag(tags, "seed", path, int),
        "step": _tag(tags, "step", path, int),
        "benchmark": str(s["benchmark"]),
        "accuracy": float(acc),
        "accuracy_se": float(s["avg_k_se"]) if use_avg and s.get("avg_k_se") is not None else math.nan,
        "accuracy_ci_lo": float(ci[0]) if ci else math.nan,
        "accuracy_ci_hi": float(ci[1]) if ci else math.nan,
        "metric": f"avg@{k}" if use_avg else "pass@1",
        "k": k,
        "n_problems": int(s.get("n_problems") or 0),
        "pass1": float(s["pass1"]) if s.get("pass1") is not None else math.nan,
        "avg_k": float(s["avg_k"]) if s.get("avg_k") is not None else math.nan,
        "path": str(path),
    }


def summaries_frame(paths: Sequence[str | Path]) -> pd.DataFrame:
    """One row per summary file (columns :data:`SUMMARY_COLUMNS`); duplicates of one tag set are errors."""
    if not paths:
        raise ResultFileError("no evaluation summaries given (--summaries)")
    rows = [_summary_row(Path(p), read_json(p)) for p in paths]
    frame = pd.DataFrame(rows, columns=SUMMARY_COLUMNS)
    key = ["size", "method", "seed", "step", "benchmark"]
    dup = frame[frame.duplicated(key, keep=False)]
    if not dup.empty:
        first = dup.iloc[0]
        same = dup[(dup[key] == first[key]).all(axis=1)]["path"].tolist()
        raise ResultFileError(f"several summaries share the tags {dict(first[key])}: {same}")
    return frame


def require(frame: pd.DataFrame, what: str, **tags: Any) -> pd.DataFrame:
    """Rows of ``frame`` matching ``tags``; an empty selection is an error naming what is missing."""
    mask = np.ones(len(frame), dtype=bool)
    for k, v in tags.items():
        mask &= (frame[k] == v).to_numpy()
    sel = frame[mask]
    if sel.empty:
        desc = " ".join(f"{k}={v}" for k, v in tags.items())
        have = ""
        if "step" in tags and "step" in frame:
            others = {k: v for k, v in tags.items() if k != "step"}
            om = np.ones(len(frame), dtype=bool)
            for k, v in others.items():
                om &= (frame[k] == v).to_numpy()
            steps = sorted(set(frame.loc[om, "step"]))
            have = f" (steps present for the rest of those tags: {steps})" if steps else ""
        raise ResultFileError(f"no {what} for {desc}{have}")
    return sel


def per_seed_accuracy(
    frame: pd.DataFrame, size: str, method: str, step: int, benchmarks: Sequence[str]
) -> pd.DataFrame:
    """Seeds x benchmarks accuracies (plus column ``avg``) of one (size, method, step).

    Every seed must have every benchmark: a hole is an error naming the missing summaries.
    """
    sel = require(frame, "evaluation summaries", size=size, method=method, step=step)
    wide = sel.pivot(index="seed", columns="benchmark", values="accuracy")
    missing = [b for b in benchmarks if b not in wide.columns]
    if missing:
        raise ResultFileError(
            f"no summaries for benchmark(s) {missing} at size={size} method={method} step={step}"
        )
    wide = wide[list(benchmarks)].sort_index()
    holes = [(int(s), b) for s in wide.index for b in benchmarks if pd.isna(wide.loc[s, b])]
    if holes:
        raise ResultFileError(
            f"missing summaries at size={size} method={method} step={step} for (seed, benchmark) {holes}"
        )
    wide[AVG] = wide[list(benchmarks)].mean(axis=1)
    return wide


# -- run folders -------------------------------------------------------------------------------------
def run_info(run_dir: str | Path) -> dict[str, Any]:
    """``run.json`` of a run folder with its tags checked: ``{size, method, seed, config_hash, provenance}``."""
    path = Path(run_dir) / "run.json"
    info = read_json(path)
    tags = info.get("tags") if isinstance(info, Mapping) else None
    if not isinstance(tags, Mapping):
        raise ResultFileError(f"{path}: needs a 'tags' mapping with size, method, seed")
    return {
        "size": _tag(tags, "size", path, str),
        "method": _tag(tags, "method", path, str),
        "seed": _tag(tags, "seed", path, int),
        "config_hash": info.get("config_hash"),
        "provenance": info.get("provenance") or {},
        "run_dir": str(run_dir),
    }


def _logging_interval(run_dir: str | Path) -> int | None:
    """``logging_steps`` of a run, from its run.json (None if it does not say, or is a fraction)."""
    try:
        value = read_json(Path(run_dir) / "run.json").get("config", {}).get("trl", {}).get("logging_steps")
    except (ResultFileError, AttributeError):
        return None
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 1 else None


def _check_no_gap(path: Path, steps: list[int], interval: int | None) -> None:
    """A curve must not silently skip logged steps: every multiple of the logging interval (from
    run.json, else the smallest step difference) up to the last step must be there (a run resumed after
    its live logs were lost would otherwise be drawn from the resume point)."""
    positive = [s for s in steps if s > 0]
    if not positive:
        return
    if interval is None:
        diffs = [b - a for a, b in itertools.pairwise(positive)]
        interval = min(diffs) if diffs else positive[0]
    missing = [s for s in range(interval, positive[-1] + 1, interval) if s not in set(positive)]
    if missing:
        shown = f"{missing[0]}-{missing[-1]}" if len(missing) > 2 else ", ".join(map(str, missing))
        raise ResultFileError(
            f"{path} has no line for step(s) {shown} (every {interval} step(s) are logged up to step "
            f"{positive[-1]}): a curve would hide that gap"
        )


def metrics_frame(run_dirs: Sequence[str | Path]) -> pd.DataFrame:
    """Per-step training metrics of every run, tagged with size, method and seed (one row per step)."""
    if not run_dirs:
        raise ResultFileError("no run folders given (--runs)")
    frames = []
    for run_dir in run_dirs:
        info = run_info(run_dir)
        path = Path(run_dir) / "metrics.jsonl"
        records = read_jsonl(path)
        if not records:
            raise ResultFileError(f"{path} is empty")
        if any("step" not in r for r in records):
            raise ResultFileError(f"{path}: every line needs a 'step'")
        f = pd.DataFrame.from_records(records)
        f["step"] = f["step"].astype(int)
        _check_no_gap(path, sorted(set(f["step"])), _logging_interval(run_dir))
        # A resumed run may log a step twice; the last line wins.
        f = f.drop_duplicates("step", keep="last").sort_values("step")
        f.insert(0, "seed", info["seed"])
        f.insert(0, "method", info["method"])
        f.insert(0, "size", info["size"])
        f["run_dir"] = str(run_dir)
        frames.append(f)
    out = pd.concat(frames, ignore_index=True)
    dup = out[out.duplicated(["size", "method", "seed", "step"], keep=False)]
    if not dup.empty:
        raise ResultFileError(
            f"several run folders share tags size/method/seed: {sorted(set(dup['run_dir']))}"
        )
    return out


def cov_samples(run_dir: str | Path) -> list[dict[str, Any]]:
    """Lines of ``cov_samples.jsonl``: ``{step, cov: array, weight: array}`` (arrays as float64).

    A missing file is an error; an empty one (sampling switched off) gives an empty list.
    """
    path = Path(run_dir) / "cov_samples.jsonl"
    out = []
    for i, r in enumerate(read_jsonl(path), start=1):
        if "cov" not in r or "step" not in r:
            raise ResultFileError(f"{path}:{i}: needs 'step' and 'cov'")
        cov = np.asarray(r["cov"], dtype=float)
        weight = np.asarray(r.get("weight", [math.nan] * cov.size), dtype=float)
        if weight.shape != cov.shape:
            raise ResultFileError(f"{path}:{i}: 'cov' and 'weight' differ in length")
        out.append({"step": int(r["step"]), "cov": cov, "weight": weight})
    return out


# -- provenance of the inputs -----------------------------------------------------------------------
def _file_sha256(path: str | Path) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def input_identity(
    summary_paths: Sequence[str | Path] = (), run_dirs: Sequence[str | Path] = ()
) -> dict[str, Any]:
    """Who produced the inputs: package versions, git commits and config hashes, plus each file's sha256."""
    files, versions, commits, hashes = [], set(), set(), set()

    def note(prov: Mapping[str, Any], chash: Any) -> None:
        if prov.get("version"):
            versions.add(str(prov["version"]))
        git = prov.get("git") or {}
        if git.get("commit"):
            commits.add(str(git["commit"])[:12] + ("+dirty" if git.get("dirty") else ""))
        if chash:
            hashes.add(str(chash))

    for p in summary_paths:
        s = read_json(p)
        prov = s.get("provenance") or {}
        note(prov, s.get("config_hash") or prov.get("config_hash"))
        files.append({"path": str(p), "sha256": _file_sha256(p), "tags": s.get("tags")})
    for d in run_dirs:
        info = run_info(d)
        note(info["provenance"], info["config_hash"])
        files.append({"path": str(Path(d) / "run.json"), "sha256": _file_sha256(Path(d) / "run.json")})
    return {
        "versions": sorted(versions),
        "commits": sorted(commits),
        "config_hashes": sorted(hashes),
        "files": files,
    }


def footer_text(identity: Mapping[str, Any], report_config_hash: str, extra: str = "") -> str:
    """One line naming the reporting code and the producers of the inputs (no clock, so it is reproducible)."""
    from cwgrpo import __version__
    from cwgrpo.provenance import git_state

    git = git_state()
    here = f"cwgrpo {__version__}"
    if git.get("commit"):
        here += f" @ {git['commit'][:12]}{'+dirty' if git.get('dirty') else ''}"

    def short(items: Sequence[str], n: int = 3) -> str:
        items = list(items)
        return (
            ", ".join(items[:n]) + (f" (+{len(items) - n})" if len(items) > n else "") if items else "unknown"
        )

    parts = [
        f"made by {here}",
        f"inputs: {len(identity['files'])} files from cwgrpo {short(identity['versions'])} @ {short(identity['commits'], 2)}",
        f"config hashes {short(identity['config_hashes'], 2)}",
        f"report config {report_config_hash}",
    ]
    if extra:
        parts.append(extra)
    return " · ".join(parts)
