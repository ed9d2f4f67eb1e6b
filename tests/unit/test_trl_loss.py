"""cwgrpo.trainer.trl_loss: each of TRL 1.16's loss reductions, on a hand-computed 2x3 loss. (That these
are TRL's own, loss type by loss type, is tests/parity/test_trainer_parity.py.)"""

from __future__ import annotations

import pytest
import torch

from cwgrpo.trainer.trl_loss import TRL_LOSS_TYPES, aggregate_like_trl

# Completion 0 has 2 valid tokens, completion 1 has 3: masked sum 3 + 15 = 18 over 5 tokens.
PER_TOKEN = torch.tensor([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])
MASK = torch.tensor([[1, 1, 0], [1, 1, 1]])
SETUP = dict(
    gradient_accumulation_steps=2,
    max_completion_length=4,
    num_items_in_batch=torch.tensor(10.0),
    num_processes=2,
    steps_per_generation=4,
)


# (loss type, in training, evaluating): training divides by the accumulation steps (2) but for
# dapo/cispo/vespo, whose normaliser is the items in the batch per process (10 / 2), times 2 / 4.
EXPECTED = [
    ("grpo", 3.25 / 2, 3.25),  # the mean of per-completion means (1.5, 5)
    ("sapo", 3.25 / 2, 3.25),
    ("bnpo", 18 / 5 / 2, 18 / 5),  # one mean over every valid token
    ("dr_grpo", 18 / (2 * 4) / 2, 18 / (2 * 4)),  # over B * max_completion_length
    ("dapo", 18 / (5 * 2 / 4), 18 / 5),
    ("cispo", 18 / (5 * 2 / 4), 18 / 5),
    ("vespo", 18 / (5 * 2 / 4), 18 / 5),
    ("luspo", 9 / 2, 9),  # the mean of per-completion sums (3, 15)
]


@pytest.mark.parametrize(("loss_type", "training", "evaluating"), EXPECTED)
def test_each_loss_type_reduces_as_trl_does(loss_type, training, evaluating):
    for is_training, expected in ((True, training), (False, evaluating)):
        got = aggregate_like_trl(PER_TOKEN, MASK, loss_type=loss_type, training=is_training, **SETUP)
        assert float(got) == pytest.approx(expected, rel=1e-6), (loss_type, is_training)


def test_every_trl_loss_type_has_a_reduction_and_an_unknown_one_is_refused():
    assert {row[0] for row in EXPECTED} == set(TRL_LOSS_TYPES)
    with pytest.raises(ValueError, match=r"no aggregation for loss_type='ppo'; supported: \['grpo'"):
        aggregate_like_trl(PER_TOKEN, MASK, loss_type="ppo", training=True, **SETUP)
