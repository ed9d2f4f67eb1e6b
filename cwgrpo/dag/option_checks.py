"""Every option section of a preset, checked at parse time by the command that will read it.

``preset_file_errors`` runs on the raw config (before Snakemake's schema validation, whose first error
would hide the rest); ``command_option_errors`` on the validated one: each job's merged options against
its command's config class (cwgrpo.dag.optioncheck), naming the section a bad key came from. With file-level
mistakes, every check runs all the same on the schema's defaults (``preset_errors``): all in one pass.
"""

from __future__ import annotations

import dataclasses
import sys
from collections.abc import Callable, Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

from cwgrpo.dag.options import (
    built_sizes,
    evaluate_options,
    report_options,
    stage_options,
    study_options,
    train_options,
    train_sources,
    where_set,
)
from cwgrpo.dag.resources import Error

Check = Callable[[], Iterable[Error]]


def seeds_from_command_line(config: dict[str, Any]) -> None:
    """`--config 'seeds=[0,1,2]'` arrives as ["0", "1", "2"]: Snakemake reads list values with YAML's
    BaseLoader, which keeps every scalar a string. Whole numbers become ints before validation."""
    seeds = config.get("seeds")
    if isinstance(seeds, list):
        config["seeds"] = [int(s) if isinstance(s, str) and s.strip().isdigit() else s for s in seeds]


def preset_file_errors(config: Mapping[str, Any], schema_path: Path, files: Iterable[str]) -> list[str]:
    """Duplicate keys in the config files read, every schema violation, mismatched reward weights and
    local paths that are not there, all in one pass, one line each (jsonschema alone stops at the first
    and quotes the whole schema)."""
    from cwgrpo.dag import configcheck as cc
    from cwgrpo.data.prepare_data import OwnDataset

    files = list(files)
    misplaced = overlay_errors([(f, _name_and_mark(f)) for f in files])
    if misplaced:  # the rest (a preset without kind, sizes, ...) follows from it
        return misplaced
    lines = cc.duplicate_keys_in_files(files)
    lines += cc.schema_errors(config, cc.load_schema(schema_path))
    lines += cc.reward_weight_errors(_reward_sections(config))
    lines += [f"{key}: {message}" for key, message in cc.missing_local_paths(config)]
    own = {f.name for f in dataclasses.fields(OwnDataset)}
    return lines + cc.dataset_errors(config.get("datasets") or {}, own)


def preset_errors(
    config: dict[str, Any],
    schema_path: Path,
    files: Iterable[str],
    make_checks: Callable[[], Iterable[Check]],
) -> list[str]:
    """Every mistake of the preset files in one pass, one line each: the file-level ones
    (``preset_file_errors``) and, when there are any, what the other checks (``make_checks()``, run on the
    config with the schema's defaults filled in) find as well; a check that crashes on what a file-level
    mistake broke adds nothing. Nothing more beside a misplaced overlay: the rest follows from it."""
    from cwgrpo.dag.configcheck import collect, fill_defaults, load_schema

    found = preset_file_errors(config, schema_path, files)
    if not found or found == overlay_errors([(f, _name_and_mark(f)) for f in files]):
        return found
    fill_defaults(config, load_schema(schema_path))
    try:
        more = list(make_checks())
    except Exception:  # a config too broken for the checks to be listed
        return found
    return collect(more, found)


def overlay_errors(files: list[tuple[str, tuple[Any, Any]]]) -> list[str]:
    """An overlay file (one with `overlay_of: PRESET`) given without that preset first on the command line.
    ``files``: (path, (name, overlay_of)) of each --configfile, in order."""
    lines = []
    for i, (path, (_, preset)) in enumerate(files):
        if not preset:
            continue
        first = files[0][1] if i else (None, None)
        if i == 0 or first[1] or first[0] != preset:
            lines.append(
                f"{path}: an overlay of the {preset} preset, given without it: put that preset's file first, "
                f"e.g. --configfile config/{preset}.yaml {path}"
            )
    return lines


def _name_and_mark(path: str) -> tuple[Any, Any]:
    """(name, overlay_of) of one config file, read defensively (a broken file is reported elsewhere)."""
    import yaml

    try:
        data = yaml.safe_load(Path(path).read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError):
        return None, None
    return (data.get("name"), data.get("overlay_of")) if isinstance(data, dict) else (None, None)


def _reward_sections(config: Mapping[str, Any]) -> Iterator[tuple[str, dict]]:
    """(where the reward weights are, merged training options) per size, read defensively (before
    validation)."""
    top = config.get("train") if isinstance(config.get("train"), dict) else {}
    sizes = config.get("sizes") if isinstance(config.get("sizes"), dict) else {}
    for size, spec in sizes.items():
        own = spec.get("train") if isinstance(spec, dict) and isinstance(spec.get("train"), dict) else {}
        yield (f"sizes.{size}.train" if "reward_weights" in own else "train"), {**top, **own}


def _sourced(err: Any, sources: list[tuple[str, Mapping]]) -> Error:
    """(config key, message) of an OptionError: the highest-precedence section that sets the bad key."""
    sources = [(name, m) for name, m in sources if m]
    key = getattr(err, "key", None)
    where = where_set(sources, key) or (sources[-1][0] if sources else "?")
    return (f"{where}.{key}" if key else where), str(err)


def _checked(check: Any, options: Mapping, sources: list[tuple[str, Mapping]]) -> Iterator[Error]:
    from cwgrpo.dag.optioncheck import OptionError

    try:
        check(options)
    except OptionError as err:
        yield _sourced(err, sources)


def command_option_errors(config: Mapping[str, Any]) -> Iterator[Error]:
    """Every option of every command, checked by the command's own config classes, so a typo fails here
    and not in a job hours later."""
    from cwgrpo.dag.optioncheck import check_options, train_option_errors
    from cwgrpo.evaluate.run import EvalConfig
    from cwgrpo.models.sft import SftConfig
    from cwgrpo.models.tiny import TinyConfig

    seed = config["seeds"][0]
    for size, spec in config["sizes"].items():
        for method in config["methods"]:
            sources = train_sources(config, size, method)
            for err in train_option_errors(train_options(config, size, method, seed)):
                yield _sourced(err, sources)
        stages = [("evaluate", EvalConfig, evaluate_options(config, size), config["evaluate"])]
        if size in built_sizes(config):
            for stage, cls in (("build", TinyConfig), ("sft", SftConfig)):
                stages.append((stage, cls, stage_options(config, stage, size), config.get(stage, {})))
        for section, cls, opts, top in stages:
            sources = [(section, top), (f"sizes.{size}.{section}", spec.get(section, {}))]
            yield from _checked(lambda o, cls=cls: check_options(cls, o), opts, sources)
    yield from _report_option_errors(config)


def _report_option_errors(config: Mapping[str, Any]) -> Iterator[Error]:
    from cwgrpo.dag.optioncheck import check_options

    try:  # the report commands need pandas, which a bare Snakemake environment may lack
        from cwgrpo.report.claim_checks import ClaimsConfig
        from cwgrpo.report.figures import FigureConfig
        from cwgrpo.report.options import TableConfig
        from cwgrpo.report.samples_load import SamplesConfig
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
    from cwgrpo.dag.options import untrained

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
    if config.get("study"):
        from cwgrpo.report.study import StudyConfig

        sources = [("report", config["report"]), ("study", config["study"])]
        yield from _checked(lambda o: check_options(StudyConfig, o), study_options(config), sources)
