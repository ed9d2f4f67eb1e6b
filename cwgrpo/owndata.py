"""The local data file of a dataset of the user's (``cwgrpo prepare-data --set path=``), read as the user
wrote it.

A gold answer keeps the text the user wrote, since a gold wrong at its 17th digit marks right answers
wrong: a JSON number keeps its exact decimal text (``12345678901234567890`` and ``1e300`` never pass
through a float), ``true``/``false`` stay JSON's words, and every CSV cell is text (``007``, ``1.50``,
``None`` and ``NA`` kept; no type inference, no NA strings). A problem or answer that is not a scalar (a
JSON object or list) is refused, naming its row. Parquet files are typed by their writer and read as typed.
"""

from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import Any

from cwgrpo.configs import ConfigError

READERS = (".jsonl", ".json", ".csv", ".parquet")


def _json_text(text: str) -> Any:
    """JSON with every number kept as its decimal text."""
    return json.loads(text, parse_int=str, parse_float=str, parse_constant=str)


def _json_rows(path: Path) -> list[Any]:
    """A JSON array of objects, or one object per line (what ``datasets``' json builder reads too)."""
    text = path.read_text(encoding="utf-8")
    if path.suffix.lower() == ".json":
        try:
            whole = _json_text(text)
        except json.JSONDecodeError:
            whole = None  # JSON lines in a .json file
        if isinstance(whole, list):
            return whole
    rows = []
    for lineno, line in enumerate(text.splitlines(), start=1):
        if line.strip():
            try:
                rows.append(_json_text(line))
            except json.JSONDecodeError as err:
                raise ConfigError(f"{path}:{lineno} is not valid JSON: {err}") from err
    return rows


def _csv_rows(path: Path) -> list[dict[str, Any]]:
    with open(path, encoding="utf-8", newline="") as fh:
        rows = list(csv.DictReader(fh))
    for i, row in enumerate(rows):
        if None in row:
            raise ConfigError(f"{path}: row {i} has more cells than the header has columns")
    return rows


def _scalar_text(value: Any, where: str) -> Any:
    """A cell as the user wrote it: JSON's true/false as those words; an object or list is refused."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (dict, list)):
        raise ConfigError(
            f"{where} is a JSON {'object' if isinstance(value, dict) else 'list'}, not text or a number: "
            "give each problem and answer as one string or number"
        )
    return value


def read_local_rows(
    path: str | Path, name: str, split: str, columns: tuple[str, str]
) -> list[dict[str, Any]]:
    """The rows of the local data file of dataset ``name``, its (problem, answer) ``columns`` checked to be
    scalars (a Parquet file's ``split`` is read with ``datasets``)."""
    path = Path(path)
    suffix = path.suffix.lower()
    if suffix not in READERS:
        raise ConfigError(f"dataset {name}: {path} is not {', '.join(READERS[:-1])} or {READERS[-1]}")
    if suffix == ".parquet":
        import datasets

        ds = datasets.load_dataset("parquet", data_files={split: str(path)}, split=split)
        rows = [dict(row) for row in ds]
    else:
        try:
            rows = _csv_rows(path) if suffix == ".csv" else _json_rows(path)
        except UnicodeDecodeError as err:
            raise ConfigError(f"dataset {name}: {path} is not UTF-8 text: {err}") from err
    checked = []
    for i, row in enumerate(rows):
        if not isinstance(row, dict):
            raise ConfigError(f"dataset {name}: row {i} of {path} is not an object with columns")
        row = dict(row)
        for column in columns:
            if column in row:
                row[column] = _scalar_text(row[column], f"dataset {name}: row {i} column {column!r}")
        checked.append(row)
    return checked
