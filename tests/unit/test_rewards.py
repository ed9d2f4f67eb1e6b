"""TRL reward functions: signature, string and conversational completions, unscorable gold, registry; a
user's reward by dotted path, and the checks that stop one that cannot work (cwgrpo.grading.reward_guard)."""

from __future__ import annotations

import json
import math
import textwrap
from pathlib import Path

import pytest

from cwgrpo.configs import ConfigError
from cwgrpo.grading.rewards import (
    REWARDS,
    accuracy_reward,
    format_reward,
    get_reward,
    number_accuracy_reward,
    released_accuracy_reward,
)
from tests.conftest import TWO_STEP_TRL


def conv(text: str) -> list[dict]:
    return [{"role": "assistant", "content": text}]


def test_accuracy_reward_strings():
    completions = ["<think>\n2+2\n</think>\n\\boxed{4}", "\\boxed{5}", "no answer"]
    assert accuracy_reward(completions, answer=["4", "4", "4"]) == [1.0, 0.0, 0.0]


def test_accuracy_reward_conversational():
    completions = [conv("\\boxed{\\frac{1}{2}}"), conv("\\boxed{0.4}")]
    assert accuracy_reward(completions, answer=["0.5", "0.5"], prompts=["p", "q"]) == [1.0, 0.0]


def test_accuracy_reward_unscorable_gold_is_none():
    assert accuracy_reward(["\\boxed{1}", "\\boxed{1}"], answer=["1", "}"]) == [1.0, None]


def test_number_accuracy_reward_scores_an_echoed_expression_zero():
    """``accuracy`` credits "75-51" for a gold 24 (math-verify evaluates it); ``number_accuracy`` does not."""
    completions = ["The answer is 75-51.", "\\boxed{24}", "22.", conv("The answer is 24."), "\\boxed{25}"]
    answers = ["24", "24", "22", "24", "24"]
    assert accuracy_reward(completions, answer=answers) == [1.0, 1.0, 1.0, 1.0, 0.0]
    number_accuracy = get_reward("number_accuracy")
    assert number_accuracy(completions, answer=answers) == [0.0, 1.0, 1.0, 1.0, 0.0]
    assert number_accuracy(["24", "-3", "4.5"], answer=["\\frac{", "-3", "4.5"]) == [None, 1.0, 1.0]
    written_as_people_do = ["\\boxed{.5}", "\\boxed{1,000}", "\\boxed{-1,234.5}"]
    assert number_accuracy(written_as_people_do, answer=["0.5", "1000", "-1234.5"]) == [1.0, 1.0, 1.0]
    with pytest.raises(ValueError, match="number_accuracy reward needs the dataset column 'answer'"):
        number_accuracy(["24"], solution=["24"])


def test_accuracy_reward_without_answer_column_is_an_error():
    with pytest.raises(ValueError, match=r"needs the dataset column 'answer'.*solution"):
        accuracy_reward(["\\boxed{1}"], solution=["1"])


@pytest.mark.parametrize(
    ("text", "reward"),
    [
        ("<think>\nreasoning\n</think>\n\\boxed{4}", 1.0),
        ("reasoning\n</think>\nanswer", 1.0),  # the opening tag may come from the prompt
        ("<think>reasoning</think>\\boxed{4}", 0.0),  # no newlines around the tag
        ("<think>\na\n</think>\nb\n</think>\nc", 0.0),  # two closing tags
        ("\\boxed{4}", 0.0),
    ],
)
def test_format_reward(text, reward):
    assert format_reward([text]) == [reward]
    assert format_reward([conv(text)]) == [reward]


def test_registry_names_map_to_functions():
    expected = {
        "accuracy": accuracy_reward,
        "accuracy_released": released_accuracy_reward,
        "format": format_reward,
        "number_accuracy": number_accuracy_reward,
    }
    assert expected == REWARDS
    assert get_reward("accuracy") is accuracy_reward
    known = "\\['accuracy', 'accuracy_released', 'format', 'number_accuracy'\\]"
    with pytest.raises(ConfigError, match=f"unknown reward 'length'; known: {known}"):
        get_reward("length")


# The released accuracy reward (src/open_r1/rewards.py of the authors' repository) against ours, on
# hand-made completions where the two readings differ. Each case: (completion, solution, answer,
# released reward, our accuracy reward).
RELEASED_VS_OURS = [
    # an unanchored plain-text answer: ours reads it, the released LaTeX-only extraction does not
    ("<think>\nso 2+3\n</think>\nThe answer is 5", "We add: $2+3=\\boxed{5}$", "5", 0.0, 1.0),
    # inline math without an anchor ("final answer", \boxed): released finds no answer
    ("<think>\n5\n</think>\n$5$", "$\\boxed{5}$", "5", 0.0, 1.0),
    # an answer only inside the reasoning: released reads the whole completion, ours only after </think>
    ("<think>\nthe result is \\boxed{5}\n</think>\nI am not sure.", "$\\boxed{5}$", "5", 1.0, 0.0),
    # the gold comes from the worked solution; one that does not parse gives None, whatever the answer column
    ("<think>\nx\n</think>\n\\boxed{5}", "no math here", "5", None, 1.0),
    # where both agree
    ("<think>\nx\n</think>\n\\boxed{\\frac{1}{2}}", "Thus $\\boxed{0.5}$", "1/2", 1.0, 1.0),
    ("<think>\nx\n</think>\n\\boxed{4}", "$\\boxed{5}$", "5", 0.0, 0.0),
]


@pytest.mark.parametrize(("completion", "solution", "answer", "released", "ours"), RELEASED_VS_OURS)
def test_released_accuracy_reward_reads_as_released(completion, solution, answer, released, ours):
    from cwgrpo.grading.rewards import get_reward

    conversation = [[{"role": "assistant", "content": completion}]]
    assert get_reward("accuracy_released")(conversation, solution=[solution]) == [released]
    assert get_reward("accuracy")(conversation, answer=[answer]) == [ours]


def test_released_accuracy_reward_needs_the_solution_column():
    from cwgrpo.grading.rewards import get_reward

    with pytest.raises(ValueError, match="'solution'"):
        get_reward("accuracy_released")(["\\boxed{1}"], answer=["1"])


# -- a user's own reward, by dotted path ---------------------------------------------------------------

USER_REWARDS = """
def brevity(completions, **kwargs):
    return [1.0 / (1 + len(c)) for c in completions]

def no_kwargs(completions):
    return [0.0 for _ in completions]

NOT_A_FUNCTION = 3
"""


@pytest.fixture
def user_module(tmp_path, monkeypatch):
    (tmp_path / "my_rewards.py").write_text(USER_REWARDS)
    (tmp_path / "broken_rewards.py").write_text("import no_such_module_xyz\n")
    monkeypatch.syspath_prepend(str(tmp_path))


def test_reward_by_dotted_path(user_module):
    func = get_reward("my_rewards:brevity")
    assert func(["ab", ""]) == [1 / 3, 1.0]


@pytest.mark.parametrize(
    ("path", "message"),
    [
        ("no_such_pkg_xyz.mod:f", "module 'no_such_pkg_xyz.mod' does not import"),
        ("broken_rewards:f", r"does not import \(ModuleNotFoundError"),
        ("my_rewards:missing", "has no 'missing'"),
        ("my_rewards:NOT_A_FUNCTION", "is not a function"),
        ("my_rewards:no_kwargs", r"signature \(completions\) is not a reward's"),
        ("my_rewards:", "expected package.module:function"),
    ],
)
def test_reward_path_errors_name_the_path(user_module, path, message):
    with pytest.raises(ConfigError, match=message):
        get_reward(path)


# -- a user's reward that cannot work (cwgrpo.grading.reward_guard): it fails before any model loads, or stops the
# run with an error, not a traceback after generation, a hang, or a run marked complete with zero gradient

HOSTILE_REWARDS = textwrap.dedent(
    """
    import time

    def raising(completions, **kwargs):
        raise KeyError("no such column")

    def returns_none(completions, **kwargs):
        return None

    def too_many(completions, **kwargs):
        return [1.0] * (len(completions) + 1)

    def text(completions, **kwargs):
        return ["1.0" for _ in completions]

    def sleeps(completions, **kwargs):
        time.sleep(30)
        return [1.0 for _ in completions]

    def all_nan(completions, **kwargs):
        return [float("nan") for _ in completions]

    def fine(completions, answer, **kwargs):
        return [1.0 if a in c[-1]["content"] else 0.0 for c, a in zip(completions, answer)]

    def wants_gold(completions, gold_answer, **kwargs):
        return [0.0 for _ in completions]
    """
)


@pytest.fixture
def user_rewards(tmp_path, monkeypatch) -> str:
    (tmp_path / "hostile_rewards.py").write_text(HOSTILE_REWARDS)
    monkeypatch.syspath_prepend(str(tmp_path))
    return "hostile_rewards"


@pytest.fixture
def no_model_load(monkeypatch):
    """Loading the policy fails the test: every check here must come first."""
    import transformers

    def loaded(*args, **kwargs):
        raise AssertionError("the model loaded before the reward was checked")

    monkeypatch.setattr(transformers.AutoModelForCausalLM, "from_pretrained", loaded)


def _train(tmp_path: Path, model_dir: Path, reward: str, **job) -> int:
    from cwgrpo.train.options import build_train_config
    from cwgrpo.train.run import train

    data = tmp_path / "train.jsonl"
    records = [{"id": f"p-{i}", "problem": "1+1", "answer": "2", "source": "test"} for i in range(2)]
    data.write_text("".join(json.dumps(r) + "\n" for r in records))
    run = tmp_path / "run"
    return train(
        model_dir, data, run, build_train_config({**TWO_STEP_TRL, "reward_funcs": [reward], **job}, run)
    )


@pytest.mark.parametrize(
    ("function", "message"),
    [
        ("raising", "raised KeyError: 'no such column'"),
        ("returns_none", "returned NoneType, not a list"),
        ("too_many", "returned 5 values for 4 completions"),
        ("text", "returned '1.0' \\(str\\)"),
    ],
)
def test_a_reward_that_cannot_work_fails_before_the_model_loads(
    tmp_path, tiny_model_dir, user_rewards, no_model_load, function, message
):
    """Weak spot: a reward that raised or returned None failed with a traceback after load and generation."""
    with pytest.raises(
        ConfigError,
        match=f"reward '{user_rewards}:{function}', called as TRL calls it on the first 2 training.*{message}",
    ):
        _train(tmp_path, tiny_model_dir, f"{user_rewards}:{function}")
    assert not (tmp_path / "run").exists()


def test_the_train_command_refuses_a_reward_before_it_launches_anything_with_the_dry_runs_message(
    tmp_path, tiny_model_dir, user_rewards, no_model_load, capfd
):
    """Issue 37: where the dry run cannot call a reward (training data the workflow builds), the training
    job's first step does, before its launcher, tokenizer or model: the same one line."""
    from cwgrpo import cli

    data = tmp_path / "train.jsonl"
    data.write_text(json.dumps({"id": "p-0", "problem": "1+1", "answer": "2", "source": "test"}) + "\n")
    args = [
        "train",
        "--model-dir",
        str(tiny_model_dir),
        "--train-data",
        str(data),
        "--run-dir",
        str(tmp_path / "run"),
    ]
    options = {**TWO_STEP_TRL, "reward_funcs": [f"{user_rewards}:wants_gold"], "launcher": "accelerate"}
    (tmp_path / "options.yaml").write_text(json.dumps({**options, "num_processes": 2}))
    assert cli.main([*args, "--config", str(tmp_path / "options.yaml")]) == 2
    err = capfd.readouterr().err
    assert (
        f"reward '{user_rewards}:wants_gold', called as TRL calls it on the first 1 training row(s) "
        "(2 completions each) before training, raised TypeError: wants_gold() missing 1 required positional argument: 'gold_answer'; it was "
        "called with the keywords prompts, completions, completion_ids, answer, trainer_state," in err
    ), err
    assert not (tmp_path / "run").exists()


def test_a_reward_over_its_time_budget_stops_naming_it(tmp_path, tiny_model_dir, user_rewards, no_model_load):
    """Weak spot: a reward that sleeps blocked training for ever; reward_timeout_s is its budget per call."""
    with pytest.raises(ConfigError, match=f"reward '{user_rewards}:sleeps'.*took more than 0.5 s"):
        _train(tmp_path, tiny_model_dir, f"{user_rewards}:sleeps", reward_timeout_s=0.5)


def test_the_sample_call_is_bounded_without_a_budget_too(
    tmp_path, tiny_model_dir, user_rewards, no_model_load, monkeypatch
):
    from cwgrpo.grading import reward_guard

    monkeypatch.setattr(reward_guard, "SAMPLE_BUDGET_S", 0.5)
    with pytest.raises(ConfigError, match=r"took more than 0.5 s.*set reward_timeout_s"):
        _train(tmp_path, tiny_model_dir, f"{user_rewards}:sleeps")


@pytest.mark.parametrize("budget", [0, -1, math.nan, math.inf])
def test_a_bad_time_budget_is_refused(tmp_path, budget):
    from cwgrpo.train.options import build_train_config

    with pytest.raises(ConfigError, match=r"reward_timeout_s=.*: must be a number of seconds > 0"):
        build_train_config({**TWO_STEP_TRL, "reward_timeout_s": budget}, tmp_path / "run")


def test_the_budget_bounds_every_call_and_keeps_the_name(user_rewards):
    from cwgrpo.grading import reward_guard
    from cwgrpo.grading.rewards import get_reward

    bounded = reward_guard.with_budget("x", get_reward(f"{user_rewards}:sleeps"), 0.2)
    assert bounded.__name__ == "sleeps"  # TRL names the reward's metrics by it
    with pytest.raises(reward_guard.RewardTimeout, match=r"one call of reward 'x' took more than 0.2 s"):
        bounded(completions=["a"])


def test_a_step_with_every_reward_missing_warns_and_a_run_of_them_is_an_error():
    from cwgrpo.grading import reward_guard

    warnings = []
    count = reward_guard.MissingRewards(limit=3, warn=lambda *a: warnings.append(a[0] % a[1:]))
    nan = {"rewards/a/mean": math.nan, "rewards/b/mean": None, "reward": 0.0}
    count.step(1, {"rewards/a/mean": 1.0, "rewards/b/mean": math.nan})  # one reward present: a signal
    count.step(2, nan)
    count.step(3, {"loss": 0.1})  # not a step with rewards
    assert len(warnings) == 1 and "EVERY REWARD IS MISSING" in warnings[0]
    count.step(4, nan)
    with pytest.raises(ConfigError, match="3 logged steps in a row had every reward missing"):
        count.step(5, nan)
    short = reward_guard.MissingRewards(limit=3, warn=lambda *a: None)
    short.step(1, nan)
    with pytest.raises(ConfigError, match=r"every logged step \(2\).*not complete"):
        short.step(2, nan, last=True)
    fine = reward_guard.MissingRewards(limit=3, warn=lambda *a: None)
    fine.step(1, nan)
    fine.step(2, {"rewards/a/mean": 0.0}, last=True)  # one step had a signal: a complete run


def test_a_run_whose_rewards_are_all_nan_is_an_error_not_a_complete_run(
    tmp_path, tiny_model_dir, user_rewards
):
    """Weak spot: a reward returning NaN for everything trained with zero gradient to the end, marked complete."""
    for _ in range(2):  # a rerun resumes from checkpoint-1 and stops again
        with pytest.raises(ConfigError, match=r"every logged step \(\d\) had every reward missing"):
            _train(tmp_path, tiny_model_dir, f"{user_rewards}:all_nan")
        assert not (tmp_path / "run" / "run.json").exists()
        assert not (tmp_path / "run" / "checkpoint-2").exists()


def test_a_reward_that_works_passes_the_sample_call(user_rewards):
    from cwgrpo.grading import reward_guard

    row = {"prompt": [{"role": "user", "content": "1+1"}], "answer": "2"}
    funcs = reward_guard.prepared_rewards([f"{user_rewards}:fine", "format"], row, budget=5)
    assert [f.__name__ for f in funcs] == ["fine", "format_reward"]
