"""Your own reward for config/byo.yaml: `reward_funcs: [my_rewards:exact_match]`. Copy it and keep the shape.

TRL calls a reward with the prompts, the completions and every column of your training file by keyword,
under your own column names (and the gold answer as `answer` too); it returns one float per completion, or
None for "no reward". The training jobs import it in processes of their own: put its folder on PYTHONPATH
(`PYTHONPATH=$PWD/config snakemake ...`) or install it. The dry run imports it as the jobs will and calls it
on the first rows of your training file, so a missing column or import fails there, in one line.
"""


def exact_match(completions, gold, **kwargs):
    """1.0 where the completion's last line is the `gold` column's answer, else 0.0."""
    rewards = []
    for completion, answer in zip(completions, gold, strict=True):
        text = completion[-1]["content"] if isinstance(completion, list) else completion  # chat or text
        lines = text.strip().splitlines() or [""]
        rewards.append(float(lines[-1].strip() == str(answer).strip()))
    return rewards
