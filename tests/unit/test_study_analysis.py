"""Unit tests of ``cwgrpo study`` (cwgrpo_workflow.report.study) on hand-made results with hand-computed effects.

Three seeds, three checkpoints (8, 16, 24), two benchmarks whose accuracies are a run's Avg ± 5 points,
so a run's Avg is the number written in the tables below. Every interval is mean ± t_{0.975, 2} · sd / √3.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pandas as pd
import pytest
from scipy import stats

from cwgrpo.cli import main
from cwgrpo.stats import paired_mde as mde
from cwgrpo_workflow.report.load import metrics_frame, summaries_frame
from cwgrpo_workflow.report.study import (
    StudyConfig,
    analyse,
    best_minus_last,
    entropy_range,
    entropy_start,
    mde_from_interval,
    paper_shape,
    study_markdown,
    tail_shares,
    unstable,
)
from tests.hand import t_interval_3

BENCHES = ("b1", "b2")
STEPS = (8, 16, 24)
BASE_AVG = 0.40
# Avg (fraction) per method, seed, checkpoint.
AVG = {
    "grpo": [[0.30, 0.20, 0.10], [0.32, 0.25, 0.12], [0.28, 0.22, 0.15]],  # best-last 20, 20, 13
    "cw_grpo": [[0.35, 0.36, 0.34], [0.33, 0.34, 0.35], [0.30, 0.31, 0.29]],  # best-last 2, 0, 2
    "cw_knob_x": [[0.34, 0.35, 0.33], [0.31, 0.32, 0.33], [0.27, 0.28, 0.26]],  # cw_grpo - 1, 2, 3 points
}
# Per-step entropy per method and seed (5 logged steps).
ENTROPY = {
    "grpo": [
        [0.2, 0.2, 0.4, 0.05, 0.3],
        [0.2, 0.2, 0.5, 0.1, 0.3],
        [0.2, 0.2, 0.3, 0.1, 0.2],
    ],  # range .35 .4 .2
    "cw_grpo": [[0.2, 0.2, 0.21, 0.2, 0.2], [0.2, 0.2, 0.22, 0.2, 0.2], [0.2, 0.2, 0.2, 0.23, 0.2]],
    "cw_knob_x": [[0.2, 0.2, 0.25, 0.2, 0.2], [0.2, 0.2, 0.2, 0.2, 0.2], [0.2, 0.2, 0.2, 0.2, 0.26]],
}


def write_summary(root: Path, method: str, seed: int, step: int, benchmark: str, acc: float) -> Path:
    path = root / "eval" / "small" / method / f"seed{seed}" / f"step{step}" / f"{benchmark}.summary.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    tags = {"size": "small", "method": method, "seed": seed, "step": step}
    path.write_text(
        json.dumps({"benchmark": benchmark, "tags": tags, "k": 1, "pass1": acc, "n_problems": 200})
    )
    return path


def write_run(root: Path, method: str, seed: int, entropy: list[float], big: float) -> Path:
    run = root / "runs" / "small" / method / f"seed{seed}"
    run.mkdir(parents=True)
    (run / "run.json").write_text(json.dumps({"tags": {"size": "small", "method": method, "seed": seed}}))
    (run / "metrics.jsonl").write_text(
        # the released statistic (the default entropy_key) as given; TRL's token mean at twice it
        "".join(
            json.dumps({"step": i + 1, "entropy_per_completion": e, "entropy": 2 * e}) + "\n"
            for i, e in enumerate(entropy)
        )
    )
    cov = [1.0, -1.0] * 49 + [1.0, -big]  # top 1 % (one token) carries big / (99 + big)
    (run / "cov_samples.jsonl").write_text(json.dumps({"step": 1, "cov": cov, "weight": [1.0] * 100}) + "\n")
    return run


def make_inputs(root: Path, avg=AVG) -> tuple[list[Path], list[Path]]:
    summaries = [
        write_summary(root, "base", 0, 0, b, BASE_AVG + d)
        for b, d in zip(BENCHES, (-0.05, 0.05), strict=True)
    ]
    runs = []
    for method, per_seed in avg.items():
        for seed, curve in enumerate(per_seed):
            for step, a in zip(STEPS, curve, strict=True):
                summaries += [
                    write_summary(root, method, seed, step, b, a + d)
                    for b, d in zip(BENCHES, (-0.05, 0.05), strict=True)
                ]
            big = {"grpo": 99.0, "cw_grpo": 1.0, "cw_knob_x": 297.0}[method]
            runs.append(write_run(root, method, seed, ENTROPY[method][seed], big))
    return summaries, runs


CLAIMS_JSON = {"claims": [{"id": 4, "per_size": [{"size": "small", "unit": "points", "effect": {"mean": 40.0, "ci95": [40.0, 40.0], "n": 3}, "verdict": "holds", "reason": "r"}]}]}  # fmt: skip
CFG = StudyConfig(kind="tiny", step=8, variants=["cw_knob_x"])


@pytest.fixture(scope="module")
def inputs(tmp_path_factory):
    return make_inputs(tmp_path_factory.mktemp("study"))


@pytest.fixture(scope="module")
def report(inputs):
    summaries, runs = inputs
    shares = tail_shares(runs, ["cw_grpo", "cw_knob_x"], 0.01)[0]
    return analyse(CFG, summaries_frame(summaries), metrics_frame(runs), shares, CLAIMS_JSON)


def by_id(report) -> dict[int, dict]:
    return {c["id"]: c for c in report["claims"]}


# -- pure measures -----------------------------------------------------------------------------------
def test_run_measures_by_hand():
    e = pd.Series([0.2, 0.4, 0.6, 0.1], index=[1, 2, 3, 4])
    assert entropy_start(e) == pytest.approx(0.3)  # mean of the first two logged steps
    assert entropy_range(e) == pytest.approx(0.5)
    curve = {8: 30.0, 16: 35.0, 24: 20.0}
    assert best_minus_last(curve) == pytest.approx(15.0)
    assert best_minus_last(curve, base=42.0) == pytest.approx(22.0)  # the base model as step 0
    assert best_minus_last({8: 10.0, 16: 30.0}) == 0.0  # improving: nothing lost


def test_unstable_needs_both_halves_of_the_criterion():
    swinging = pd.Series([0.2, 0.2, 0.4, 0.05])  # range 0.35 >= 0.5 * 0.2
    flat = pd.Series([0.2, 0.2, 0.21, 0.2])
    falling = {8: 30.0, 16: 15.0}
    assert unstable(swinging, falling, 0.5, 10.0, None)
    assert not unstable(flat, falling, 0.5, 10.0, None)
    assert not unstable(swinging, {8: 30.0, 16: 25.0}, 0.5, 10.0, None)
    assert unstable(swinging, {8: 30.0, 16: 25.0}, 0.5, 10.0, base=40.0)  # amended: base counts as step 0


def test_mde_matches_the_registered_formula():
    # (t_{.975,6} + t_{.8,6}) * sd / sqrt(7) with sd = 1: 2.446912 + 0.905703
    assert mde(1.0, 7) == pytest.approx((2.4469118511 + 0.9057033) / math.sqrt(7), rel=1e-6)
    assert math.isnan(mde(1.0, 1))


# -- the analysis on hand-made runs -------------------------------------------------------------------
def test_regime_precondition_by_hand(report):
    reg = report["regime"]
    assert reg["unstable_seeds"] == 3 and reg["precondition"]
    assert reg["per_seed"][0]["best_minus_last"] == pytest.approx(20.0)
    assert reg["per_seed"][2]["best_minus_last_incl_base"] == pytest.approx(25.0)
    assert reg["per_seed"][1]["entropy_range"] == pytest.approx(0.4)
    assert report["base_avg"] == pytest.approx(40.0)
    # GRPO's best checkpoints (30, 32, 28) are below the base model's 40: no gain, so not the paper's shape
    assert [reg["per_seed"][s]["gain_over_base"] for s in range(3)] == pytest.approx([-10.0, -8.0, -12.0])
    assert reg["paper_shape_seeds"] == 0


def test_the_papers_shape_needs_a_gain_then_a_drift():
    assert paper_shape({8: 46.0, 16: 50.0, 24: 44.0}, base=40.0, points=5.0)  # +10, then -6
    assert not paper_shape({8: 46.0, 16: 50.0, 24: 46.0}, base=40.0, points=5.0)  # drift 4 only
    assert not paper_shape({8: 44.0, 16: 30.0}, base=40.0, points=5.0)  # gain 4 only
    assert not paper_shape({8: 45.0, 16: 50.0}, base=40.0, points=5.0)  # gains steadily


def test_the_entropy_statistic_is_the_configured_one(inputs):
    summaries, runs = inputs
    frames = summaries_frame(summaries), metrics_frame(runs)
    trl_mean = StudyConfig(kind="tiny", step=8, variants=["cw_knob_x"], entropy_key="entropy")
    released = analyse(CFG, *frames, {}, CLAIMS_JSON)["regime"]["per_seed"][1]["entropy_range"]
    token = analyse(trl_mean, *frames, {}, CLAIMS_JSON)["regime"]["per_seed"][1]["entropy_range"]
    assert (released, token) == (pytest.approx(0.4), pytest.approx(0.8))


def test_claim1_is_the_last_checkpoint_difference(report):
    c = by_id(report)[1]
    m, lo, hi = t_interval_3([24.0, 23.0, 14.0])
    assert c["effect"]["mean"] == pytest.approx(m)
    assert c["effect"]["ci95"] == pytest.approx([lo, hi])
    assert c["verdict"] == "holds"
    step8 = c["secondary"]["avg_first"]
    assert step8["mean"] == pytest.approx((5.0 + 1.0 + 2.0) / 3)
    # mde from the spread of the paired differences
    sd = math.sqrt(sum((d - m) ** 2 for d in (24.0, 23.0, 14.0)) / 2)
    assert c["mde_80"] == pytest.approx(mde(sd, 3))
    # a secondary measure has its own: the step-8 differences 5, 1, 2 (mean 8/3)
    sd8 = math.sqrt(sum((d - 8 / 3) ** 2 for d in (5.0, 1.0, 2.0)) / 2)
    assert step8["mde_80"] == pytest.approx(mde(sd8, 3))


def test_claim4s_mde_comes_from_its_interval(report):
    # claims.json's claim 4: mean 40, CI [40, 40] over 3 seeds: no spread, so the smallest MDE, 0
    assert by_id(report)[4]["mde_80"] == pytest.approx(0.0)
    half, n = 2.0, 5
    sd = half / stats.t.ppf(0.975, n - 1) * math.sqrt(n)
    effect = {"mean": 10.0, "ci95": [8.0, 12.0], "n": n}
    assert mde_from_interval(effect) == pytest.approx(mde(sd, n))
    assert math.isnan(mde_from_interval({"mean": 1.0, "ci95": None, "n": 1}))


def test_claims_2_and_3_are_reference_minus_treatment(report):
    c2, c3 = by_id(report)[2], by_id(report)[3]
    m, lo, hi = t_interval_3([0.35 - 0.01, 0.4 - 0.02, 0.2 - 0.03])
    assert c2["effect"]["mean"] == pytest.approx(m) and c2["effect"]["ci95"] == pytest.approx([lo, hi])
    m, lo, hi = t_interval_3([20.0 - 2.0, 20.0 - 0.0, 13.0 - 2.0])
    assert c3["effect"]["mean"] == pytest.approx(m) and c3["effect"]["ci95"] == pytest.approx([lo, hi])
    assert c2["verdict"] == "holds" and c3["verdict"] == "holds"
    assert by_id(report)[4]["verdict"] == "holds" and by_id(report)[4]["effect"]["mean"] == 40.0


def test_ablation_is_variant_against_treatment(report):
    row = report["ablation"]["cw_knob_x"]
    m, lo, hi = t_interval_3([-1.0, -2.0, -3.0])
    assert row["avg_last"]["mean"] == pytest.approx(m) and row["avg_last"]["ci95"] == pytest.approx([lo, hi])
    # entropy range: T - V (a narrower band for V would be positive): 0.01-0.05, 0.02-0, 0.03-0.06
    assert row["entropy_range"]["mean"] == pytest.approx((-0.04 + 0.02 - 0.03) / 3)
    # top share: V 297/396 = 75 %, T 1/100 = 1 % -> +74 points
    assert row["top_share_pct"]["mean"] == pytest.approx(75.0 - 1.0)


def test_claim_m_is_its_arm_against_the_treatment_under_claim_1s_rule(inputs):
    """The third study's claim M: Avg(M) - Avg(T) at the last checkpoint, not gated, with its MDE."""
    summaries, runs = inputs
    cfg = StudyConfig(kind="tiny", step=8, variants=["cw_knob_x"], mechanism_method="cw_knob_x")
    report = analyse(cfg, summaries_frame(summaries), metrics_frame(runs), {}, CLAIMS_JSON)
    assert [c["id"] for c in report["claims"]] == [1, "M", 2, 3, 4]
    m_claim = by_id(report)["M"]
    m, lo, hi = t_interval_3([-1.0, -2.0, -3.0])  # cw_knob_x is cw_grpo - 1, 2, 3 points at step 24
    assert m_claim["effect"]["mean"] == pytest.approx(m) and m_claim["effect"]["ci95"] == pytest.approx(
        [lo, hi]
    )
    assert m_claim["verdict"] == "does not hold" and m_claim["mde_80"] == pytest.approx(mde(1.0, 3))
    assert "| M |" in study_markdown(report, cfg)
    assert "M" not in {
        c["id"]
        for c in analyse(CFG, summaries_frame(summaries), metrics_frame(runs), {}, CLAIMS_JSON)["claims"]
    }


def test_precondition_failure_gates_claims_2_and_3(tmp_path):
    calm = {**AVG, "grpo": [[0.30, 0.31, 0.32], [0.30, 0.31, 0.33], [0.29, 0.30, 0.31]]}  # GRPO improves
    summaries, runs = make_inputs(tmp_path, avg=calm)
    report = analyse(CFG, summaries_frame(summaries), metrics_frame(runs), {}, CLAIMS_JSON)
    assert report["regime"]["unstable_seeds"] == 0 and not report["regime"]["precondition"]
    c2, c3 = by_id(report)[2], by_id(report)[3]
    # reported as "precondition failed", with their numbers, whatever the effect (both registrations)
    assert c2["effect"]["mean"] > 0 and c2["verdict"] == "precondition failed"
    assert "GRPO unstable in 0 of 3 seeds" in c2["reason"]
    assert c3["verdict"] == "precondition failed" and c3["effect"]["mean"] <= 0
    assert c3["reason"].startswith("GRPO unstable in 0 of 3 seeds; the effect is not positive")
    assert by_id(report)[1]["verdict"] in ("holds", "inconclusive")  # claim 1 is not gated


def test_missing_checkpoint_is_an_error_naming_it(tmp_path):
    summaries, runs = make_inputs(tmp_path)
    gone = [p for p in summaries if "cw_grpo/seed1/step24/b2" in p.as_posix()]
    assert gone
    from cwgrpo.io import ResultFileError

    with pytest.raises(ResultFileError, match="step=24"):
        analyse(
            CFG,
            summaries_frame([p for p in summaries if p not in gone]),
            metrics_frame(runs),
            {},
            CLAIMS_JSON,
        )


def test_markdown_names_every_claim_and_variant(report):
    md = study_markdown(report, CFG)
    claims = [f"| {i} |" for i in (1, 2, 3, 4)]
    for text in ("GRPO unstable in **3 of 3**", *claims, "`cw_knob_x`", "| `grpo` | 40.0 |"):
        assert text in md


def test_markdown_reads_a_gated_claim_of_an_older_report_as_precondition_failed(report):
    """A study.json written before analyse said "precondition failed" (the second study's) renders so."""
    old = {**report, "regime": {**report["regime"], "precondition": False}}
    old["claims"] = [{**c, "verdict": "does not hold"} for c in report["claims"]]
    md = study_markdown(old, CFG).splitlines()
    rows = {c["id"]: next(line for line in md if c["claim"] in line) for c in old["claims"]}
    assert "| precondition failed |" in rows[2] and "| precondition failed |" in rows[3]
    assert "| does not hold |" in rows[1]  # claim 1 is not gated


def test_command_writes_every_declared_file(inputs, tmp_path):
    summaries, runs = inputs
    claims = tmp_path / "claims.json"
    claims.write_text(json.dumps(CLAIMS_JSON))
    power = tmp_path / "power.json"
    power.write_text(json.dumps({"mde_points": {"n5_P200_k1": 6.3, "n7_P200_k1": 4.8, "n7_P200_k2": 4.7}}))
    out = {k: tmp_path / name for k, name in (
        ("json", "study.json"), ("md", "study.md"), ("abl", "study_ablation.pdf"), ("abl_png", "study_ablation.png"),
        ("pow", "study_power.pdf"), ("pow_png", "study_power.png"))}  # fmt: skip
    argv = ["study", "--summaries", *map(str, summaries), "--runs", *map(str, runs), "--claims", str(claims),
            "--power", str(power), "--out-json", str(out["json"]), "--out-md", str(out["md"]),
            "--out-ablation", str(out["abl"]), "--out-ablation-png", str(out["abl_png"]),
            "--out-power", str(out["pow"]), "--out-power-png", str(out["pow_png"]),
            "--set", "kind=tiny", "--set", "step=8", "--set", "variants=[cw_knob_x]"]  # fmt: skip
    assert main(argv) == 0
    for path in out.values():
        assert path.stat().st_size > 0, path
    written = json.loads(out["json"].read_text())
    assert written["claims"][0]["verdict"] == "holds" and written["config"]["variants"] == ["cw_knob_x"]
    assert out["pow"].read_bytes()[:4] == b"%PDF" and out["abl_png"].read_bytes()[:4] == b"\x89PNG"
