"""``cw_one_group_per_micro_batch``: every loss micro-batch is exactly one prompt's G completions.

As in the released run (the CW-GRPO weight's mean_A is then 0 and sigma is per group): the batch geometry
that gives it under TRL 1.16, checked when the config is built, and the check of each micro-batch.
"""

from __future__ import annotations

from typing import Any


def check_one_group_geometry(
    per_device_train_batch_size: int, num_generations: int, steps_per_generation: int
) -> None:
    """The batch geometry under which TRL 1.16 hands the loss one whole group per micro-batch.

    TRL's sampler yields each prompt ``num_generations`` times in a row, and each process takes
    ``per_device_train_batch_size`` consecutive rows per micro-step, so a micro-batch is one group when
    the two are equal. With ``steps_per_generation > 1`` TRL generates that many micro-batches at once
    and shuffles the rows before splitting them (``_prepare_inputs``), which mixes groups.

    """
    if per_device_train_batch_size != num_generations:
        raise ValueError(
            f"cw_one_group_per_micro_batch: per_device_train_batch_size ({per_device_train_batch_size}) "
            f"must equal num_generations ({num_generations}), so that each loss micro-batch is one "
            "group; raise gradient_accumulation_steps to keep the prompts per optimiser step"
        )
    if steps_per_generation != 1:
        raise ValueError(
            f"cw_one_group_per_micro_batch: steps_per_generation must be 1, got {steps_per_generation} "
            "(TRL 1.16 defaults it to gradient_accumulation_steps, then shuffles the generated rows across "
            "that many micro-batches); set steps_per_generation: 1"
        )


def check_one_group(inputs: dict[str, Any], group_size: int) -> None:
    """Raise unless the micro-batch holds exactly one prompt's ``group_size`` completions."""
    prompt_ids, prompt_mask = inputs["prompt_ids"], inputs["prompt_mask"]
    rows = prompt_ids.size(0)
    same = bool(((prompt_ids == prompt_ids[:1]) | (prompt_mask == 0)).all()) and bool(
        (prompt_mask == prompt_mask[:1]).all()
    )
    if rows != group_size or not same:
        raise RuntimeError(
            f"cw_one_group_per_micro_batch: a loss micro-batch holds {rows} completions "
            f"{'of one prompt' if same else 'of several prompts'}, expected one prompt's {group_size}; "
            "the batch geometry or TRL's sampler no longer gives one group per micro-batch"
        )
