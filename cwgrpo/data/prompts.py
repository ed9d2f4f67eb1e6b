"""Prompt sets: the system prompt and user templates for training and evaluation, in one place.

``open_rs`` is the released run's, verbatim (``tests/unit/test_prompts.py`` pins every character);
``tiny`` is the bare problem, since every character is a token of the tiny models.
"""

from __future__ import annotations

import dataclasses

from cwgrpo.configs import ConfigError


@dataclasses.dataclass(frozen=True)
class PromptSet:
    """How problems become chat messages: a system message (or None) and a ``{problem}`` template."""

    name: str
    train_system: str | None
    train_user_template: str
    eval_system: str | None
    eval_user_template: str


# The released run's strings, character for character: they are hyperparameters of the experiment.
# System prompt: `system_prompt` of the authors' recipes (recipes/gaussian_1.5b.yaml, gaussian_7b.yaml,
# grpo_1.5b.yaml, grpo_7b.yaml, line 9 each), as YAML reads it: the doubled braces of `\\boxed{{}}` and
# the space before the full stop are in the original and reach the model as they are (open-r1's
# `make_conversation` does not format the string).
OPEN_RS_SYSTEM = (
    "A conversation between User and Assistant. The user asks a question, and the Assistant solves it. "
    "The assistant first thinks about the reasoning process in the mind and then provides the user with "
    "the answer, and put your final answer within \\boxed{{}} . The reasoning process and answer are "
    "enclosed within <think> </think> and <answer> </answer> tags, respectively, i.e., <think> reasoning "
    "process here </think> <answer> answer here </answer>. Note that respond by English, NOT use other "
    "languages."
)

# Evaluation prompt: `MATH_QUERY_TEMPLATE` of the released src/open_r1/evaluate.py (lines 34-38, adapted
# there from simple-evals), after its `.format(Question=...)`: `{{ANSWER}}` has become `{ANSWER}`, the
# double space after "clearly." is the original's. lighteval applies the chat template, no system prompt.
EVAL_MATH_TEMPLATE = (
    "Solve the following math problem efficiently and clearly.  The last line of your response should be "
    "of the following format: 'Therefore, the final answer is: $\\boxed{ANSWER}$. I hope it is correct' "
    "(without quotes) where ANSWER is just the final number or expression that solves the problem. Think "
    "step by step before answering.\n\n{problem}"
)

TRAIN_PROMPT_SET = "tiny"  # `cwgrpo train`'s default; a preset's evaluation takes its training's (cwgrpo_workflow.dag.options)

PROMPT_SETS: dict[str, PromptSet] = {
    "open_rs": PromptSet(
        name="open_rs",
        train_system=OPEN_RS_SYSTEM,
        train_user_template="{problem}",
        eval_system=None,
        eval_user_template=EVAL_MATH_TEMPLATE,
    ),
    "tiny": PromptSet(
        name="tiny",
        train_system=None,
        train_user_template="{problem}",
        eval_system=None,
        eval_user_template="{problem}",
    ),
}


def get_prompt_set(name: str) -> PromptSet:
    """Registry lookup; an unknown name is an error listing the known ones."""
    try:
        return PROMPT_SETS[name]
    except KeyError:
        raise ConfigError(f"unknown prompt set {name!r}; known: {sorted(PROMPT_SETS)}") from None


def check_system_prompt(text: str | None) -> None:
    """Refuse a system prompt the tokenizer cannot encode (a YAML ``"\\ud800"``) before the model loads."""
    if text is None or text.isascii():
        return
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as err:
        raise ConfigError(
            f"system_prompt: character {err.start} is a lone surrogate ({text[err.start]!r}), not text; "
            "write the character itself"
        ) from None


def _messages(system: str | None, template: str, problem: str) -> list[dict[str, str]]:
    messages = [{"role": "system", "content": system}] if system else []
    # str.replace, not str.format: problems contain LaTeX braces
    messages.append({"role": "user", "content": template.replace("{problem}", problem)})
    return messages


def train_messages(prompt_set: PromptSet | str, problem: str) -> list[dict[str, str]]:
    """Chat messages of a training prompt (``[system,] user``)."""
    ps = get_prompt_set(prompt_set) if isinstance(prompt_set, str) else prompt_set
    return _messages(ps.train_system, ps.train_user_template, problem)


def eval_messages(prompt_set: PromptSet | str, problem: str) -> list[dict[str, str]]:
    """Chat messages of an evaluation prompt (``[system,] user``)."""
    ps = get_prompt_set(prompt_set) if isinstance(prompt_set, str) else prompt_set
    return _messages(ps.eval_system, ps.eval_user_template, problem)
