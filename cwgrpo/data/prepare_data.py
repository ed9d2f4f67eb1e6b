"""``cwgrpo prepare-data``: a registry dataset or one of the user's to a records JSONL and its manifest."""

from __future__ import annotations

import dataclasses
import logging
import re
from pathlib import Path

from cwgrpo import paper
from cwgrpo.configs import ConfigError
from cwgrpo.data.registry import DATASETS, DatasetSpec, get_dataset, manifest_path, prepare

logger = logging.getLogger(__name__)

NAME = r"[A-Za-z0-9_]+"  # a dataset of the user's: its name is part of file names, wildcards and record ids


def name_error(name: str) -> str | None:
    """Why ``name`` cannot name a dataset of the user's (the workflow refuses it at parse time too), or None."""
    if re.fullmatch(NAME, name):
        return None
    return (
        f"dataset name {name!r} may hold only ASCII letters, digits and _ (the pattern {NAME}): it becomes "
        "part of file names, workflow wildcards and record ids; rename it"
    )


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
        if name_error(name):
            raise ConfigError(name_error(name))
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
                what = "a folder, not a file" if Path(self.path).is_dir() else "file not found"
                raise ConfigError(f"dataset {name!r}: {what}: {self.path}")
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
            own=True,
        )


def configure_parser(parser) -> None:
    from cwgrpo.configs import add_config_arguments, describe_options

    parser.add_argument(
        "--dataset",
        required=True,
        help=f"registry name (one of {', '.join(DATASETS)}), or any name with --set id=/path= (OwnDataset)",
    )
    parser.add_argument("--out", required=True, type=Path, help="output JSONL (manifest written beside it)")
    add_config_arguments(parser)
    parser.epilog = describe_options(OwnDataset)


OUTPUTS = ("out",)  # the other files it writes and reads: file_arguments


def file_arguments(args) -> tuple[list[Path], list[Path]]:
    """The user's dataset file (read) and the manifest (written), for ``cwgrpo.cli``'s input/output check."""
    spec = dataset_spec(args)
    return [Path(spec.local_path)] if spec.local_path else [], [manifest_path(args.out)]


def dataset_spec(args) -> DatasetSpec:
    """A registry entry, or the user's own dataset when options are given (``OwnDataset``)."""
    from cwgrpo.configs import build_config, parse_overrides

    overrides = parse_overrides(args.overrides)
    if args.config is not None or overrides:
        return build_config(OwnDataset, args.config, overrides).spec(args.dataset)
    return get_dataset(args.dataset)


def run(args) -> int:
    spec = dataset_spec(args)
    manifest = prepare(spec, args.out)
    logger.info("wrote %s (%d rows, sha256 %s)", args.out, manifest["rows"], manifest["sha256"][:12])
    return 0
