"""A dataset of the user's (``cwgrpo prepare-data --set id=/path=``): its options, and its local file read as
the user wrote it.

A gold answer keeps the text the user wrote, since a gold wrong at its 17th digit marks right answers
wrong: a JSON number keeps its exact decimal text (``12345678901234567890`` and ``1e300`` never pass
through a float), ``true``/``false`` stay JSON's words, and every CSV cell is text (``007``, ``1.50``,
``None`` and ``NA`` kept; no type inference, no NA strings). A problem or answer that is not a scalar (a
JSON object or list) is refused, naming its row. Parquet files are typed by their writer and read as typed.
"""

from __future__ import annotations

import csv
import dataclasses
import json
from pathlib import Path
from typing import Any

from cwgrpo import paper
from cwgrpo.configs import ConfigError
from cwgrpo.data import DatasetSpec

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


def read_local_rows(spec: DatasetSpec) -> list[dict[str, Any]]:
    """The rows of a local data file, the problem and answer columns checked to be scalars."""
    path = Path(str(spec.local_path))
    suffix = path.suffix.lower()
    if suffix not in READERS:
        raise ConfigError(f"dataset {spec.name}: {path} is not {', '.join(READERS[:-1])} or {READERS[-1]}")
    if suffix == ".parquet":
        import datasets

        ds = datasets.load_dataset("parquet", data_files={spec.split: str(path)}, split=spec.split)
        rows = [dict(row) for row in ds]
    else:
        try:
            rows = _csv_rows(path) if suffix == ".csv" else _json_rows(path)
        except UnicodeDecodeError as err:
            raise ConfigError(f"dataset {spec.name}: {path} is not UTF-8 text: {err}") from err
    checked = []
    for i, row in enumerate(rows):
        if not isinstance(row, dict):
            raise ConfigError(f"dataset {spec.name}: row {i} of {path} is not an object with columns")
        row = dict(row)
        for column in (spec.problem_column, spec.answer_column):
            if column in row:
                row[column] = _scalar_text(row[column], f"dataset {spec.name}: row {i} column {column!r}")
        checked.append(row)
    return checked


@dataclasses.dataclass
class OwnDataset:
    """A dataset of the user's, given by options instead of a registry entry (``cwgrpo prepare-data --set``)."""

    id: str | None = dataclasses.field(default=None, metadata={"help": "Hugging Face dataset id (or: path)"})
    path: str | None = dataclasses.field(
        default=None, metadata={"help": "local .jsonl/.json/.csv/.parquet file (or: id)"}
    )
    split: str = dataclasses.field(default="train", metadata={"help": "split to read"})
    problem: str = dataclasses.field(default="problem", metadata={"help": "column holding the problem"})
    answer: str = dataclasses.field(default="answer", metadata={"help": "column holding the gold answer"})
    answer_from: str = dataclasses.field(
        default="column", metadata={"help": "'column' or 'boxed' (last \\boxed{} of the answer column)"}
    )
    solution: str | None = dataclasses.field(
        default=None, metadata={"help": "column with a worked solution kept as the records' solution"}
    )
    revision: str | None = dataclasses.field(default=None, metadata={"help": "dataset revision (id only)"})
    subset: str | None = dataclasses.field(
        default=None, metadata={"help": "Hugging Face config name (id only)"}
    )
    display: str | None = dataclasses.field(
        default=None, metadata={"help": "label in tables and figures (default: the dataset name)"}
    )
    mirrors: str | None = dataclasses.field(
        default=None,
        metadata={
            "help": f"the paper benchmark it stands in for ({'|'.join(paper.BENCHMARKS)}): its Table 1 "
            "column and the paper metric's gold kind (default: none)"
        },
    )

    def spec(self, name: str) -> DatasetSpec:
        """The ``DatasetSpec`` of these options; a missing or contradictory source is a ``ConfigError``."""
        if (self.id is None) == (self.path is None):
            raise ConfigError(
                f"dataset {name!r}: give exactly one of id (a Hub dataset) or path (a local file)"
            )
        if self.problem == self.answer:
            raise ConfigError(
                f"dataset {name!r}: problem and answer are both the column {self.problem!r}: the gold answer "
                "would be the prompt; name the answer column with --set answer=COLUMN"
            )
        if self.answer_from not in ("column", "boxed"):
            raise ConfigError(f"dataset {name!r}: answer_from={self.answer_from!r}; valid: column, boxed")
        if self.mirrors is not None and self.mirrors not in paper.BENCHMARKS:
            raise ConfigError(
                f"dataset {name!r}: mirrors={self.mirrors!r}; valid: {', '.join(paper.BENCHMARKS)}"
            )
        if self.id is not None and not self.revision:
            raise ConfigError(f"dataset {name!r}: a Hub dataset needs a revision (a commit sha or tag)")
        if self.path is not None:
            if self.revision or self.subset:
                raise ConfigError(
                    f"dataset {name!r}: revision and subset are for Hub datasets, not a local file"
                )
            if not Path(self.path).is_file():
                raise ConfigError(f"dataset {name!r}: file not found: {self.path}")
        return DatasetSpec(
            name,
            self.id,
            self.split,
            self.revision,
            rows=0,  # 0: whatever the source holds (no expected row count)
            problem_column=self.problem,
            answer_column=self.answer,
            answer_from=self.answer_from,
            subset=self.subset,
            solution_column=self.solution,
            display=self.display or name,
            mirrors=self.mirrors,
            local_path=self.path,
        )
