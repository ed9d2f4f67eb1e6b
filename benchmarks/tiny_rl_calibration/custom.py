"""`cwgrpo` with two test rewards registered: `random` (Bernoulli(0.2), independent of the completion)
and `negacc` (1 - accuracy, a sign check). Usage: python custom.py train ... --set 'reward_funcs=["random"]'."""

import random
import sys

import cwgrpo.grading.rewards as rewards
from cwgrpo.cli import main

_rng = random.Random(0)


def random_reward(completions, **kwargs):
    return [float(_rng.random() < 0.2) for _ in completions]


def neg_accuracy(completions, answer=None, **kwargs):
    return [None if r is None else 1.0 - r for r in rewards.accuracy_reward(completions, answer=answer)]


rewards.REWARDS["random"] = random_reward
rewards.REWARDS["negacc"] = neg_accuracy

if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
