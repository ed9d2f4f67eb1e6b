"""A reward of the user's (``reward_funcs: [module:function]``), checked in the dry run as the jobs run it.

It is imported in the jobs' interpreter (``cwgrpo.train.probe``), where the Snakefile's folder is not on the
path, and called on the first training rows where those are a local file of the user's.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from cwgrpo.configs import ConfigError
from cwgrpo_workflow.dag.options import train_options, train_sources, training_prompts, where_set
from cwgrpo_workflow.dag.resources import Error

IMPORT_BUDGET_S = 120.0  # the probe's start and imports, on top of each reward's own budget


def reward_groups(config: Mapping[str, Any]) -> dict[tuple, str]:
    """(user rewards, prompt_set, system_prompt, reward_timeout_s) -> the key that sets its reward_funcs."""
    groups: dict[tuple, str] = {}
    for size in config["sizes"]:
        for method in config["methods"]:
            opts = train_options(config, size, method)
            names = tuple(n for n in opts.get("reward_funcs") or [] if isinstance(n, str) and ":" in n)
            if names:
                prompts = training_prompts(config, size, method)
                key = (names, prompts["prompt_set"], prompts["system_prompt"], opts.get("reward_timeout_s"))
                where = where_set(train_sources(config, size, method), "reward_funcs") or "train"
                groups.setdefault(key, f"{where}.reward_funcs")
    return groups


def local_records(config: Mapping[str, Any]) -> list[dict] | None:
    """The first training records of the user's local file, read as `prepare-data` will (else None)."""
    from cwgrpo.data.prepare_data import OwnDataset
    from cwgrpo.data.registry import load_rows, normalise
    from cwgrpo.train.rows import SAMPLE_ROWS

    name = config["data"]["train"]
    spec = (config.get("datasets") or {}).get(name) or {}
    if not spec.get("path"):
        return None
    try:
        own = OwnDataset(**spec).spec(name)
        return normalise(own, load_rows(own)[:SAMPLE_ROWS])
    except Exception:  # a bad file or column: reported by the data checks, one line each
        return None


def reward_errors(config: Mapping[str, Any], env: Mapping[str, str], notes: list[str]) -> Iterator[Error]:
    """(reward_funcs key, refusal) of each user reward the jobs could not import or call."""
    from cwgrpo.grading.reward_guard import SAMPLE_BUDGET_S
    from cwgrpo.train.rows import training_rows
    from cwgrpo_workflow.dag.machine import ask_train_python

    groups = reward_groups(config)
    records = local_records(config) if groups else None
    for (names, prompt_set, system_prompt, budget), where in groups.items():
        rows = training_rows(records, prompt_set, system_prompt) if records else None
        request = {"ask": "rewards", "names": list(names), "rows": rows, "budget": budget}
        timeout = IMPORT_BUDGET_S + len(names) * (budget or SAMPLE_BUDGET_S)
        try:
            refusals = ask_train_python(request, env, timeout, ", ".join(names))
        except ConfigError as err:
            refusals = [str(err)]
        for line in refusals:
            yield where, line
    if groups and records is None:
        every = sorted({n for names, *_ in groups for n in names})
        notes.append(
            f"note: reward(s) {', '.join(every)} imported as the jobs will; the call on the training data "
            f"runs in the training job's first step, before its model loads (data.train "
            f"{config['data']['train']!r} is not a local file of yours, so it is built by the workflow)"
        )
