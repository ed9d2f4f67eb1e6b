"""The pre-registered studies side by side (docs/study/README.md), from their ``study.json`` files.

Each study's claims are its own (``cwgrpo study``); this module only puts them next to each other: one
table of every claim's effect, interval, MDE and verdict in each study ("not registered" where a study did
not register the claim), the regime's effect on claim 1 between the two tiny-model studies
(the second study's mean paired difference minus the first's, a Welch interval: the studies share seed
numbers, not runs), the exploratory comparisons computed as the claims are (each method against the base
model, CW-GRPO as described and Clip-Cov against GRPO: effect, interval, MDE), and one figure of the
checkpoint curves, a panel a study. The page
holds the table between ``<!-- generated: study-pair -->`` markers; ``--write`` rewrites it::

    python -m cwgrpo_workflow.report.study_pair --write
"""

from __future__ import annotations

import argparse
import functools
import math
import statistics
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, NamedTuple

from cwgrpo.io import read_json
from cwgrpo.stats import seed_effect
from cwgrpo_workflow.report.load import load_reported
from cwgrpo_workflow.report.options import markdown_table
from cwgrpo_workflow.report.readme_tables import rewrite
from cwgrpo_workflow.report.study import MEASURES, ci_text, num_text, secondary, shown_verdict
from cwgrpo_workflow.report.style import apply_style, method_color, new_figure, save_figure


class Study(NamedTuple):
    """One study's report (its ``claims.json`` lies beside it), its regime, its model and the claims its
    registration tested, for the page."""

    path: Path
    regime: str
    model: str
    registered: tuple[int | str, ...] = (1, 2, 3, 4)


TINY = "tiny `small`: 1M parameters, 266 tokens"
STUDIES = {
    "first": Study(Path("docs/study/results/study.json"), "lr 2e-4 constant, no KL", TINY),
    "second": Study(
        Path("docs/study/results-regime/study.json"), "lr 2e-4 cosine to 0.1, 10 % warm-up, KL 0.04", TINY
    ),
    "third": Study(
        Path("docs/study/results-smollm2/study.json"),
        "lr 3e-5 cosine to 0.1, 10 % warm-up, KL 0.04",
        "SmolLM2-135M-Instruct: 135M parameters, 49,152 tokens",
        registered=(1, "M", 4),
    ),
}
METHODS = ("grpo", "cw_grpo", "cw_grpo_nograd", "cw_grpo_described", "clip_cov")  # those a study ran
CLAIM_ORDER: tuple[int | str, ...] = (1, "M", 2, 3, 4)
# Exploratory comparisons beside the registered claims (no verdicts): (first, second, measure). "base" is
# the base model's one evaluation, the same number for every seed.
BASE = "base"
EXPLORATORY = (
    ("grpo", BASE, "avg_last"),
    ("cw_grpo", BASE, "avg_last"),
    ("cw_grpo_described", "cw_grpo", "avg_last"),
    *(
        (v, "grpo", m)
        for v in ("cw_grpo_described", "clip_cov")
        for m in ("avg_last", "entropy_range", "best_minus_last")
    ),
)
NAMES = {
    BASE: "base model",
    "grpo": "GRPO",
    "cw_grpo": "CW-GRPO as released",
    "cw_grpo_nograd": "CW-GRPO as released, no gradient through the weight",
    "cw_grpo_described": "CW-GRPO as described",
    "clip_cov": "Clip-Cov",
}


def claim_differences(report: Mapping[str, Any]) -> dict[int, float]:
    """seed -> T − R of claim 1's measure (Avg at the last checkpoint), from one study's measures."""
    cfg = report["config"]
    t = report["measures"][cfg["treatment_method"]]["avg_last"]
    r = report["measures"][cfg["reference_method"]]["avg_last"]
    return {int(s): t[s] - r[s] for s in t if s in r}


def regime_effect(first: Mapping[str, Any], second: Mapping[str, Any]) -> dict[str, Any]:
    """Claim 1's effect in the second study minus the first's; unpaired (Welch), since no run is shared."""
    d1, d2 = claim_differences(first), claim_differences(second)
    shifted = {s + 1 + max(d1): v for s, v in d2.items()}  # disjoint keys: seed_effect then does not pair
    return seed_effect(shifted, d1).as_dict()


def claims_table(reports: Mapping[str, Mapping[str, Any]]) -> str:
    """One row per claim: effect [CI], MDE and verdict in each study ("precondition failed" for a gated
    claim of a study whose precondition failed, "not registered" for a claim its registration left out)."""
    labels = list(reports)
    header = ["#", "measure", *(f"{lab} study: effect [95 % CI], MDE → verdict" for lab in labels)]
    rows = []
    by_id = {lab: {c["id"]: c for c in rep["claims"]} for lab, rep in reports.items()}
    for cid in (i for i in CLAIM_ORDER if any(i in claims for claims in by_id.values())):
        first = next(claims[cid] for claims in by_id.values() if cid in claims)
        cells = []
        for lab in labels:
            c = by_id[lab].get(cid)
            if c is None or cid not in STUDIES[lab].registered:
                cells.append("n/a" if c is None else "not registered")
                continue
            digits = 3 if c.get("unit") == "nats" else 1
            mean = c["effect"].get("mean")
            mde = c.get("mde_80")
            cells.append(
                f"{num_text(mean, digits)} {ci_text(c['effect'], digits)}"
                + (f", MDE {mde:.{digits}f}" if isinstance(mde, float) else "")
                + f" → {verdict_text(c, shown_verdict(c, reports[lab]['regime']['precondition']))}"
            )
        rows.append([cid, first.get("measure", first.get("claim", "")), *cells])
    return "\n".join(markdown_table(header, rows)) + "\n"


@functools.cache
def paper_effect(claim_id: int | str) -> float | None:
    """The paper's own effect for a claim where it reports one: claim 1, CW-GRPO's Avg minus GRPO's at the
    1.5B size in Table 1 (the size the studies stand in for)."""
    if claim_id != 1:
        return None
    rows = {r["method"]: r["avg"] for r in load_reported(None)["table1"]["rows"] if r["size"] == "1.5b"}
    return round(rows["cw_grpo"] - rows["grpo"], 1)


def verdict_text(claim: Mapping[str, Any], verdict: str) -> str:
    """The registered verdict and what its interval excludes: 0, and the paper's effect where it has one.
    A verdict whose interval contains 0 is the registered rule's word, not a refutation, and is not bold."""
    lo, hi = claim["effect"].get("lo"), claim["effect"].get("hi")
    if not (isinstance(lo, (int, float)) and isinstance(hi, (int, float)) and math.isfinite(lo + hi)):
        return f"**{verdict}**"  # no interval to say anything of
    paper = paper_effect(claim["id"])
    points = [("0", 0.0), *([(f"the paper's {paper:+.1f}", paper)] if paper is not None else [])]
    excluded = [name for name, x in points if not lo <= x <= hi]
    contained = [name for name, x in points if lo <= x <= hi]
    if lo > 0.0 or hi < 0.0:
        words = f"**{verdict}**"
    else:
        words = f"{verdict} (registered rule: mean ≤ 0)" if verdict == "does not hold" else verdict
    parts = [
        f"excludes {' and '.join(excluded)}" if excluded else "",
        f"contains {' and '.join(contained)}" if contained else "",
    ]
    return f"{words}; " + "; ".join(p for p in parts if p)


def exploratory_effect(
    report: Mapping[str, Any], first: str, second: str, measure: str
) -> dict[str, Any] | None:
    """``first`` vs ``second`` on ``measure`` as the claims compute it (paired by seed, signed so that a
    positive value favours ``first``, MDE from the spread of the differences); None where the study did
    not run a method."""
    ms = report["measures"]
    if first not in ms or (second != BASE and second not in ms):
        return None
    t = {int(s): v for s, v in ms[first][measure].items()}
    r = (
        {s: report["base_avg"] for s in t}
        if second == BASE
        else {int(s): v for s, v in ms[second][measure].items()}
    )
    return secondary(measure, t, r)


def exploratory_table(reports: Mapping[str, Mapping[str, Any]]) -> str:
    """One row per exploratory comparison: effect [CI], MDE in each study (n/a where it did not run)."""
    labels = list(reports)
    header = ["comparison", "measure", *(f"{lab} study: effect [95 % CI], MDE" for lab in labels)]
    rows = []
    for first, second, measure in EXPLORATORY:
        digits = 3 if MEASURES[measure][0] == "nats" else 1
        cells = []
        for rep in reports.values():
            e = exploratory_effect(rep, first, second, measure)
            if e is None:
                cells.append("n/a")
            elif measure == "best_minus_last" and len(rep["steps"]) < 2:
                cells.append("n/a: one checkpoint")  # best is last: 0 by construction, not a measurement
            else:
                cells.append(
                    f"{num_text(e['mean'], digits)} {ci_text(e, digits)}, MDE {e['mde_80']:.{digits}f}"
                )
        rows.append([f"{NAMES[first]} − {NAMES[second]}", measure, *cells])
    return "\n".join(markdown_table(header, rows)) + "\n"


def tail_ratio(claims: Mapping[str, Any]) -> dict[str, Any] | None:
    """GRPO's covariance tail ratio (q99.99 − q0.01)/(q60 − q40) over seeds, from claim 4 of ``claims.json``
    (``cwgrpo_workflow.report.claim_checks``); None where the report has none."""
    for claim in claims.get("claims", []):
        if claim.get("id") == 4:
            for size in claim.get("per_size", []):
                found = (size.get("details") or {}).get("quantile_ratio")
                if found:
                    return found
    return None


def ratio_text(ratio: Mapping[str, Any] | None) -> str:
    """A tail ratio as ``mean [lo, hi], median m`` in whole numbers (one seed's extreme ratio pulls the mean),
    or ``n/a``."""
    if not ratio:
        return "n/a"
    median = statistics.median(ratio["per_seed"].values()) if ratio.get("per_seed") else None
    return f"{ratio['mean']:.0f} [{ratio['ci95'][0]:.0f}, {ratio['ci95'][1]:.0f}]" + (
        f", median {median:.0f}" if median is not None else ""
    )


def regime_rows(reports: Mapping[str, Mapping[str, Any]]) -> str:
    """Each study's model, regime, covariance tail and precondition in one line each."""
    header = ["study", "model", "regime", "base Avg", "tail ratio [95 % CI], median", "GRPO unstable (seeds)",
              "precondition of claims 2, 3"]  # fmt: skip
    rows = []
    for lab, rep in reports.items():
        reg, study = rep["regime"], STUDIES[lab]
        gate = ("holds" if reg["precondition"] else "fails") if 2 in study.registered else "not registered"
        rows.append([lab, study.model, study.regime, f"{rep['base_avg']:.1f}", ratio_text(rep.get("tail_ratio")),
                     f"{reg['unstable_seeds']} of {len(reg['per_seed'])}", gate])  # fmt: skip
    return "\n".join(markdown_table(header, rows, "lllr")) + "\n"


def page_block(reports: Mapping[str, Mapping[str, Any]]) -> str:
    first, second = reports["first"], reports["second"]
    eff = regime_effect(first, second)
    n1, n2 = len(claim_differences(first)), len(claim_differences(second))
    entropy = "; ".join(
        f"{lab} study `{rep['config'].get('entropy_key', 'entropy')}`"
        for lab, rep in reports.items()
        if 2 in STUDIES[lab].registered
    )
    return (
        regime_rows(reports)
        + "\nTail ratio: GRPO's (q99.99 − q0.01)/(q60 − q40) of the token covariance, mean over seeds (claim 4 of "
        "each study's `claims.json`); the paper's quantiles give about 40, a Gaussian 14.7.\n\n"
        + claims_table(reports)
        + "\nVerdicts are each registration's rule: 'does not hold' for a mean ≤ 0 whatever the interval, in "
        "bold only where the interval excludes 0. Each study's `claims.md` applies `cwgrpo claims`' rule to "
        "the same numbers, which calls an interval that reaches 0 'inconclusive': the two pages differ there "
        "by rule, not by data.\n"
        + f"\nClaim 2's entropy statistic, as each study registered it: {entropy} (a study.json without "
        "`entropy_key` was analysed on TRL's token mean, `entropy`).\n"
        + "\nThe regime's effect on claim 1 (the second study's CW-GRPO − GRPO at the last checkpoint minus "
        f"the first's; Welch interval, {n1} and {n2} seeds): **{num_text(eff['mean'], 1)} points {ci_text(eff, 1)}**.\n"
        + "\nExploratory comparisons (no verdicts), computed as the claims are: paired by seed, signed so that a "
        "positive value favours the first-named (a narrower entropy range, a smaller drop from the best "
        "checkpoint); the base model is one evaluation, the same for every seed, so its own sampling noise "
        "is not in those intervals:\n\n" + exploratory_table(reports)
    )


def curves_figure(
    reports: Mapping[str, Mapping[str, Any]], methods: Sequence[str], pdf: Path, png: Path
) -> None:
    """Mean Avg over seeds at each checkpoint (the base model as step 0), min–max band, one panel a study."""
    apply_style()
    footer = "Avg of each study's held-out splits, mean over seeds; band: min–max over seeds"
    fig, axes = new_figure(1, len(reports), max(6.8, 2.4 * len(reports)), 2.6, footer, sharey=True)
    for ax, (lab, rep) in zip(axes[0], reports.items(), strict=True):
        for m in methods:
            seeds = rep["curves"].get(m)
            if not seeds:
                continue
            steps = sorted({int(s) for c in seeds.values() for s in c})
            per_step = [[c[str(s)] for c in seeds.values()] for s in steps]
            xs = [0, *steps]
            mean = [rep["base_avg"], *(statistics.fmean(v) for v in per_step)]
            ax.plot(xs, mean, color=method_color(m), label=m, marker="o", markersize=2.5)
            lo = [rep["base_avg"], *(min(v) for v in per_step)]
            hi = [rep["base_avg"], *(max(v) for v in per_step)]
            ax.fill_between(xs, lo, hi, color=method_color(m), alpha=0.15, linewidth=0)
        ax.set_title(f"{lab} study\n{STUDIES[lab].regime}", fontsize=7)
        ax.set_xlabel("step")
    axes[0][0].set_ylabel("Avg (points)")
    axes[0][-1].legend(loc="best")
    save_figure(fig, pdf, png)


OUTPUTS = ("page", "figure")  # the page is read and rewritten in place; the studies are read


def file_arguments(args: argparse.Namespace) -> tuple[list[Path], list[Path]]:
    """The two studies (read) and the figure's PDF beside its PNG (written), for ``cwgrpo.cli``'s check."""
    read = [p for study in STUDIES.values() for p in (study.path, study.path.with_name("claims.json"))]
    return read, [args.figure.with_suffix(".pdf")]


def run(args: argparse.Namespace) -> int:
    reports = {
        lab: {**read_json(s.path), "tail_ratio": tail_ratio(read_json(s.path.with_name("claims.json")))}
        for lab, s in STUDIES.items()
    }
    differs = f"{args.page} is not what the study files give: run with --write"
    rc = rewrite(args.page, {"study-pair": page_block(reports)}, args.write, differs)
    if args.write:
        curves_figure(reports, METHODS, args.figure.with_suffix(".pdf"), args.figure)
    return rc


def main(argv: list[str] | None = None) -> int:
    from cwgrpo.cli import run_checked

    p = argparse.ArgumentParser(
        prog="python -m cwgrpo_workflow.report.study_pair",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--page", type=Path, default=Path("docs/study/README.md"))
    p.add_argument("--figure", type=Path, default=Path("docs/study/regimes.png"))
    p.add_argument("--write", action="store_true", help="rewrite the page's block and the figure")
    return run_checked(sys.modules[__name__], p, argv, run)


if __name__ == "__main__":
    sys.exit(main())
