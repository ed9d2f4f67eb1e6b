"""The conda env files: where the package installs from, which env each preset kind uses, and their pins.

Conda cannot run here. What is checked, and how:
- Snakemake 9.27.1 itself runs `--use-conda --conda-create-envs-only` with a stand-in `conda` on PATH
  (standin_conda.py): Snakemake copies each env file to .snakemake/conda/<hash>.yaml and calls
  `conda env create --file <copy>` (snakemake/deployment/conda.py, Env.create); the stand-in does what
  conda's pip installer does with the `pip:` lines (a requirements file in the copy's folder, pip run
  from there) and asks pip's own parser where the editable install points.
- The pins, statically: against pyproject.toml and across the env files.
Not checked here: that conda-forge serves python/pip at the pinned versions, and the pip resolution
itself (it needs the network; the closing note of issue 17 says how it was checked).
"""

from __future__ import annotations

import json
import re
import sys
import tomllib
from pathlib import Path

import pytest
import yaml
from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet
from test_workflow import PRESETS, REPO, run_snakemake

# lighteval.yaml is the paper metric's own environment (lighteval 0.8.1's pins, no cwgrpo package): it
# cannot agree with pyproject; tests/unit/test_paper_metric.py checks it against its requirements.txt.
LIGHTEVAL_ENV = REPO / "envs" / "lighteval.yaml"
ENVS = sorted(p for p in (REPO / "envs").glob("*.yaml") if p != LIGHTEVAL_ENV)
GPU_ONLY = ("vllm", "deepspeed")  # never in the CPU env
CPU_INDEX = "--extra-index-url https://download.pytorch.org/whl/cpu"
EDITABLE = "-e ${CWGRPO_WORKFLOW_DIR}"
# The package's extras each env installs: the CPU env runs the reports (the workflow extra), the GPU envs
# only train and evaluate (core dependencies).
ENV_EXTRAS = {"cpu.yaml": ["workflow"], "train.yaml": [], "eval.yaml": [], "vllm-cpu.yaml": []}
# vLLM's CPU build: the conda twin of `make vllm` and the requirements file that target installs.
VLLM_CPU_ENV = REPO / "envs" / "vllm-cpu.yaml"
VLLM_CPU_REQS = REPO / "envs" / "vllm-cpu.txt"
# The training environment with DeepSpeed on CPU (`make deepspeed`): envs/train.yaml's pins without vLLM.
DEEPSPEED_CPU_REQS = REPO / "envs" / "deepspeed-cpu.txt"
# The workflow extra's libraries, which a GPU env does not pin (it does not need them).
WORKFLOW_ONLY = ("snakemake", "jsonschema", "scipy", "matplotlib", "seaborn")


def _pyproject() -> dict:
    return tomllib.loads((REPO / "pyproject.toml").read_text())["project"]


def _requirements(*groups: str) -> dict[str, Requirement]:
    """pyproject's requirements by lower-case name: core dependencies, plus the named extras."""
    project = _pyproject()
    lines = [*project["dependencies"], *[r for g in groups for r in project["optional-dependencies"][g]]]
    reqs = [Requirement(r) for r in lines if not r.startswith("cwgrpo")]
    return {r.name.lower().replace("_", "-"): r for r in reqs}


def _pins(env_file: Path) -> tuple[list[str], dict[str, str], dict[str, str], list[str]]:
    """(channels, conda pins name -> version, pip pins name -> version, other pip lines) of an env file."""
    env = yaml.safe_load(env_file.read_text())
    conda: dict[str, str] = {}
    pip: dict[str, str] = {}
    other: list[str] = []
    for dep in env["dependencies"]:
        if isinstance(dep, dict):
            for line in dep["pip"]:
                if line.startswith("-"):
                    other.append(line)
                    continue
                req = Requirement(line)
                (spec,) = list(req.specifier)
                assert spec.operator == "==", f"{env_file.name}: {line} is not pinned with =="
                pip[req.name.lower().replace("_", "-")] = spec.version
        else:
            name, _, version = dep.partition("=")
            conda[name] = version
    return env["channels"], conda, pip, other


def _editable_extras(line: str) -> list[str]:
    """The extras of the env file's editable install line (`-e ${CWGRPO_WORKFLOW_DIR}[a,b]`)."""
    match = re.fullmatch(re.escape(EDITABLE) + r"(?:\[([a-z,]+)\])?", line)
    assert match, f"{line!r} is not the editable install of the workflow folder"
    return sorted(match.group(1).split(",")) if match.group(1) else []


def _standin_conda(tmp_path: Path) -> tuple[Path, dict[str, str]]:
    """A bin folder with the stand-in `conda`, and the environment variables it reads."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    conda = bin_dir / "conda"
    script = Path(__file__).with_name("standin_conda.py")
    conda.write_text(f'#!/bin/sh\nexec "{sys.executable}" "{script}" "$@"\n')
    conda.chmod(0o755)
    return bin_dir, {"STANDIN_CONDA_PREFIX": str(tmp_path / "conda")}


# -- pins ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("env_file", ENVS, ids=lambda p: p.name)
def test_env_file_pins_every_dependency_within_pyproject(env_file):
    channels, conda, pip, other = _pins(env_file)
    assert channels == ["conda-forge", "nodefaults"]
    assert conda and all(conda.values()), f"{env_file.name}: unpinned conda package in {conda}"
    assert SpecifierSet(_pyproject()["requires-python"]).contains(conda["python"])
    assert other[-1].startswith(EDITABLE), (
        f"{env_file.name}: the package is installed last, from the workflow folder"
    )
    installed = _editable_extras(other[-1])
    assert installed == ENV_EXTRAS[env_file.name]
    extras = [*installed, *[g for g in ("vllm", "deepspeed") if g in pip]]
    requirements = _requirements(*extras)
    # Every dependency is pinned, so that pip's resolver never picks a version of its own.
    assert sorted(set(requirements) - set(pip)) == [], f"{env_file.name}: not pinned"
    for name, req in requirements.items():
        assert req.specifier.contains(pip[name], prereleases=True), (
            f"{env_file.name}: {name}=={pip[name]} does not satisfy pyproject's {req}"
        )
    assert pip["trl"] == "1.16.0"


def test_envs_agree_with_each_other():
    """One version of each package in every env (vllm 0.31.0 caps transformers < 5.18 and numpy < 2.4)."""
    versions: dict[str, set[str]] = {}
    for env_file in ENVS:
        for name, version in _pins(env_file)[2].items():
            versions.setdefault(name, set()).add(version)
    assert {n: v for n, v in versions.items() if len(v) > 1} == {}
    assert {p.name for p in ENVS} == {"cpu.yaml", "train.yaml", "eval.yaml", "vllm-cpu.yaml"}
    assert "vllm" in _pins(REPO / "envs" / "eval.yaml")[2]
    # vllm-cpu is the CPU build of the GPU envs' vllm, at the same version
    assert _pins(VLLM_CPU_ENV)[2]["vllm-cpu"] == _pins(REPO / "envs" / "eval.yaml")[2]["vllm"]
    assert {"vllm", "deepspeed"} <= set(_pins(REPO / "envs" / "train.yaml")[2])


def test_cpu_env_has_no_gpu_stack():
    """The CPU env must make on a laptop and a Mac: no vLLM or DeepSpeed, and torch from PyTorch's CPU
    index on Linux (PyPI's Linux torch 2.13.0 pulls the CUDA libraries)."""
    _, conda, pip, other = _pins(REPO / "envs" / "cpu.yaml")
    assert not set(GPU_ONLY) & set(pip)
    assert not [n for n in [*pip, *conda] if n.startswith(("nvidia", "cuda", "pytorch-cuda"))]
    assert other == [CPU_INDEX, f"{EDITABLE}[workflow]"]


def _requirements_pins(path: Path) -> dict[str, str]:
    """name -> version of a requirements file, each line pinned with ==."""
    lines = [line.strip() for line in path.read_text().splitlines()]
    pinned = {}
    for req in [Requirement(line) for line in lines if line and not line.startswith("#")]:
        (spec,) = list(req.specifier)
        assert spec.operator == "==", f"{path.name}: {req} is not pinned with =="
        pinned[req.name.lower().replace("_", "-")] = spec.version
    return pinned


def test_deepspeed_cpu_requirements_are_the_training_envs_without_vllm():
    """`make deepspeed` installs envs/deepspeed-cpu.txt after the CPU torch: the GPU training env's pins,
    DeepSpeed's among them, less vLLM (and torch, installed first)."""
    _, _, pip, _ = _pins(REPO / "envs" / "train.yaml")
    expected = {name: version for name, version in pip.items() if name not in ("torch", "vllm")}
    assert _requirements_pins(DEEPSPEED_CPU_REQS) == expected
    assert expected["deepspeed"] == "0.19.8"


def test_vllm_cpu_requirements_match_its_conda_twin():
    """`make vllm` installs envs/vllm-cpu.txt after the CPU torch: the same pins as envs/vllm-cpu.yaml,
    which takes that torch from PyTorch's CPU index (vllm-cpu requires torch 2.13.0+cpu)."""
    lines = [line.strip() for line in VLLM_CPU_REQS.read_text().splitlines()]
    reqs = [Requirement(line) for line in lines if line and not line.startswith("#")]
    pinned = {}
    for req in reqs:
        (spec,) = list(req.specifier)
        assert spec.operator == "==", f"{VLLM_CPU_REQS.name}: {req} is not pinned with =="
        pinned[req.name.lower().replace("_", "-")] = spec.version
    _, _, pip, other = _pins(VLLM_CPU_ENV)
    assert pinned == {name: version for name, version in pip.items() if name != "torch"}
    assert other == [CPU_INDEX, EDITABLE]


@pytest.mark.parametrize("env_file", ["train.yaml", "eval.yaml", "vllm-cpu.yaml"])
def test_gpu_envs_hold_no_workflow_or_plotting_stack(env_file):
    """The GPU jobs run `cwgrpo train` / `evaluate`, which need the core only: no Snakemake, no plotting."""
    _, _, pip, other = _pins(REPO / "envs" / env_file)
    assert _editable_extras(other[-1]) == []
    assert sorted(set(WORKFLOW_ONLY) & set(pip)) == []


# -- what Snakemake does with the env files -------------------------------------------------------


@pytest.mark.parametrize(
    ("preset", "expected"),
    [("tiny", {"cpu.yaml"}), ("paper", {"cpu.yaml", "train.yaml", "eval.yaml", "lighteval.yaml"})],
)
def test_snakemake_creates_envs_that_install_the_package_from_the_workflow(preset, expected, tmp_path):
    """`--use-conda --conda-create-envs-only` run from a folder outside the repository: each env of the
    preset is created from Snakemake's copy under .snakemake/conda/, and pip, run from that copy's folder,
    installs the package from the repository (a relative `-e ..` there named .snakemake/)."""
    bin_dir, env = _standin_conda(tmp_path)
    workdir = tmp_path / "work"
    workdir.mkdir()
    proc, out = run_snakemake(
        workdir,
        "--use-conda",
        "--conda-create-envs-only",
        "--cores",
        "1",
        configfile=PRESETS[preset],
        path_prefix=bin_dir,
        env=env,
    )
    assert proc.returncode == 0, out[-3000:]
    created = {Path(p).name for p in re.findall(r"Environment for (\S+) created", out)}
    assert created == expected
    reports = [
        json.loads(p.read_text()) for p in (workdir / ".snakemake" / "conda").glob("*/standin-report.json")
    ]
    assert len(reports) == len(expected)
    editable = sorted(len(report["editable"]) for report in reports)
    # every env installs the package from the repository, except the paper metric's (lighteval only)
    assert editable == sorted(0 if name == LIGHTEVAL_ENV.name else 1 for name in expected)
    for report in reports:
        assert Path(report["env_file"]).parent == workdir / ".snakemake" / "conda"
        assert [Path(p) for p in report["editable"]] in ([REPO], []), report
    # pip reads the extras of the editable line after expanding ${CWGRPO_WORKFLOW_DIR}: the CPU env (every
    # env of a tiny preset) gets the workflow extra, the GPU envs none
    assert sorted(r["extras"] for r in reports if r["editable"]) == sorted(
        [[ENV_EXTRAS[name]] for name in expected if name != LIGHTEVAL_ENV.name]
    )


def test_the_real_preset_refuses_use_conda_at_parse_time(tmp_path):
    """The real preset's model and data packages install with `pip --no-deps`, which no env file can say,
    and its jobs would get the paper preset's GPU envs: `--use-conda` stops before any job, naming why."""
    bin_dir, env = _standin_conda(tmp_path)
    proc, out = run_snakemake(
        tmp_path / "work", "--use-conda", "-n", configfile=REPO / "config" / "real.yaml",
        path_prefix=bin_dir, env=env,
    )  # fmt: skip
    assert proc.returncode != 0
    assert "config error in kind: is real, which has no conda env" in out, out[-3000:]
    assert "Environment for" not in out  # refused before any env was made
