"""cwgrpo_workflow.report.study_pair: the studies side by side (hand-made study.json reports)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from scipy import stats

from cwgrpo_workflow.report import study_pair


def report(t_last: list[float], r_last: list[float], verdict: str, precondition: bool) -> dict:
    seeds = [str(s) for s in range(len(t_last))]
    effect = {"mean": sum(t_last) / len(t_last) - sum(r_last) / len(r_last), "ci95": [-1.0, 2.0]}
    return {
        "config": {"treatment_method": "cw_grpo", "reference_method": "grpo"},
        "steps": [8, 16],
        "measures": {
            "cw_grpo": {"avg_last": dict(zip(seeds, t_last, strict=True))},
            "grpo": {"avg_last": dict(zip(seeds, r_last, strict=True))},
        },
        "claims": [
            {
                "id": 1,
                "measure": "avg_last",
                "unit": "points",
                "effect": effect,
                "mde_80": 4.0,
                "verdict": verdict,
            },
            {
                "id": 2,
                "measure": "entropy_range",
                "unit": "nats",
                "effect": {"mean": 0.0123, "ci95": None},
                "verdict": "does not hold",
            },
        ],
        "regime": {
            "per_seed": {s: {} for s in seeds},
            "unstable_seeds": 2 if precondition else 0,
            "precondition": precondition,
        },
        "base_avg": 40.0,
        "curves": {"grpo": {s: {"8": 30.0 + i, "16": 20.0} for i, s in enumerate(seeds)}},
    }


FIRST = report([10.0, 12.0, 14.0], [15.0, 15.0, 15.0], "does not hold", True)  # T - R: -5, -3, -1
SECOND = report([50.0, 51.0, 55.0], [50.0, 50.0, 50.0], "inconclusive", False)  # T - R: 0, 1, 5


def test_the_regime_effect_is_a_welch_difference_of_the_two_studies_paired_differences():
    eff = study_pair.regime_effect(FIRST, SECOND)
    # paired differences T - R: first -5, -3, -1 (mean -3); second 0, 1, 5 (mean 2)
    assert eff["mean"] == pytest.approx(2.0 - (-3.0))
    assert not eff["paired"]  # the studies share seed numbers, not runs
    v1, v2 = 4.0 / 3, 7.0 / 3  # sample variances / n
    df = (v1 + v2) ** 2 / (v1**2 / 2 + v2**2 / 2)
    half = stats.t.ppf(0.975, df) * math.sqrt(v1 + v2)
    assert eff["ci95"] == pytest.approx([5.0 - half, 5.0 + half])


CLAIMS = {  # a claims.json's claim 4 as cwgrpo claims writes it, with GRPO's tail ratio over seeds
    "claims": [
        {"id": 1, "per_size": []},
        {"id": 4, "per_size": [{"details": {"quantile_ratio": {"mean": 600.0, "ci95": [400.0, 800.0]}}}]},
    ]
}


def test_the_tail_ratio_is_claim_4s_and_none_where_a_report_has_none():
    assert study_pair.tail_ratio(CLAIMS) == {"mean": 600.0, "ci95": [400.0, 800.0]}
    assert study_pair.tail_ratio({"claims": [{"id": 4, "per_size": [{"details": {}}]}]}) is None


def test_the_page_block_names_each_studys_verdicts_and_precondition():
    block = study_pair.page_block(
        {"first": {**FIRST, "tail_ratio": {"mean": 616.6, "ci95": [438.4, 794.8]}}, "second": SECOND}
    )
    assert (
        "| first | tiny `small`: 1M parameters, 266 tokens | lr 2e-4 constant, no KL | 40.0 | 617 [438, 795] | "
        "2 of 3 | holds |" in block
    )
    assert "| second |" in block and "| 40.0 | n/a | 0 of 3 | fails |" in block
    assert "+0.012 n/a → **does not hold**" in block  # nats get three digits; no interval says so
    assert "+0.012 n/a → **precondition failed**" in block  # claim 2 of the study whose precondition failed
    assert "**inconclusive**" in block and ", MDE 4.0" in block
    assert "Welch interval, 3 and 3 seeds): **+5.0 points [" in block
    assert "first study `entropy`; second study `entropy`" in block  # neither report names a key


def test_a_claim_a_study_did_not_register_reads_not_registered_and_claim_m_sits_after_claim_1(monkeypatch):
    """The third study registered claims 1, M and 4: its computed claim 2 is not a verdict of the page,
    and the earlier studies, which have no claim M, read n/a there."""
    third = report([20.0, 22.0, 24.0], [10.0, 10.0, 10.0], "holds", False)
    m_claim = {
        "id": "M",
        "measure": "avg_last",
        "unit": "points",
        "effect": {"mean": -3.0, "ci95": [-5.0, -1.0]},
    }
    third["claims"].insert(1, {**m_claim, "mde_80": 2.5, "verdict": "does not hold"})
    study = study_pair.Study(Path("third.json"), "regime 3", "a 135M model", registered=(1, "M", 4))
    monkeypatch.setitem(study_pair.STUDIES, "third", study)
    block = study_pair.page_block({"first": FIRST, "second": SECOND, "third": third})
    rows = [line for line in block.splitlines() if line.startswith(("| 1 |", "| M |", "| 2 |"))]
    assert [r.split(" |")[0] for r in rows] == ["| 1", "| M", "| 2"]
    assert rows[1].endswith("| n/a | n/a | -3.0 [-5.0, -1.0], MDE 2.5 → **does not hold** |")
    assert rows[2].endswith("| not registered |")
    assert "| third | a 135M model | regime 3 | 40.0 | n/a | 0 of 3 | not registered |" in block
    assert "second study `entropy` (" in block and "third study `entropy`" not in block


NO_DROP = {"best_minus_last": {"0": 0.0, "1": 0.0}}


def test_exploratory_comparisons_are_paired_signed_as_the_claims_and_n_a_where_not_run():
    rep = {
        **FIRST,
        "measures": {
            "grpo": {
                "avg_last": {"0": 15.0, "1": 15.0, "2": 15.0},
                "entropy_range": {"0": 0.1, "1": 0.2},
                **NO_DROP,
            },
            "clip_cov": {
                "avg_last": {"0": 16.0, "1": 18.0, "2": 20.0},
                "entropy_range": {"0": 0.3, "1": 0.3},
                **NO_DROP,
            },
        },
    }
    half = stats.t.ppf(0.975, 2) * 2.0 / math.sqrt(3)  # differences -25, -25, -25 / +1, +3, +5: sd 0 / 2
    gain = study_pair.exploratory_effect(rep, "grpo", study_pair.BASE, "avg_last")
    assert gain["mean"] == pytest.approx(15.0 - 40.0) and gain["ci95"] == pytest.approx([-25.0, -25.0])
    versus = study_pair.exploratory_effect(rep, "clip_cov", "grpo", "avg_last")
    assert versus["mean"] == pytest.approx(3.0) and versus["ci95"] == pytest.approx([3 - half, 3 + half])
    assert versus["mde_80"] == pytest.approx(
        (stats.t.ppf(0.975, 2) + stats.t.ppf(0.8, 2)) * 2.0 / math.sqrt(3)
    )
    # entropy range is signed R − T as claim 2 is: a wider range than GRPO's is negative
    assert study_pair.exploratory_effect(rep, "clip_cov", "grpo", "entropy_range")["mean"] == pytest.approx(
        -0.15
    )
    assert study_pair.exploratory_effect(rep, "cw_grpo_described", "grpo", "avg_last") is None
    table = study_pair.exploratory_table({"first": rep, "second": rep})
    assert "| Clip-Cov − GRPO | avg_last | +3.0 [" in table
    # with one checkpoint the best is the last: its drop is 0 by construction, not measured
    table = study_pair.exploratory_table({"first": rep, "third": {**rep, "steps": [24]}})
    assert "| Clip-Cov − GRPO | best_minus_last | +0.0 [+0.0, +0.0], MDE 0.0 | n/a: one checkpoint |" in table
    assert "| CW-GRPO as described − GRPO | avg_last | n/a | n/a |" in table


def test_write_refuses_a_page_without_the_block_and_check_reports_a_stale_one(tmp_path, monkeypatch):
    for lab, rep in (("first", FIRST), ("second", SECOND)):
        path = tmp_path / lab / "study.json"
        path.parent.mkdir()
        path.write_text(json.dumps(rep))
        (path.parent / "claims.json").write_text(json.dumps(CLAIMS))
        monkeypatch.setitem(study_pair.STUDIES, lab, study_pair.STUDIES[lab]._replace(path=path))
    page = tmp_path / "README.md"
    page.write_text("no block here\n")
    assert study_pair.main(["--page", str(page), "--figure", str(tmp_path / "f.png")]) == 2
    page.write_text("a\n<!-- generated: study-pair -->\nold\n<!-- /generated: study-pair -->\n")
    assert study_pair.main(["--page", str(page), "--figure", str(tmp_path / "f.png")]) == 1
    assert study_pair.main(["--page", str(page), "--figure", str(tmp_path / "f.png"), "--write"]) == 0
    assert "| 600 [400, 800] |" in page.read_text()  # each study's tail ratio, from the claims.json beside it
    assert study_pair.main(["--page", str(page), "--figure", str(tmp_path / "f.png")]) == 0
    assert (tmp_path / "f.png").stat().st_size > 0 and (tmp_path / "f.pdf").stat().st_size > 0


def test_the_study_page_is_what_the_two_study_files_give(monkeypatch):
    repo = Path(__file__).resolve().parents[2]
    monkeypatch.chdir(repo)  # the page's study files are named from the repository root
    assert study_pair.main([]) == 0, "run: python -m cwgrpo_workflow.report.study_pair --write"


@pytest.mark.parametrize(
    ("lo", "hi", "verdict", "shown"),
    [
        (
            -20.1,
            4.8,
            "does not hold",
            "does not hold (registered rule: mean ≤ 0); contains 0 and the paper's +2.7",
        ),
        (-8.3, -0.9, "does not hold", "**does not hold**; excludes 0 and the paper's +2.7"),
        (0.3, 12.9, "holds", "**holds**; excludes 0; contains the paper's +2.7"),
        (-1.0, 3.0, "inconclusive", "inconclusive; contains 0 and the paper's +2.7"),
    ],
)
def test_a_verdict_says_what_its_interval_excludes_and_only_a_decisive_one_is_bold(lo, hi, verdict, shown):
    """A registered 'does not hold' whose interval reaches 0 is the rule's word, not a refutation: it is
    printed plain, with what the interval contains; claim 1 is set beside the paper's own +2.7 (Table 1,
    1.5B: CW-GRPO 55.3, GRPO 52.6)."""
    claim = {"id": 1, "effect": {"lo": lo, "hi": hi}}
    assert study_pair.verdict_text(claim, verdict) == shown
    assert (
        study_pair.verdict_text({"id": 4, "effect": {"lo": 0.3, "hi": 1.0}}, "holds")
        == "**holds**; excludes 0"
    )
    assert study_pair.verdict_text({"id": 2, "effect": {"mean": 0.1, "ci95": None}}, "holds") == "**holds**"
    # campaign #72, #73: an interval that starts at 0 contains it; bounds that are not numbers are no interval
    assert (
        study_pair.verdict_text({"id": 4, "effect": {"lo": 0.0, "hi": 3.0}}, "holds") == "holds; contains 0"
    )
    nan = float("nan")
    assert (
        study_pair.verdict_text({"id": 1, "effect": {"lo": nan, "hi": nan}}, "inconclusive")
        == "**inconclusive**"
    )
