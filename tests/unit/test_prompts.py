"""Prompt sets: messages for training and evaluation, LaTeX braces kept, unknown names listed."""

from __future__ import annotations

import pytest

from cwgrpo.configs import ConfigError
from cwgrpo.prompts import PROMPT_SETS, eval_messages, get_prompt_set, train_messages

PROBLEM = "Compute $\\frac{1}{2} + \\{x\\}$ for {x} = 3."


# The released strings, pinned character for character (docs/fidelity.md): the recipes' `system_prompt`
# as YAML reads it, and the lighteval MATH_QUERY_TEMPLATE of src/open_r1/evaluate.py after `.format`.
RELEASED_SYSTEM = (
    "A conversation between User and Assistant. The user asks a question, and the Assistant solves it. The "
    "assistant first thinks about the reasoning process in the mind and then provides the user with the answer, "
    "and put your final answer within \\boxed{{}} . The reasoning process and answer are enclosed within "
    "<think> </think> and <answer> </answer> tags, respectively, i.e., <think> reasoning process here </think> "
    "<answer> answer here </answer>. Note that respond by English, NOT use other languages."
)
RELEASED_EVAL_PREFIX = (
    "Solve the following math problem efficiently and clearly.  The last line of your response should be of "
    "the following format: 'Therefore, the final answer is: $\\boxed{ANSWER}$. I hope it is correct' (without "
    "quotes) where ANSWER is just the final number or expression that solves the problem. Think step by step "
    "before answering.\n\n"
)


def test_open_rs_train_messages_are_the_released_system_prompt_then_the_problem():
    msgs = train_messages("open_rs", PROBLEM)
    assert msgs == [{"role": "system", "content": RELEASED_SYSTEM}, {"role": "user", "content": PROBLEM}]


def test_open_rs_eval_messages_are_the_released_lighteval_prompt():
    msgs = eval_messages(PROMPT_SETS["open_rs"], PROBLEM)
    assert msgs == [{"role": "user", "content": RELEASED_EVAL_PREFIX + PROBLEM}]  # braces survive templating


def test_tiny_prompts_are_the_bare_problem():
    assert train_messages("tiny", "47+35") == [{"role": "user", "content": "47+35"}]
    assert eval_messages("tiny", "47+35") == [{"role": "user", "content": "47+35"}]


def test_get_prompt_set_unknown_lists_names():
    assert get_prompt_set("tiny").name == "tiny"
    with pytest.raises(ConfigError, match="unknown prompt set 'r1'; known: \\['open_rs', 'tiny'\\]"):
        get_prompt_set("r1")
