"""Who produced a report's inputs, and the one footer line that names them.

:func:`input_identity`: versions, commits, config hashes, each file's sha256; :func:`footer_text`: the
footer line, which names the reporting code beside them."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from cwgrpo.io import read_json
from cwgrpo.models.hub import file_sha256
from cwgrpo_workflow.report.load import run_info


def input_identity(
    summary_paths: Sequence[str | Path] = (), run_dirs: Sequence[str | Path] = ()
) -> dict[str, Any]:
    """Who produced the inputs: package versions, git commits and config hashes, plus each file's sha256."""
    files, versions, commits, hashes = [], set(), set(), set()

    def note(prov: Mapping[str, Any], chash: Any) -> None:
        if prov.get("version"):
            versions.add(str(prov["version"]))
        git = prov.get("git") or {}
        if git.get("commit"):
            commits.add(str(git["commit"])[:12] + ("+dirty" if git.get("dirty") else ""))
        if chash:
            hashes.add(str(chash))

    for p in summary_paths:
        s = read_json(p)
        prov = s.get("provenance") or {}
        note(prov, s.get("config_hash") or prov.get("config_hash"))
        files.append({"path": str(p), "sha256": file_sha256(Path(p)), "tags": s.get("tags")})
    for d in run_dirs:
        info = run_info(d)
        note(info["provenance"], info["config_hash"])
        path = Path(d) / "run.json"
        files.append({"path": str(path), "sha256": file_sha256(path)})
    return {
        "versions": sorted(versions),
        "commits": sorted(commits),
        "config_hashes": sorted(hashes),
        "files": files,
    }


def footer_text(
    identity: Mapping[str, Any], report_config_hash: str, extra: str = "", preset: str = ""
) -> str:
    """One line naming the preset, the reporting code and the producers of the inputs (no clock, so it is
    reproducible)."""
    from cwgrpo import __version__
    from cwgrpo.provenance import git_state

    git = git_state()
    here = f"cwgrpo {__version__}"
    if git.get("commit"):
        here += f" @ {git['commit'][:12]}{'+dirty' if git.get('dirty') else ''}"

    def short(items: Sequence[str], n: int = 3) -> str:
        items = list(items)
        return (
            ", ".join(items[:n]) + (f" (+{len(items) - n})" if len(items) > n else "") if items else "unknown"
        )

    parts = [
        *([f"preset {preset}"] if preset else []),
        f"made by {here}",
        f"inputs: {len(identity['files'])} files from cwgrpo {short(identity['versions'])} @ {short(identity['commits'], 2)}",
        f"config hashes {short(identity['config_hashes'], 2)}",
        f"report config {report_config_hash}",
    ]
    if extra:
        parts.append(extra)
    return " · ".join(parts)
