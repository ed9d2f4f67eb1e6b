"""cwgrpo.weighting.registry: methods by name, registered once, with whether they keep the PPO clip, and
options that must all be given."""

from __future__ import annotations

import dataclasses
import re

import pytest
import torch

from cwgrpo import weighting as W
from cwgrpo.weighting.registry import (
    METHODS,
    MethodInputs,
    MethodOptions,
    MethodOutput,
    get_method,
    register_method,
)
from tests.unit.weighting_batches import DEVICES, VARIANTS, method_options, spread_batch


@pytest.mark.parametrize("device", DEVICES)
def test_registry_names_resolve_and_run(device):
    assert set(METHODS) == {"grpo", "cw_grpo", "clip_cov", "kl_cov"}
    logps, adv, mask = (x.to(device) for x in spread_batch())
    for name in METHODS:
        fn = get_method(name)
        assert fn is METHODS[name]
        for variant in VARIANTS:
            gen = torch.Generator().manual_seed(0)  # a CPU generator, as the trainer passes
            out = fn(
                MethodInputs(logps, logps.detach() - 0.1, adv, mask, gen), method_options(cw_variant=variant)
            )
            assert isinstance(out, MethodOutput)
            assert out.multipliers.shape == logps.shape and out.multipliers.dtype == torch.float32
            assert all(not v.requires_grad and v.ndim == 0 for v in out.metrics.values())


def test_registry_duplicate_raises():
    with pytest.raises(ValueError, match="'grpo' is already registered"):
        register_method("grpo")(lambda *a: None)  # checked once, when a function is registered
    decorator = register_method("_test_tmp")
    try:
        decorator(lambda *a: None)
        with pytest.raises(ValueError, match="already registered"):
            decorator(lambda *a: None)
    finally:
        METHODS.pop("_test_tmp", None)


def test_registration_says_which_methods_run_without_the_ppo_clip():
    assert {"kl_cov"} == W.UNCLIPPED  # KL-Cov (spec method.md §3); Clip-Cov keeps the clip
    try:
        register_method("_test_unclipped", ppo_clip=False)(lambda *a: None)
        register_method("_test_clipped")(lambda *a: None)
        assert {"kl_cov", "_test_unclipped"} == W.UNCLIPPED
    finally:
        for name in ("_test_unclipped", "_test_clipped"):
            METHODS.pop(name, None)
        W.UNCLIPPED.discard("_test_unclipped")


def test_registry_unknown_name_lists_known():
    with pytest.raises(
        ValueError, match=re.escape("unknown method 'nope'; known: ['clip_cov', 'cw_grpo', 'grpo', 'kl_cov']")
    ):
        get_method("nope")


def test_method_options_have_no_defaults():
    """Every option's default lives in CWOptions; only the resolved knobs may be left to MethodOptions."""
    fields = {f.name: f.default for f in dataclasses.fields(MethodOptions)}
    assert fields.pop("cw_knobs") is None
    assert all(default is dataclasses.MISSING for default in fields.values())
    with pytest.raises(dataclasses.FrozenInstanceError):
        method_options().cw_variant = "released"


def test_method_options_built_by_hand_are_checked_and_resolved_ones_are_taken_as_given():
    """The drop-in API (a MethodOptions built by hand) checks its options and resolves the knobs; the
    trainer passes knobs resolved from options CWOptions has checked, which are not checked again."""
    assert method_options(cw_variant="described", cw_centring="sequence").cw_knobs == W.CWKnobs(
        "sequence", "valid", False
    )
    with pytest.raises(ValueError, match=re.escape("unknown variant 'paper'")):
        method_options(cw_variant="paper")
    with pytest.raises(ValueError, match=re.escape("clip_cov_ratio=0.0: must be in (0, 1]")):
        method_options(clip_cov_ratio=0.0)
    knobs = W.variant_knobs("released", None, "valid", None)
    assert knobs == W.resolve_knobs("released", normaliser="valid") == W.CWKnobs("sequence", "valid", True)
    assert method_options(cw_variant="released", cw_normaliser="valid", cw_knobs=knobs).cw_knobs is knobs


# ------------------------------------------------------------------------------------ layering, sync
