"""File I/O at the edges: atomic writes so that a killed job never leaves a file that looks complete."""

from __future__ import annotations

import contextlib
import errno
import json
import os
import re
import shutil
import tempfile
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import yaml


class _Loader(yaml.SafeLoader):
    """YAML 1.1 reads ``1e-6`` (no dot) as a string; configs are full of such learning rates."""


_Loader.add_implicit_resolver(
    "tag:yaml.org,2002:float",
    re.compile(
        r"^[-+]?(?:\d[\d_]*\.?\d*(?:[eE][-+]?\d+)?|\.\d+(?:[eE][-+]?\d+)?|\.(?:inf|Inf|INF)|\.(?:nan|NaN|NAN))$"
    ),
    list("-+0123456789."),
)


def yaml_load(text: str) -> Any:
    """``yaml.safe_load`` that also reads ``1e-6`` as a float."""
    return yaml.load(text, Loader=_Loader)  # a SafeLoader subclass: safe


class ResultFileError(ValueError):
    """A result or data file is missing, empty, truncated or malformed."""


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


@contextlib.contextmanager
def atomic_path(path: str | os.PathLike, suffix: str = "") -> Iterator[Path]:
    """Yield a temporary path beside ``path``; rename it onto ``path`` only if the block succeeds."""
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=suffix or ".tmp", dir=target.parent)
    except OSError as err:  # name the file asked for, not the temporary one
        raise OSError(err.errno, f"cannot write {target}: {err.strerror}") from None
    os.close(fd)
    tmp_path = Path(tmp)
    try:
        yield tmp_path
        os.chmod(tmp_path, 0o666 & ~_umask())  # mkstemp makes 0600; results are ordinary files
        os.replace(tmp_path, target)
    except OSError as err:  # a full disk or a quota: name the file (ENOSPC carries no file name)
        if err.filename is not None:
            raise
        raise OSError(err.errno, f"cannot write {target}: {err.strerror or err}") from err
    finally:
        if tmp_path.exists():
            tmp_path.unlink()


OWNED_MARK = ".cwgrpo-owned"  # inside a folder this package wrote as a whole: the files it wrote there


def folder_files(folder: Path) -> dict[str, int]:
    """Every file and link under ``folder`` but its mark, by path relative to it: its size (a link: -1)."""
    found = {}
    for root, dirs, files in os.walk(folder):
        for name in files + [d for d in dirs if os.path.islink(os.path.join(root, d))]:
            path = Path(root, name)
            rel = str(path.relative_to(folder))
            if rel != OWNED_MARK:
                found[rel] = -1 if path.is_symlink() else path.stat().st_size
    return found


def _mark(folder: Path, files: dict[str, int] | None) -> None:
    """Mark ``folder`` as this package's: the files it wrote there, or None while it writes in place."""
    text = json.dumps({"written_by": "cwgrpo", "files": files}, sort_keys=True, indent=0)
    (folder / OWNED_MARK).write_text(text + "\n", encoding="utf-8")


def check_replaceable_dir(path: str | os.PathLike) -> None:
    """Refuse a folder this package may not replace: a file, a link, one holding the current folder, or one
    with content other than its ``OWNED_MARK`` lists."""
    p = Path(path)
    what = f"output folder {p}"
    if p.is_symlink():
        raise ValueError(f"{what} is a symbolic link: name a new folder (the link is not followed)")
    if not p.exists():
        return
    if not p.is_dir():
        raise ValueError(f"{what} is a file: name a new folder")
    if Path.cwd().resolve().is_relative_to(p.resolve()):
        raise ValueError(f"{what} holds the current folder: name a new folder")
    mark = p / OWNED_MARK
    if not (mark.is_file() and not mark.is_symlink()):
        if any(p.iterdir()):
            raise ValueError(
                f"{what} exists and holds files cwgrpo did not write there: name a new folder, or move it aside"
            )
        return
    try:
        written = json.loads(mark.read_text(encoding="utf-8"))["files"]
    except (ValueError, KeyError, TypeError, UnicodeDecodeError):
        raise ValueError(
            f"{what} has a mark that lists no files (an older cwgrpo's, or edited), so yours cannot be told from "
            "its own: name a new folder, or move it aside"
        ) from None
    if written is None:  # a command writing into it in place (a download that resumes)
        return
    found = folder_files(p)
    differ = sorted(k for k in set(found) | set(written) if found.get(k) != written.get(k))
    if differ:
        shown = ", ".join(differ[:3]) + (f" and {len(differ) - 3} more" if len(differ) > 3 else "")
        raise ValueError(
            f"{what} holds files cwgrpo did not write there, or changed ({shown}): name a new folder, or move "
            "it aside"
        )


@contextlib.contextmanager
def owned_dir(path: str | os.PathLike) -> Iterator[Path]:
    """Yield a temporary folder beside ``path``; if the block succeeds, mark it and move it onto ``path``."""
    target = Path(path).absolute()
    check_replaceable_dir(target)
    target.parent.mkdir(parents=True, exist_ok=True)
    try:
        tmp = Path(tempfile.mkdtemp(prefix=f".{target.name}.", dir=target.parent))
    except OSError as err:  # name the folder asked for, not the temporary one
        raise OSError(err.errno, f"cannot write {target}: {err.strerror}") from None
    old: Path | None = None
    try:
        yield tmp
        os.chmod(tmp, 0o777 & ~_umask())  # mkdtemp makes 0700; results are ordinary folders
        _mark(tmp, folder_files(tmp))
        check_replaceable_dir(target)
        if target.exists():
            old = Path(tempfile.mkdtemp(prefix=f".{target.name}.old.", dir=target.parent))
            os.replace(target, old)  # onto an empty folder: atomic
        try:
            os.replace(tmp, target)
        except OSError:
            if old is not None:
                os.replace(old, target)
            raise
    finally:
        for leftover in (tmp, old):
            if leftover is not None and leftover.exists():
                shutil.rmtree(leftover)


def claim_dir(path: str | os.PathLike) -> Path:
    """Create and mark ``path`` for a command that writes into it in place (a resumable download)."""
    target = Path(path)
    check_replaceable_dir(target)
    target.mkdir(parents=True, exist_ok=True)
    _mark(target, None)
    return target


def seal_dir(path: str | os.PathLike) -> None:
    """Record in a claimed folder's mark the files now there: from then on only those may be replaced."""
    _mark(Path(path), folder_files(Path(path)))


def write_text(path: str | os.PathLike, text: str) -> None:
    with atomic_path(path) as tmp:
        tmp.write_text(text, encoding="utf-8")


def write_json(path: str | os.PathLike, obj: Any) -> None:
    """Write ``obj`` as indented JSON with sorted keys, so equal content gives equal bytes."""
    write_text(path, json.dumps(obj, indent=2, sort_keys=True, ensure_ascii=False) + "\n")


def json_line(record: Any) -> str:
    """One JSON line, non-ASCII kept, with the line breaks ``str.splitlines`` also splits on escaped."""
    text = json.dumps(record, sort_keys=True, ensure_ascii=False)
    return text.replace("\x85", "\\u0085").replace("\u2028", "\\u2028").replace("\u2029", "\\u2029") + "\n"


def write_jsonl(path: str | os.PathLike, records: Iterable[dict[str, Any]]) -> int:
    """Write one JSON object per line; returns the number of records written."""
    n = 0
    with atomic_path(path) as tmp, open(tmp, "w", encoding="utf-8") as fh:
        for rec in records:
            fh.write(json_line(rec))
            n += 1
    return n


FORMULA_START = ("=", "+", "-", "@", "\t", "\r")  # what makes a spreadsheet read a cell as a formula


def csv_safe(value: Any) -> Any:
    """A CSV cell that a spreadsheet would run as a formula gets a leading ``'`` (OWASP); numbers stay."""
    if not isinstance(value, str) or not value.startswith(FORMULA_START):
        return value
    try:
        float(value)
    except ValueError:
        return "'" + value
    return value


def write_csv(path: str | os.PathLike, frame: Any) -> None:
    """Write a ``DataFrame`` as CSV (no index), made ``csv_safe``: every CSV the package writes."""
    safe = frame.map(csv_safe).rename(columns=csv_safe)
    write_text(path, safe.to_csv(index=False))


def read_json(path: str | os.PathLike) -> Any:
    p = Path(path)
    if not p.is_file():
        raise ResultFileError(f"missing file: {p}")
    try:
        return json.loads(p.read_text(encoding="utf-8-sig"))
    except (json.JSONDecodeError, UnicodeDecodeError) as err:
        raise ResultFileError(f"{p} is not valid JSON (truncated or corrupt?): {err}") from err


def read_jsonl(path: str | os.PathLike) -> list[dict[str, Any]]:
    """Read a JSONL file; a malformed line is an error naming the file and line number."""
    p = Path(path)
    if not p.is_file():
        raise ResultFileError(f"missing file: {p}")
    records = []
    try:
        with open(p, encoding="utf-8-sig") as fh:
            for lineno, line in enumerate(fh, start=1):
                if not line.strip():
                    continue
                try:
                    records.append(json.loads(line))
                except json.JSONDecodeError as err:
                    raise ResultFileError(f"{p}:{lineno} is not valid JSON (truncated?): {err}") from err
    except UnicodeDecodeError as err:
        raise ResultFileError(f"{p} is not UTF-8 text: {err}") from err
    return records


def append_jsonl(path: str | os.PathLike, record: dict[str, Any]) -> None:
    """Append one record, never through a symbolic link (a planted one would send records to its target)."""
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    try:
        fd = os.open(p, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o666)
    except OSError as err:
        if err.errno != errno.ELOOP:
            raise
        raise OSError(err.errno, f"log {p} is a symbolic link, never followed: remove the link") from None
    with os.fdopen(fd, "a", encoding="utf-8") as fh:
        fh.write(json_line(record))
        fh.flush()


def read_yaml(path: str | os.PathLike) -> Any:
    p = Path(path)
    if not p.is_file():
        raise ResultFileError(f"missing file: {p}")
    try:
        return yaml_load(p.read_text(encoding="utf-8"))
    except yaml.YAMLError as err:
        raise ResultFileError(f"{p} is not valid YAML: {err}") from err


def check_outputs_distinct(outputs: Iterable[str | os.PathLike]) -> None:
    """Refuse two outputs that name one file, before anything is written."""
    seen: dict[Path, Path] = {}
    for out in map(Path, outputs):
        key = out.resolve()
        if key in seen:
            raise ValueError(f"outputs {seen[key]} and {out} are one file: give each output its own path")
        seen[key] = out


def check_outputs_not_inputs(
    inputs: Iterable[str | os.PathLike], outputs: Iterable[str | os.PathLike]
) -> None:
    """Refuse an output that is an input, inside an input folder, or a folder holding an input."""
    ins = [Path(p) for p in inputs]
    for out in map(Path, outputs):
        for inp in ins:
            same = out.resolve() == inp.resolve() or (out.exists() and inp.exists() and out.samefile(inp))
            inside = inp.is_dir() and out.resolve().is_relative_to(inp.resolve())
            if same or inside or inp.resolve().is_relative_to(out.resolve()):
                raise ValueError(f"output {out} would overwrite the input {inp}: choose another output path")


def check_arguments_not_overwritten(
    args: Any,
    output_dests: Iterable[str],
    more_inputs: Iterable[str | os.PathLike] = (),
    more_outputs: Iterable[str | os.PathLike] = (),
    skip: Iterable[str] = (),
) -> None:
    """``check_outputs_not_inputs`` over parsed arguments: a ``Path`` is an output only by its ``dest``."""
    dests = set(output_dests)
    inputs: list[Path] = list(map(Path, more_inputs))
    outputs: list[Path] = list(map(Path, more_outputs))
    for dest, value in vars(args).items():
        if dest in skip:
            continue
        values = value if isinstance(value, list) else [value]
        (outputs if dest in dests else inputs).extend(v for v in values if isinstance(v, Path))
    check_outputs_not_inputs(inputs, outputs)
