"""The core install stays slim: the trainer and the core commands import no workflow or plotting library,
and a command that needs an optional extra says which one to install.

`pip install cwgrpo` (no extras) has no Snakemake, Slurm plugin, jsonschema, scipy, matplotlib or seaborn;
pandas it has anyway, because TRL depends on it and ``trl.trainer.grpo_trainer`` imports it.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import tomllib
from pathlib import Path

import pytest

from cwgrpo import cli
from cwgrpo.extras import extra_for, extras_by_distribution

REPO = Path(__file__).resolve().parents[2]
# What the `workflow` and `slurm` extras bring; none of it may load with the core.
WORKFLOW_STACK = {
    "snakemake",
    "snakemake_executor_plugin_slurm",
    "jsonschema",
    "matplotlib",
    "seaborn",
    "scipy",
    "pandas",
}


def _loaded_after(code: str) -> set[str]:
    """Top-level non-stdlib modules loaded by ``code`` in a fresh interpreter."""
    probe = textwrap.dedent(f"""
        import json, sys
        {code}
        print(json.dumps(sorted({{m.split('.')[0] for m in sys.modules}} - set(sys.stdlib_module_names))))
    """)
    proc = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return set(json.loads(proc.stdout.splitlines()[-1]))


def test_the_maths_imports_no_workflow_or_report_library():
    loaded = _loaded_after("import cwgrpo, cwgrpo.weighting; cwgrpo.cw_weights")
    assert "torch" in loaded
    assert loaded & WORKFLOW_STACK == set()


def test_the_trainer_imports_nothing_beyond_trl():
    """The trainer loads TRL's GRPOTrainer (which imports pandas, and transformers scipy where
    it is installed) and nothing else but cwgrpo itself: no Snakemake, no plotting stack."""
    trl_alone = _loaded_after("import torch; from trl import GRPOConfig, GRPOTrainer")
    ours = _loaded_after("import cwgrpo, cwgrpo.weighting; from cwgrpo.trainer import CWGRPOTrainer")
    assert ours - trl_alone == {"cwgrpo"}
    assert (
        ours & {"snakemake", "snakemake_executor_plugin_slurm", "jsonschema", "matplotlib", "seaborn"}
        == set()
    )


def test_core_commands_import_no_workflow_or_report_library():
    """Every command outside cwgrpo_workflow.report (train, evaluate, grade, data, models, doctor) imports without
    the workflow extra's libraries; the heavy ones (torch, TRL) load where they run."""
    core = sorted(
        {module for module, _ in cli.COMMANDS.values() if not module.startswith("cwgrpo_workflow.report")}
    )
    assert "cwgrpo.train.run" in core and "cwgrpo.evaluate.run" in core
    loaded = _loaded_after(f"import cwgrpo.cli, cwgrpo.stats, {', '.join(core)}")
    assert loaded & WORKFLOW_STACK == set()


def _blocked(modules: list[str], argv: list[str]) -> subprocess.CompletedProcess:
    """`cwgrpo ARGV` in a fresh interpreter in which importing any of ``modules`` fails as if it were not
    installed (``sys.modules[name] = None`` makes ``import name`` raise ModuleNotFoundError)."""
    code = f"import sys\nfor m in {modules!r}: sys.modules[m] = None\nfrom cwgrpo.cli import main\nsys.exit(main({argv!r}))"
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)


@pytest.mark.parametrize("command", ["table", "figure", "claims", "study"])
def test_a_report_command_without_the_workflow_extra_names_it_before_it_starts(command):
    """Checked before the command's module is imported, so it cannot stop half-way (e.g. at the PDF, after
    writing the CSV files): pandas alone is there anyway (TRL's), matplotlib is not."""
    proc = _blocked(["matplotlib", "seaborn"], [command, "--help"])
    assert proc.returncode == 2, proc.stdout + proc.stderr
    (line,) = proc.stderr.strip().splitlines()  # one line, no traceback
    assert line == (
        f"cwgrpo {command}: error: cwgrpo {command} needs the 'workflow' extra (missing: matplotlib, "
        "seaborn): pip install 'cwgrpo[workflow]' (from a checkout: pip install -e '.[workflow]')"
    )
    assert "usage:" not in proc.stdout  # not even its --help ran


def _fake_command(tmp_path, monkeypatch, module: str, body: str) -> None:
    """Register `cwgrpo fake` as module ``module`` (a new name per test: imported modules stay cached),
    whose run() executes ``body``."""
    (tmp_path / f"{module}.py").write_text(
        f"def configure_parser(parser):\n    pass\n\n\ndef run(args):\n    {body}\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setitem(cli.COMMANDS, "fake", (module, "a test command"))


def test_a_missing_extra_imported_at_run_time_is_named_too(tmp_path, monkeypatch, capsys):
    _fake_command(
        tmp_path,
        monkeypatch,
        "fake_gguf_command",
        "raise ModuleNotFoundError('No module named gguf', name='gguf')",
    )
    assert cli.main(["fake"]) == 2
    err = capsys.readouterr().err
    assert (
        "cwgrpo fake: error: cwgrpo fake needs 'gguf', from the 'gguf' extra: pip install 'cwgrpo[gguf]'"
        in err
    )


def test_a_missing_module_that_no_extra_provides_is_not_disguised(tmp_path, monkeypatch):
    """An import error of our own (a typo, a module that is a core dependency) stays an error with its
    traceback, not advice to install an extra."""
    _fake_command(tmp_path, monkeypatch, "fake_typo_command", "import cwgrpo_no_such_module")
    with pytest.raises(ModuleNotFoundError, match="cwgrpo_no_such_module"):
        cli.main(["fake"])
    assert extra_for("torch") is None and extra_for("trl") is None


def test_extras_read_back_from_the_metadata_are_pyprojects():
    """The CLI's advice comes from the installed metadata: it must say what pyproject.toml says (a stale
    install fails here; `make setup` reinstalls whenever pyproject.toml changes)."""
    from packaging.requirements import Requirement

    declared: dict[str, list[str]] = {}
    extras = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    for extra, lines in extras.items():
        for line in lines:
            name = Requirement(line).name.lower().replace("_", "-")
            if name != "cwgrpo":
                declared.setdefault(name, []).append(extra)
    assert extras_by_distribution() == declared
    for module in ("snakemake", "pandas", "scipy", "matplotlib", "seaborn", "jsonschema"):
        assert extra_for(module) == "workflow", module
    assert extra_for("snakemake_executor_plugin_slurm") == "slurm"
    assert extra_for("gguf") == "gguf"  # also in `test`, which is never the one suggested


def test_core_dependencies_hold_no_workflow_or_plotting_library():
    core = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["dependencies"]
    from packaging.requirements import Requirement

    names = {Requirement(line).name.lower() for line in core}
    assert names & {"snakemake", "snakemake-executor-plugin-slurm", "jsonschema", "matplotlib", "seaborn", "scipy", "pandas"} == set()  # fmt: skip
    assert {"torch", "trl", "transformers", "math-verify"} <= names
