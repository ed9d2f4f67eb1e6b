"""Prompt sets: messages for training and evaluation, LaTeX braces kept, unknown names listed."""

from __future__ import annotations

import pytest

from cwgrpo.configs import ConfigError
from cwgrpo.prompts import PROMPT_SETS, eval_messages, get_prompt_set, train_messages

PROBLEM = "Compute $\\frac{1}{2} + \\{x\\}$ for {x} = 3."


def test_open_rs_train_messages_have_system_then_problem():
    msgs = train_messages("open_rs", PROBLEM)
    assert [m["role"] for m in msgs] == ["system", "user"]
    system = msgs[0]["content"]
    assert "<think>" in system and "</think>" in system and "\\boxed{}" in system and "English" in system
    assert msgs[1]["content"] == PROBLEM


def test_open_rs_eval_messages_ask_for_the_boxed_final_line():
    msgs = eval_messages(PROMPT_SETS["open_rs"], PROBLEM)
    assert [m["role"] for m in msgs] == ["user"]
    text = msgs[0]["content"]
    assert "efficiently and clearly" in text
    assert "Therefore, the final answer is: $\\boxed{ANSWER}$." in text
    assert text.endswith(PROBLEM)  # braces in the problem survive templating


def test_tiny_prompts_are_the_bare_problem():
    assert train_messages("tiny", "47+35") == [{"role": "user", "content": "47+35"}]
    assert eval_messages("tiny", "47+35") == [{"role": "user", "content": "47+35"}]


def test_get_prompt_set_unknown_lists_names():
    assert get_prompt_set("tiny").name == "tiny"
    with pytest.raises(ConfigError, match="unknown prompt set 'r1'; known: \\['open_rs', 'tiny'\\]"):
        get_prompt_set("r1")
