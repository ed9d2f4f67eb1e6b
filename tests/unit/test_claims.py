"""Unit tests of ``cwgrpo claims`` (cwgrpo_workflow.report.claims) on hand-made results with hand-computed effects.

Three seeds throughout, so every interval is mean ± t_{0.975, 2} · sd / sqrt(3), t = 4.302652729911275.
"""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

import pytest

from cwgrpo.cli import main
from cwgrpo.io import ResultFileError
from cwgrpo.stats import Effect
from cwgrpo_workflow.report.claim_checks import (
    FAILS,
    HOLDS,
    INCONCLUSIVE,
    NOT_TESTABLE,
    ClaimsConfig,
    decide,
    gaussian_top_share,
    silent_runs,
    top_share,
)
from cwgrpo_workflow.report.claims import claims_markdown, evaluate_claims
from tests.hand import t_interval_3
from tests.summaries import write_summary

BENCHES = ("b1", "b2")


def write_run(root: Path, size, method, seed, entropy: list[float], big: float) -> Path:
    """A run whose one cov_samples line has 99 tokens with |c| = 1 and one with |c| = ``big``."""
    run = root / "runs" / size / method / f"seed{seed}"
    run.mkdir(parents=True)
    (run / "run.json").write_text(json.dumps({"tags": {"size": size, "method": method, "seed": seed}}))
    # TRL's token-weighted entropy twice the released statistic: claim 2 must read the one it is told to
    lines = [{"step": i + 1, "entropy": 2 * e, "entropy_per_completion": e} for i, e in enumerate(entropy)]
    (run / "metrics.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))
    cov = [1.0, -1.0] * 49 + [1.0, -big]
    (run / "cov_samples.jsonl").write_text(json.dumps({"step": 5, "cov": cov, "weight": [1.0] * 100}) + "\n")
    return run


# Benchmark averages per (method, seed): step 100 and step 200. Each benchmark is avg ± 0.05.
AVG_100 = {"grpo": [0.55, 0.57, 0.53], "cw_grpo": [0.58, 0.61, 0.58]}  # diffs .03 .04 .05
AVG_200 = {"grpo": [0.50, 0.53, 0.47], "cw_grpo": [0.58, 0.60, 0.59]}  # drops grpo .05 .04 .06, cw 0 .01 -.01
AMPLITUDE = {"grpo": [0.2, 0.3, 0.4], "cw_grpo": [0.0, 0.0, 0.0]}  # second-half entropy wobble
BIG = {"grpo": [99.0, 49.0, 149.0], "cw_grpo": [1.0, 1.0, 1.0]}


def make_inputs(root: Path, swap: bool = False, seeds=(0, 1, 2), sizes=("small",)):
    """Summaries and runs; ``swap=True`` exchanges the two methods' numbers (every claim flips)."""
    summaries, runs = [], []
    for size in sizes:
        for method in ("grpo", "cw_grpo"):
            src = {"grpo": "cw_grpo", "cw_grpo": "grpo"}[method] if swap else method
            for seed in seeds:
                for step, table in ((100, AVG_100), (200, AVG_200)):
                    avg = table[src][seed]
                    for bench, acc in zip(BENCHES, (avg - 0.05, avg + 0.05), strict=True):
                        summaries.append(write_summary(root, size, method, seed, step, bench, acc))
                a = AMPLITUDE[src][seed]
                # steps 1-5 (first half): a large swing that the window must ignore; steps 6-10: 0, a, 0, a, 0
                entropy = [2.0, 0.0, 2.0, 0.0, 2.0, 0.5, 0.5 + a, 0.5, 0.5 + a, 0.5]
                big = BIG["grpo"][seed]  # the tail is measured on grpo's runs; same for both methods
                runs.append(write_run(root, size, method, seed, entropy, big))
    return summaries, runs


def by_id(report) -> dict[int, dict]:
    return {c["id"]: c for c in report["claims"]}


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    root = tmp_path_factory.mktemp("claims")
    return evaluate_claims(ClaimsConfig(kind="tiny"), *make_inputs(root))


@pytest.fixture(scope="module")
def flipped(tmp_path_factory):
    root = tmp_path_factory.mktemp("flipped")
    return evaluate_claims(ClaimsConfig(kind="tiny"), *make_inputs(root, swap=True))


def test_claim1_accuracy_effect_by_hand(report):
    r = by_id(report)[1]["per_size"][0]
    m, lo, hi = t_interval_3([3.0, 4.0, 5.0])  # points
    assert r["effect"]["mean"] == pytest.approx(m) and m == pytest.approx(4.0)
    assert r["effect"]["ci95"] == pytest.approx([lo, hi])
    assert r["effect"]["paired"] and r["effect"]["n"] == 3
    assert r["verdict"] == HOLDS and by_id(report)[1]["verdict"] == HOLDS


def test_claim2_entropy_std_second_half_by_hand(report):
    r = by_id(report)[2]["per_size"][0]
    # std (ddof 1) of (0, a, 0, a, 0) is a * sqrt(0.3); cw is flat (0)
    m, lo, hi = t_interval_3([a * math.sqrt(0.3) for a in AMPLITUDE["grpo"]])
    assert r["effect"]["mean"] == pytest.approx(m)
    assert r["effect"]["ci95"] == pytest.approx([lo, hi])
    assert r["verdict"] == HOLDS


def test_claim2_entropy_range_option(tmp_path):
    rep = evaluate_claims(ClaimsConfig(kind="tiny", entropy_stat="range"), *make_inputs(tmp_path))
    r = by_id(rep)[2]["per_size"][0]
    assert r["effect"]["mean"] == pytest.approx(0.3)  # ranges 0.2, 0.3, 0.4 vs 0


def test_claim2_reads_the_entropy_statistic_it_is_told_to(tmp_path):
    summaries, runs = make_inputs(tmp_path)
    cfg = ClaimsConfig(kind="tiny", entropy_stat="range", entropy_key="entropy")
    r = by_id(evaluate_claims(cfg, summaries, runs))[2]
    assert r["per_size"][0]["effect"]["mean"] == pytest.approx(0.6)  # TRL's statistic: twice the released
    assert "token-weighted" in r["measure"]
    for run in runs:  # runs logged before the released statistic existed: the error names it
        path = run / "metrics.jsonl"
        path.write_text(path.read_text().replace('"entropy_per_completion"', '"other"'))
    with pytest.raises(ResultFileError, match="entropy_per_completion"):
        evaluate_claims(ClaimsConfig(kind="tiny"), summaries, runs)


def test_claim2_whole_run_window_sees_first_half(tmp_path):
    rep = evaluate_claims(ClaimsConfig(kind="tiny", entropy_window=1.0), *make_inputs(tmp_path))
    d = by_id(rep)[2]["per_size"][0]["details"]
    assert d["treatment_stat"]["mean"] > 0.5  # the first-half swing of 2.0 now counts


def test_claim3_degradation_by_hand(report):
    r = by_id(report)[3]["per_size"][0]
    drops_grpo, drops_cw = [5.0, 4.0, 6.0], [0.0, 1.0, -1.0]
    m, lo, hi = t_interval_3([g - c for g, c in zip(drops_grpo, drops_cw, strict=True)])  # 5, 3, 7
    assert r["details"]["late_step"] == 200
    assert r["effect"]["mean"] == pytest.approx(m)
    assert r["effect"]["ci95"] == pytest.approx([lo, hi])
    assert r["details"]["reference_drop"]["mean"] == pytest.approx(5.0)
    assert r["verdict"] == HOLDS


def test_claim3_needs_grpo_to_degrade(tmp_path):
    summaries, runs = make_inputs(tmp_path)
    # Rewrite step 200 so that both improve, cw more: effect > 0 but the precondition fails.
    for seed in range(3):
        for method, avg in (("grpo", 0.60), ("cw_grpo", 0.70)):
            for bench, acc in zip(BENCHES, (avg - 0.05, avg + 0.05), strict=True):
                write_summary(tmp_path, "small", method, seed, 200, bench, acc)
    rep = evaluate_claims(ClaimsConfig(kind="tiny"), summaries, runs)
    r = by_id(rep)[3]["per_size"][0]
    assert r["effect"]["mean"] > 0
    assert (
        r["verdict"] == NOT_TESTABLE and r["reason"] == "GRPO does not degrade (mean drop -5.00 points ≤ 0)"
    )
    assert by_id(rep)[3]["verdict"] == NOT_TESTABLE


def test_claim3_without_later_checkpoint_is_not_testable(tmp_path):
    summaries, runs = make_inputs(tmp_path)
    summaries = [p for p in summaries if "step200" not in p.as_posix()]
    r = by_id(evaluate_claims(ClaimsConfig(kind="tiny"), summaries, runs))[3]["per_size"][0]
    assert r["verdict"] == NOT_TESTABLE and r["reason"] == "no checkpoint after step 100"


def test_claim4_heavy_tail_by_hand(report):
    r = by_id(report)[4]["per_size"][0]
    shares = [b / (b + 99.0) for b in BIG["grpo"]]  # top 1 % of 100 tokens = the one big token
    m, lo, hi = t_interval_3([100 * s for s in shares])
    assert r["details"]["top_share_pct"]["mean"] == pytest.approx(m)
    assert r["effect"]["mean"] == pytest.approx(m - 10.0)  # threshold 10 %
    assert r["effect"]["ci95"] == pytest.approx([lo - 10.0, hi - 10.0])
    assert r["details"]["gaussian_share_pct"] == pytest.approx(100 * gaussian_top_share(0.01))
    assert r["verdict"] == HOLDS


def test_top_share_and_gaussian_reference():
    assert top_share([1.0] * 99 + [99.0], 0.01) == pytest.approx(0.5)
    assert top_share([2.0] * 200, 0.01) == pytest.approx(0.01)  # k = 2 of 200 equal tokens
    assert math.isnan(top_share([0.0, 0.0], 0.01))
    assert gaussian_top_share(0.01) == pytest.approx(0.036245, abs=1e-6)


def test_verdicts_flip_when_inputs_flip(flipped):
    """Swapped, claims 1 and 2 fail (intervals below 0); claim 3's GRPO then does not degrade (its drops
    are CW-GRPO's 0, 1, -1), so claim 3 cannot be tested."""
    claims = by_id(flipped)
    for i in (1, 2):
        assert claims[i]["per_size"][0]["verdict"] == FAILS, i
        assert claims[i]["per_size"][0]["effect"]["ci95"][1] < 0
    assert claims[1]["per_size"][0]["effect"]["mean"] == pytest.approx(-4.0)
    assert claims[3]["per_size"][0]["verdict"] == NOT_TESTABLE


def test_claim4_fails_without_a_tail(tmp_path):
    summaries, runs = make_inputs(tmp_path)
    for run in runs:  # every token |c| = 1: the top 1 % carries 1 % of the mass
        (run / "cov_samples.jsonl").write_text(json.dumps({"step": 5, "cov": [1.0] * 100}) + "\n")
    r = by_id(evaluate_claims(ClaimsConfig(kind="tiny"), summaries, runs))[4]["per_size"][0]
    assert r["effect"]["mean"] == pytest.approx(1.0 - 10.0)
    assert r["verdict"] == FAILS


def test_one_seed_ci_unavailable_and_inconclusive(tmp_path):
    rep = evaluate_claims(ClaimsConfig(kind="tiny"), *make_inputs(tmp_path, seeds=(0,)))
    r = by_id(rep)[1]["per_size"][0]
    assert r["effect"]["ci95"] is None and r["effect"]["mean"] == pytest.approx(3.0)
    assert r["verdict"] == INCONCLUSIVE and "fewer than 2 seeds" in r["reason"]
    md = claims_markdown(rep, ClaimsConfig(kind="tiny"))
    assert "unavailable (< 2 seeds)" in md


def effect(mean: float, lo: float = math.nan, hi: float = math.nan, n: int = 1) -> Effect:
    return Effect(mean, lo, hi, n, True, tuple(range(n)))


@pytest.mark.parametrize(
    ("eff", "untestable", "verdict", "reason"),
    [
        (effect(0.0), "", INCONCLUSIVE, "fewer than 2 seeds"),  # exactly 0, one seed
        (effect(-4.0), "", INCONCLUSIVE, "fewer than 2 seeds"),  # negative, one seed
        (effect(4.0), "", INCONCLUSIVE, "fewer than 2 seeds"),
        (effect(-2.0, -3.0, -1.0, n=2), "", FAILS, "the whole 95 % CI is below 0"),
        (effect(-2.0, -3.0, 0.5, n=2), "", INCONCLUSIVE, "the 95 % CI includes 0"),
        (effect(0.0, -1.0, 1.0, n=3), "", INCONCLUSIVE, "the 95 % CI includes 0"),
        (effect(2.0, 1.0, 3.0, n=2), "", HOLDS, "the whole 95 % CI is above 0"),
        (effect(2.0, 1.0, 3.0, n=2), "GRPO does not degrade", NOT_TESTABLE, "GRPO does not degrade"),
        (effect(math.nan, n=0), "", INCONCLUSIVE, "no measurement"),
    ],
)
def test_decide_needs_two_seeds_to_fail_and_a_precondition_to_test(eff, untestable, verdict, reason):
    assert decide(eff, untestable=untestable)[0] == verdict
    assert decide(eff, untestable=untestable)[1].startswith(reason)


def test_overall_verdict_needs_every_size(tmp_path):
    summaries, runs = make_inputs(tmp_path, sizes=("small", "large"))
    # large: cw 5-7 points below grpo at step 100 -> claim 1 fails there, so it fails overall
    for seed in range(3):
        for bench, acc in zip(BENCHES, (0.50, 0.60), strict=True):
            write_summary(tmp_path, "large", "cw_grpo", seed, 100, bench, acc - 0.05 - 0.01 * seed)
            write_summary(tmp_path, "large", "grpo", seed, 100, bench, acc)
    c1 = by_id(evaluate_claims(ClaimsConfig(kind="tiny"), summaries, runs))[1]
    assert [r["verdict"] for r in c1["per_size"]] == [HOLDS, FAILS]  # order: small, large
    assert c1["verdict"] == FAILS


def test_claims_missing_method_names_it(tmp_path):
    summaries, runs = make_inputs(tmp_path)
    summaries = [p for p in summaries if "/cw_grpo/" not in p.as_posix()]
    with pytest.raises(ResultFileError, match="size=small method=cw_grpo step=100"):
        evaluate_claims(ClaimsConfig(kind="tiny"), summaries, runs)


def test_claims_missing_cov_samples_names_it(tmp_path):
    summaries, runs = make_inputs(tmp_path)
    (runs[0] / "cov_samples.jsonl").unlink()
    with pytest.raises(ResultFileError, match=r"cov_samples\.jsonl"):
        evaluate_claims(ClaimsConfig(kind="tiny"), summaries, runs)


def test_claims_empty_tail_samples_names_what_is_missing(tmp_path):
    summaries, runs = make_inputs(tmp_path)
    for run in runs:
        (run / "cov_samples.jsonl").write_text("")
    with pytest.raises(ResultFileError, match="size=small method=grpo"):
        evaluate_claims(ClaimsConfig(kind="tiny"), summaries, runs)


def test_claims_on_runs_with_only_zero_covariances_say_not_testable(tmp_path):
    """A run whose every group had zero reward spread logs c = 0 everywhere: claim 4 cannot be tested,
    and the report says so instead of stopping the workflow."""
    summaries, runs = make_inputs(tmp_path)
    for run in runs:
        (run / "cov_samples.jsonl").write_text(json.dumps({"step": 1, "cov": [0.0] * 10}) + "\n")
    claim = by_id(evaluate_claims(ClaimsConfig(kind="tiny"), summaries, runs))[4]
    (r,) = claim["per_size"]
    assert (r["verdict"], claim["verdict"]) == (NOT_TESTABLE, NOT_TESTABLE)
    assert r["reason"].startswith("no learning signal: every sampled covariance is 0 (seeds 0, 1, 2)")
    assert r["effect"]["mean"] is None and r["effect"]["n"] == 3


def test_claims_of_a_size_whose_run_recorded_no_learning_signal_are_not_testable(tmp_path):
    summaries, runs = make_inputs(tmp_path, sizes=("small", "large"))
    silent = next(r for r in runs if "/large/grpo/seed1" in r.as_posix())
    info = json.loads((silent / "run.json").read_text())
    info["learning_signal"] = [{"cause": "zero_reward_spread", "from_step": 1, "to_step": 10}]
    (silent / "run.json").write_text(json.dumps(info))
    report = evaluate_claims(ClaimsConfig(kind="tiny"), summaries, runs)
    for claim in report["claims"]:
        small, large = claim["per_size"]
        assert small["verdict"] == HOLDS and large["verdict"] == NOT_TESTABLE
        assert claim["verdict"] == INCONCLUSIVE  # holds where testable, but not for every size
        assert (
            large["reason"] == "no learning signal in training (grpo seed 1: zero reward spread, steps 1-10)"
        )
    assert "| not testable | no learning signal in training" in claims_markdown(
        report, ClaimsConfig(kind="tiny")
    )


def test_claims_cli_writes_json_and_markdown_with_rules(tmp_path):
    summaries, runs = make_inputs(tmp_path / "r")
    out_json, out_md = tmp_path / "claims.json", tmp_path / "claims.md"
    args = ["claims", "--summaries", *map(str, summaries), "--runs", *map(str, runs)]
    args += [
        "--out-json",
        str(out_json),
        "--out-md",
        str(out_md),
        "--set",
        "kind=tiny",
        "--set",
        "step=100",
    ]
    assert main(args) == 0
    data = json.loads(out_json.read_text())
    assert [c["verdict"] for c in data["claims"]] == [HOLDS] * 4
    assert (
        data["verdict_rule"] and data["config"]["step"] == 100 and data["provenance"]["package"] == "cwgrpo"
    )
    md = out_md.read_text()
    assert "**Verdict rule.**" in md and md.count("- Measure:") == 4 and md.count("- Rule:") == 4
    assert "Avg(CW-GRPO) − Avg(GRPO) at step 100" in md
    assert "top 1 % of sampled tokens" in md


def test_claims_cli_missing_file_exits_2(tmp_path, capsys):
    summaries, runs = make_inputs(tmp_path / "r")
    args = ["claims", "--summaries", *map(str, summaries), str(tmp_path / "lost.summary.json")]
    args += [
        "--runs",
        *map(str, runs),
        "--out-json",
        str(tmp_path / "c.json"),
        "--out-md",
        str(tmp_path / "c.md"),
    ]
    assert main(args) == 2
    assert "lost.summary.json" in capsys.readouterr().err


def test_a_small_effect_keeps_two_significant_digits(report):
    """An entropy effect of 0.0060 − 0.0066 prints as −0.00060, not −0.00."""
    import copy

    small = copy.deepcopy(report)
    effect = by_id(small)[2]["per_size"][0]["effect"]
    effect.update(mean=-0.0006, ci95=[-0.0011, -0.00004])
    md = claims_markdown(small, ClaimsConfig(kind="tiny"))
    assert "−0.00060 nats / token | [−0.0011, −0.000040]" in md
    assert "−0.00 " not in md


def test_claims_say_what_is_not_the_papers_from_the_results(report):
    md = claims_markdown(report, ClaimsConfig(kind="tiny"))
    assert report["stand_in"].startswith("Not the paper's own benchmarks b1, b2")
    assert report["stand_in"] in md and "Tiny preset" not in md


@pytest.mark.parametrize(
    "recorded", ["yes", {"cause": "zero_reward_spread"}, [{"foo": 1}], ["a"], [{"cause": 5, "from_step": 1}]]
)
def test_a_foreign_learning_signal_record_is_named_not_a_traceback(tmp_path, recorded):
    run = tmp_path / "small" / "grpo" / "seed0"
    run.mkdir(parents=True)
    tags = {"size": "small", "method": "grpo", "seed": 0}
    (run / "run.json").write_text(json.dumps({"tags": tags, "learning_signal": recorded}))
    with pytest.raises(ResultFileError, match=rf"{re.escape(str(run / 'run.json'))}: 'learning_signal'"):
        silent_runs([run])
