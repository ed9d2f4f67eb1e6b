"""cwgrpo_workflow.report.study: the registered verdict rule, its gating, and the options' checks."""

from __future__ import annotations

import math

import pytest

from cwgrpo.configs import ConfigError
from cwgrpo.stats import Effect
from cwgrpo_workflow.report.study import (
    GATED,
    MEASURES,
    PRECONDITION_FAILED,
    PRIMARY,
    SECONDARY,
    StudyConfig,
    registered_verdict,
    shown_verdict,
)


def effect(mean: float, lo: float, hi: float) -> Effect:
    return Effect(mean, lo, hi, 7, True, tuple(range(7)))


@pytest.mark.parametrize(
    ("eff", "precondition", "verdict", "why"),
    [
        (effect(2.0, 0.5, 3.5), True, "holds", "the whole 95 % CI is above 0"),
        (effect(2.0, -0.5, 4.5), True, "inconclusive", "the effect is positive but the 95 % CI includes 0"),
        (effect(0.0, -1.0, 1.0), True, "does not hold", "the effect is not positive"),
        (effect(-3.0, -5.0, -1.0), True, "does not hold", "the effect is not positive (the whole 95 % CI is below 0)"),
        (effect(2.0, 0.5, 3.5), False, "does not hold", "GRPO stable"),  # a positive effect, precondition failed
        (effect(2.0, math.nan, math.nan), True, "inconclusive", "the effect is positive but its CI is unavailable (fewer than 2 seeds)"),
        (effect(math.nan, math.nan, math.nan), True, "inconclusive", "no measurement"),
    ],
)  # fmt: skip
def test_the_registered_rule_by_hand(eff, precondition, verdict, why):
    assert registered_verdict(eff, precondition, "GRPO stable") == (verdict, why)


def test_a_gated_claim_reads_precondition_failed_only_when_it_failed():
    for cid in (1, 2, 3, 4):
        claim = {"id": cid, "verdict": "does not hold"}
        assert shown_verdict(claim, precondition=True) == "does not hold"
        assert shown_verdict(claim, precondition=False) == (
            PRECONDITION_FAILED if cid in GATED else "does not hold"
        )


def test_every_registered_measure_has_a_unit_and_a_sign():
    named = {*PRIMARY.values(), *(m for ms in SECONDARY.values() for m in ms)}
    assert named <= set(MEASURES)
    assert all(unit in ("points", "nats") and sign in (1, -1) for unit, sign in MEASURES.values())


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"treatment_method": "grpo"}, "must differ"),
        ({"drop_points": 0.0}, "entropy_swing, drop_points and shape_points must be > 0"),
        ({"mechanism_method": "cw_grpo"}, "mechanism_method 'cw_grpo' must be a third method"),
        ({"mechanism_method": "grpo"}, "mechanism_method 'grpo' must be a third method"),
    ],
)
def test_bad_options_are_refused(options, message):
    with pytest.raises(ConfigError, match=message):
        StudyConfig(**options)
