"""A reward of the user's checked by the dry run in the jobs' interpreter (``cwgrpo_workflow.dag.user_rewards``): where
the workflow builds the training data, the import is checked and the call left to the job, saying so."""

from __future__ import annotations

import os

from cwgrpo_workflow.dag.user_rewards import reward_errors

REWARD = "def f(completions, **kwargs):\n    return [0.0 for _ in completions]\n"


def _config(train: str) -> dict:
    return {
        "sizes": {"s": {}},
        "methods": {"grpo": {}},
        "train": {"reward_funcs": ["own_reward_x:f"]},
        "data": {"train": train},
        "datasets": {},
    }


def test_training_data_the_workflow_builds_leaves_the_call_to_the_job_and_says_so(tmp_path):
    (tmp_path / "own_reward_x.py").write_text(REWARD)
    path = os.pathsep.join(filter(None, [str(tmp_path), os.environ.get("PYTHONPATH")]))
    notes: list[str] = []
    assert list(reward_errors(_config("syn_dev"), {**os.environ, "PYTHONPATH": path}, notes)) == []
    assert notes == [
        "note: reward(s) own_reward_x:f imported as the jobs will; the call on the training data runs in the "
        "training job's first step, before its model loads (data.train 'syn_dev' is not a local file of "
        "yours, so it is built by the workflow)"
    ]
    [(key, line)] = reward_errors(_config("syn_dev"), dict(os.environ), [])  # the folder not on the path
    assert key == "train.reward_funcs" and "module 'own_reward_x' does not import" in line
