"""TRL reward functions: signature, string and conversational completions, unscorable gold, registry."""

from __future__ import annotations

import pytest

from cwgrpo.configs import ConfigError
from cwgrpo.rewards import REWARDS, accuracy_reward, format_reward, get_reward


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
    assert {"accuracy": accuracy_reward, "format": format_reward} == REWARDS
    assert get_reward("accuracy") is accuracy_reward
    with pytest.raises(ConfigError, match="unknown reward 'length'; known: \\['accuracy', 'format'\\]"):
        get_reward("length")
