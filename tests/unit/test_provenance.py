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
from cwgrpo.seeding import PORTABLE_CPU_NUMERICS, cpuinfo


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


PROBE_NUMERICS = (
    "import os, sys; from cwgrpo.cli import main; main(['--version']); import torch; "
    "from cwgrpo.provenance import hardware; h = hardware(); "
    "print(h['aten_cpu_capability'], h['mkl_cbwr'], bool(h['cpu_model']))"
)


@pytest.mark.skipif("avx2" not in (cpuinfo("flags") or "").split(), reason="needs an x86 CPU with AVX2")
def test_a_command_pins_the_cpus_numerics_before_torch_loads_and_the_provenance_names_them(monkeypatch):
    """A training step's bytes depend on ATen's kernels and MKL's branch (docs/usage.md, "Determinism"):
    every command runs AVX2 kernels and MKL's COMPATIBLE branch, unless the user chose, and says so."""
    for name in PORTABLE_CPU_NUMERICS:
        monkeypatch.delenv(name, raising=False)
    done = subprocess.run([sys.executable, "-c", PROBE_NUMERICS], capture_output=True, text=True, check=True)
    assert done.stdout.split()[-3:] == ["AVX2", "COMPATIBLE", "True"]
    monkeypatch.setenv("ATEN_CPU_CAPABILITY", "default")
    monkeypatch.setenv("MKL_CBWR", "AUTO")
    done = subprocess.run([sys.executable, "-c", PROBE_NUMERICS], capture_output=True, text=True, check=True)
    assert done.stdout.split()[-3:] == ["DEFAULT", "AUTO", "True"]


def test_a_machine_whose_numerics_differ_from_the_tiny_results_is_told_why(monkeypatch):
    from cwgrpo import seeding

    flags = {"flags": "fpu sse2 avx avx2", "model name": "Some CPU"}
    monkeypatch.setattr(seeding, "cpuinfo", lambda field: flags.get(field))
    for name in PORTABLE_CPU_NUMERICS:
        monkeypatch.delenv(name, raising=False)
    assert seeding.numerics_note() is None
    monkeypatch.setenv("ATEN_CPU_CAPABILITY", "avx512")
    assert seeding.numerics_note().startswith("ATEN_CPU_CAPABILITY=avx512 is set: docs/tiny-results was made")
    monkeypatch.delenv("ATEN_CPU_CAPABILITY")
    flags["flags"] = "fpu sse2 avx"
    assert seeding.numerics_note().startswith("this CPU (Some CPU) has no AVX2: docs/tiny-results")


def test_a_cpu_variable_torch_would_ignore_is_not_taken_for_the_portable_one(monkeypatch):
    """Campaign #37: ATEN_CPU_CAPABILITY=AVX2 (upper case) is ignored by torch, which then runs its widest
    kernels; the note compares as torch reads it."""
    from cwgrpo import seeding

    monkeypatch.setattr(seeding, "cpuinfo", lambda field: {"flags": "avx2"}.get(field))
    monkeypatch.delenv("MKL_CBWR", raising=False)
    monkeypatch.setenv("ATEN_CPU_CAPABILITY", "AVX2")
    assert seeding.numerics_note().startswith("ATEN_CPU_CAPABILITY=AVX2 is set")
