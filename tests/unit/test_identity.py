"""cwgrpo.train.identity: a run's inputs are fingerprinted by content (never by path or time), cheaply for
large files, and a change is named in words."""

from __future__ import annotations

import hashlib
import json
import shutil

from cwgrpo.train import identity
from cwgrpo.train.identity import changed_inputs, file_digest, model_fingerprint, run_inputs


def _model(folder, weights: bytes = b"w" * 100):
    folder.mkdir(parents=True)
    (folder / "config.json").write_text("{}")
    (folder / "model.safetensors").write_bytes(weights)
    (folder / ".cache").mkdir()
    (folder / ".cache" / "lock").write_text("skipped")
    return folder


def test_a_small_file_is_hashed_whole_and_a_large_one_by_size_and_samples(tmp_path, monkeypatch):
    small = tmp_path / "a.bin"
    small.write_bytes(b"abc" * 1000)
    assert file_digest(small) == hashlib.sha256(b"abc" * 1000).hexdigest()
    monkeypatch.setattr(identity, "FULL_HASH_BYTES", 100)
    monkeypatch.setattr(identity, "CHUNK_BYTES", 10)
    monkeypatch.setattr(identity, "SAMPLES", 3)
    big = tmp_path / "b.bin"
    data = bytes(range(256))
    big.write_bytes(data)  # chunks at offsets 0, 123, 246
    expected = hashlib.sha256(b"sampled:256:" + data[0:10] + data[123:133] + data[246:256]).hexdigest()
    assert file_digest(big) == expected
    big.write_bytes(data[:50] + b"x" + data[51:])  # a byte outside every sampled chunk
    assert file_digest(big) == expected


def test_a_copied_model_folder_keeps_its_fingerprint_and_a_changed_one_does_not(tmp_path):
    here = _model(tmp_path / "here" / "base")
    (tmp_path / "here" / "base.json").write_text(json.dumps({"model_id": "m", "path": "not pinned"}))
    there = tmp_path / "there" / "base"
    shutil.copytree(here, there)
    shutil.copy(tmp_path / "here" / "base.json", tmp_path / "there" / "base.json")
    fingerprint = model_fingerprint(here)
    assert fingerprint == model_fingerprint(there)
    assert fingerprint["files"] == 2 and fingerprint["marker"] == {"model_id": "m"}
    (there / "model.safetensors").write_bytes(b"v" * 100)
    assert model_fingerprint(there)["files_sha256"] != fingerprint["files_sha256"]


def test_changed_inputs_name_what_changed(tmp_path):
    data = tmp_path / "train.jsonl"
    data.write_text('{"problem": "1+1"}\n')
    old = run_inputs(_model(tmp_path / "base"), data)
    assert old["train_data_sha256"] == hashlib.sha256(data.read_bytes()).hexdigest()
    assert changed_inputs(old, old) == []
    (tmp_path / "base.json").write_text(json.dumps({"revision": "r2"}))
    data.write_text('{"problem": "2+2"}\n')
    new = run_inputs(tmp_path / "base", data)
    assert changed_inputs(old, new) == [
        "the base model (marker {} -> {'revision': 'r2'})",
        f"the training data (sha256 {old['train_data_sha256'][:12]} -> {new['train_data_sha256'][:12]})",
    ]
    assert changed_inputs(None, new) == [
        "the base model and the training data (not recorded: made by an older cwgrpo)"
    ]
