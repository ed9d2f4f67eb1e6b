"""Prompt sets: the system prompt and user templates for training and evaluation, in one place.

``open_rs`` follows the paper's recipes: the training prompt is Open-RS's (think inside
``<think> </think>``, answer with the final result in ``\\boxed{}``, in English; reworded here), and the
evaluation prompt is the lighteval MATH prompt the Open-RS evaluation uses (an efficient, clear solution
ending with "Therefore, the final answer is: $\\boxed{ANSWER}$."). ``tiny`` is for the character-level
tiny models: no system prompt and the bare problem, since every character is a token.
"""

from __future__ import annotations

import dataclasses

from cwgrpo.configs import ConfigError


@dataclasses.dataclass(frozen=True)
class PromptSet:
    """How problems are turned into chat messages.

    Attributes:
        name: registry name.
        train_system: system message for training prompts, or None for none.
        train_user_template: user message for training; ``{problem}`` is replaced by the problem.
        eval_system: system message for evaluation prompts, or None.
        eval_user_template: user message for evaluation; ``{problem}`` is replaced by the problem.
    """

    name: str
    train_system: str | None
    train_user_template: str
    eval_system: str | None
    eval_user_template: str


OPEN_RS_SYSTEM = (
    "A conversation between a user and an assistant. The user asks a question and the assistant solves "
    "it. The assistant first reasons through the problem step by step inside <think> </think> tags, and "
    "then gives the user the answer, with the final answer written inside \\boxed{}. "
    "Always respond in English."
)

EVAL_MATH_TEMPLATE = (
    "Solve the following math problem efficiently and clearly. The last line of your response should "
    "be of the following format: 'Therefore, the final answer is: $\\boxed{ANSWER}$.' (without quotes) "
    "where ANSWER is just the final number or expression that solves the problem. Think step by step "
    "before answering.\n\n{problem}"
)

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
