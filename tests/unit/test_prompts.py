"""Prompt sets: messages for training and evaluation, LaTeX braces kept, unknown names listed."""

from __future__ import annotations

import pytest

from cwgrpo.configs import ConfigError
from cwgrpo.data.prompts import PROMPT_SETS, eval_messages, get_prompt_set, train_messages

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


def test_evaluate_system_prompt_replaces_the_prompt_sets_own():
    from cwgrpo.evaluate.options import EvalConfig

    given = eval_messages(
        EvalConfig(prompt_set="tiny", system_prompt="Reply with the number.").prompts(), "1+2"
    )
    assert given == [
        {"role": "system", "content": "Reply with the number."},
        {"role": "user", "content": "1+2"},
    ]
    assert eval_messages(EvalConfig(prompt_set="tiny").prompts(), "1+2") == eval_messages("tiny", "1+2")
    assert (
        eval_messages(EvalConfig(prompt_set="open_rs", system_prompt="").prompts(), "x")[0]["role"] == "user"
    )


def test_evaluation_log_line_rounds_every_number():
    from cwgrpo.evaluate.summary import summary_line

    summary = {"pass1": 0.25, "k": 2, "avg_k": 0.1875, "avg_k_ci95": [0.24024999999999636, None]}
    assert summary_line("syn", summary) == "syn: pass1 0.250, avg@2 0.188 [0.240, none]"
    cut = {**summary, "n_samples": 8, "n_truncated": 3, "n_timed_out": 1}
    assert summary_line("syn", cut) == (
        "syn: pass1 0.250, avg@2 0.188 [0.240, none]; 3 of 8 answers cut at max_new_tokens; 1 answers ran out "
        "of grading time and count as wrong"
    )
