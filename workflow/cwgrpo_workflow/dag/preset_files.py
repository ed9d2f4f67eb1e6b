"""Every mistake of a preset's files in one pass, one line each, before any job starts (for the workflow's parse).

They run on the raw config, before Snakemake's schema validation, whose first error would hide the rest
(and whose message for an unknown top-level key quotes the whole schema).
"""

from __future__ import annotations

import copy
import dataclasses
import json
import re
from collections.abc import Callable, Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

import yaml

from cwgrpo.configs import nearest

MAX_VALUE_CHARS = 60  # a value quoted in an error line is cut to this
Check = Callable[[], Iterable[tuple[str, str]]]


def error_text(lines: list[str]) -> str:
    """Config errors, each once, under one heading."""
    lines = list(dict.fromkeys(lines))
    if len(lines) == 1:
        return f"config error in {lines[0]}"
    return f"{len(lines)} config errors:\n" + "\n".join(f"  {line}" for line in lines)


def unknown_key_line(
    where: str, key: str, known: Iterable[str], what: str = "unknown key", otherwise: str | None = None
) -> str:
    """``where.key: unknown key; did you mean 'k'?`` (``otherwise``, or the known keys, if none is close)."""
    known = sorted(str(k) for k in known)
    guess = nearest(key, known)
    hint = f"did you mean {guess!r}?" if guess else otherwise or f"known: {', '.join(known)}"
    return f"{where + '.' if where else ''}{key}: {what}; {hint}"


def collect(checks: Iterable[Check], found: Iterable[str] = ()) -> list[str]:
    """``key: message`` lines of every check, each once; a check that crashes after an earlier error was
    collected is taken as that error's consequence."""
    lines: list[str] = list(found)
    for check in checks:
        try:
            for key, message in check():
                if f"{key}: {message}" not in lines:
                    lines.append(f"{key}: {message}")
        except Exception:
            if not lines:
                raise
    return lines


def seeds_from_command_line(config: dict[str, Any]) -> None:
    """`--config 'seeds=[0,1,2]'` arrives as ["0", "1", "2"] (YAML's BaseLoader): whole numbers become ints."""
    seeds = config.get("seeds")
    if isinstance(seeds, list):
        config["seeds"] = [int(s) if isinstance(s, str) and s.strip().isdigit() else s for s in seeds]


def preset_errors(
    config: dict[str, Any],
    schema_path: Path,
    files: Iterable[str],
    make_checks: Callable[[], Iterable[Check]],
) -> list[str]:
    """Every mistake of the preset files, one line each; when there are any, what ``make_checks()`` finds
    too, run on the config with the schema's defaults. A misplaced overlay alone: the rest follows from it."""
    from cwgrpo.data.prepare_data import OwnDataset

    files = list(files)
    misplaced = overlay_errors([(f, _name_and_mark(f)) for f in files])
    if misplaced:
        return misplaced
    schema = load_schema(schema_path)
    found = duplicate_keys_in_files(files) + schema_errors(config, schema)
    found += reward_weight_errors(_reward_sections(config))
    found += [f"{key}: {message}" for key, message in missing_local_paths(config)]
    found += dataset_errors(config.get("datasets") or {}, [f.name for f in dataclasses.fields(OwnDataset)])
    if not found:
        return found
    fill_defaults(config, schema)
    try:
        more = list(make_checks())
    except Exception:  # a config too broken for the checks to be listed
        return found
    return collect(more, found)


def overlay_errors(files: list[tuple[str, tuple[Any, Any]]]) -> list[str]:
    """An overlay file given without its preset first. ``files``: (path, (name, overlay_of)) of each
    --configfile, in order."""
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
    try:
        data = yaml.safe_load(Path(path).read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError):
        return None, None
    return (data.get("name"), data.get("overlay_of")) if isinstance(data, dict) else (None, None)


def _reward_sections(config: Mapping[str, Any]) -> Iterator[tuple[str, dict]]:
    top = config.get("train") if isinstance(config.get("train"), dict) else {}
    sizes = config.get("sizes") if isinstance(config.get("sizes"), dict) else {}
    for size, spec in sizes.items():
        own = spec.get("train") if isinstance(spec, dict) and isinstance(spec.get("train"), dict) else {}
        yield (f"sizes.{size}.train" if "reward_weights" in own else "train"), {**top, **own}


# ---------------------------------------------------------------- duplicate keys


def _duplicates(node: yaml.Node, path: str) -> Iterator[str]:
    if isinstance(node, yaml.MappingNode):
        seen: dict[Any, int] = {}
        for key_node, value_node in node.value:
            key = key_node.value if isinstance(key_node, yaml.ScalarNode) else None
            line = key_node.start_mark.line + 1
            where = f"{path}.{key}" if path else str(key)
            if key is not None and key in seen:
                yield f":{line}: {where}: duplicate key (first at line {seen[key]}; YAML would keep only this one)"
            elif key is not None:
                seen[key] = line
            yield from _duplicates(value_node, where)
    elif isinstance(node, yaml.SequenceNode):
        for i, item in enumerate(node.value):
            yield from _duplicates(item, f"{path}[{i}]")


def duplicate_keys(text: str, name: str = "<config>") -> list[str]:
    try:
        root = yaml.compose(text, Loader=yaml.SafeLoader)
    except yaml.YAMLError as err:
        return [f"{name}: not valid YAML: {' '.join(str(err).split())}"]
    return [f"{name}{line}" for line in _duplicates(root, "")] if root is not None else []


def duplicate_keys_in_files(paths: Iterable[str | Path]) -> list[str]:
    lines: list[str] = []
    for path in paths:
        try:
            text = Path(path).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as err:
            lines.append(f"{path}: cannot be read: {err}")
            continue
        lines += duplicate_keys(text, str(path))
    return lines


# ---------------------------------------------------------------- schema


def shorten(text: str, head: int, tail: int = 0) -> str:
    """``text``, or its first ``head`` and last ``tail`` characters around a mark of what was left out, cut
    between words."""
    if len(text) <= head + tail:
        return text
    start = text[:head]
    if " " in start.strip():
        start = start[: start.rstrip().rfind(" ")]
    end = text[len(text) - tail :] if tail else ""
    if " " in end.strip():
        end = end[end.find(" ") + 1 :]
    cut = len(text) - len(start) - len(end)
    return f"{start.rstrip()} [… {cut:,} characters …]" + (f" {end.lstrip()}" if end else "")


def _short(value: Any) -> str:
    text = json.dumps(value, default=str) if not isinstance(value, str) else repr(value)
    return text if len(text) <= MAX_VALUE_CHARS else text[: MAX_VALUE_CHARS - 3] + "..."


def _schema_line(error: Any) -> list[str]:
    where = ".".join(str(p) for p in error.absolute_path)
    kind, schema, instance = error.validator, error.schema, error.instance
    if "propertyNames" in error.schema_path:  # the name of a key at fault: name that key
        where = f"{where}.{instance}" if where else str(instance)
    if isinstance(schema, Mapping) and "errorMessage" in schema:
        return [f"{where}: {schema['errorMessage']}"]
    if kind == "additionalProperties" and isinstance(instance, Mapping):
        known = set(schema.get("properties", {}))
        patterns = schema.get("patternProperties", {})
        extra = [k for k in instance if k not in known and not any(re.search(p, str(k)) for p in patterns)]
        return [unknown_key_line(where, str(k), known) for k in extra]
    if kind == "required":
        missing = [k for k in error.validator_value if isinstance(instance, Mapping) and k not in instance]
        return [f"{where + '.' if where else ''}{k}: missing (required)" for k in missing]
    label = where or "(top level)"
    if kind == "type":
        wanted = error.validator_value
        wanted = " or ".join(wanted) if isinstance(wanted, list) else wanted
        return [f"{label}: expected {wanted}, got {_short(instance)} ({type(instance).__name__})"]
    if kind == "enum":
        return [f"{label}: {_short(instance)} is not one of {error.validator_value}"]
    return [f"{label}: {shorten(error.message, 200)}"]


def schema_errors(config: Mapping[str, Any], schema: Mapping[str, Any]) -> list[str]:
    import jsonschema

    cls = jsonschema.validators.validator_for(schema)
    errors = sorted(cls(schema).iter_errors(config), key=lambda e: [str(p) for p in e.absolute_path])
    return [line for error in errors for line in _schema_line(error)]


def load_schema(path: str | Path) -> dict[str, Any]:
    return yaml.safe_load(Path(path).read_text(encoding="utf-8"))


def fill_defaults(config: dict[str, Any], schema: Mapping[str, Any]) -> dict[str, Any]:
    """The schema's defaults set as ``validate(set_default=True)`` sets them, but despite schema errors."""
    import jsonschema

    cls = jsonschema.validators.validator_for(schema)
    properties = cls.VALIDATORS["properties"]

    def set_defaults(validator: Any, props: Any, instance: Any, sub: Any) -> Iterator[Any]:
        if isinstance(instance, dict):
            for key, spec in props.items():
                if isinstance(spec, Mapping) and "default" in spec:
                    instance.setdefault(key, copy.deepcopy(spec["default"]))
        yield from properties(validator, props, instance, sub)

    for _ in jsonschema.validators.extend(cls, {"properties": set_defaults})(schema).iter_errors(config):
        pass
    return config


# ---------------------------------------------------------------- what a file names


def reward_weight_errors(sections: Iterable[tuple[str, Mapping[str, Any]]]) -> list[str]:
    """``reward_weights`` against ``reward_funcs`` in each (where, merged training options) pair."""
    return [
        f"{where}.reward_weights: {len(weights)} weight(s) {weights} for {len(funcs)} reward function(s) "
        f"{funcs}; give one weight per reward function"
        for where, opts in sections
        for funcs, weights in [(opts.get("reward_funcs"), opts.get("reward_weights"))]
        if isinstance(weights, list) and isinstance(funcs, list) and len(weights) != len(funcs)
    ]


def missing_local_paths(config: Mapping[str, Any]) -> list[tuple[str, str]]:
    """(key, message) for each model or data file named by a local path that is not there."""
    missing = []
    for size, spec in (config.get("sizes") or {}).items():
        model = str(spec.get("model") or "")
        if Path(model).expanduser().exists():
            continue
        if model.startswith(("/", "./", "../", "~")):
            missing.append(
                (
                    f"sizes.{size}.model",
                    f"{model}: no such folder or file (a model folder, a .gguf file, or owner/name@revision)",
                )
            )
        elif "/" in model and not re.search(r"[@:]", model) and not spec.get("revision"):
            # folder/name reads as a Hub id too: without a revision it can only have meant a folder
            missing.append(
                (
                    f"sizes.{size}.model",
                    f"{model}: no such folder or file here, and as a Hub model it needs a revision "
                    "(owner/name@revision)",
                )
            )
    for name, spec in (config.get("datasets") or {}).items():
        path = spec.get("path") if isinstance(spec, Mapping) else None
        if path and not Path(path).expanduser().is_file():
            missing.append(
                (f"datasets.{name}.path", f"{path}: no such file (.jsonl, .json, .csv or .parquet)")
            )
    return missing


def dataset_errors(datasets: Mapping[str, Any], fields: Iterable[str]) -> list[str]:
    """Unknown keys of each own dataset (``fields``: OwnDataset's), and columns its local file does not have
    or has twice."""
    from cwgrpo.data.rows import columns_of

    fields = sorted(fields)
    lines = []
    for name, spec in (datasets or {}).items():
        if not isinstance(spec, Mapping):
            continue
        lines += [unknown_key_line(f"datasets.{name}", str(k), fields) for k in spec if k not in fields]
        path = Path(str(spec["path"])).expanduser() if spec.get("path") else None
        columns = columns_of(path) if path is not None and path.is_file() else None
        if columns is None:
            continue
        for key, default in (("problem", "problem"), ("answer", "answer"), ("solution", None)):
            column = spec.get(key, default)
            if column is not None and column not in columns:
                lines.append(
                    f"datasets.{name}.{key}: column {column!r} is not in {path.name} "
                    f"(its columns: {', '.join(columns)}); set {key}: to one of them"
                )
            elif column is not None and columns.count(column) > 1:
                lines.append(
                    f"datasets.{name}.{key}: the column {column!r} appears {columns.count(column)} times in "
                    f"{path.name}; keep one"
                )
    return lines
