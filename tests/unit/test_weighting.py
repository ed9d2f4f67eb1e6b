"""cwgrpo.weighting (spec method.md §2-§4): the CW-GRPO weights of ``kernel`` (hand-computed, invariants,
dtypes, gradients, the variants' knobs) and the package's input checks and layering. The other modules:
test_covariance.py, test_masks.py, test_weighting_registry.py, test_methods.py. CPU only, a few seconds."""

from __future__ import annotations

import ast
import itertools
import math
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from cwgrpo import weighting as W
from cwgrpo.weighting import (
    MethodInputs,
    cw_weights,
    kl_cov_select,
    token_covariance,
)
from cwgrpo.weighting.kernel import _normalised_kernel
from cwgrpo.weighting.masks import valid_tokens
from tests.unit.weighting_batches import ADV, DEVICES, LP, MASK, VARIANTS, method_options, random_batch, t64

REPO = Path(__file__).resolve().parents[2]


def _ref_weights(lp, adv, mask, variant):
    """Plain-Python transcription of the spec table (method.md §2), independent of the torch code."""
    b, t = len(lp), len(lp[0])
    valid = [(i, j) for i in range(b) for j in range(t) if mask[i][j]]
    n = len(valid)
    if variant == "described":
        mean_lp = sum(lp[i][j] for i, j in valid) / n
        mean_a = sum(adv[i] for i, _ in valid) / n
        cov = {(i, j): (lp[i][j] - mean_lp) * (adv[i] - mean_a) for i, j in valid}
    else:
        row_mean = {i: sum(lp[i][j] for j in range(t) if mask[i][j]) / sum(mask[i]) for i in range(b)}
        mean_a = sum(adv) / b
        cov = {(i, j): (lp[i][j] - row_mean[i]) * (adv[i] - mean_a) for i, j in valid}
    mu = sum(cov.values()) / n
    sigma = math.sqrt(sum((c - mu) ** 2 for c in cov.values()) / n)
    sigma += 1e-8 if variant == "released" else 0.0
    w = {k: math.exp(-(c**2) / (2 * sigma**2)) for k, c in cov.items()}
    z = n if variant == "described" else b * t
    total = sum(w.values())
    return [[z * w[(i, j)] / total if (i, j) in w else 0.0 for j in range(t)] for i in range(b)], cov


# ------------------------------------------------------------------------------- hand-computed 2x3


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("variant", VARIANTS)
def test_cw_weights_2x3_match_the_python_reference(variant, device):
    expected, _ = _ref_weights(LP, ADV, MASK, variant)
    got = cw_weights(
        t64(LP).to(device), t64(ADV).to(device), torch.tensor(MASK, device=device), variant=variant
    )
    assert got.dtype == torch.float64 and got.device.type == device
    torch.testing.assert_close(got.cpu(), t64(expected), rtol=1e-12, atol=1e-12)


def test_cw_weights_hand_computed_2x3_described_numbers():
    # c = 0.72, -0.48 | -0.88, -0.08, 1.12 ; sigma^2 = mean(c^2) - mean(c)^2 with mean(c) = 0.08
    c = [0.72, -0.48, -0.88, -0.08, 1.12]
    var = sum(x * x for x in c) / 5 - 0.08**2
    w = [math.exp(-x * x / (2 * var)) for x in c]
    expected = [5 * x / sum(w) for x in w]
    got = cw_weights(t64(LP), t64(ADV), torch.tensor(MASK), variant="described")
    torch.testing.assert_close(got[torch.tensor(MASK).bool()], t64(expected), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("variant", VARIANTS)
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_cw_weights_matches_python_reference_random(variant, seed):
    logps, adv, mask = random_batch(seed=seed)
    expected, _ = _ref_weights(logps.tolist(), adv.tolist(), mask.tolist(), variant)
    got = cw_weights(logps, adv, mask, variant=variant)
    torch.testing.assert_close(got, t64(expected), rtol=1e-10, atol=1e-12)


# --------------------------------------------------------------------------------------- invariants


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_cw_weights_described_mean_one_and_bounds(seed):
    logps, adv, mask = random_batch(seed=seed)
    w = cw_weights(logps, adv, mask, variant="described")
    m = mask.bool()
    n = m.sum()
    torch.testing.assert_close(w[m].mean(), t64(1.0), rtol=0, atol=1e-12)
    assert bool((w[m] > 0).all()) and bool((w[m] <= n).all())


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_cw_weights_released_sums_to_padded_size(seed):
    logps, adv, mask = random_batch(seed=seed)
    w = cw_weights(logps, adv, mask, variant="released")
    torch.testing.assert_close(w.sum(), t64(float(mask.numel())), rtol=1e-12, atol=0)
    assert bool((w[mask.bool()] > 0).all()) and bool((w <= mask.numel()).all())
    assert w[mask.bool()].mean() >= 1.0  # padding counted in Z


@pytest.mark.parametrize("variant", VARIANTS)
def test_cw_weights_symmetric_in_sign_of_covariance(variant):
    logps, adv, mask = random_batch(seed=3)
    centring = W.VARIANT_KNOBS[variant].centring
    # A -> -A flips mean_A too, so every c flips sign
    cov, cov_flip = (token_covariance(logps, a, mask, centring=centring) for a in (adv, -adv))
    torch.testing.assert_close(cov_flip, -cov, rtol=0, atol=1e-12)
    w, w_flip = (cw_weights(logps, a, mask, variant=variant) for a in (adv, -adv))
    torch.testing.assert_close(w_flip, w, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("variant", VARIANTS)
def test_cw_weights_decreasing_in_abs_covariance(variant):
    logps, adv, mask = random_batch(b=8, t=16, seed=4)
    centring = W.VARIANT_KNOBS[variant].centring
    m = mask.bool()
    cov = token_covariance(logps, adv, mask, centring=centring)[m]
    w = cw_weights(logps, adv, mask, variant=variant)[m]
    order = cov.abs().argsort()
    assert bool((w[order].diff() <= 1e-12).all())


@pytest.mark.parametrize("variant", VARIANTS)
def test_cw_weights_padding_is_zero_and_ignored(variant):
    logps, adv, mask = random_batch(seed=5)
    pad = ~mask.bool()
    assert bool(pad.any())
    w = cw_weights(logps, adv, mask, variant=variant)
    assert bool((w[pad] == 0).all())
    for fill in (1e6, -1e6, math.inf, math.nan):
        edited = logps.masked_fill(pad, fill)
        assert torch.equal(cw_weights(edited, adv, mask, variant=variant), w)


def test_cw_weights_released_padding_gets_zero_gradient():
    logps, adv, mask = random_batch(seed=6)
    logps.requires_grad_(True)
    w = cw_weights(logps, adv, mask, variant="released")
    (w * torch.linspace(0, 1, w.numel(), dtype=w.dtype).view_as(w)).sum().backward()
    assert bool((logps.grad[~mask.bool()] == 0).all())
    assert bool(logps.grad[mask.bool()].abs().sum() > 0)


def test_cw_weights_constant_advantages_reproduce_grpo():
    # sigma -> inf limit of the kernel: A constant => every c = 0 => every described weight 1 exactly
    logps, _, mask = random_batch(seed=7)
    adv = torch.full((logps.shape[0],), 0.7, dtype=torch.float64)
    assert bool((token_covariance(logps, adv, mask, centring="batch") == 0).all())
    w = cw_weights(logps, adv, mask, variant="described")
    assert torch.equal(w, mask.to(w.dtype))
    assert torch.equal(adv[:, None] * w, adv[:, None] * mask)  # the GRPO per-token advantages
    # released: also flat, but at B*T/N because padding is counted in Z
    w_rel = cw_weights(logps, adv, mask, variant="released")
    flat = mask.numel() / mask.sum().to(torch.float64)
    torch.testing.assert_close(w_rel[mask.bool()], flat.expand(int(mask.sum())), rtol=1e-12, atol=0)


def test_kernel_tends_to_one_as_sigma_grows():
    logps, adv, mask = random_batch(seed=8)
    cov = token_covariance(logps, adv, mask, centring="batch")
    tokens = valid_tokens(mask, logps, adv, torch.float64)
    sigmas = torch.tensor([0.1, 1.0, 10.0, 1e3, 1e12], dtype=torch.float64) * cov[mask.bool()].std()
    gaps = [(_normalised_kernel(cov, tokens, s, tokens.total) - mask).abs().max() for s in sigmas]
    assert all(a > b for a, b in itertools.pairwise(gaps)), gaps  # closer to 1 at every step
    assert gaps[-1] <= 1e-12


def test_cw_weights_mask_dtypes_agree():
    logps, adv, mask = random_batch(seed=9)
    ref = cw_weights(logps, adv, mask.bool(), variant="described")
    for m in (mask, mask.int(), mask.float(), mask.double()):
        assert torch.equal(cw_weights(logps, adv, m, variant="described"), ref)


# ----------------------------------------------------------------------------- degenerate, dtypes

DTYPES = [torch.float32, torch.float64, torch.bfloat16, torch.float16]


def _degenerate(case, dtype):
    logps, adv, mask = random_batch(b=4, t=6, seed=10)
    if case == "sigma0":  # constant advantages: every c = 0
        adv = torch.ones_like(adv)
    elif case == "all_padding":
        mask = torch.zeros_like(mask)
    elif case == "single_valid":
        mask = torch.zeros_like(mask)
        mask[2, 0] = 1
    elif case == "equal_nonzero_cov":  # described: c = (1, 1, 1, 1), sigma = 0 but c != 0
        logps = torch.tensor([[0.0, 0.0], [-2.0, -2.0]], dtype=torch.float64)
        adv, mask = torch.tensor([1.0, -1.0], dtype=torch.float64), torch.ones(2, 2, dtype=torch.long)
    elif case == "underflow":  # |c| >> sigma for every token: exp(-c^2/2sigma^2) underflows everywhere
        logps = torch.tensor([[1.0, 1.001, 0.999], [-1.0, -1.001, -0.999]], dtype=torch.float64)
        adv, mask = torch.tensor([1.0, -1.0], dtype=torch.float64), torch.ones(2, 3, dtype=torch.long)
    return logps.to(dtype), adv.to(dtype), mask


CASES = ["random", "sigma0", "all_padding", "single_valid", "equal_nonzero_cov", "underflow"]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("variant", VARIANTS)
@pytest.mark.parametrize("case", CASES)
def test_cw_weights_finite_on_degenerate_inputs(case, variant, dtype, device):
    logps, adv, mask = (x.to(device) for x in _degenerate(case, dtype))
    logps.requires_grad_(True)
    w = cw_weights(logps, adv, mask, variant=variant)
    assert w.dtype == (torch.float64 if dtype == torch.float64 else torch.float32)
    assert bool(torch.isfinite(w).all())
    m = mask.bool()
    assert bool((w[~m] == 0).all())
    n = int(m.sum())
    if n == 0:
        assert bool((w == 0).all())
    else:  # the normaliser holds in every case
        z = n if variant == "described" else mask.numel()
        torch.testing.assert_close(
            w.sum().double(), torch.tensor(float(z), dtype=torch.float64), rtol=1e-5, atol=0
        )
    if case in ("sigma0", "single_valid", "equal_nonzero_cov") and variant == "described":
        assert bool((w[m] == 1).all())  # sigma = 0: every valid weight 1 (spec §2)
    if variant == "released":
        w.sum().backward()
        assert bool(torch.isfinite(logps.grad).all())


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16], ids=str)
@pytest.mark.parametrize("variant", VARIANTS)
def test_cw_weights_half_inputs_computed_in_float32(dtype, variant):
    logps, adv, mask = random_batch(seed=11, dtype=dtype)
    w = cw_weights(logps, adv, mask, variant=variant)
    ref = cw_weights(logps.float(), adv.float(), mask, variant=variant)
    assert w.dtype == torch.float32
    torch.testing.assert_close(w, ref, rtol=1e-6, atol=1e-6)


# --------------------------------------------------------------------------------------- gradients


def test_cw_weights_described_carries_no_gradient():
    logps, adv, mask = random_batch(seed=12, dtype=torch.float32)
    logps.requires_grad_(True)
    w = cw_weights(logps, adv, mask, variant="described")
    assert not w.requires_grad


def test_cw_weights_released_carries_gradient():
    logps, adv, mask = random_batch(seed=12, dtype=torch.float32)
    logps.requires_grad_(True)
    w = cw_weights(logps, adv, mask, variant="released")
    assert w.requires_grad
    (w * w).sum().backward()
    assert bool(logps.grad.abs().sum() > 0)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64], ids=str)
def test_cw_weights_released_same_values_with_and_without_graph(dtype):
    # whether autograd records must not change the numbers
    logps, adv, mask = random_batch(b=8, t=32, seed=15, dtype=dtype)
    plain = cw_weights(logps, adv, mask, variant="released")
    tracked = cw_weights(logps.clone().requires_grad_(True), adv, mask, variant="released")
    torch.testing.assert_close(tracked.detach(), plain, rtol=1e-6, atol=0)
    with torch.no_grad():
        torch.testing.assert_close(
            cw_weights(logps.requires_grad_(True), adv, mask, variant="released"), plain
        )


def test_cw_weights_released_gradcheck():
    logps, adv, mask = random_batch(b=3, t=4, seed=13)
    logps.requires_grad_(True)
    adv.requires_grad_(True)
    assert torch.autograd.gradcheck(lambda lp, a: cw_weights(lp, a, mask, variant="released"), (logps, adv))


def _released_formula(logps: torch.Tensor, adv: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """The released weight as the spec's table writes it (method.md §2), in plain torch and left in the
    graph: per-completion mean log-prob, plain mean advantage, population std + 1e-8, Z = B*T."""
    m = mask.to(logps.dtype)
    row_mean = (logps * m).sum(1, keepdim=True) / m.sum(1, keepdim=True)
    cov = (logps - row_mean) * (adv[:, None] - adv.mean())
    valid = cov[mask.bool()]
    sigma = (valid - valid.mean()).pow(2).mean().sqrt() + 1e-8
    w = torch.exp(-cov.pow(2) / (2 * sigma**2)) * m
    return w * mask.numel() / w.sum()


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_cw_weights_released_gradient_is_the_released_formulas(seed):
    """Not only the values: the gradient the released weight sends back through the log-probs (its
    centring, bandwidth and normaliser all depend on them) is the released formula's, in the GRPO surrogate
    with the weighted advantage."""
    logps, adv, mask = random_batch(b=4, t=6, seed=seed, dtype=torch.float64)
    grads = []
    for weights in (
        lambda lp: cw_weights(lp, adv, mask, variant="released"),
        lambda lp: _released_formula(lp, adv, mask),
    ):
        lp = logps.clone().requires_grad_(True)
        surrogate = (weights(lp) * adv[:, None] * lp * mask).sum() / mask.sum()
        (grad,) = torch.autograd.grad(surrogate, lp)
        grads.append(grad)
    torch.testing.assert_close(grads[0], grads[1], rtol=1e-10, atol=1e-12)
    lp = logps.clone().requires_grad_(True)
    detached = cw_weights(lp, adv, mask, variant="released").detach()
    (without,) = torch.autograd.grad((detached * adv[:, None] * lp * mask).sum() / mask.sum(), lp)
    assert not torch.allclose(without, grads[0])  # the term through the weight is in what was compared


# ---------------------------------------------------------------------------------------- variants


def test_variant_knobs_match_spec_table():
    spec_table = {
        "released": W.CWKnobs(centring="sequence", normaliser="padded", gradient=True),
        "described": W.CWKnobs(centring="batch", normaliser="valid", gradient=False),
    }
    assert spec_table == W.VARIANT_KNOBS
    assert set(W.VARIANT_KNOBS) == set(W.CW_VARIANTS)


# -------------------------------------------------------------------------------------- bad inputs


def test_bad_inputs_raise_value_error():
    lp, adv, mask = t64(LP), t64(ADV), torch.tensor(MASK)
    with pytest.raises(ValueError, match=r"logps must be 2-D \(B, T\), got shape \(3,\)"):
        cw_weights(lp[0], adv, mask, variant="released")
    with pytest.raises(ValueError, match=r"advantages must have shape \(B,\) = \(2,\), got \(3,\)"):
        cw_weights(lp, t64([1.0, 2.0, 3.0]), mask, variant="released")
    with pytest.raises(ValueError, match=r"mask shape \(2, 2\) must equal logps shape \(2, 3\)"):
        cw_weights(lp, adv, mask[:, :2], variant="released")
    with pytest.raises(ValueError, match="mask must be bool or hold only 0/1"):
        cw_weights(lp, adv, mask * 2, variant="released")
    with pytest.raises(ValueError, match="mask must be bool or hold only 0/1"):
        cw_weights(lp, adv, mask * 0.5, variant="described")
    with pytest.raises(
        ValueError, match=re.escape("unknown variant 'paper'; valid: ['released', 'described']")
    ):
        cw_weights(lp, adv, mask, variant="paper")
    with pytest.raises(ValueError, match=re.escape("unknown centring 'token'; valid: ['batch', 'sequence']")):
        token_covariance(lp, adv, mask, centring="token")
    with pytest.raises(ValueError, match="logps must be a floating-point tensor"):
        cw_weights(mask, adv, mask, variant="released")
    with pytest.raises(ValueError, match=r"old_logps shape \(2, 2\) must equal logps shape \(2, 3\)"):
        MethodInputs(lp, lp[:, :2], adv, mask)
    with pytest.raises(ValueError, match=r"ratio=1.5: must be in \(0, 1\]"):
        kl_cov_select(lp, mask, ratio=1.5)


def test_import_does_not_pull_trl_or_transformers():
    code = "import sys, cwgrpo.weighting; print(sorted({'trl', 'transformers'} & set(sys.modules)))"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}
    res = subprocess.run(
        [sys.executable, "-c", code], cwd=REPO, env=env, capture_output=True, text=True, check=True
    )
    assert res.stdout.strip() == "[]"


def test_source_has_no_host_sync_calls():
    sources = sorted(Path(W.__file__).parent.glob("*.py"))
    assert len(sources) > 1
    for source in sources:
        tree = ast.parse(source.read_text())
        attrs = {node.attr for node in ast.walk(tree) if isinstance(node, ast.Attribute)}
        assert not attrs & {"item", "nonzero", "tolist", "cpu", "numpy"}, source.name
        imports = {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
        imports |= {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module}
        ours = {name for name in imports if name.startswith("cwgrpo.")}
        assert all(name.startswith("cwgrpo.weighting.") for name in ours), source.name
        outside = {name.split(".")[0] for name in imports - ours}
        assert outside <= {"torch", "math", "dataclasses", "typing", "collections", "__future__"}, source.name


# ------------------------------------------------------------------ one-knob overrides (the study's ablation)


@pytest.mark.parametrize("variant", VARIANTS)
def test_knobs_left_at_none_or_set_to_the_variants_own_choice_change_nothing(variant):
    lp, adv, mask = random_batch()
    own = W.VARIANT_KNOBS[variant]
    plain = cw_weights(lp, adv, mask, variant=variant)
    same = cw_weights(
        lp,
        adv,
        mask,
        variant=variant,
        centring=own.centring,
        normaliser=own.normaliser,
        gradient=own.gradient,
    )
    assert torch.equal(plain, same)


@pytest.mark.parametrize(("variant", "other"), [("released", "described"), ("described", "released")])
def test_flipping_all_three_knobs_gives_the_other_variant(variant, other):
    """Only sigma's + 1e-8 (which follows cw_variant) then separates the two."""
    lp, adv, mask = random_batch(seed=3)
    k = W.VARIANT_KNOBS[other]
    flipped = cw_weights(
        lp, adv, mask, variant=variant, centring=k.centring, normaliser=k.normaliser, gradient=k.gradient
    )
    assert torch.allclose(flipped, cw_weights(lp, adv, mask, variant=other), rtol=1e-6, atol=1e-9)
    assert not torch.allclose(flipped, cw_weights(lp, adv, mask, variant=variant), rtol=1e-3)


def test_centring_knob_weights_the_chosen_covariance():
    """released + batch centring = the kernel of the batch-centred covariance, released's Z and sigma."""
    lp, adv, mask = random_batch(seed=5)
    w = cw_weights(lp, adv, mask, variant="released", centring="batch")
    c = token_covariance(lp, adv, mask, centring="batch")
    m = mask.bool()
    sigma = c[m].std(unbiased=False) + W.RELEASED_SIGMA_EPS
    raw = torch.exp(-c.square() / (2 * sigma**2)) * m
    assert torch.allclose(w, raw * mask.numel() / raw.sum(), rtol=1e-9)


@pytest.mark.parametrize("variant", VARIANTS)
def test_normaliser_knob_sets_the_valid_token_mean_of_the_weights(variant):
    lp, adv, mask = random_batch(seed=7)
    m = mask.bool()
    valid = cw_weights(lp, adv, mask, variant=variant, normaliser="valid")
    padded = cw_weights(lp, adv, mask, variant=variant, normaliser="padded")
    assert valid[m].mean().item() == pytest.approx(1.0, rel=1e-12)
    assert padded[m].mean().item() == pytest.approx(mask.numel() / m.sum().item(), rel=1e-12)


@pytest.mark.parametrize("variant", VARIANTS)
def test_gradient_knob_decides_whether_the_weight_carries_gradient(variant):
    lp, adv, mask = random_batch(seed=9)
    lp = lp.clone().requires_grad_(True)
    assert cw_weights(lp, adv, mask, variant=variant, gradient=True).requires_grad
    assert not cw_weights(lp, adv, mask, variant=variant, gradient=False).requires_grad


@pytest.mark.parametrize(
    ("kw", "message"),
    [
        ({"centring": "token"}, "unknown centring 'token'"),
        ({"normaliser": "N"}, "unknown normaliser 'N'"),
        ({"gradient": "yes"}, "gradient must be True, False or None"),
    ],
)
def test_bad_knob_values_are_refused_by_name(kw, message):
    lp, adv, mask = random_batch()
    with pytest.raises(ValueError, match=re.escape(message)):
        cw_weights(lp, adv, mask, variant="released", **kw)
    names = {"centring": "cw_centring", "normaliser": "cw_normaliser", "gradient": "cw_weight_gradient"}
    with pytest.raises(ValueError, match=re.escape(message)):
        method_options(cw_variant="released", **{names[k]: v for k, v in kw.items()})
