"""One prompt's group per loss micro-batch under TRL 1.16: the batch geometry that gives it
(cwgrpo.trainer.grpo.one_group_geometry_problem, a rule of CWGRPOConfig) and the check of each micro-batch
(cwgrpo.trainer.grpo.check_one_group). (That TRL then hands the loss whole groups, and that its default
geometry mixes them, is tests/parity/test_released_semantics.py.)"""

from __future__ import annotations

import re

import pytest
import torch

from cwgrpo.trainer.grpo import CWGRPOConfig, check_one_group, one_group_geometry_problem


def test_the_geometry_needs_a_per_device_batch_of_one_group_and_one_step_per_generation():
    assert (
        one_group_geometry_problem(per_device_train_batch_size=12, num_generations=12, steps_per_generation=1)
        is None
    )
    message = one_group_geometry_problem(
        per_device_train_batch_size=8, num_generations=4, steps_per_generation=1
    )
    assert re.search(r"per_device_train_batch_size \(8\) must equal num_generations \(4\)", message)
    message = one_group_geometry_problem(
        per_device_train_batch_size=4, num_generations=4, steps_per_generation=4
    )
    assert "steps_per_generation must be 1, got 4" in message


def test_the_config_applies_the_geometry_rule_only_with_one_group(tmp_path):
    geometry = {"per_device_train_batch_size": 8, "num_generations": 4, "gradient_accumulation_steps": 4}
    CWGRPOConfig(str(tmp_path), use_cpu=True, **geometry)  # groups may mix: no rule
    with pytest.raises(
        ValueError, match=r"per_device_train_batch_size \(8\) must equal num_generations \(4\)"
    ):
        CWGRPOConfig(str(tmp_path), use_cpu=True, cw_one_group_per_micro_batch=True, **geometry)


def test_runtime_check_refuses_a_mixed_micro_batch():
    ids = torch.tensor([[5, 6, 7]] * 3 + [[5, 6, 8]])
    mask = torch.ones_like(ids)
    with pytest.raises(RuntimeError, match="several prompts"):
        check_one_group({"prompt_ids": ids, "prompt_mask": mask}, 4)
    check_one_group({"prompt_ids": ids[:3], "prompt_mask": mask[:3]}, 3)  # one prompt: fine


def test_padding_may_differ_under_the_mask_but_not_the_group_size():
    ids = torch.tensor([[0, 5, 6]] * 3 + [[9, 5, 6]])  # the first position is left padding
    mask = torch.tensor([[0, 1, 1]] * 4)
    check_one_group({"prompt_ids": ids, "prompt_mask": mask}, 4)
    with pytest.raises(RuntimeError, match="holds 4 completions of one prompt, expected one prompt's 3"):
        check_one_group({"prompt_ids": ids, "prompt_mask": mask}, 3)
    longer = torch.tensor([[0, 1, 1]] * 3 + [[1, 1, 1]])  # same ids, one row's prompt is a token longer
    with pytest.raises(RuntimeError, match="of several prompts"):
        check_one_group({"prompt_ids": ids, "prompt_mask": longer}, 4)
