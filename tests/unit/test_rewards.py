"""TRL reward functions: signature, string and conversational completions, unscorable gold, registry."""

from __future__ import annotations

import pytest

from cwgrpo.configs import ConfigError
from cwgrpo.rewards import REWARDS, accuracy_reward, format_reward, get_reward, released_accuracy_reward


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
    }
    assert expected == REWARDS
    assert get_reward("accuracy") is accuracy_reward
    with pytest.raises(
        ConfigError, match="unknown reward 'length'; known: \\['accuracy', 'accuracy_released', 'format'\\]"
    ):
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
    from cwgrpo.rewards import get_reward

    conversation = [[{"role": "assistant", "content": completion}]]
    assert get_reward("accuracy_released")(conversation, solution=[solution]) == [released]
    assert get_reward("accuracy")(conversation, answer=[answer]) == [ours]


def test_released_accuracy_reward_needs_the_solution_column():
    from cwgrpo.rewards import get_reward

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
        ("broken_rewards:f", "does not import: ModuleNotFoundError"),
        ("my_rewards:missing", "has no 'missing'"),
        ("my_rewards:NOT_A_FUNCTION", "is not a function"),
        ("my_rewards:no_kwargs", r"signature \(completions\) is not a reward's"),
        ("my_rewards:", "expected package.module:function"),
    ],
)
def test_reward_path_errors_name_the_path(user_module, path, message):
    with pytest.raises(ConfigError, match=message):
        get_reward(path)
