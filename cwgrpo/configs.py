"""Command configs: one dataclass per command, read from ``--config FILE`` plus ``--set key=value`` overrides.

Each option is a dataclass field whose ``metadata["help"]`` is its only description; unknown keys are
refused by name, so a typo in a preset is an error, not a silently ignored value.
"""

from __future__ import annotations

import dataclasses
import difflib
import hashlib
import json
import re
import types
import typing
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, TypeVar

import yaml

from cwgrpo.io import read_yaml, yaml_load

T = TypeVar("T")


class ConfigError(ValueError):
    """A config value or combination of values is invalid; the message names the key and the fix."""


class OptionError(ConfigError):
    """A bad option; ``key`` is the option's name (None when the error spans several options)."""

    def __init__(self, key: str | None, message: str) -> None:
        super().__init__(message)
        self.key = key


def parse_overrides(pairs: Sequence[str]) -> dict[str, Any]:
    """Parse ``key=value`` strings; values are read as YAML (``lr=1e-4`` -> float, ``x=[1,2]`` -> list)."""
    out: dict[str, Any] = {}
    for pair in pairs:
        key, sep, raw = pair.partition("=")
        if not sep or not key.strip():
            raise ConfigError(f"--set expects key=value, got {pair!r}")
        try:
            out[key.strip()] = yaml_load(raw) if raw != "" else ""
        except yaml.YAMLError as err:
            raise ConfigError(f"--set {key}: cannot parse value {raw!r}: {err}") from err
    return out


def coerce_value(name: str, value: Any, annotation: Any) -> Any:
    """Light type check/coercion of one option's YAML value against its field annotation: ints and numeric
    strings pass as floats, integral floats as ints, a bool is never a number, and a list or mapping option
    needs one (a lone string would be iterated); else ``ConfigError`` naming the option.
    """
    origin = typing.get_origin(annotation)
    args = typing.get_args(annotation)
    if origin in (typing.Union, types.UnionType):
        if value is None and type(None) in args:
            return None
        non_none = [a for a in args if a is not type(None)]
        if len(non_none) == 1:
            return coerce_value(name, value, non_none[0])
        return value
    if annotation in (int, float) and isinstance(value, bool):
        raise ConfigError(f"{name}: expected {annotation.__name__}, got {value!r} (bool)")
    if annotation is float and isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    if annotation is float and isinstance(value, str):
        try:
            return float(value)
        except ValueError:
            pass
    if annotation in (int, float, str, bool) and not isinstance(value, annotation):
        if annotation is int and isinstance(value, float) and value.is_integer():
            return int(value)
        raise ConfigError(f"{name}: expected {annotation.__name__}, got {value!r} ({type(value).__name__})")
    if (origin or annotation) is dict and not isinstance(value, Mapping):
        raise ConfigError(f"{name}: expected a mapping, got {value!r}")
    if origin in (list, tuple) and not isinstance(value, (list, tuple)):
        raise ConfigError(f"{name}: expected a list, got {value!r} ({type(value).__name__})")
    if origin in (list, tuple) and args:
        return [coerce_value(f"{name}[{i}]", v, args[0]) for i, v in enumerate(value)]
    return value


# The first line of a workflow job's options file (cwgrpo_workflow.dag.options): the hash of the text below it, which
# the file's name carries too. A reader refuses a file whose text no longer has that hash.
OPTIONS_HEADER = "# cwgrpo job options "


def options_digest(body: str) -> str:
    """The short content hash of an options file's YAML text (below its header line)."""
    return hashlib.sha256(body.encode("utf-8")).hexdigest()[:10]


def options_text(options: Mapping[str, Any]) -> str:
    """A workflow job's options file: the header line with the YAML text's hash, then the YAML text."""
    body = yaml.safe_dump(dict(options), sort_keys=False, allow_unicode=True)
    return f"{OPTIONS_HEADER}{options_digest(body)}: written by the workflow, never edited\n{body}"


def recorded_digest(text: str) -> str | None:
    """The hash a workflow job's options file records in its header (None: not such a file)."""
    head = text.partition("\n")[0]
    return head[len(OPTIONS_HEADER) :].split(":", 1)[0] if head.startswith(OPTIONS_HEADER) else None


def check_options_text(file: str | Path, text: str) -> None:
    """Refuse a workflow job's options file whose text no longer has the hash its header records."""
    recorded = recorded_digest(text)
    if recorded is None:
        return
    named = Path(file).name.rsplit(".", 2)  # <stem>.<hash>.yaml: the hash the workflow planned with
    if len(named) == 3 and re.fullmatch(r"[0-9a-f]{10}", named[1]) and named[1] != recorded:
        raise ConfigError(
            f"{file} holds the options of another job (hash {recorded}, its name says {named[1]}): the file "
            "was replaced after the workflow wrote it; delete it so the workflow writes it again"
        )
    if recorded != options_digest(text.partition("\n")[2]):
        raise ConfigError(
            f"{file} was changed after the workflow wrote it (its options no longer have the hash "
            f"{recorded} it was written with): set options in the preset, and delete the file so the "
            "workflow writes it again"
        )


def read_options(file: str | Path) -> dict[str, Any]:
    """The mapping of options in a YAML (or JSON) file; an empty file has none, anything else raises."""
    path = Path(file)
    if path.is_file():
        check_options_text(path, path.read_text(encoding="utf-8", errors="replace"))
    loaded = read_yaml(file) or {}
    if not isinstance(loaded, dict):
        raise ConfigError(f"{file}: expected a mapping of options, got {type(loaded).__name__}")
    return loaded


def build_config(
    cls: type[T], file: str | Path | None = None, overrides: Mapping[str, Any] | None = None
) -> T:
    """Create ``cls`` from an optional YAML file and overrides; unknown keys raise ``ConfigError``."""
    values = read_options(file) if file is not None else {}
    values.update(overrides or {})
    fields = {f.name: f for f in dataclasses.fields(cls)}  # type: ignore[arg-type]
    unknown = sorted(set(values) - set(fields))
    if unknown:
        raise ConfigError(f"unknown option(s) {unknown} for {cls.__name__}; known: {sorted(fields)}")
    hints = typing.get_type_hints(cls)
    kwargs = {k: coerce_value(k, v, hints.get(k, Any)) for k, v in values.items()}
    missing = [
        n
        for n, f in fields.items()
        if n not in kwargs and f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
    ]
    if missing:
        raise ConfigError(f"{cls.__name__}: missing required option(s) {missing}")
    return cls(**kwargs)


def check_together(cls: type[T], options: Mapping[str, Any]) -> T:
    """``cls`` built from all ``options``; failing, ``OptionError`` naming the first key that fails alone."""
    try:
        return build_config(cls, overrides=dict(options))
    except (ConfigError, ValueError, TypeError) as err:
        for key, value in options.items():
            try:
                build_config(cls, overrides={key: value})
            except (ConfigError, ValueError, TypeError) as alone:
                raise OptionError(key, str(alone)) from None
        raise OptionError(None, str(err)) from None


def config_hash(obj: Any) -> str:
    """Short stable hash of a config (dataclass or mapping); used in provenance, never for paths of results."""
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        obj = dataclasses.asdict(obj)
    blob = json.dumps(obj, sort_keys=True, default=str).encode()
    return hashlib.sha256(blob).hexdigest()[:16]


def add_config_arguments(parser: Any) -> None:
    """The two options every command shares."""
    parser.add_argument("--config", type=Path, default=None, help="YAML file with this command's options")
    parser.add_argument(
        "--set",
        dest="overrides",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="override one option (value parsed as YAML); repeatable",
    )


def config_from_args(cls: type[T], args: Any) -> T:
    return build_config(cls, args.config, parse_overrides(args.overrides))


def describe_options(cls: type) -> str:
    """Help text listing every option of a config dataclass with its default and help."""
    lines = [f"options for --config / --set ({cls.__name__}):"]
    for f in dataclasses.fields(cls):
        default = (
            f.default
            if f.default is not dataclasses.MISSING
            else (f.default_factory() if f.default_factory is not dataclasses.MISSING else "required")
        )
        lines.append(f"  {f.name} (default {default!r}): {f.metadata.get('help', '')}")
    return "\n".join(lines)


INT_TAGS = ("seed", "step")  # run-identity tags stored as integers, so results group and sort by value


def parse_tags(pairs: list[str]) -> dict[str, Any]:
    """``KEY=VALUE`` strings -> dict; ``seed`` and ``step`` must be integers and are stored as such."""
    tags: dict[str, Any] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        key = key.strip()
        if not sep or not key:
            raise ConfigError(f"--tag expects KEY=VALUE, got {pair!r}")
        if key in tags:
            raise ConfigError(f"--tag {key} given twice")
        if key in INT_TAGS:
            try:
                tags[key] = int(value)
            except ValueError:
                raise ConfigError(f"--tag {key} must be an integer, got {value!r}") from None
        else:
            tags[key] = value
    return tags


def nearest(key: str, known: Iterable[str]) -> str | None:
    """The known name closest to ``key`` (difflib), or None if none is close."""
    known = [str(k) for k in known]
    lowered = {k.lower(): k for k in known}
    if key.lower() in lowered:
        return lowered[key.lower()]
    match = difflib.get_close_matches(key, known, n=1, cutoff=0.6)
    return match[0] if match else None
