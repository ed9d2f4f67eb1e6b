"""Every command's options, checked at the workflow's parse by the command's own config (without importing TRL).

A typo in an option section (``train.learnig_rate``, ``evaluate.tempreature``, ``cw_variant: relased``) must
fail ``snakemake -n``, not a job hours later on a cluster. ``cwgrpo_workflow.dag.preset_rules.preset_checks`` merges
each job's options as the workflow writes them (cwgrpo_workflow.dag.options) and checks them here with its command's
config dataclass (``EvalConfig``, ``SftConfig``, ``TinyConfig``, the report configs, ``TrainJob``), naming the
section a bad key came from. The package's own training options (``cw_*``, Clip-Cov's, KL-Cov's) are checked
by their one validator, ``cwgrpo.trainer.options.CWOptions``, which the job's ``CWGRPOConfig`` derives from
and runs again. The rest of ``CWGRPOConfig`` (TRL's ~150 fields) is checked against
``resources/grpo_config_fields.json``: each field's kind (int, float, str, bool, list, dict, any; ``|None``
when it may be null) and TRL's choices, written by ``python -m cwgrpo_workflow.dag.command_options`` from the live
class (a unit test keeps the two equal), because importing TRL costs seconds at every Snakemake start.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import sys
import types
import typing
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

from cwgrpo.configs import ConfigError, build_config, coerce_value
from cwgrpo_workflow.dag.options import (
    built_sizes,
    evaluate_options,
    report_options,
    stage_options,
    study_options,
    untrained,
    where_set,
)
from cwgrpo_workflow.dag.preset_files import nearest
from cwgrpo_workflow.dag.resources import Error

FIELDS_PATH = Path(__file__).resolve().parents[1] / "resources" / "grpo_config_fields.json"
# TRL's batch geometry, whose defaults the parse needs for cw_one_group_per_micro_batch's rule.
GEOMETRY = (
    "per_device_train_batch_size",
    "num_generations",
    "gradient_accumulation_steps",
    "steps_per_generation",
    "generation_batch_size",
)
_KINDS: dict[str, Any] = {"int": int, "float": float, "str": str, "bool": bool, "list": list[Any]}


class OptionError(ConfigError):
    """A bad option; ``key`` is the option's name (None when the error spans several options)."""

    def __init__(self, key: str | None, message: str) -> None:
        super().__init__(message)
        self.key = key


def kind_of(annotation: Any) -> str:
    """The kind of one field annotation, as stored in ``grpo_config_fields.json``."""
    nullable = False
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        args = typing.get_args(annotation)
        non_none = [a for a in args if a is not type(None)]
        nullable = len(non_none) < len(args)
        if len(non_none) != 1:
            return "any"
        annotation = non_none[0]
    origin = typing.get_origin(annotation) or annotation
    base = {int: "int", float: "float", str: "str", bool: "bool", list: "list", tuple: "list", dict: "dict"}
    kind = base.get(origin, "any") if isinstance(origin, type) else "any"
    return f"{kind}|None" if nullable and kind != "any" else kind


def describe_config(cls: type) -> dict[str, Any]:
    """``{fields: {name: kind}, choices: {name: [values]}, defaults: {name: value}}`` of ``CWGRPOConfig``
    (imports TRL). The choices are TRL's, the defaults those of its batch geometry (``GEOMETRY``); the
    package's own options (``CWOptions``) are checked by their validator, read live, never shipped."""
    from cwgrpo.trainer.trl_loss import TRL_LOSS_TYPES

    hints = typing.get_type_hints(cls)
    defaults = {f.name: f.default for f in dataclasses.fields(cls)}
    return {
        "fields": {f.name: kind_of(hints.get(f.name, Any)) for f in dataclasses.fields(cls)},
        "choices": {"loss_type": list(TRL_LOSS_TYPES)},
        "defaults": {name: defaults[name] for name in GEOMETRY},
    }


@functools.cache
def shipped_fields() -> dict[str, Any]:
    return json.loads(FIELDS_PATH.read_text(encoding="utf-8"))


def _annotation(kind: str) -> Any:
    base, _, none = kind.partition("|")
    annotation = _KINDS.get(base, Any)
    return annotation | None if none and annotation is not Any else annotation


def check_trl_option(key: str, value: Any, spec: Mapping[str, Any]) -> None:
    from cwgrpo.train.options import check_finite_option

    kind = spec["fields"][key]
    try:
        checked = coerce_value(key, value, _annotation(kind))
        if kind.startswith("dict") and checked is not None and not isinstance(checked, Mapping):
            raise ConfigError(f"{key}: expected a mapping, got {value!r}")
        check_finite_option(key, checked)
    except ConfigError as err:
        raise OptionError(key, str(err)) from None
    choices = spec["choices"].get(key)
    if choices is not None and value not in choices:
        raise OptionError(key, f"{key}={value!r}; valid: {choices}")


def check_train_options(options: Mapping[str, Any]) -> None:
    """Raise the first of ``train_option_errors``."""
    errors = train_option_errors(options)
    if errors:
        raise errors[0]


def train_option_errors(options: Mapping[str, Any]) -> list[OptionError]:
    """What ``cwgrpo train`` would refuse in its options before TRL runs, every mistake at once: unknown
    keys, wrong types, TrainJob's rules, vLLM's, and the covariance-aware methods' (``CWOptions``)."""
    from cwgrpo.train.options import TrainJob
    from cwgrpo.trainer.options import CWOptions

    spec = shipped_fields()
    job_fields = {f.name for f in dataclasses.fields(TrainJob)}
    cw_fields = {f.name for f in dataclasses.fields(CWOptions)}
    errors = []
    for key, value in options.items():
        try:
            if key in cw_fields:
                continue  # CWOptions' own, checked below by its validator
            if key in spec["fields"] and key not in job_fields:
                check_trl_option(key, value, spec)
            elif key not in job_fields:
                guess = nearest(key, [*spec["fields"], *job_fields])
                hint = f"; did you mean {guess!r}?" if guess else ""
                raise OptionError(
                    key, f"unknown training option {key!r}: not a TrainJob nor a CWGRPOConfig field{hint}"
                )
        except OptionError as err:
            errors.append(err)
    bad = {err.key for err in errors}
    good = {k: v for k, v in options.items() if k not in bad}
    for check in (
        lambda: _check_together(TrainJob, {k: v for k, v in good.items() if k in job_fields}),
        lambda: _check_vllm(good),
    ):
        try:
            check()
        except OptionError as err:
            errors.append(err)
    return errors + cw_option_errors(good, spec)


def cw_option_errors(options: Mapping[str, Any], spec: Mapping[str, Any]) -> list[OptionError]:
    """Every rule of ``CWOptions`` that ``options`` break, as the job's ``CWGRPOConfig`` checks them; the
    batch geometry from ``options`` or TRL's defaults (``spec``), derived as TRL derives it."""
    from cwgrpo.train.options import check_finite_option
    from cwgrpo.trainer.options import CWOptions, geometry_problems, option_problems

    hints = typing.get_type_hints(CWOptions)
    values, errors = {}, []
    for key, value in options.items():
        if key in hints:
            try:
                values[key] = coerce_value(key, value, hints[key])  # as the job's config reads it
                check_finite_option(key, values[key])
            except ConfigError as err:
                errors.append(OptionError(key, str(err)))
                values.pop(key, None)  # the rules below see the default instead
    problems = option_problems(values)
    size = {**spec["defaults"], **{k: options[k] for k in GEOMETRY if k in options}}
    if all(isinstance(size[k], int) for k in GEOMETRY[:3]):
        steps = size["steps_per_generation"]
        if steps is None and size["generation_batch_size"] is not None:
            world = size["per_device_train_batch_size"] * int(options.get("num_processes", 1))
            steps = size["generation_batch_size"] // world
        steps = size["gradient_accumulation_steps"] if steps is None else steps
        one_group = values.get("cw_one_group_per_micro_batch") is True
        problems += geometry_problems(
            one_group, size["per_device_train_batch_size"], size["num_generations"], steps
        )
    return errors + [
        OptionError(next((k for k in keys if k in options), keys[0]), message) for keys, message in problems
    ]


def _check_vllm(options: Mapping[str, Any]) -> None:
    """The vLLM engine settings vLLM would refuse once started (cwgrpo.generation.vllm_checks)."""
    from cwgrpo.generation.vllm_checks import check_vllm_options

    try:
        check_vllm_options(options, int(options.get("num_processes", 1)))
    except (ConfigError, ValueError) as err:
        named = str(err).split("=", 1)[0].split(".")[0]  # each message starts with its option: KEY=VALUE
        raise OptionError(named if named in options else None, str(err)) from None


def _check_one(cls: type, key: str, value: Any) -> None:
    try:
        build_config(cls, overrides={key: value})
    except (ConfigError, ValueError, TypeError) as err:
        raise OptionError(key, str(err)) from None


def _check_together(cls: type, options: Mapping[str, Any]) -> None:
    """All options at once (rules that span fields, e.g. processes per node, need their partners); when
    that fails, the error names the first key that fails alone, if one does."""
    try:
        build_config(cls, overrides=dict(options))
    except (ConfigError, ValueError, TypeError) as err:
        for key, value in options.items():
            _check_one(cls, key, value)
        raise OptionError(None, str(err)) from None


def check_options(cls: type, options: Mapping[str, Any]) -> None:
    """Options of a command whose config is the dataclass ``cls``: unknown keys by name, then the values
    (together, and the failing key named where one fails alone)."""
    known = {f.name for f in dataclasses.fields(cls)}
    for key in options:
        if key not in known:
            guess = nearest(key, known)
            hint = f"did you mean {guess!r}?" if guess else f"known: {sorted(known)}"
            raise OptionError(key, f"unknown option {key!r} for {cls.__name__}; {hint}")
    _check_together(cls, options)


def sourced(errors: Iterable[OptionError], sources: list[tuple[str, Mapping]]) -> Iterator[Error]:
    """(config key, message) of each error: its key in the highest-precedence section that sets it."""
    sources = [(name, m) for name, m in sources if m]
    for err in errors:
        where = where_set(sources, err.key) or (sources[-1][0] if sources else "?")
        yield (f"{where}.{err.key}" if err.key else where), str(err)


def _checked(check: Any, options: Mapping, sources: list[tuple[str, Mapping]]) -> Iterator[Error]:
    try:
        check(options)
    except OptionError as err:
        yield from sourced([err], sources)


def stage_option_errors(config: Mapping[str, Any], size: str) -> Iterator[Error]:
    """A size's evaluate options, and build's and sft's where the size is built here, checked by their
    commands' configs (its training options: ``train_option_errors``, one list entry per method)."""
    from cwgrpo.evaluate.options import EvalConfig
    from cwgrpo.models.sft import SftConfig
    from cwgrpo.models.tiny import TinyConfig

    spec = config["sizes"][size]
    stages = [("evaluate", EvalConfig, evaluate_options(config, size), config["evaluate"])]
    if size in built_sizes(config):
        for stage, cls in (("build", TinyConfig), ("sft", SftConfig)):
            stages.append((stage, cls, stage_options(config, stage, size), config.get(stage, {})))
    for section, cls, opts, top in stages:
        sources = [(section, top), (f"sizes.{size}.{section}", spec.get(section, {}))]
        yield from _checked(lambda o, cls=cls: check_options(cls, o), opts, sources)


def report_option_errors(config: Mapping[str, Any]) -> Iterator[Error]:
    try:  # the report commands need pandas, which a bare Snakemake environment may lack
        from cwgrpo_workflow.report.claim_checks import ClaimsConfig
        from cwgrpo_workflow.report.figures import FigureConfig
        from cwgrpo_workflow.report.options import TableConfig
        from cwgrpo_workflow.report.samples_load import SamplesConfig
    except ImportError as err:
        print(f"note: report options not checked at parse time ({err})", file=sys.stderr)
        return
    classes = {"table": TableConfig, "figure": FigureConfig, "claims": ClaimsConfig, "samples": SamplesConfig}
    for command, cls in classes.items():
        sources = [("report", config["report"]), (command, config[command])]
        yield from _checked(
            lambda o, cls=cls: check_options(cls, o), report_options(config, command), sources
        )
    # Table 1 needs a row of every `methods` label for every size: one this preset does not train fails the
    # table job at the end of the run, so it fails here, naming the key.
    table = TableConfig(**report_options(config, "table"))
    methods = list(config["methods"])
    for key in ("methods", "effect_methods"):
        missing = untrained(config, getattr(table, key), table.base_method)
        if missing:
            yield (
                "report.methods / table.methods" if key == "methods" else "table.effect_methods",
                f"{missing} not trained by this preset (methods: {', '.join(methods)}); "
                f"Table 1 needs each: list only this preset's methods (default {key}: "
                f"{getattr(TableConfig(kind=config['kind']), key)})",
            )
    yield from paper_mirror_errors(config, table, FigureConfig(**report_options(config, "figure")))
    if config.get("study"):
        from cwgrpo_workflow.report.study import StudyConfig

        sources = [("report", config["report"]), ("study", config["study"])]
        preset_key = {
            "study.treatment_method": "study.treatment",
            "study.mechanism_method": "study.mechanism",
        }
        for key, message in _checked(lambda o: check_options(StudyConfig, o), study_options(config), sources):
            yield preset_key.get(key, key), message


def paper_mirror_errors(config: Mapping[str, Any], table: Any, figure: Any) -> Iterator[Error]:
    """Table 1 compares with the paper through a size that stands in for a paper size, and the checkpoint
    figure draws each of its paper benchmarks through one of ours: without them both jobs fail after every
    run is done, so the parse names the key."""
    from cwgrpo import paper
    from cwgrpo.data.registry import DATASETS

    own = config.get("datasets") or {}

    def mirror(b: str) -> str | None:
        return table.mirror(b) or own.get(b, {}).get("mirrors") or getattr(DATASETS.get(b), "mirrors", None)

    sizes = list(config["sizes"])
    if not any(table.size_mirror(s) for s in sizes):
        yield (
            "report.size_mirrors",
            f"no size of this preset ({', '.join(sizes)}) stands in for a paper size ({', '.join(paper.SIZES)}), "
            "so Table 1's comparison with the paper (cwgrpo table) would fail after the runs; set "
            f"report.size_mirrors, e.g. {{{sizes[0]}: {next(iter(paper.SIZES))}}}",
        )
    mirrored = {mirror(b) for b in config["data"]["benchmarks"]}
    missing = [b for b in figure.checkpoint_benchmarks if b not in mirrored]
    if missing:
        yield (
            "figure.checkpoint_benchmarks",
            f"{missing}: no benchmark of this preset stands in for it (data.benchmarks mirror "
            f"{sorted(m for m in mirrored if m)}), so the checkpoint figure would fail after the runs; list "
            "paper benchmarks that data.benchmarks mirror",
        )


def main(argv: list[str] | None = None) -> int:
    """Write ``grpo_config_fields.json`` from the installed TRL (run after a TRL upgrade)."""
    from cwgrpo.trainer import CWGRPOConfig

    spec = describe_config(CWGRPOConfig)
    FIELDS_PATH.write_text(json.dumps(spec, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    print(f"wrote {FIELDS_PATH} ({len(spec['fields'])} fields)")
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
