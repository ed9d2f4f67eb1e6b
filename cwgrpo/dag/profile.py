"""The profile and command line of a Snakemake run against its workflow, once every rule exists.

``workflow`` is Snakemake's own object (its rules and the resource settings it parsed); the checks of each
part are in cwgrpo.dag.profilecheck.
"""

from __future__ import annotations

import types
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml

from cwgrpo.dag import profilecheck as pc
from cwgrpo.dag.configcheck import duplicate_keys_in_files
from cwgrpo.dag.resources import Error, train_rule_name


def shipped_train_rules(basedir: str | Path) -> set[str]:
    """Per-size job names of the shipped presets: a profile serves all of them (profiles/slurm names the
    paper's train_1_5b and train_7b, and is used with the smoke preset too)."""
    names = set()
    for path in sorted(Path(basedir).glob("config/*.yaml")):
        for size in (yaml.safe_load(path.read_text(encoding="utf-8")) or {}).get("sizes") or {}:
            train = train_rule_name(size)
            names |= {train, f"evaluate_run_{train.removeprefix('train_')}"}
    return names


def preset_resource_keys(config: Mapping[str, Any]) -> set[str]:
    """Resource keys the preset or the workflow's rules give a job."""
    keys = {"gpu", "gres", "nodes", "tasks", "tasks_per_gpu", "mpi", "cpus_per_task"}
    for res in config["resources"].values():
        keys |= set(res)
    for spec in config["sizes"].values():
        for res in spec.get("resources", {}).values():
            keys |= set(res)
    return keys


def run_settings(workflow: Any, sizes: Sequence[str]) -> tuple[bool, int | None, dict[str, Any]]:
    """(conda in use, the `--resources gpu=N` cap, size -> the gpu_model that --set-resources or a profile
    gives its training rule) of this Snakemake run, for the parse-time checks."""
    from snakemake_interface_executor_plugins.settings import DeploymentMethod

    uses_conda = DeploymentMethod.CONDA in workflow.deployment_settings.deployment_method
    cap = workflow.global_resources.get("gpu")
    cap = None if cap is None or cap.value is None else int(cap.value)
    overrides = workflow.resource_settings.overwrite_resources
    models = {s: overrides.get(train_rule_name(s), {}).get("gpu_model") for s in sizes}
    return uses_conda, cap, {s: getattr(m, "raw", m) for s, m in models.items()}  # a Resource: its raw value


def resource_sections(config: Mapping[str, Any], settings: Any) -> Iterator[tuple[str, Mapping[str, Any]]]:
    """Every place a job's resources are set, by name: the preset's `resources` (per job kind, per size),
    the profile's or command line's set-resources and default-resources."""
    for kind, res in config["resources"].items():
        yield f"resources.{kind}", res
    for size, spec in config["sizes"].items():
        for kind, res in spec.get("resources", {}).items():
            yield f"sizes.{size}.resources.{kind}", res
    for name, res in settings.overwrite_resources.items():
        yield f"set-resources.{name}", res
    yield "default-resources", settings.default_resources or {}


def _split(line: str) -> Error:
    key, _, message = line.partition(": ")
    return key, message


def profile_errors(
    workflow: Any, config: Mapping[str, Any], argv: Sequence[str], environ: Mapping
) -> Iterator[Error]:
    """Rule names and resource keys of the profile and the command line (set-resources, set-threads,
    default-resources, resources) against this workflow's rules and the resources anything reads."""
    profile = pc.profile_file(argv, environ)
    lines = duplicate_keys_in_files([profile] if profile else [])
    settings = workflow.resource_settings
    rules = {r.name for r in workflow.rules}
    elsewhere = shipped_train_rules(workflow.basedir)
    known = preset_resource_keys(config)
    for section, names in (
        ("set-resources", settings.overwrite_resources),
        ("set-threads", settings.overwrite_threads),
    ):
        lines += pc.rule_name_errors(section, names, rules, elsewhere)
    for name, res in settings.overwrite_resources.items():
        lines += pc.resource_key_errors(f"set-resources.{name}", res, known)
    lines += pc.resource_key_errors("default-resources", settings.default_resources or {}, known)
    for where, res in resource_sections(config, settings):
        lines += pc.slurm_extra_errors(where, res)
    asked = {key for r in workflow.rules for key in r.resources}
    lines += pc.global_resource_errors(workflow.global_resources, asked)
    yield from map(_split, lines)


def _rule_values(job_rule: Any, key: str, sizes: Sequence[str]) -> set[Any]:
    """The values a rule's jobs get for one resource (a per-size resource: one per size)."""
    if key not in job_rule.resources:
        return set()
    resource = job_rule.resources[key]
    raw = getattr(resource, "raw", resource)
    if isinstance(raw, str):  # a profile's or command line's value: Snakemake keeps it as an expression
        return {raw.strip("'\"")}
    value = getattr(resource, "_evaluator", None)  # the preset's per-size resources: a function of the size
    if value is None:
        return {raw}
    found = set()
    for size in sizes:
        try:
            found.add(value(types.SimpleNamespace(size=size)))
        except Exception:
            continue
    return found


def slurm_line(workflow: Any, sizes: Sequence[str], argv: Sequence[str], environ: Mapping) -> str | None:
    """One line for a Slurm run: the account, partitions and GPU model its jobs will use (None otherwise)."""
    if pc.executor_name(argv, environ) != "slurm":  # Snakemake picks its executor after the parse
        return None
    keys = ("slurm_account", "slurm_partition", "gpu", "gpu_model")
    local = getattr(
        workflow, "_localrules", set()
    )  # workflow.is_local() is True for all before the executor is set
    jobs = {
        r.name: {key: _rule_values(r, key, sizes) for key in keys}
        for r in workflow.rules
        if r.name not in local and r.name != "all"
    }
    return pc.slurm_summary(jobs)
