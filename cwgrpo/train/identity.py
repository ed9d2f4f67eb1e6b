"""What a training run was trained from: a cheap, content-based fingerprint of its base model and data.

A large file is hashed by its size and ``SAMPLES`` evenly spaced chunks (a 15 GB model in under a
second); the marker beside the folder adds what pins a downloaded model exactly. No path or time enters
it: a copied folder has the same identity.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

FULL_HASH_BYTES = 64 * 2**20
SAMPLES = 16
CHUNK_BYTES = 2**20
MARKER_KEYS = ("model_id", "revision", "commit", "weights_sha256")  # marker fields that pin a model


def file_digest(path: Path) -> str:
    """SHA-256 of a small file; of its size and ``SAMPLES`` evenly spaced chunks for a large one."""
    size = path.stat().st_size
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        if size <= FULL_HASH_BYTES:
            return hashlib.file_digest(fh, "sha256").hexdigest()
        digest.update(f"sampled:{size}:".encode())
        for i in range(SAMPLES):
            fh.seek((size - CHUNK_BYTES) * i // (SAMPLES - 1))
            digest.update(fh.read(CHUNK_BYTES))
    return digest.hexdigest()


def model_fingerprint(model_dir: Path) -> dict[str, Any]:
    """``{files_sha256, files, marker}`` of a model folder (hidden files and folders are skipped)."""
    model_dir = Path(model_dir)
    files = sorted(
        p
        for p in model_dir.rglob("*")
        if p.is_file() and not any(part.startswith(".") for part in p.relative_to(model_dir).parts)
    )
    listing = hashlib.sha256()
    for path in files:
        listing.update(f"{path.relative_to(model_dir).as_posix()}\0{file_digest(path)}\n".encode())
    marker: dict[str, Any] = {}
    marker_path = model_dir.with_name(model_dir.name + ".json")
    if marker_path.is_file():
        try:
            loaded = json.loads(marker_path.read_text(encoding="utf-8"))
        except (json.JSONDecodeError, UnicodeDecodeError):
            loaded = {}
        if isinstance(loaded, dict):
            marker = {k: loaded[k] for k in MARKER_KEYS if k in loaded}
    return {"files_sha256": listing.hexdigest(), "files": len(files), "marker": marker}


def run_inputs(model_dir: Path, train_data: Path) -> dict[str, Any]:
    """The inputs part of a run's identity (stored in each checkpoint's flag and in ``run.json``)."""
    with open(train_data, "rb") as fh:
        data_sha256 = hashlib.file_digest(fh, "sha256").hexdigest()
    return {"model": model_fingerprint(model_dir), "train_data_sha256": data_sha256}


def changed_inputs(recorded: Any, now: dict[str, Any]) -> list[str]:
    """Human names of the inputs that differ between a recorded identity and the current one."""
    if not isinstance(recorded, dict):
        return ["the base model and the training data (not recorded: made by an older cwgrpo)"]
    changed = []
    old_model, new_model = recorded.get("model") or {}, now["model"]
    if old_model != new_model:
        what = "the base model"
        if old_model.get("marker") != new_model.get("marker"):
            what += f" (marker {old_model.get('marker')} -> {new_model.get('marker')})"
        else:
            what += f" (content {str(old_model.get('files_sha256'))[:12]} -> {str(new_model['files_sha256'])[:12]})"
        changed.append(what)
    if recorded.get("train_data_sha256") != now["train_data_sha256"]:
        changed.append(
            f"the training data (sha256 {str(recorded.get('train_data_sha256'))[:12]} -> "
            f"{now['train_data_sha256'][:12]})"
        )
    return changed
