"""Resources of the workflow's jobs and the GPU layout of its training jobs, from a preset's config.

The layout is ``cwgrpo.launch.multinode``'s, so Slurm is asked for exactly what the job will use.
"""

from __future__ import annotations

import dataclasses
import functools
import re
from collections.abc import Iterator, Mapping
from typing import Any

from cwgrpo_workflow.dag.options import train_options

Error = tuple[str, str]


def positive_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value > 0


def rule_resources(config: Mapping[str, Any], kind: str, size: str | None = None) -> dict:
    merged = {**config["resources"].get("default", {}), **config["resources"].get(kind, {})}
    if size is not None:
        merged.update(config["sizes"][size].get("resources", {}).get(kind, {}))
    return merged


def rule_threads(config: Mapping[str, Any], kind: str, size: str | None = None) -> int:
    return int(rule_resources(config, kind, size).get("threads", 1))


def fixed_resources(config: Mapping[str, Any], kind: str, size: str | None = None) -> dict:
    """Resources of jobs of one size (or none); `threads`, when set, also becomes cpus_per_task (a dry run
    shows it)."""
    res = dict(rule_resources(config, kind, size))
    if "threads" in res:
        res["cpus_per_task"] = int(res.pop("threads"))
    return res


def _size_resource(config: Mapping[str, Any], kind: str, key: str, wildcards: Any) -> Any:
    return fixed_resources(config, kind, wildcards.size)[key]


def size_resources(config: Mapping[str, Any], kind: str) -> dict[str, Any]:
    return {
        key: functools.partial(_size_resource, config, kind, key) for key in fixed_resources(config, kind)
    }


def train_rule_name(size: str) -> str:
    return "train_" + re.sub(r"\W", "_", size)


def _layouts(config: Mapping[str, Any], size: str) -> set[tuple[int, int]]:
    from cwgrpo.configs import build_config
    from cwgrpo.launch.multinode import gpus_per_node, nodes_needed
    from cwgrpo.train.options import TrainJob

    fields = {f.name for f in dataclasses.fields(TrainJob)}
    layouts = set()
    for method in config["methods"]:
        opts = train_options(config, size, method)
        job = build_config(TrainJob, overrides={k: v for k, v in opts.items() if k in fields})
        layouts.add((nodes_needed(job), gpus_per_node(job)))
    return layouts


def train_layout(config: Mapping[str, Any], size: str) -> tuple[int, int]:
    return min(_layouts(config, size))


def train_resources(config: Mapping[str, Any], size: str) -> dict:
    """Resources of one size's training job. Several nodes: one task per node (`mpi` makes the job-step
    plugin run `cwgrpo train` in the batch step, which starts its own srun steps) and the GPUs per node as
    `gres` (--gpus=N alone may split a job unevenly over the nodes)."""
    res = fixed_resources(config, "train", size)
    nodes, _ = train_layout(config, size)
    if nodes == 1:
        return res
    gpus = res.pop("gpu")
    res.setdefault("gres", f"gpu:{gpus // nodes}")
    return {**res, "nodes": nodes, "tasks": nodes, "tasks_per_gpu": 0, "mpi": "srun"}


def layout_errors(config: Mapping[str, Any], size: str, gpu_model: Any = None) -> Iterator[Error]:
    """A size whose methods need different layouts, or whose `gpu` / `gres` cannot hold it; and a gpu_model
    on a multi-node job (the Slurm plugin would add --gpus=MODEL:N to its --gres: one more GPU)."""
    layouts = _layouts(config, size)
    if len(layouts) > 1:
        yield "methods", f"size {size!r}: the methods ask for different node layouts {sorted(layouts)}"
        return
    ((nodes, need),) = layouts
    if nodes == 1:
        return
    where = f"resources.train (size {size!r}, {nodes} nodes)"
    res = fixed_resources(config, "train", size)
    gpus = res.get("gpu")
    if not positive_int(gpus) or gpus % nodes:
        yield where, f"gpu={gpus!r}: give the job's total, {nodes} x the GPUs of each node"
        return
    per_node = gpus // nodes
    if per_node < need:
        yield (
            where,
            f"gpu={gpus} is {per_node} per node, but the training options need {need} GPUs on a node "
            "(num_processes // num_nodes, plus the vLLM server's GPU)",
        )
    gres = res.get("gres", f"gpu:{per_node}")
    if not re.fullmatch(rf"gpu(:[A-Za-z0-9_.]+)?:{per_node}", str(gres)):
        yield (
            f"{where}.gres",
            f"{gres!r}: expected gpu:{per_node} or gpu:MODEL:{per_node} (gpu={gpus} / {nodes})",
        )
    if gpu_model:
        name = train_rule_name(size)
        yield (
            f"set-resources {name}.gpu_model",
            f'{gpu_model!r}: a multi-node job gives its GPU type in the preset instead: set gpu_model: "" for '
            f"{name} in the profile and resources.train.gres: gpu:{gpu_model}:{per_node} (docs/hardware.md)",
        )


def multinode_sizes(config: Mapping[str, Any]) -> dict[str, int]:
    nodes = {size: train_layout(config, size)[0] for size in config["sizes"]}
    return {size: n for size, n in nodes.items() if n > 1}


def gpu_needs(config: Mapping[str, Any]) -> dict[str, int]:
    """Kind of job (and size) -> GPUs per job, for the kinds that ask for any."""
    needs = {}
    for kind in (kind for kind in config["resources"] if kind != "default"):
        for size in config["sizes"]:
            gpus = int(rule_resources(config, kind, size).get("gpu", 0))
            if gpus:
                needs[f"{kind} ({size})"] = gpus
    return needs


def gpu_cap_errors(config: Mapping[str, Any], cap: int | None) -> Iterator[Error]:
    """Snakemake scales a job's `gpu` down to `--resources gpu=N` without a word: the launcher would fail."""
    too_big = {job: n for job, n in gpu_needs(config).items() if cap is not None and n > cap}
    if too_big:
        yield (
            "resources",
            f"--resources gpu={cap}, but jobs need more GPUs each: {too_big}. Give the machine's GPU count, "
            "or use a preset for fewer GPUs (docs/hardware.md)",
        )


def local_run_problems(
    config: Mapping[str, Any], executor: str, cap: int | None, env: Mapping[str, str]
) -> tuple[str | None, str | None]:
    """(error, warning) before the first job of a run: a multi-node job needs Slurm; a local run's GPU cap
    must fit this machine, and GPU jobs should have one."""
    sizes = multinode_sizes(config)
    if sizes and executor != "slurm":
        return (
            f"training jobs of sizes {sizes} (size: nodes) span several nodes and need a Slurm allocation, but "
            f"this run uses the {executor!r} executor: use --profile profiles/slurm (docs/hardware.md), or "
            "set num_nodes: 1"
        ), None
    needs = gpu_needs(config)
    if executor != "local" or not needs:
        return None, None
    if cap is None:
        return None, (
            f"jobs of this preset need GPUs ({needs}) and nothing caps them: Snakemake will start more than "
            "fit, and they will wait for free devices. Give the machine's count with --resources gpu=N, or "
            "use --profile profiles/gpu-box (docs/hardware.md)."
        )
    from cwgrpo.launch.devices import gpu_pool

    seen = len(gpu_pool(env))
    if cap <= seen:
        return None, None
    if seen == 0 and "CUDA_VISIBLE_DEVICES" not in env:
        return (
            f"--resources gpu={cap}, but this machine shows no GPU (no nvidia-smi, CUDA_VISIBLE_DEVICES unset)",
            None,
        )
    return f"--resources gpu={cap}, but this machine shows {seen} GPUs; give gpu={seen}", None


def resource_sections(config: Mapping[str, Any]) -> Iterator[tuple[str, Mapping[str, Any]]]:
    for kind, res in config["resources"].items():
        yield f"resources.{kind}", res
    for size, spec in config["sizes"].items():
        for kind, res in spec.get("resources", {}).items():
            yield f"sizes.{size}.resources.{kind}", res


def resource_errors(config: Mapping[str, Any]) -> Iterator[Error]:
    """A size's resource keys must be set for every size; `threads` must be a positive integer."""
    for size, spec in config["sizes"].items():
        for kind, res in spec.get("resources", {}).items():
            extra = sorted(set(res) - set(rule_resources(config, kind)))
            if extra:
                yield (
                    f"sizes.{size}.resources.{kind}",
                    f"{extra} must also be set in resources.{kind} or .default",
                )
    for key, res in resource_sections(config):
        if "threads" in res and not positive_int(res["threads"]):
            yield f"{key}.threads", f"must be a positive integer, got {res['threads']!r}"
