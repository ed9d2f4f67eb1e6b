"""A few real optimiser steps of CWGRPOTrainer on the tiny model, for every method.

Each run must change the parameters and log every diagnostic of spec method.md §4.
"""

from __future__ import annotations

import json
import re

import pytest
import torch

pytest.importorskip("trl")

from transformers import AutoModelForCausalLM, AutoTokenizer

from cwgrpo.trainer import CWGRPOConfig, CWGRPOTrainer
from cwgrpo.weighting import COV_QUANTILE_KEYS
from tests.conftest import cpu_run_fields

DIAGNOSTICS = [
    "entropy",
    "entropy_per_completion",
    "cw/cov_mean",
    "cw/cov_std",
    "cw/cov_abs_mean",
    *COV_QUANTILE_KEYS,
    "cw/weight_mean",
    "cw/weight_std",
    "cw/weight_min",
    "cw/weight_max",
    "cw/weight_frac_below_0.5",
    "cw/weight_frac_above_2",
]
KEPT_SHARES = ["cw/group_successes", "cw/group_kept_positive", "cw/group_kept_negative", "cw/group_push_sum"]
METHODS = [
    ({"cw_method": "grpo"}, []),
    ({"cw_method": "cw_grpo", "cw_variant": "released"}, []),
    ({"cw_method": "cw_grpo", "cw_variant": "described"}, []),
    ({"cw_method": "clip_cov"}, ["cw/frac_tokens_clipped"]),
    ({"cw_method": "kl_cov", "num_iterations": 2}, ["cw/frac_tokens_penalised"]),
]


def _length_reward(completions, **kwargs):
    """A reward with spread inside each group, so advantages are not all zero."""
    return [float(len(c[0]["content"]) % 5) for c in completions]


def _tiny_trainer(model_dir, out_dir, prompts: int, **options) -> tuple[CWGRPOTrainer, list[dict]]:
    """A CWGRPOTrainer on the tiny model (2 steps, lr 1e-2, a log line per step) and the list its log
    lines go to; ``options`` override or add ``CWGRPOConfig`` fields."""
    from datasets import Dataset

    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_pretrained(model_dir)
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    data = Dataset.from_list([{"prompt": [{"role": "user", "content": f"{i}+{i}"}]} for i in range(prompts)])
    fields = dict(
        cpu_run_fields(out_dir), num_generations=4, max_completion_length=8, learning_rate=1e-2, max_steps=2
    )
    trainer = CWGRPOTrainer(
        model=model,
        args=CWGRPOConfig(**{**fields, **options}),
        train_dataset=data,
        reward_funcs=_length_reward,
        processing_class=tokenizer,
    )
    logged: list[dict] = []
    original_log = trainer.log

    def capture(logs, *args, **kwargs):  # TRL adds its metrics to ``logs`` in place
        original_log(logs, *args, **kwargs)
        logged.append(dict(logs))

    trainer.log = capture
    return trainer, logged


@pytest.mark.parametrize(("options", "extra_metrics"), METHODS, ids=lambda o: str(o))
def test_few_steps_change_parameters_and_log_diagnostics(tiny_model_dir, tmp_path, options, extra_metrics):
    trainer, logged = _tiny_trainer(
        tiny_model_dir, tmp_path, 16, per_device_train_batch_size=8, cw_sample_every=1, **options
    )
    before = {n: p.detach().clone() for n, p in trainer.model.named_parameters()}
    trainer.train()

    changed = [n for n, p in trainer.model.named_parameters() if not torch.equal(p.detach(), before[n])]
    assert changed, "no parameter changed"
    step_logs = [entry for entry in logged if "entropy" in entry]
    assert len(step_logs) == 2
    for key in [*DIAGNOSTICS, *extra_metrics]:
        values = [entry.get(key) for entry in step_logs]
        assert all(v is not None and v == v for v in values), f"{key} not logged: {values}"
    samples = [json.loads(line) for line in (tmp_path / "cov_samples.jsonl").read_text().splitlines()]
    assert [s["step"] for s in samples] == [1, 2]
    assert all(len(s["cov"]) == len(s["weight"]) > 0 for s in samples)


def test_kept_shares_are_logged_where_a_micro_batch_is_one_group_and_only_there(tiny_model_dir, tmp_path):
    """The kernel's cut of each group's outcomes needs the groups: with one group per micro-batch every step
    logs it; with several (TRL shuffles a generation batch's rows before it splits them) none is logged."""
    trainer, logged = _tiny_trainer(
        tiny_model_dir, tmp_path / "one", 8, per_device_train_batch_size=4, cw_one_group_per_micro_batch=True
    )
    trainer.train()
    step_logs = [entry for entry in logged if "entropy" in entry]
    assert len(step_logs) == 2
    for key in KEPT_SHARES:
        assert all(entry.get(key) == entry.get(key) is not None for entry in step_logs), key
    assert all(1 <= entry["cw/group_successes"] <= 3 for entry in step_logs)
    trainer, logged = _tiny_trainer(tiny_model_dir, tmp_path / "mixed", 8, per_device_train_batch_size=8)
    trainer.train()
    assert not [key for entry in logged for key in entry if key.startswith(("cw/group_", "cw/kept_"))]


def test_released_entropy_and_kl_are_means_of_completion_means(tiny_model_dir, tmp_path):
    """The logged ``entropy_per_completion`` and ``kl_per_completion`` are the released run's statistics
    of the loss's own tensors: each completion's mean over its tokens, then the mean over completions."""
    from cwgrpo.trainer.grpo import k3_kl, per_completion_means

    trainer, logged = _tiny_trainer(
        tiny_model_dir,
        tmp_path,
        8,
        beta=0.04,
        per_device_train_batch_size=4,
        gradient_accumulation_steps=2,
        steps_per_generation=1,
        cw_method="cw_grpo",
        cw_one_group_per_micro_batch=True,
    )
    seen: list[tuple[float, float, bool]] = []  # per loss call: expected entropy, KL; lengths differ
    hook = trainer._get_per_token_logps_and_entropies

    def record(model, input_ids, attention_mask, logits_to_keep, *args, **kwargs):
        inputs = trainer._cw_pending
        logps, entropies, aux = hook(model, input_ids, attention_mask, logits_to_keep, *args, **kwargs)
        if inputs is not None and model.training:
            mask = inputs["completion_mask"]
            kl = k3_kl(logps.detach(), inputs["ref_per_token_logps"])
            lengths = mask.sum(-1)
            seen.append(
                (
                    per_completion_means(entropies.detach(), mask).mean().item(),
                    per_completion_means(kl, mask).mean().item(),
                    bool((lengths != lengths[0]).any()),
                )
            )
        return logps, entropies, aux

    trainer._get_per_token_logps_and_entropies = record
    trainer.train()

    steps = [entry for entry in logged if "entropy_per_completion" in entry]
    assert len(steps) == 2 and len(seen) == 4  # two steps of two one-group micro-batches
    for step, entry in enumerate(steps):
        calls = seen[2 * step : 2 * step + 2]
        assert entry["entropy_per_completion"] == pytest.approx(sum(c[0] for c in calls) / 2, rel=1e-5)
        assert entry["kl_per_completion"] == pytest.approx(sum(c[1] for c in calls) / 2, rel=1e-5, abs=1e-9)
        if not any(c[2] for c in calls):  # completions of one length: the two means are the same number
            assert entry["entropy_per_completion"] == pytest.approx(entry["entropy"], rel=1e-5)
            assert entry["kl_per_completion"] == pytest.approx(entry["kl"], rel=1e-5, abs=1e-9)


def test_without_args_builds_the_default_config_as_grpo_trainer_does(tiny_model_dir, tmp_path, monkeypatch):
    """TRL's minimal call, ``GRPOTrainer(model, reward_funcs=..., train_dataset=...)``, works unchanged:
    the default config is a ``CWGRPOConfig`` named after the model, as TRL names ``GRPOConfig``'s (on a
    machine without an accelerator, with ``use_cpu``, where TRL's own default is refused)."""
    from datasets import Dataset

    monkeypatch.chdir(tmp_path)  # the default output_dir is relative, as TRL's
    data = Dataset.from_list([{"prompt": [{"role": "user", "content": f"{i}+{i}"}]} for i in range(8)])
    trainer = CWGRPOTrainer(str(tiny_model_dir), reward_funcs=_length_reward, train_dataset=data)
    assert isinstance(trainer.args, CWGRPOConfig)
    assert trainer.args.output_dir == f"{tiny_model_dir.name}-CW-GRPO"
    assert trainer.args.cw_method == "cw_grpo"
    assert trainer.args.use_cpu == (not torch.accelerator.is_available())
    assert trainer.args.cw_samples_path == f"{tiny_model_dir.name}-CW-GRPO/cov_samples.jsonl"


@pytest.mark.parametrize(
    ("method", "trained_with", "paper"),
    [("grpo", "GRPO", "DeepSeekMath"), ("clip_cov", "Clip-Cov", "The Entropy Mechanism")],
)
def test_a_baselines_model_card_names_its_method_its_base_model_and_its_folder(
    tiny_model_dir, tmp_path, method, trained_with, paper
):
    """Bug: the GRPO baseline's card said "trained with CW-GRPO", "fine-tuned version of [None]" and
    ``pipeline(model="None")``."""
    trainer, _ = _tiny_trainer(tiny_model_dir, tmp_path, 4, cw_method=method)
    trainer.create_model_card()
    card = (tmp_path / "README.md").read_text(encoding="utf-8")
    assert f"This model was trained with {trained_with}, a method introduced in [{paper}" in card
    assert "CW-GRPO" not in card and "cw-grpo" not in card and "None" not in card
    assert f"fine-tuned version of [{tiny_model_dir}]" in card
    assert f'pipeline("text-generation", model="{tmp_path}"' in card


def test_a_run_writes_its_model_card_and_completions_and_no_samples_when_off(tiny_model_dir, tmp_path):
    """A checkpoint writes TRL's model card, which names CW-GRPO and cites the paper; ``log_completions``
    saves each step's completions where the sample browser reads them; ``cw_sample_every=-1`` writes no
    ``cov_samples.jsonl``."""
    from cwgrpo_workflow.report.samples import load_train_steps
    from cwgrpo_workflow.report.samples_load import SamplesConfig

    trainer, _ = _tiny_trainer(
        tiny_model_dir,
        tmp_path,
        8,
        per_device_train_batch_size=4,
        cw_sample_every=-1,
        save_strategy="steps",
        save_steps=2,
        log_completions=True,
    )
    trainer.train()
    card = (tmp_path / "README.md").read_text(encoding="utf-8")
    assert "CW-GRPO" in card and "Taming Extreme Tokens" in card
    assert "@inproceedings{wang2026taming" in card
    assert not (tmp_path / "cov_samples.jsonl").exists()
    (tmp_path / "run.json").write_text(
        json.dumps({"tags": {"size": "small", "method": "cw_grpo", "seed": 0}})
    )
    steps, issues = load_train_steps([tmp_path], SamplesConfig(kind="tiny", per_cell=4))
    assert issues == [] and [s.step for s in steps] == [1, 2]
    assert all(s.total == trainer.args.generation_batch_size == len(s.rows) == 4 for s in steps)
    assert (
        re.fullmatch(r"user: (\d)\+\1", steps[0].rows[0]["prompt"])
        and "_length_reward" in steps[0].rows[0]["rewards"]
    )
