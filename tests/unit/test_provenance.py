"""cwgrpo.provenance: the identity block of every result file, the same for two calls on one checkout, with
the checkout's commit and the installed libraries' versions, and no cost of importing torch."""

from __future__ import annotations

import importlib.metadata
import json
import subprocess
import sys
from pathlib import Path

import pytest

import cwgrpo.provenance
from cwgrpo import __version__
from cwgrpo.provenance import LIBRARIES, git_state, library_versions, provenance


def test_the_block_is_deterministic_and_carries_the_extra_fields():
    first = provenance(config={"seed": 0})
    assert json.dumps(first, sort_keys=True) == json.dumps(provenance(config={"seed": 0}), sort_keys=True)
    assert first["package"] == "cwgrpo" and first["version"] == __version__
    assert first["config"] == {"seed": 0}
    assert set(first) == {"package", "version", "git", "libraries", "hardware", "config"}


def test_library_versions_are_the_installed_ones_and_none_when_absent():
    versions = library_versions()
    assert list(versions) == list(LIBRARIES)
    assert versions["torch"] == importlib.metadata.version("torch")
    for name, version in versions.items():
        try:
            assert version == importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            assert version is None


def test_git_state_is_the_commit_of_the_checkout_the_package_runs_from():
    package = Path(cwgrpo.provenance.__file__).parent
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=package, capture_output=True, text=True)
    if head.returncode != 0:
        pytest.skip("not a git checkout")
    assert git_state()["commit"] == head.stdout.strip()
    assert isinstance(git_state()["dirty"], bool)


def test_provenance_never_imports_torch():
    code = "import sys, cwgrpo.provenance as p; h = p.provenance()['hardware']; print(h['gpus'], 'torch' in sys.modules)"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.split() == ["None", "False"]
