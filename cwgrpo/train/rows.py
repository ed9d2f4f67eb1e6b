"""The rows of a training run's dataset, which TRL turns into prompts and reward calls.

Each row holds the ``prompt``, the gold ``answer`` and any worked ``solution``; a user's dataset
(``OwnDataset``) adds every column of its file under its own name, since TRL passes each column but
``prompt`` to the rewards by keyword (a name TRL or the package uses keeps the package's meaning). The dry
run builds the same rows, so a reward is called on the same keywords before anything runs.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from cwgrpo.data.prompts import get_prompt_set, train_messages

# Keywords TRL's reward call sets itself (GRPOTrainer._calculate_rewards) or never passes.
TRL_KEYWORDS = (
    "prompt",
    "prompts",
    "completion",
    "completions",
    "completion_ids",
    "trainer_state",
    "log_extra",
    "log_metric",
    "environments",
)
SAMPLE_ROWS = 4  # the rows each reward is called on before training


def training_rows(
    records: Sequence[Mapping[str, Any]], prompt_set: str, system_prompt: str | None
) -> list[dict[str, Any]]:
    """One dataset row per record; ``system_prompt`` (None: the prompt set's own, '': none) opens each prompt."""
    found = get_prompt_set(prompt_set)
    if system_prompt is not None:
        found = dataclasses.replace(found, train_system=system_prompt or None)
    with_solution = any("solution" in r for r in records)
    own = sorted({k for r in records for k in r.get("columns") or {}} - {*TRL_KEYWORDS, "answer", "solution"})
    rows = []
    for r in records:
        row = {"prompt": train_messages(found, r["problem"]), "answer": r["answer"]}
        if with_solution:
            row["solution"] = r.get("solution") or ""
        row.update({k: (r.get("columns") or {}).get(k) for k in own})
        rows.append(row)
    return rows


def first_rows(train_data: str | Path, prompt_set: str, system_prompt: str | None) -> list[dict[str, Any]]:
    """The first ``SAMPLE_ROWS`` training rows of a records file."""
    from cwgrpo.data.registry import load_records

    return training_rows(load_records(train_data)[:SAMPLE_ROWS], prompt_set, system_prompt)
