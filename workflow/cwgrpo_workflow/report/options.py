"""The options and names the report commands share, and how every page writes a number.

A number is written by :func:`number`, an interval by :func:`interval`, a Markdown table by :func:`markdown_table`. :class:`ReportConfig` holds the options of ``cwgrpo table``,
``cwgrpo figure`` and ``cwgrpo claims`` (methods, sizes and benchmarks in order, display names, and the
mapping of stand-in benchmarks and sizes onto the paper's); :class:`TableConfig` adds the table's own. The
paper's own benchmark and size names come from :mod:`cwgrpo.paper`.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from cwgrpo.configs import ConfigError
from cwgrpo.io import (
    ResultFileError,
)
from cwgrpo.paper import BENCHMARK_DISPLAY as PAPER_BENCHMARK_DISPLAY
from cwgrpo.paper import BENCHMARKS as PAPER_BENCHMARKS
from cwgrpo.paper import SIZE_DISPLAY as PAPER_SIZE_DISPLAY
from cwgrpo.paper import SIZES as PAPER_SIZES

PRESET_KINDS: tuple[str, ...] = ("tiny", "paper", "real")
# Sizes in the order the architecture names them; any other size follows, alphabetically.
SIZE_ORDER: tuple[str, ...] = ("small", "large", "1.5b", "7b")
AVG = "avg"  # the pseudo-benchmark "mean of the benchmark accuracies"
# metrics.jsonl's two entropy statistics, and how each averages the per-token entropies.
ENTROPY_MEANS = {
    "entropy_per_completion": "each completion's mean, then the mean over completions, as released",
    "entropy": "TRL 1.16's token-weighted mean over the batch",
}
_HEX_COLOUR = re.compile(r"#[0-9A-Fa-f]{6}")
# How the report writes a number in text: a missing or non-finite value is written ``missing`` ("—" unless
# a page says otherwise), and a minus sign is the typographic ``−`` unless a page keeps ASCII ``-``, so that
# each page's text is what it always was.
MISSING = "—"
MINUS = "−"


def number(
    x: Any,
    decimals: int = 1,
    sign: bool = False,
    *,
    percent: bool = False,
    small: bool = False,
    missing: str = MISSING,
    minus: str = MINUS,
) -> str:
    """``x`` to ``decimals`` decimals (``+`` shown when ``sign``); ``percent`` writes ``100 * x``; ``small``
    writes two significant digits where ``decimals`` decimals would show ±0.00."""
    if x is None or not math.isfinite(x):
        return missing
    if percent:
        x = 100 * x
    if small and x != 0 and abs(x) < 0.5 * 10**-decimals:
        decimals = 1 - math.floor(math.log10(abs(x)))
    text = f"{x:+.{decimals}f}" if sign else f"{x:.{decimals}f}"
    return text.replace("-", minus)


def interval(ci: Sequence[float] | None, decimals: int = 1, sign: bool = False, **kw: Any) -> str:
    """``[lo, hi]``, each written by :func:`number` (``kw``: its options), or "" without an interval."""
    return f"[{number(ci[0], decimals, sign, **kw)}, {number(ci[1], decimals, sign, **kw)}]" if ci else ""


def markdown_table(header: Sequence[Any], rows: Iterable[Sequence[Any]], align: str = "") -> list[str]:
    """The lines of a Markdown table with the cells as given (no padding, so a diff shows changed numbers
    only); ``align`` has a letter per column, ``r`` right-aligned, any other or none left."""
    lines = ["| " + " | ".join(map(str, row)) + " |" for row in [header, *rows]]
    lines.insert(1, "|" + "".join("---:|" if align[i : i + 1] == "r" else "---|" for i in range(len(header))))
    return lines


def _help(text: str) -> dict[str, str]:
    return {"help": text}


@dataclass
class ReportConfig:
    """Options shared by ``cwgrpo table``, ``cwgrpo figure`` and ``cwgrpo claims``."""

    kind: str = field(
        default="paper",
        metadata=_help(
            "'paper' (real benchmarks: absolute numbers are compared with the paper), 'tiny' "
            "(synthetic stand-ins: only effects, e.g. CW-GRPO minus GRPO, are compared) or 'real' (a small "
            "pretrained model on a benchmark of one's choice: only effects are compared)"
        ),
    )
    preset: str = field(
        default="",
        metadata=_help(
            "the preset's name, printed in every table's and figure's footer: a copied file still says "
            "which preset it shows"
        ),
    )
    step: int = field(
        default=100, metadata=_help("training step of Table 1 and of claim 1 (the paper reports step 100)")
    )
    entropy_key: str = field(
        default="entropy_per_completion",
        metadata=_help(
            "metrics.jsonl key of the entropy figure and claim 2: entropy_per_completion (the released "
            "run's statistic: each completion's mean, then the mean over completions) or entropy (TRL "
            "1.16's token-weighted mean over the batch)"
        ),
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
    method_colors: dict[str, str] = field(
        default_factory=dict,
        metadata=_help(
            "method label -> colour as '#RRGGBB' (overrides the defaults). A label the package does not "
            "know gets a spare colour chosen by a hash of its name, which two labels can share: give "
            "distinct colours to a preset's own labels here"
        ),
    )

    def __post_init__(self) -> None:
        if self.kind not in PRESET_KINDS:
            raise ConfigError(f"kind: expected one of {list(PRESET_KINDS)}, got {self.kind!r}")
        if self.entropy_key not in ENTROPY_MEANS:
            raise ConfigError(f"entropy_key: expected one of {list(ENTROPY_MEANS)}, got {self.entropy_key!r}")
        for name in (
            "benchmark_display",
            "benchmark_mirrors",
            "size_display",
            "size_mirrors",
            "method_display",
            "method_colors",
        ):
            value = getattr(self, name)
            if not isinstance(value, Mapping):
                raise ConfigError(f"{name}: expected a mapping name -> value, got {value!r}")
            setattr(self, name, {str(k): str(v) for k, v in value.items()})
        bad = {k: v for k, v in self.method_colors.items() if not _HEX_COLOUR.fullmatch(v)}
        if bad:
            raise ConfigError(f"method_colors: {bad} are not colours of the form '#RRGGBB'")
        for name, paper in (("benchmark_mirrors", PAPER_BENCHMARKS), ("size_mirrors", PAPER_SIZES)):
            bad = {k: v for k, v in getattr(self, name).items() if v not in paper}
            if bad:
                what = name.removesuffix("_mirrors")
                raise ConfigError(f"{name}: {bad} not among the paper's {what}s {list(paper)}")

    def adopt_benchmark_names(self, display: Mapping[str, str], mirrors: Mapping[str, str]) -> None:
        """Take the display names and mirrors the data carries (its manifests, via the summaries) for the
        benchmarks these options do not name: the options override the data, the data the defaults."""
        bad = {
            k: v for k, v in mirrors.items() if k not in self.benchmark_mirrors and v not in PAPER_BENCHMARKS
        }
        if bad:
            raise ResultFileError(
                f"the summaries' benchmark_mirror {bad} is not among the paper's benchmarks "
                f"{list(PAPER_BENCHMARKS)}"
            )
        self.benchmark_display = {**display, **self.benchmark_display}
        self.benchmark_mirrors = {**mirrors, **self.benchmark_mirrors}

    def mark_first_problems(self, first: Mapping[str, int]) -> None:
        """Each benchmark evaluated on its first N problems only gets " (first N)" in its display name
        (unless the name says it already), so every table and figure column shows the cut."""
        for benchmark, n in first.items():
            name = self.benchmark_display.get(benchmark) or PAPER_BENCHMARK_DISPLAY.get(benchmark, benchmark)
            if f"(first {n})" not in name:
                self.benchmark_display[benchmark] = f"{name} (first {n})"

    def stand_in_note(self, benchmarks: Iterable[str], sizes: Iterable[str]) -> str:
        """What in these results is not the paper's own (benchmarks, model sizes), named from the results,
        or "" when everything is: the sentence that says the numbers are not the paper's."""
        parts = []
        benches = [self.benchmark_name(b) for b in benchmarks if self.mirror(b) != b]
        if benches:
            parts.append(f"benchmarks {', '.join(benches)}")
        models = [self.size_name(s) for s in sizes if self.size_mirror(s) != s]
        if models:
            parts.append(f"models {', '.join(models)}")
        if not parts:
            return ""
        return f"Not the paper's own {' and '.join(parts)}: the numbers are not comparable with the paper's."

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
        from cwgrpo_workflow.report.style import method_label

        return self.method_display.get(method) or method_label(method)

    def method_colour(self, method: str) -> str:
        """The colour of a method label in every figure: the configured one, else the package's."""
        from cwgrpo_workflow.report.style import method_color

        return self.method_colors.get(method) or method_color(method)

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
