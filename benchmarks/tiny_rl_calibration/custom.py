import random, sys
import cwgrpo.rewards as R
_rng = random.Random(0)
def random_reward(completions, **kw):
    return [float(_rng.random() < 0.2) for _ in completions]
def neg_accuracy(completions, answer=None, **kw):
    return [None if r is None else 1.0 - r for r in R.accuracy_reward(completions, answer=answer)]
R.REWARDS["random"] = random_reward
R.REWARDS["negacc"] = neg_accuracy
from cwgrpo.cli import main
sys.exit(main(sys.argv[1:]))
