"""cwgrpo.trainer.options: the covariance-aware methods' options, one validator in the job's config (CWGRPOConfig), which
the workflow's parse builds too (cwgrpo.train.options.train_option_errors, as the Snakefile runs it)."""

from __future__ import annotations

import pytest

from cwgrpo.train import options as train_options
from cwgrpo.trainer.options import CENTRINGS, CW_VARIANTS, METHOD_NAMES, NORMALISERS, CWOptions


def train_option_errors(options: dict) -> list:
    """The dry run's check of a job's options; every job has a ``max_steps`` (the preset's)."""
    return train_options.train_option_errors({"max_steps": 1, **options})


# Every rule CWGRPOConfig enforces on its own options: (options, the option the error names).
BROKEN_RULES = {
    "unknown method": ({"cw_method": "ppo"}, "cw_method"),
    "unknown variant": ({"cw_variant": "paper"}, "cw_variant"),
    "unknown centring": ({"cw_centring": "bath"}, "cw_centring"),
    "unknown normaliser": ({"cw_normaliser": "N"}, "cw_normaliser"),
    "clip-cov ratio above one": ({"clip_cov_ratio": 2.0}, "clip_cov_ratio"),
    "clip-cov ratio zero": ({"clip_cov_ratio": 0.0}, "clip_cov_ratio"),
    "kl-cov ratio above one": ({"kl_cov_ratio": 1.5}, "kl_cov_ratio"),
    "kl-cov ratio not a number": ({"kl_cov_ratio": float("nan")}, "kl_cov_ratio"),
    "clip-cov ratio of the wrong type": ({"clip_cov_ratio": "abc"}, "clip_cov_ratio"),
    "clip-cov bounds crossed": ({"clip_cov_lb": 6.0, "clip_cov_ub": 5.0}, "clip_cov_lb"),
    "clip-cov bound not finite": ({"clip_cov_ub": float("inf")}, "clip_cov_ub"),
    "kl-cov coefficient negative": ({"kl_cov_coef": -1.0}, "kl_cov_coef"),
    "probe prompts negative": ({"cw_probe_prompts": -1}, "cw_probe_prompts"),
    "sample interval below never": ({"cw_sample_every": -2}, "cw_sample_every"),
    "sample size zero": ({"cw_sample_size": 0}, "cw_sample_size"),
    "log-prob temperature zero": ({"cw_logprob_temperature": 0.0}, "cw_logprob_temperature"),
    "prompt cut zero": ({"max_prompt_length": 0}, "max_prompt_length"),
    "no-signal stretch negative": ({"cw_no_signal_steps": -1}, "cw_no_signal_steps"),
    "one group with a larger batch": (
        {"cw_one_group_per_micro_batch": True, "per_device_train_batch_size": 8, "num_generations": 4},
        "cw_one_group_per_micro_batch",
    ),
    "one group with several micro-batches a generation": (
        {
            "cw_one_group_per_micro_batch": True,
            "per_device_train_batch_size": 4,
            "num_generations": 4,
            "gradient_accumulation_steps": 2,
        },
        "cw_one_group_per_micro_batch",
    ),
}


@pytest.mark.parametrize("case", sorted(BROKEN_RULES))
def test_each_rule_is_refused_at_parse_time_naming_its_option(case):
    options, key = BROKEN_RULES[case]
    errors = train_option_errors(options)
    assert [e.key for e in errors] == [key], [str(e) for e in errors]
    assert key in str(errors[0]) and "\n" not in str(errors[0])


@pytest.mark.parametrize("case", sorted(BROKEN_RULES))
def test_each_rule_is_refused_by_the_jobs_config_the_same_way(case):
    from cwgrpo.trainer import CWGRPOConfig

    options, key = BROKEN_RULES[case]
    with pytest.raises(ValueError, match=key):
        CWGRPOConfig(output_dir="unused", report_to="none", use_cpu=True, bf16=False, **options)


def test_every_mistake_is_reported_at_once():
    options = {"clip_cov_ratio": 2.0, "cw_centring": "bath", "clip_cov_lb": 6.0, "cw_probe_prompts": -1}
    keys = {e.key for e in train_option_errors(options)}
    assert keys == {"clip_cov_ratio", "cw_centring", "clip_cov_lb", "cw_probe_prompts"}
    with pytest.raises(ValueError) as err:
        CWOptions(**options)
    assert len(str(err.value).splitlines()) == 4


def test_the_defaults_and_the_papers_settings_pass():
    assert CWOptions().problems() == []
    released = {"cw_method": "cw_grpo", "cw_variant": "released", "cw_logprob_temperature": 1.0,
                "cw_one_group_per_micro_batch": True, "per_device_train_batch_size": 12, "num_generations": 12,
                "steps_per_generation": 1, "max_prompt_length": 512, "cw_centring": None}  # fmt: skip
    assert train_option_errors(released) == []


def test_the_torch_free_choices_are_the_registrys_and_the_kernels():
    """The parse-time check reads these names (no torch); cwgrpo.weighting holds the methods and choices
    themselves. A method added to the registry must be named here too, and the parse must not import torch."""
    import subprocess
    import sys

    from cwgrpo import weighting
    from cwgrpo.weighting import covariance, kernel

    assert set(METHOD_NAMES) == set(weighting.METHODS)
    assert (CW_VARIANTS, CENTRINGS, NORMALISERS) == (
        kernel.CW_VARIANTS,
        covariance.CENTRINGS,
        kernel.NORMALISERS,
    )
    loaded = subprocess.run(
        [sys.executable, "-c", "import sys, cwgrpo_workflow.dag.command_options, cwgrpo_workflow.dag.preset_rules; print('torch' in sys.modules)"],
        capture_output=True, text=True, check=True,
    ).stdout.strip()  # fmt: skip
    assert loaded == "False"


@pytest.mark.parametrize("ratio", [0.0, 1e-9, 0.5, 1.0, 1.0001, 2.0, -0.1])
def test_one_ratio_rule_for_the_workflow_the_job_and_a_hand_built_methods_options(ratio):
    """clip_cov_ratio and kl_cov_ratio are in (0, 1] wherever they are checked: CWOptions (parse and job)
    and the weighting layer's MethodOptions and selections, built by hand."""
    from cwgrpo import weighting

    valid = 0.0 < ratio <= 1.0
    for name in ("clip_cov_ratio", "kl_cov_ratio"):
        assert (train_option_errors({name: ratio}) == []) is valid
        hand = dict(cw_variant="released", clip_cov_ratio=0.5, clip_cov_lb=1.0, clip_cov_ub=5.0, kl_cov_ratio=0.5,
                    kl_cov_coef=1.0, epsilon_low=0.2, epsilon_high=0.2, cw_centring=None, cw_normaliser=None,
                    cw_weight_gradient=None) | {name: ratio}  # fmt: skip
        if valid:
            weighting.MethodOptions(**hand)
        else:
            with pytest.raises(ValueError, match=rf"{name}={ratio!r}: must be in \(0, 1\]"):
                weighting.MethodOptions(**hand)


def test_the_trainer_hands_the_methods_the_knobs_cw_options_checked():
    """CWGRPOConfig.method_options resolves the knobs of options its CWOptions checked, as a hand-built
    MethodOptions resolves (and checks) its own."""
    import itertools

    from cwgrpo import weighting
    from cwgrpo.trainer import CWGRPOConfig

    for variant, centring, normaliser, gradient in itertools.product(
        CW_VARIANTS, (None, *CENTRINGS), (None, *NORMALISERS), (None, True, False)
    ):
        config = CWGRPOConfig(output_dir="unused", report_to="none", use_cpu=True, bf16=False, cw_variant=variant,
                              cw_centring=centring, cw_normaliser=normaliser, cw_weight_gradient=gradient)  # fmt: skip
        options = config.method_options(0.2, 0.28)
        assert options.cw_knobs == weighting.resolve_knobs(variant, centring, normaliser, gradient)
        assert (options.epsilon_low, options.epsilon_high, options.clip_cov_ratio) == (0.2, 0.28, 2e-4)
