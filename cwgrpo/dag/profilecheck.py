"""A Snakemake profile's rule names and resource keys, checked against the workflow (for the parse).

Snakemake ignores a `set-resources` entry for a rule that does not exist (``train_7B:``) and passes any
resource key through (``slurm_partiton:``), so a copied profile's typo sends GPU jobs to the default
partition with exit 0. The workflow hands this module what Snakemake parsed from the profile and the
command line (``workflow.resource_settings``, ``workflow.global_resources``) and its own rules.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml

from cwgrpo.dag.configcheck import nearest

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


def rule_name_errors(section: str, names: Iterable[str], rules: set[str], elsewhere: set[str]) -> list[str]:
    """Names under ``section`` (set-resources, set-threads) that are no rule of this workflow, with the
    nearest rule. ``elsewhere``: rules that other presets have (a profile may serve several presets)."""
    lines = []
    for name in names:
        if name in rules or name in elsewhere:
            continue
        guess = nearest(name, sorted(rules | elsewhere))
        hint = f"did you mean {guess!r}?" if guess else f"rules: {', '.join(sorted(rules))}"
        lines.append(
            f"{section}.{name}: no rule of this workflow has that name (Snakemake ignores it); {hint}"
        )
    return lines


def resource_key_errors(where: str, keys: Iterable[str], known: set[str]) -> list[str]:
    """Resource keys that neither Snakemake, the Slurm plugin nor the workflow's rules read."""
    known = set(known) | SNAKEMAKE_RESOURCES | SLURM_RESOURCES
    lines = []
    for key in keys:
        if key in known:
            continue
        guess = nearest(key, sorted(known))
        hint = f"did you mean {guess!r}?" if guess else "no executor reads it"
        lines.append(f"{where}.{key}: unknown resource (it would be passed on and ignored); {hint}")
    return lines


# The resource that sets what a flag the Slurm plugin manages itself would set (its names for the flags).
PLUGIN_FLAG_RESOURCES = {
    "account": "slurm_account",
    "partition": "slurm_partition",
    "memory": "mem_mb",
    "memory per CPU": "mem_mb_per_cpu",
    "number of tasks": "tasks",
    "tasks per GPU": "tasks_per_gpu",
    "CPUs per task": "cpus_per_task (the rule's threads)",
    "CPUs per GPU": "cpus_per_gpu",
    "runtime/time limit": "runtime",
    "node constraints": "constraint",
    "quality of service": "qos",
    "number of nodes": "nodes",
    "cluster specification": "clusters",
    "generic resources (GRES)": "gres",
    "GPU allocation": "gpu and gpu_model",
}


def slurm_extra_errors(where: str, resources: Mapping[str, Any]) -> list[str]:
    """Flags in a ``slurm_extra`` value that the Slurm plugin sets itself and refuses there, by the plugin's
    own list: it refuses them only when it submits the job, which a dry run never reaches."""
    if "slurm_extra" not in resources:
        return []
    try:
        from snakemake_executor_plugin_slurm.validation import get_forbidden_slurm_options
    except ImportError:  # no Slurm plugin: nothing would submit the value
        return []
    value = resources["slurm_extra"]
    text = str(getattr(value, "raw", value)).strip("'\"")
    lines = []
    for pattern, name in get_forbidden_slurm_options().items():
        match = re.search(pattern, text)
        if match:
            instead = PLUGIN_FLAG_RESOURCES.get(name)
            use = f"set the resource {instead} instead" if instead else "the plugin sets it itself: remove it"
            lines.append(
                f"{where}.slurm_extra: {match.group(0).strip()!r} ({name}) is refused by the Slurm plugin "
                f"at submission; {use}"
            )
    return lines


def global_resource_errors(keys: Iterable[str], asked: set[str]) -> list[str]:
    """Caps (`resources:` of a profile, `--resources`) on a resource that no job asks for."""
    lines = []
    for key in keys:
        if key.startswith("_") or key in asked:
            continue
        guess = nearest(key, sorted(asked))
        hint = f"did you mean {guess!r}?" if guess else f"jobs ask for: {', '.join(sorted(asked))}"
        lines.append(f"resources.{key}: no job asks for this resource, so the cap limits nothing; {hint}")
    return lines


def _shown(values: set[Any], unset: str) -> str:
    shown = sorted(str(v) for v in values if v not in (None, ""))
    return "/".join(shown) if shown else unset


def slurm_summary(jobs: Mapping[str, Mapping[str, set[Any]]]) -> str:
    """One line: the account, the partitions (by GPU and CPU rules) and the GPU model of a Slurm run.

    ``jobs``: rule name -> {slurm_account, slurm_partition, gpu, gpu_model: set of values its jobs get}.
    """
    accounts: set[Any] = (
        set().union(*(r.get("slurm_account", set()) for r in jobs.values())) if jobs else set()
    )
    gpu_rules = sorted(r for r, res in jobs.items() if any(_gpus(v) for v in res.get("gpu", set())))
    cpu_rules = sorted(r for r in jobs if r not in gpu_rules)
    parts = [f"account {_shown(accounts, 'none (-A not given)')}"]
    for label, rules in (("GPU jobs", gpu_rules), ("CPU jobs", cpu_rules)):
        if not rules:
            continue
        partitions = set().union(*(jobs[r].get("slurm_partition", set()) for r in rules))
        where = _shown(partitions, "")
        parts.append(
            f"{label} ({', '.join(rules)}) on {f'partition {where}' if where else 'the default partition'}"
        )
    if gpu_rules:
        models = set().union(*(jobs[r].get("gpu_model", set()) for r in gpu_rules))
        parts.append(f"GPU model {_shown(models, 'any (gpu_model unset)')}")
    return "Slurm run: " + "; ".join(parts)


def _gpus(value: Any) -> int:
    try:
        return int(value)
    except (TypeError, ValueError):
        return 0


def _profile_dir(name: str, environ: Mapping[str, str]) -> Path | None:
    """Where Snakemake finds a profile: a path, or a name under the user's and the system's config folders."""
    # `-d/--directory` has moved the process by now; the shell's PWD is where a relative profile path began.
    candidates = [Path(environ.get("PWD", ".")) / name]
    if not Path(name).is_absolute():
        home = Path(environ.get("XDG_CONFIG_HOME") or Path(environ.get("HOME", "~")).expanduser() / ".config")
        candidates += [home / "snakemake" / name, Path("/etc/xdg/snakemake") / name]
    return next((c for c in candidates if c.is_dir()), None)


def _command_line(argv: Sequence[str], environ: Mapping[str, str]) -> tuple[str | None, str | None]:
    """(the -e/--executor value, the --profile value or SNAKEMAKE_PROFILE) of a Snakemake command line."""
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
    """The profile's settings file a Snakemake command line uses (config.yaml or profile.yaml), if any."""
    _, profile = _command_line(argv, environ)
    folder = _profile_dir(profile, environ) if profile else None
    for name in ("config.yaml", "profile.yaml"):
        if folder is not None and (folder / name).is_file():
            return folder / name
    return None


def executor_name(argv: Sequence[str], environ: Mapping[str, str]) -> str:
    """The executor a Snakemake command line asks for (`-e/--executor`, else its profile's `executor:`),
    for the parse, when Snakemake has not yet chosen its executor plugin; "local" when none is named."""
    executor, _ = _command_line(argv, environ)
    if executor:
        return executor
    path = profile_file(argv, environ)
    settings = (yaml.safe_load(path.read_text(encoding="utf-8")) or {}) if path else {}
    return str(settings.get("executor", "local")) if isinstance(settings, dict) else "local"
