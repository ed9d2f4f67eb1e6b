"""Dataset registry: every dataset by name, and its rows as normalised problem records.

Every dataset becomes records ``{id, problem, answer, source}`` (``docs/architecture.md``, "Records"),
``answer`` the gold final answer as text; ``normalise`` is pure, and only ``load_rows`` reads or touches
the network. Record ids are ``{name}-{row index:04d}`` in the pinned revision's order.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import logging
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from cwgrpo import paper
from cwgrpo.configs import ConfigError
from cwgrpo.data import synthetic
from cwgrpo.data.rows import arrow_rows, cell_text, package_file, plain, read_local_rows
from cwgrpo.grading.scoring import last_boxed
from cwgrpo.io import ResultFileError, read_jsonl, write_json, write_jsonl

logger = logging.getLogger(__name__)

RECORD_KEYS = ("id", "problem", "answer", "source")


@dataclasses.dataclass(frozen=True)
class DatasetSpec:
    """One registered dataset (``name`` is also the stem of ``data/{name}.jsonl``): ``rows`` its expected row
    count, ``answer_from="boxed"`` the last ``\\boxed{...}`` of ``answer_column``, ``mirrors`` the paper
    benchmark it is or stands in for (its Table 1 column and gold kind)."""

    name: str
    hf_id: str | None
    split: str
    revision: str | None
    rows: int
    problem_column: str = "problem"
    answer_column: str = "answer"
    answer_from: str = "column"
    subset: str | None = None
    solution_column: str | None = None
    display: str = ""
    mirrors: str | None = None
    package: str | None = None
    local_path: str | None = None
    gold_kind: str | None = None
    own: bool = False  # a dataset of the user's: each record keeps its row's columns (cwgrpo.train.rows)

    @property
    def synthetic(self) -> bool:
        return self.hf_id is None and self.package is None and self.local_path is None

    @property
    def source(self) -> str:
        if self.local_path is not None:
            return f"file:{self.local_path}"
        if self.package is not None:
            return f"package:{self.package}@{self.revision}"
        return self.hf_id if self.hf_id is not None else f"synthetic:{self.name}"


def _paper_names(benchmark: str, gold_kind: str) -> dict[str, str]:
    """A paper benchmark's display name, itself as its mirror, and its released gold kind."""
    return {"display": paper.BENCHMARK_DISPLAY[benchmark], "mirrors": benchmark, "gold_kind": gold_kind}


# Revisions: "main" (no sha could be looked up offline); each prepared file's manifest pins its bytes' sha256.
_HF_SPECS = (
    DatasetSpec(
        "open_rs",
        "knoveleng/open-rs",
        "train",
        "main",
        7000,
        solution_column="solution",
        display="Open-RS (train)",
    ),
    DatasetSpec("aime24", "HuggingFaceH4/aime_2024", "train", "main", 30, **_paper_names("aime24", "expr")),
    DatasetSpec("math500", "HuggingFaceH4/MATH-500", "test", "main", 500, **_paper_names("math500", "latex")),
    DatasetSpec("amc23", "knoveleng/AMC-23", "train", "main", 40, **_paper_names("amc23", "expr")),
    DatasetSpec(
        "minerva",
        "knoveleng/Minerva-Math",
        "train",
        "main",
        272,
        answer_column="solution",
        answer_from="boxed",
        **_paper_names("minerva", "latex"),
    ),
    DatasetSpec(
        "olympiadbench",
        "knoveleng/OlympiadBench",
        "train",
        "main",
        675,
        problem_column="question",
        **_paper_names("olympiadbench", "latex"),
    ),
    # Mao et al. 2024, "CHAMP: A Competition-level Dataset for Fine-Grained Analyses of LLMs' Mathematical
    # Reasoning Capabilities" (MIT licence): the real preset's benchmark, offline.
    DatasetSpec(
        "champ",
        None,
        "problems",
        "1.0.0",
        270,
        problem_column="_text",
        answer_column="_answer",
        display="CHAMP",
        package="champ_dataset/dataset_files/v0.json",
    ),
)

_PAPER_GOLD_KINDS = {s.name: s.gold_kind for s in _HF_SPECS if s.gold_kind is not None}
DATASETS: dict[str, DatasetSpec] = {s.name: s for s in _HF_SPECS} | {
    s.name: DatasetSpec(
        s.name,
        None,
        s.name,
        None,
        s.n,
        display=s.display,
        mirrors=s.mirrors,
        gold_kind=_PAPER_GOLD_KINDS.get(s.mirrors),
    )
    for s in synthetic.SPLITS.values()
}


def get_dataset(name: str) -> DatasetSpec:
    """Registry lookup; an unknown name is an error listing the known ones."""
    try:
        return DATASETS[name]
    except KeyError:
        raise ConfigError(f"unknown dataset {name!r}; known: {sorted(DATASETS)}") from None


def gold_kind_for(benchmark: str, mirror: str | None = None) -> str:
    """The released gold kind of ``benchmark``, or of the paper benchmark it mirrors."""
    spec = DATASETS.get(mirror or benchmark)
    if spec is None or spec.gold_kind is None:
        raise ConfigError(
            f"benchmark {benchmark!r} has no gold kind in the released configuration; known: "
            f"{', '.join(_PAPER_GOLD_KINDS)} (a stand-in benchmark takes its mirror's: the `mirrors` of its "
            "data manifest, from the dataset registry)"
        )
    return spec.gold_kind


def _blank(value: Any) -> bool:
    return value is None or (isinstance(value, str) and not value.strip())


def answer_text(value: Any) -> str:
    """A gold answer as text: one-element lists unwrapped, longer ones joined by ``, ``, ``$`` stripped."""
    if isinstance(value, (list, tuple)):
        parts = [answer_text(v) for v in value if not _blank(v)]
        return ", ".join(parts) if parts else cell_text(None)
    text = cell_text(value)
    if len(text) >= 2 and text.startswith("$") and text.endswith("$"):
        text = cell_text(text.strip("$"))
    return text


def _text(spec: DatasetSpec, i: int, column: str, value: Any, convert: Any = cell_text) -> str:
    """``convert(value)``, its refusal a one-line error naming the dataset, its source, the row and column."""
    try:
        return convert(value)
    except ValueError as err:
        raise ValueError(f"dataset {spec.name} ({spec.source}): row {i} column {column!r} {err}") from None


def normalise(spec: DatasetSpec, rows: Iterable[Mapping[str, Any]]) -> list[dict[str, str]]:
    """Raw rows -> records ``{id, problem, answer, source[, solution][, columns]}`` (no row-count check)."""
    if spec.synthetic:
        return [validate_record(dict(r), spec.name, i) for i, r in enumerate(rows)]
    records = []
    for i, row in enumerate(rows):
        for column in (spec.problem_column, spec.answer_column, spec.solution_column):
            if column is not None and column not in row:
                raise ValueError(
                    f"dataset {spec.name} ({spec.source}): missing column {column!r} in row {i}; "
                    f"columns found: {sorted(row)}"
                )
        problem = _text(spec, i, spec.problem_column, row[spec.problem_column])
        raw = row[spec.answer_column]
        if spec.answer_from == "boxed":
            raw = last_boxed(_text(spec, i, spec.answer_column, raw))
            if raw is None:
                raise ValueError(
                    f"dataset {spec.name} ({spec.source}): row {i} has no \\boxed{{...}} answer in column "
                    f"{spec.answer_column!r}"
                )
        answer = _text(spec, i, spec.answer_column, raw, answer_text)
        record = {"id": f"{spec.name}-{i:04d}", "problem": problem, "answer": answer, "source": spec.source}
        if spec.solution_column is not None:
            solution = row[spec.solution_column]
            record["solution"] = "" if _blank(solution) else _text(spec, i, spec.solution_column, solution)
        if spec.own:
            record["columns"] = plain(dict(row))
        records.append(record)
    return records


def warn_conflicting_golds(spec: DatasetSpec, records: list[dict]) -> None:
    """A problem that appears more than once with different gold answers cannot be right both times: say
    so, naming the first such pair (each copy stays a record of its own, as in the source)."""
    first: dict[str, int] = {}
    conflicts = []
    for i, rec in enumerate(records):
        j = first.setdefault(rec["problem"], i)
        if j != i and records[j]["answer"] != rec["answer"]:
            conflicts.append((j, i))
    if conflicts:
        j, i = conflicts[0]
        logger.warning(
            "dataset %s: %d row(s) repeat an earlier problem with another gold answer (first: rows %d and %d, "
            "golds %r and %r); each is kept as its own record",
            spec.name, len(conflicts), j, i, records[j]["answer"], records[i]["answer"],
        )  # fmt: skip


def check_row_count(spec: DatasetSpec, records: list[dict]) -> None:
    if not records:
        raise ValueError(f"dataset {spec.name} ({spec.source}): zero rows")
    if spec.rows and len(records) != spec.rows:  # rows 0: no expected count (a dataset of the user's)
        raise ValueError(f"dataset {spec.name}: expected {spec.rows} rows, found {len(records)}")


def validate_record(record: Any, where: str, index: int) -> dict[str, str]:
    """Check one record has the four keys with non-empty string values; returns it."""
    if not isinstance(record, dict):
        raise ResultFileError(f"{where}: record {index} is not a JSON object")
    missing = [k for k in RECORD_KEYS if k not in record]
    if missing:
        raise ResultFileError(f"{where}: record {index} lacks {missing}; keys found: {sorted(record)}")
    for key in RECORD_KEYS:
        if not isinstance(record[key], str) or not record[key].strip():
            raise ResultFileError(f"{where}: record {index} has an empty or non-string {key!r}")
    return record


def load_records(path: str | Path) -> list[dict[str, str]]:
    """Read and validate a records JSONL file (every later step reads data through this)."""
    records = read_jsonl(path)
    if not records:
        raise ResultFileError(f"{path}: no records")
    seen: set[str] = set()
    for i, rec in enumerate(records):
        validate_record(rec, str(path), i)
        if rec["id"] in seen:
            raise ResultFileError(f"{path}: duplicate id {rec['id']!r} (record {i})")
        seen.add(rec["id"])
    return records


def load_rows(spec: DatasetSpec) -> list[dict[str, Any]]:
    """The raw rows of a dataset: generated, read from a local file or package, or from the Hub."""
    if spec.synthetic:
        return synthetic.generate_split(spec.name)
    if spec.local_path is not None:
        columns = (spec.problem_column, spec.answer_column, spec.solution_column)
        return read_local_rows(spec.local_path, spec.name, columns)
    if spec.package is not None:
        table = json.loads(package_file(spec.package, spec.revision).read_text(encoding="utf-8"))[spec.split]
        return list(table.values()) if isinstance(table, dict) else list(table)
    import datasets  # heavy, and only needed here

    logger.info("loading %s (split %s, revision %s)", spec.hf_id, spec.split, spec.revision)
    ds = datasets.load_dataset(spec.hf_id, spec.subset, split=spec.split, revision=spec.revision)
    return arrow_rows(ds.with_format("arrow")[:])


def prepare(spec: DatasetSpec, out: str | Path, rows: Iterable[Mapping[str, Any]] | None = None) -> dict:
    """Normalise, check and write ``out`` (JSONL), then its manifest beside it, last; returns the manifest."""
    from cwgrpo.provenance import provenance

    records = normalise(spec, load_rows(spec) if rows is None else rows)
    check_row_count(spec, records)
    warn_conflicting_golds(spec, records)
    out = Path(out)
    write_jsonl(out, records)
    manifest = {
        "name": spec.name,
        "hf_id": spec.hf_id,
        "revision": spec.revision,
        "split": spec.split,
        "rows": len(records),
        "display": spec.display or spec.name,
        "mirrors": spec.mirrors,
        "sha256": hashlib.sha256(out.read_bytes()).hexdigest(),
        "provenance": provenance(),
    }
    write_json(manifest_path(out), manifest)
    return manifest


def manifest_path(data_path: str | Path) -> Path:
    """``data/NAME.jsonl`` -> ``data/NAME.manifest.json``."""
    p = Path(data_path)
    return p.with_name(p.name.removesuffix(".jsonl") + ".manifest.json")
