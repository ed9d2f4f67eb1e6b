"""``cwgrpo claims``: test the paper's four claims on our results, per size, over seeds.

Each claim becomes one measured effect per size, signed so that a positive value supports the claim, with a
95 % t-interval over seeds, and a verdict under one rule (``claim_checks.VERDICT_RULE``); what each claim
measures is written into the report (:func:`claim_texts`). Beside them, the paper's covariance quantile
table for every size and method (``cov_quantiles``). Example::

    cwgrpo claims --summaries results/tiny/eval/*/*/*/step*/*.summary.json \\
        --runs results/tiny/runs/*/*/seed* --out-json results/tiny/claims.json \\
        --out-md results/tiny/claims.md --set kind=tiny
"""

from __future__ import annotations

import argparse
import logging
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from cwgrpo.configs import add_config_arguments, describe_options
from cwgrpo.io import write_json, write_text
from cwgrpo_workflow.report.claim_checks import (
    VERDICT_RULE,
    ClaimsConfig,
    claim_accuracy,
    claim_degradation,
    claim_entropy,
    claim_heavy_tail,
    gaussian_top_share,
    mark_untestable,
    overall,
    report_record,
)
from cwgrpo_workflow.report.cov_quantiles import quantile_markdown, quantile_rows
from cwgrpo_workflow.report.load import (
    add_input_arguments,
    command_options,
    load_reported,
    load_summaries,
    metrics_frame,
)
from cwgrpo_workflow.report.options import ENTROPY_MEANS, interval, markdown_table, number

log = logging.getLogger(__name__)


# -- the report --------------------------------------------------------------------------------------
def claim_texts(cfg: ClaimsConfig, reported: Mapping[str, Any]) -> dict[int, dict[str, str]]:
    t, r = cfg.method_name(cfg.treatment_method), cfg.method_name(cfg.reference_method)
    paper = reported["claims"]
    gains = ", ".join(f"+{v} points at {s.upper()}" for s, v in paper["1"]["effect_points"].items())
    pct = f"{100 * cfg.tail_top_fraction:g} %"
    window = (
        "the whole run"
        if cfg.entropy_window >= 1
        else f"the last {100 * cfg.entropy_window:g} % of each run's steps"
    )
    stat = "sample standard deviation" if cfg.entropy_stat == "std" else "range (max − min)"
    return {
        1: {
            "title": paper["1"]["text"],
            "paper": f"{gains} on the average of five benchmarks at step 100",
            "measure": (
                f"Avg({t}) − Avg({r}) at step {cfg.step}, in accuracy points, where Avg is the mean of the "
                "benchmark accuracies (avg@k of each summary) of one seed; paired by seed."
            ),
        },
        2: {
            "title": paper["2"]["text"],
            "paper": "entropy curves over training (figure)",
            "measure": (
                f"S({r}) − S({t}), where S is the {stat} of the logged per-step policy entropy (nats per "
                f"token; {ENTROPY_MEANS[cfg.entropy_key]}) over {window} (steps > "
                f"{1 - cfg.entropy_window:g} × the run's last step); paired by seed. Positive: the treatment's entropy moves in a narrower band. (A collapse that is over "
                "before the window shows up as a small spread; entropy_window=1 covers the whole run.)"
            ),
        },
        3: {
            "title": paper["3"]["text"],
            "paper": "1.5B checkpoints 100/150/200: GRPO MATH-500 85.0 → 79.8, CW-GRPO 87.0 → 86.4",
            "measure": (
                f"D({r}) − D({t}), where D = Avg(step {cfg.step}) − Avg(late step) is the drop of the benchmark "
                "average (points) and the late step is "
                + (
                    f"{cfg.late_step}"
                    if cfg.late_step is not None
                    else "the last step evaluated for both methods"
                )
                + f"; paired by seed. Precondition: {r}'s mean drop is > 0 (it does degrade), else 'not testable'."
            ),
        },
        4: {
            "title": paper["4"]["text"],
            "paper": "covariance quantiles about ±12 at the 0.01 % tails versus ±0.3 at the 40 % quantile",
            "measure": (
                f"H − {100 * cfg.tail_share_min:g} points, where H is the share (%) of the total |c| carried by "
                f"the top {pct} of sampled tokens by |c| in a step (cov_samples.jsonl of the {cfg.method_name(cfg.tail_method)} "
                f"runs), averaged over logged steps per seed; t-interval over seeds. For scale: a Gaussian gives "
                f"{100 * gaussian_top_share(cfg.tail_top_fraction):.1f} %, a product of two independent Gaussians about 7.1 %."
            ),
        },
    }


def _detail_text(claim: int, r: Mapping[str, Any], cfg: ClaimsConfig) -> str:
    d = r["details"]
    t, ref = cfg.method_name(cfg.treatment_method), cfg.method_name(cfg.reference_method)

    def ci(block: Mapping[str, Any] | None, sign: bool = False, digits: int = 2) -> str:
        if not block:
            return "—"
        ci95 = interval(block.get("ci95"), digits, sign, small=True)
        return f"{number(block['mean'], digits, sign, small=True)} {ci95}".rstrip()

    if claim == 1:
        return f"Avg {t} {ci(d['treatment_avg'])}, {ref} {ci(d['reference_avg'])}"
    if claim == 2:
        return (
            f"{cfg.entropy_stat} {t} {ci(d['treatment_stat'], digits=4)}, {ref} {ci(d['reference_stat'], digits=4)}; "
            f"mean entropy {t} {ci(d['treatment_mean_entropy'], digits=3)}, {ref} {ci(d['reference_mean_entropy'], digits=3)}"
        )
    if claim == 3:
        if d.get("late_step") is None:
            return "no later checkpoint"
        return (
            f"steps {d['step']} → {d['late_step']}: drop {t} {ci(d['treatment_drop'], True)}, "
            f"{ref} {ci(d['reference_drop'], True)}"
        )
    q = d.get("quantile_ratio")
    qtext = f"; logged quantile ratio {ci(q, digits=1)} (Gaussian 14.7, paper ≈ 40)" if q else ""
    return f"top-share {ci(d['top_share_pct'])} % vs threshold {d['threshold_pct']:g} % (Gaussian {d['gaussian_share_pct']:.1f} %){qtext}"


def claims_markdown(report: Mapping[str, Any], cfg: ClaimsConfig) -> str:
    lines = [
        "# The paper's four claims, measured",
        "",
        (f"Preset `{cfg.preset}` (kind `{cfg.kind}`)" if cfg.preset else f"Kind `{cfg.kind}`")
        + f"; treatment {cfg.method_name(cfg.treatment_method)}, reference "
        f"{cfg.method_name(cfg.reference_method)}; step {cfg.step}. Effects are means over seeds with 95 % "
        "t-intervals over seeds (paired by seed where the seeds match).",
        "",
        f"**Verdict rule.** {VERDICT_RULE}",
        "",
    ]
    if report.get("stand_in"):
        lines += [
            f"{report['stand_in']} A verdict here says whether the *effect* the paper describes appears in "
            "these runs, not whether the paper's numbers are reproduced.",
            "",
        ]
    lines += markdown_table(
        ["#", "Claim", "Verdict"], [(c["id"], c["title"], f"**{c['verdict']}**") for c in report["claims"]]
    )
    lines.append("")
    for c in report["claims"]:
        lines += [
            f"## Claim {c['id']}: {c['title']} — **{c['verdict']}**",
            "",
            f"- Paper: {c['paper']}.",
            f"- Measure: {c['measure']}",
            f"- Rule: {c['rule']}",
            "",
        ]
        rows = []
        for r in c["per_size"]:
            e = r["effect"]
            ci = interval(e.get("ci95"), 2, True, small=True) or "unavailable (< 2 seeds)"
            cells = [
                r["size_display"], f"{number(e['mean'], 2, True, small=True)} {r['unit']}", ci, str(e["n"]), r["verdict"], r["reason"],
                _detail_text(c["id"], r, cfg),
            ]  # fmt: skip
            rows.append([x.replace("|", "\\|") for x in cells])
        header = ["Size", "Effect", "95 % CI", "Seeds", "Verdict", "Why", "Details"]
        lines += [*markdown_table(header, rows, "lrlr"), ""]
    lines += quantile_markdown(report.get("cov_quantiles", []), cfg.size_name, cfg.method_name)
    return "\n".join(lines)


def evaluate_claims(
    cfg: ClaimsConfig, summaries: Sequence[Path], runs: Sequence[Path], reported_path: Path | None = None
) -> dict[str, Any]:
    """Measure the four claims; returns the JSON report (without provenance)."""
    frame = load_summaries(summaries, cfg)
    metrics = metrics_frame(runs)
    sizes = cfg.order_sizes(set(frame["size"]) | set(metrics["size"]))
    texts = claim_texts(cfg, load_reported(reported_path))
    results = {
        1: claim_accuracy(frame, cfg, sizes),
        2: claim_entropy(metrics, cfg, sizes),
        3: claim_degradation(frame, cfg, sizes),
        4: claim_heavy_tail(runs, metrics, cfg, sizes),
    }
    claims = []
    for i, per_size in results.items():
        needed = (cfg.tail_method,) if i == 4 else (cfg.treatment_method, cfg.reference_method)
        mark_untestable(per_size, runs, needed)
        claims.append(
            {
                "id": i,
                **texts[i],
                "rule": "holds if the 95 % CI of the measure lies above 0; does not hold if it lies below 0; "
                "inconclusive otherwise (one seed gives no CI)"
                + ("; not testable if the precondition fails" if i == 3 else ""),
                "verdict": overall([r["verdict"] for r in per_size]),
                "per_size": per_size,
            }
        )
    stand_in = cfg.stand_in_note(sorted(set(frame["benchmark"])), sizes)
    quantiles = quantile_rows(runs, sizes)
    return {
        "verdict_rule": VERDICT_RULE,
        "sizes": sizes,
        "stand_in": stand_in,
        "claims": claims,
        "cov_quantiles": quantiles,
    }


# -- command -----------------------------------------------------------------------------------------
def configure_parser(parser: argparse.ArgumentParser) -> None:
    add_input_arguments(parser)
    parser.add_argument("--out-json", required=True, type=Path, help="e.g. results/<preset>/claims.json")
    parser.add_argument("--out-md", required=True, type=Path, help="e.g. results/<preset>/claims.md")
    parser.add_argument("--reported", type=Path, default=None, help="the paper's numbers (default: packaged)")
    add_config_arguments(parser)
    parser.epilog = describe_options(ClaimsConfig)


OUTPUTS = ("out_json", "out_md")  # every other path argument is read (cwgrpo.cli)


def run(args: argparse.Namespace) -> int:
    cfg = command_options(ClaimsConfig, args, OUTPUTS)
    report = evaluate_claims(cfg, list(args.summaries), list(args.runs), args.reported)
    write_json(args.out_json, report_record(report, cfg, args.summaries, args.runs))
    write_text(args.out_md, claims_markdown(report, cfg))
    for c in report["claims"]:
        log.info("claim %d: %s", c["id"], c["verdict"])
    return 0
