"""The training job's answers to the workflow's dry run, given in the jobs' own interpreter.

``python -P -m cwgrpo.train.probe`` reads one JSON request on stdin, ``{"ask": "options", "texts": [...]}``
(each built through ``build_train_config``, all in one request since importing TRL costs seconds) or
``{"ask": "rewards", "names": [...], "rows": [...], "budget": ...}``, and answers on stdout's last line.
"""

from __future__ import annotations

import json
import sys
from typing import Any


def judge_options(texts: list[str]) -> list[list[tuple[str | None, str]]]:
    """Each options text read as ``cwgrpo train --config`` reads it: its (option, message) errors."""
    from cwgrpo.io import yaml_load
    from cwgrpo.train.options import train_option_errors

    return [[(e.key, str(e)) for e in train_option_errors(yaml_load(text))] for text in texts]


def reward_refusals(names: list[str], rows: list[dict] | None, budget: float | None) -> list[str]:
    """Why each reward cannot be imported, or fails on ``rows``; one line each."""
    from cwgrpo.configs import ConfigError
    from cwgrpo.grading.reward_guard import check_on_sample
    from cwgrpo.grading.rewards import get_reward

    lines = []
    for name in names:
        try:
            func = get_reward(name)
            if rows:
                check_on_sample(name, func, rows, budget)
        except ConfigError as err:
            lines.append(str(err))
    return lines


def answer(request: dict[str, Any]) -> Any:
    if request["ask"] == "options":
        return judge_options(request["texts"])
    return reward_refusals(request["names"], request["rows"], request["budget"])


def main() -> int:
    """Answer the request on stdin as one JSON line, the last of stdout (anything else goes to stderr)."""
    request, out = json.load(sys.stdin), sys.stdout
    sys.stdout = sys.stderr
    found = answer(request)
    out.write("\n" + json.dumps(found) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
