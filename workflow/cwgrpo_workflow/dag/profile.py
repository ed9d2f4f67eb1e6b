"""A Snakemake profile and command line, checked against the workflow once every rule exists (for the parse).

Snakemake ignores a `set-resources` entry for a rule that does not exist (``train_7B:``) and passes any
resource key through (``slurm_partiton:``): a copied profile's typo sends GPU jobs to the default partition.
"""

from __future__ import annotations

import types
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml

from cwgrpo_workflow.dag.preset_files import duplicate_keys_in_files, unknown_key_line
from cwgrpo_workflow.dag.resources import resource_sections, train_rule_name

# Resources Snakemake itself reads (snakemake.resources: the standard size and time resources).
SNAKEMAKE_RESOURCES = frozenset(
    {
        "_cores",
        "_nodes",
        "threads",
        "mem",
        "mem_mb",
        "mem_mib",
        "disk",
        "disk_mb",
        "disk_mib",
        "runtime",
        "tmpdir",
    }
)
# Resources snakemake-executor-plugin-slurm 2.8 (and its job-step plugin) read from a job.
SLURM_RESOURCES = frozenset(
    {
        "slurm_account", "slurm_partition", "slurm_extra", "slurm_cluster", "cluster", "clusters", "qos",
        "constraint", "gpu", "gpu_model", "gres", "cpus_per_task", "cpus_per_gpu", "mem_mb_per_cpu", "nodes",
        "tasks", "tasks_per_node", "tasks_per_gpu", "mpi",
    }
)  # fmt: skip


def _shown(values: set[Any], unset: str) -> str:
    shown = sorted(str(v) for v in values if v not in (None, ""))
    return "/".join(shown) if shown else unset


def slurm_summary(jobs: Mapping[str, Mapping[str, set[Any]]]) -> str:
    """One line: the account, the partitions (by GPU and CPU rules) and the GPU model of a Slurm run.
    ``jobs``: rule name -> {slurm_account, slurm_partition, gpu, gpu_model: set of values its jobs get}."""
    accounts: set[Any] = set().union(*(r["slurm_account"] for r in jobs.values()))
    gpu_rules = sorted(r for r, res in jobs.items() if any(str(v).isdigit() and int(v) for v in res["gpu"]))
    cpu_rules = sorted(r for r in jobs if r not in gpu_rules)
    parts = [f"account {_shown(accounts, 'none (-A not given)')}"]
    for label, rules in (("GPU jobs", gpu_rules), ("CPU jobs", cpu_rules)):
        if not rules:
            continue
        partitions = set().union(*(jobs[r]["slurm_partition"] for r in rules))
        where = _shown(partitions, "")
        parts.append(
            f"{label} ({', '.join(rules)}) on {f'partition {where}' if where else 'the default partition'}"
        )
    if gpu_rules:
        models = set().union(*(jobs[r]["gpu_model"] for r in gpu_rules))
        parts.append(f"GPU model {_shown(models, 'any (gpu_model unset)')}")
    return "Slurm run: " + "; ".join(parts)


def _command_line(argv: Sequence[str], environ: Mapping[str, str]) -> tuple[str | None, str | None]:
    args = list(argv)
    executor, profile = None, environ.get("SNAKEMAKE_PROFILE")
    for i, arg in enumerate(args):
        key, _, value = arg.partition("=")
        value = value or (args[i + 1] if i + 1 < len(args) else "")
        if key in ("-e", "--executor") and executor is None:
            executor = value
        elif key == "--profile":
            profile = value
    return executor, profile


def profile_file(argv: Sequence[str], environ: Mapping[str, str]) -> Path | None:
    from snakemake.cli import get_profile_dir

    _, profile = _command_line(argv, environ)
    if not profile:
        return None
    # `-d/--directory` has moved the process by now; the shell's PWD is where a relative profile path began.
    found = get_profile_dir(str(Path(environ.get("PWD", ".")) / profile)) or get_profile_dir(profile)
    return found[1] if found else None


def executor_name(argv: Sequence[str], environ: Mapping[str, str]) -> str:
    """The executor a Snakemake command line asks for (`-e`, else its profile's), before Snakemake chose it."""
    executor, _ = _command_line(argv, environ)
    if executor:
        return executor
    path = profile_file(argv, environ)
    settings = (yaml.safe_load(path.read_text(encoding="utf-8")) or {}) if path else {}
    return str(settings.get("executor", "local")) if isinstance(settings, dict) else "local"


def shipped_train_rules(basedir: str | Path) -> set[str]:
    """Per-size job names of the shipped presets: a profile serves all of them."""
    names = set()
    for path in sorted(Path(basedir).glob("config/*.yaml")):
        for size in (yaml.safe_load(path.read_text(encoding="utf-8")) or {}).get("sizes") or {}:
            train = train_rule_name(size)
            names |= {train, f"evaluate_run_{train.removeprefix('train_')}"}
    return names


def run_settings(workflow: Any, sizes: Sequence[str]) -> tuple[bool, int | None, dict[str, Any]]:
    """(conda in use, the `--resources gpu=N` cap, size -> its training rule's gpu_model) of this run."""
    from snakemake_interface_executor_plugins.settings import DeploymentMethod

    uses_conda = DeploymentMethod.CONDA in workflow.deployment_settings.deployment_method
    cap = workflow.global_resources.get("gpu")
    cap = None if cap is None or cap.value is None else int(cap.value)
    overrides = workflow.resource_settings.overwrite_resources
    models = {s: overrides.get(train_rule_name(s), {}).get("gpu_model") for s in sizes}
    return uses_conda, cap, {s: getattr(m, "raw", m) for s, m in models.items()}  # a Resource: its raw value


def profile_errors(
    workflow: Any, config: Mapping[str, Any], argv: Sequence[str], environ: Mapping
) -> list[str]:
    """Rule names and resource keys of the profile and the command line against this workflow's rules and
    the resources anything reads."""
    profile = profile_file(argv, environ)
    lines = duplicate_keys_in_files([profile] if profile else [])
    settings = workflow.resource_settings
    rules = {r.name for r in workflow.rules}
    named = rules | shipped_train_rules(workflow.basedir)  # a profile may serve several presets
    no_rule = "no rule of this workflow has that name (Snakemake ignores it)"
    listed = f"rules: {', '.join(sorted(rules))}"
    for section, names in (
        ("set-resources", settings.overwrite_resources),
        ("set-threads", settings.overwrite_threads),
    ):
        lines += [unknown_key_line(section, n, named, no_rule, listed) for n in names if n not in named]
    # what Snakemake, the Slurm plugin (the workflow's rules' own among them) or the preset read
    known = SNAKEMAKE_RESOURCES.union(SLURM_RESOURCES, *(res for _, res in resource_sections(config)))
    given = [(f"set-resources.{name}", res) for name, res in settings.overwrite_resources.items()]
    given.append(("default-resources", settings.default_resources or {}))
    unread = "unknown resource (it would be passed on and ignored)"
    for where, res in given:
        lines += [
            unknown_key_line(where, k, known, unread, "no executor reads it") for k in res if k not in known
        ]
    # caps (`resources:` of a profile, `--resources`) on a resource that no job asks for
    asked = {key for r in workflow.rules for key in r.resources}
    no_job = "no job asks for this resource, so the cap limits nothing"
    return lines + [
        unknown_key_line("resources", k, asked, no_job, f"jobs ask for: {', '.join(sorted(asked))}")
        for k in workflow.global_resources
        if not k.startswith("_") and k not in asked
    ]


def _rule_values(job_rule: Any, key: str, sizes: Sequence[str]) -> set[Any]:
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
    if executor_name(argv, environ) != "slurm":  # Snakemake picks its executor after the parse
        return None
    keys = ("slurm_account", "slurm_partition", "gpu", "gpu_model")
    # workflow.is_local() is True for all before the executor is set
    local = getattr(workflow, "_localrules", set())
    jobs = {
        r.name: {key: _rule_values(r, key, sizes) for key in keys}
        for r in workflow.rules
        if r.name not in local and r.name != "all"
    }
    return slurm_summary(jobs)
