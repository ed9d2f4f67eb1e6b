"""Each job's options, merged from a preset's sections, and the one YAML file per job that carries them.

A file is named after its content (``options/train/small/grpo/seed0.<hash>.yaml``) and never changes once
written: an edited preset adds files and leaves every file a running job reads as it was, and a change of
options is a new input path, so Snakemake reruns the job. Files no preset uses any more stay: deleting one
could pull it from under a running job.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

from cwgrpo.configs import options_text, recorded_digest
from cwgrpo.data.prompts import TRAIN_PROMPT_SET
from cwgrpo.io import atomic_path

BASE = "base"  # method label of the untrained model, evaluated at step 0
EVAL_SWITCHES = (  # workflow keys of `evaluate`, not passed on
    "one_job_per_benchmark",
    "one_job_per_run",
    "paper_metric",
    "primary_metric",
    "grade_processes",
)
REPORT_COMMANDS = ("table", "figure", "claims", "samples")
TINY_SOURCE = (
    "tiny:"  # a size's `model` built here: `tiny:ARCH` (ARCH of cwgrpo.models.tiny.SIZES), then warmed up
)


def built_sizes(config: Mapping[str, Any]) -> dict[str, str]:
    """Sizes whose base model is built and warmed up here (build-tiny + sft) -> their tiny architecture:
    every size of a tiny preset, and any size whose `model` is `tiny:ARCH`."""
    if config["kind"] == "tiny":
        return {size: size for size in config["sizes"]}
    return {
        size: str(spec["model"]).removeprefix(TINY_SOURCE)
        for size, spec in config["sizes"].items()
        if str(spec.get("model") or "").startswith(TINY_SOURCE)
    }


def train_options(config: Mapping[str, Any], size: str, method: str, seed: int | None = None) -> dict:
    """Options of `cwgrpo train`: train, then sizes.<size>.train, then methods.<method>, then the seed."""
    opts = {
        **config["train"],
        **config["sizes"][size].get("train", {}),
        **config["methods"][method],
    }
    if seed is not None:
        opts["seed"] = int(seed)
    return opts


def train_sources(config: Mapping[str, Any], size: str, method: str) -> list[tuple[str, Mapping]]:
    return [
        ("train", config["train"]),
        (f"sizes.{size}.train", config["sizes"][size].get("train", {})),
        (f"methods.{method}", config["methods"][method]),
    ]


def where_set(sources: list[tuple[str, Mapping]], key: Any) -> str | None:
    return next((name for name, options in reversed(sources) if options and key in options), None)


def training_prompts(config: Mapping[str, Any], size: str, method: str | None = None) -> dict:
    """``prompt_set`` and ``system_prompt`` of a size's training (of one method's, if given)."""
    if method is None:
        opts = {**config["train"], **config["sizes"][size].get("train", {})}
    else:
        opts = train_options(config, size, method)
    return {
        "prompt_set": opts.get("prompt_set", TRAIN_PROMPT_SET),
        "system_prompt": opts.get("system_prompt"),
    }


def evaluate_options(config: Mapping[str, Any], size: str) -> dict:
    """Options of `cwgrpo evaluate`: evaluate (less the workflow switches), then sizes.<size>.evaluate;
    the prompt is the training's unless they set their own. A null ``system_prompt`` is the command's
    default, so it is not written."""
    opts = {k: v for k, v in config["evaluate"].items() if k not in EVAL_SWITCHES}
    opts = {**opts, **config["sizes"][size].get("evaluate", {})}
    for key, value in training_prompts(config, size).items():
        opts.setdefault(key, value)
    if opts["system_prompt"] is None:
        del opts["system_prompt"]
    return opts


def prompt_note(config: Mapping[str, Any]) -> str | None:
    """One line when a run is evaluated with another prompt than it trained with, naming both."""
    from cwgrpo_workflow.dag.preset_files import shorten

    def said(prompts: Mapping[str, Any]) -> str:
        system = prompts.get("system_prompt")
        text = "the set's own" if system is None else repr(shorten(system, 60)) if system else "none"
        return f"prompt_set {prompts['prompt_set']}, system prompt {text}"

    for size in config["sizes"]:
        evaluation = evaluate_options(config, size)
        for method in config["methods"]:
            training = training_prompts(config, size, method)
            if {k: evaluation.get(k) for k in training} != training:
                own = {**config["evaluate"], **config["sizes"][size].get("evaluate", {})}
                keys = [f"evaluate.{k}" for k in training if k in own]
                keys = keys or [f"methods.{method}.{k}" for k in training if k in config["methods"][method]]
                where = ", ".join(keys)
                return (
                    f"note: prompts set apart on purpose ({where}): training (size {size}, {method}) uses "
                    f"{said(training)}; evaluation uses {said(evaluation)}. Remove {where} to use one prompt."
                )
    return None


def resume_note(config: Mapping[str, Any]) -> str | None:
    """One line when a training job of the preset could not resume after a stop (``save_only_model``: its
    checkpoints hold no optimiser or RNG state), naming where it is set and the fix."""
    for size in config["sizes"]:
        for method in config["methods"]:
            if train_options(config, size, method).get("save_only_model"):
                where = where_set(train_sources(config, size, method), "save_only_model") or "train"
                return (
                    f"note: {where}.save_only_model is true (size {size}, {method}): a stopped training run "
                    "cannot resume and restarts at step 0; set it false to resume from the newest checkpoint "
                    "(each checkpoint then also holds the optimiser state, about twice the model's size)"
                )
    return None


def stage_options(config: Mapping[str, Any], stage: str, size: str) -> dict:
    return {**config.get(stage, {}), **config["sizes"][size].get(stage, {})}


def report_options(config: Mapping[str, Any], command: str) -> dict:
    """Options of table / figure / claims / samples: `report`, the preset's kind and name, the command's
    own; Table 1's default rows and effects cut to the methods this preset trains."""
    opts = {**config["report"], "kind": config["kind"], "preset": config["name"], **config[command]}
    if command != "table":
        return opts
    try:
        from cwgrpo_workflow.report.options import TableConfig
    except ImportError:  # a bare Snakemake environment: the table command applies its own defaults
        return opts
    defaults = TableConfig(kind=config["kind"])
    for key in ("methods", "effect_methods"):
        gone = untrained(config, getattr(defaults, key), defaults.base_method)
        if gone and key not in opts:
            opts[key] = [m for m in getattr(defaults, key) if m not in gone]
    return opts


def study_options(config: Mapping[str, Any]) -> dict:
    """Options of `cwgrpo study`: `report`, the treatment, the ablation variants, claim M's arm if any."""
    treatment = config["study"]["treatment"]
    reference = config["report"].get("reference_method", "grpo")
    variants = [m for m in config["methods"] if m not in (treatment, reference)]
    shared = {**config["report"], "kind": config["kind"], "preset": config["name"]}
    mechanism = config["study"].get("mechanism")  # absent from the first two studies' options
    return {
        **shared,
        "treatment_method": treatment,
        "variants": variants,
        **({"mechanism_method": mechanism} if mechanism else {}),
    }


def untrained(config: Mapping[str, Any], methods: list[str], base_method: str) -> list[str]:
    """The labels among `methods` that this preset does not train (the base model's label aside)."""
    return [m for m in methods if m != base_method and m not in config["methods"]]


def saved_steps(config: Mapping[str, Any], size: str) -> list[int]:
    """Steps with a checkpoint marker: multiples of save_steps up to max_steps, plus max_steps itself."""
    opts = train_options(config, size, next(iter(config["methods"])))
    max_steps, save_steps = opts["max_steps"], opts["save_steps"]
    steps = list(range(save_steps, max_steps + 1, save_steps))
    return steps if steps[-1] == max_steps else [*steps, max_steps]


def datasets(config: Mapping[str, Any]) -> list[str]:
    """Every dataset a preset prepares: training set, the warm-up's dev set if needed, benchmarks."""
    data = config["data"]
    return list(
        dict.fromkeys([data["train"], *([data["dev"]] if built_sizes(config) else []), *data["benchmarks"]])
    )


def job_options(config: Mapping[str, Any]) -> Iterator[tuple[tuple[str, ...], dict]]:
    for size in config["sizes"]:
        for method in config["methods"]:
            for seed in config["seeds"]:
                yield ("train", size, method, f"seed{seed}"), train_options(config, size, method, seed)
        yield ("evaluate", size), evaluate_options(config, size)
        if size in built_sizes(config):
            for stage in ("build", "sft"):
                yield (stage, size), stage_options(config, stage, size)
    for command in REPORT_COMMANDS:
        yield (command,), report_options(config, command)
    if config.get("study"):
        yield ("study",), study_options(config)
    for dataset, opts in (config.get("datasets") or {}).items():
        yield ("prepare_data", dataset), dict(opts)


def option_files(root: str | Path, config: Mapping[str, Any]) -> dict[tuple[str, ...], tuple[Path, str]]:
    """Job name -> (its options file under ``root``, the file's text)."""
    files = {}
    for name, opts in job_options(config):
        text = options_text(opts)
        files[name] = (Path(root, *name[:-1], f"{name[-1]}.{recorded_digest(text)}.yaml"), text)
    return files


def write_option_files(files: Iterable[tuple[Path, str]]) -> list[str]:
    """Write each (path, text) not there yet, atomically and read-only; error lines for a file edited by hand
    or a path that cannot be written."""
    errors = []
    for path, text in files:
        try:
            if path.is_file():
                if path.read_text(encoding="utf-8", errors="replace") != text:
                    errors.append(
                        f"{path} was edited after the workflow wrote it (its content no longer matches the "
                        "hash in its name): set the options in the preset instead, and delete the file so "
                        "the workflow writes it again"
                    )
                continue
            with atomic_path(path) as tmp:
                tmp.write_text(text, encoding="utf-8")
            path.chmod(0o444)  # readable by a job run as another user; never to be edited
        except OSError as err:
            errors.append(
                f"{path}: cannot write this job's options file ({err.strerror or err}): {path.parent} must "
                "be a folder you can write to, and the path free or a file the workflow wrote"
            )
    return errors


def _listing(names: Iterable[Any]) -> str:
    return ", ".join(str(n) for n in names)


def preset_contents(config: Mapping[str, Any]) -> str:
    """What this preset runs, in a sentence (the report captions end with it)."""
    report, sizes, benchmarks = config["report"], list(config["sizes"]), config["data"]["benchmarks"]
    display = report.get("size_display", {})
    steps = _listing(f"{display.get(s, s)} ({saved_steps(config, s)[-1]} RL steps)" for s in sizes)
    named = report.get("benchmark_display", {})
    limits = {evaluate_options(config, s).get("limit") for s in sizes}
    if limits == {None}:
        cut = ""
    elif len(limits) == 1:
        cut = f", the first {next(iter(limits))} problems of each"
    else:
        cut = ", some sizes on only the first problems of each (Table 1's columns say how many)"
    return (
        f"This run: models {steps}, trained on {config['data']['train']}; seeds {_listing(config['seeds'])}; "
        f"methods {_listing(config['methods'])}; evaluated on {_listing(named.get(b, b) for b in benchmarks)}"
        f"{cut}; Table 1 at step {report['step']}."
    )
