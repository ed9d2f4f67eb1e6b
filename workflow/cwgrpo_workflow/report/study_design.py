"""What the pre-registered study fixed before it ran: options, measures, each claim's measure and wording.

Registered in docs/study/preregistration.md; each measure with its unit and sign, each claim with a primary
and a secondary measure. :mod:`cwgrpo_workflow.report.study` computes the analysis from them;
:mod:`cwgrpo_workflow.report.study_render` writes it; neither imports the other's module for these.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from cwgrpo.configs import ConfigError
from cwgrpo.stats import Effect
from cwgrpo_workflow.report.options import ReportConfig


@dataclass
class StudyConfig(ReportConfig):
    """Options of ``cwgrpo study``; the defaults are the registration's."""

    treatment_method: str = field(
        default="cw_grpo", metadata={"help": "the treatment T (CW-GRPO as released)"}
    )
    mechanism_method: str | None = field(
        default=None,
        metadata={
            "help": "the arm of claim M (the third study's): Avg(it) - Avg(treatment) at the last checkpoint, "
            "tested with claim 1's rule; None: no claim M"
        },
    )
    variants: list[str] = field(
        default_factory=list,
        metadata={"help": "ablation method labels, each compared with treatment_method (exploratory)"},
    )
    entropy_swing: float = field(
        default=0.5,
        metadata={"help": "precondition: entropy range over the run at least this fraction of its start"},
    )
    drop_points: float = field(
        default=10.0,
        metadata={
            "help": "precondition: Avg at the last checkpoint at least this many points below the best"
        },
    )
    shape_points: float = field(
        default=5.0,
        metadata={
            "help": "the paper's shape of GRPO, reported per seed: its best checkpoint at least this many points "
            "above the base model and its last at least this many below its best (the second study's "
            "learning-rate criterion)"
        },
    )
    tail_top_fraction: float = field(
        default=0.01, metadata={"help": "ablation's claim-4 measure: share of sum |c| of the top fraction"}
    )

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.treatment_method == self.reference_method:
            raise ConfigError("treatment_method and reference_method must differ")
        if self.mechanism_method in (self.treatment_method, self.reference_method):
            raise ConfigError(
                f"mechanism_method {self.mechanism_method!r} must be a third method: claim M compares it "
                f"with the treatment {self.treatment_method!r}, beside the reference {self.reference_method!r}"
            )
        if not self.entropy_swing > 0 or not self.drop_points > 0 or not self.shape_points > 0:
            raise ConfigError(
                "entropy_swing, drop_points and shape_points must be > 0, got "
                f"{self.entropy_swing}, {self.drop_points}, {self.shape_points}"
            )


# measure -> (unit, sign: +1 when "treatment minus reference" supports the claim, -1 when R - T does)
MEASURES: dict[str, tuple[str, int]] = {
    "avg_last": ("points", +1),
    "avg_first": ("points", +1),
    "avg_mean": ("points", +1),
    "entropy_range": ("nats", -1),
    "entropy_sd": ("nats", -1),
    "entropy_mean": ("nats", +1),
    "best_minus_last": ("points", -1),
    "best_minus_last_incl_base": ("points", -1),
    "drop_first_to_last": ("points", -1),
}
PRIMARY = {1: "avg_last", 2: "entropy_range", 3: "best_minus_last"}
SECONDARY = {
    1: ["avg_first", "avg_mean"],
    2: ["entropy_sd"],
    3: ["best_minus_last_incl_base", "drop_first_to_last"],
}
# The claims tested only where GRPO is unstable (the precondition); both registrations report them as
# "precondition failed", with their numbers, when it is not.
GATED = (2, 3)
PRECONDITION_FAILED = "precondition failed"
CLAIM_TEXT: dict[int | str, str] = {
    1: "CW-GRPO is more accurate: Avg(T) - Avg(R) at the last checkpoint",
    2: "CW-GRPO keeps entropy in a band: entropy range over the run, R - T",
    3: "CW-GRPO holds its accuracy: best-minus-last over the checkpoints, R - T",
    4: "a few tokens carry most of the covariance (as `cwgrpo claims`)",
    "M": "the gradient through the weight costs accuracy: Avg(M) - Avg(T) at the last checkpoint",
}


def shown_verdict(claim: Mapping[str, Any], precondition: bool) -> str:
    """A claim's verdict as reported: "precondition failed" for a gated claim of a study whose precondition
    failed (a report written before ``analyse`` said so has "does not hold" there), else its own."""
    return PRECONDITION_FAILED if claim["id"] in GATED and not precondition else claim["verdict"]


def registered_verdict(effect: Effect, precondition: bool, precondition_failed: str) -> tuple[str, str]:
    """The verdict rule as registered (preregistration.md section 3), kept so the study reads as it was
    registered: 'does not hold' for a mean <= 0 or a failed precondition, whatever the interval.
    ``cwgrpo claims`` has its own rule (``claim_checks.decide``)."""
    if not math.isfinite(effect.mean):
        return "inconclusive", "no measurement"
    if effect.mean <= 0:
        below = effect.has_ci and effect.hi < 0
        return "does not hold", "the effect is not positive" + (
            " (the whole 95 % CI is below 0)" if below else ""
        )
    if not precondition:
        return "does not hold", precondition_failed
    if not effect.has_ci:
        return "inconclusive", "the effect is positive but its CI is unavailable (fewer than 2 seeds)"
    if effect.lo > 0:
        return "holds", "the whole 95 % CI is above 0"
    return "inconclusive", "the effect is positive but the 95 % CI includes 0"
