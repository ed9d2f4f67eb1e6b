"""The library stands alone: it imports nothing of the workflow, works without Snakemake, keeps within its line
budget, and its stage folders form layers (a folder imports only the folders below it)."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
LIBRARY = REPO / "cwgrpo"
# What the library must never import: the workflow's own package and the workflow's libraries.
WORKFLOW_ONLY = ("cwgrpo_workflow", "snakemake", "snakemake_executor_plugin_slurm", "jsonschema")
# The stage folders, lowest first: each may import only the folders before it.
LAYERS = ("weighting", "generation", "grading", "data", "trainer", "models", "launch", "train", "evaluate")
# The library's size: the budget is 6,000 lines; the ceiling only ever goes down, to the budget.
LIBRARY_LINE_BUDGET = 6_000
LIBRARY_LINE_CEILING = 10_597


def _imports(path: Path) -> set[str]:
    """Every module a file imports, at its top, inside a function or for annotations only."""
    names = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
    return names


def test_the_library_imports_nothing_of_the_workflow():
    offenders = {
        f"{path.relative_to(REPO)}: {name}"
        for path in LIBRARY.rglob("*.py")
        for name in _imports(path)
        if name.split(".")[0] in WORKFLOW_ONLY
    }
    assert offenders == set()


def test_the_library_runs_without_snakemake_or_the_workflow():
    """The TRL drop-in, the grader and the library's commands, in an interpreter where the workflow's package
    and libraries cannot be imported (as in a venv with only the core dependencies)."""
    blocked = [*WORKFLOW_ONLY, "matplotlib", "seaborn", "scipy"]
    code = (
        f"import sys\nfor m in {blocked!r}: sys.modules[m] = None\n"
        "from cwgrpo.trainer import CWGRPOConfig, CWGRPOTrainer\n"
        "from cwgrpo.grading.scoring import grade\n"
        "assert grade(r'\\boxed{4}', '4') is True\n"
        "from cwgrpo import cli\n"
        "assert 'table' not in cli.COMMANDS and 'evaluate' in cli.COMMANDS\n"
        "for command in ('evaluate', 'grade', 'train'):\n"
        "    try:\n"
        "        cli.main([command, '--help'])\n"
        "    except SystemExit as done:\n"
        "        assert done.code == 0, (command, done.code)\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert "usage: cwgrpo evaluate" in proc.stdout and "usage: cwgrpo grade" in proc.stdout


def test_the_workflow_commands_come_from_the_workflow_package():
    from cwgrpo import cli

    assert set(cli.LIBRARY_COMMANDS) < set(cli.COMMANDS)
    assert {m for m, _ in cli.LIBRARY_COMMANDS.values()} == {
        m for m, _ in cli.COMMANDS.values() if m.startswith("cwgrpo.")
    }
    assert all(
        m.startswith("cwgrpo_workflow.")
        for n, (m, _) in cli.COMMANDS.items()
        if n not in cli.LIBRARY_COMMANDS
    )


def test_the_stage_folders_form_layers():
    """No folder imports one above it, so the stages cannot form a knot again."""
    upward = []
    for rank, folder in enumerate(LAYERS):
        for path in (LIBRARY / folder).rglob("*.py"):
            for name in _imports(path):
                parts = name.split(".")
                if parts[0] == "cwgrpo" and len(parts) > 1 and parts[1] in LAYERS[rank + 1 :]:
                    upward.append(f"{path.relative_to(REPO)} imports {name}")
    assert upward == []
    assert {p.name for p in LIBRARY.iterdir() if (p / "__init__.py").exists()} - set(LAYERS) <= {"resources"}


def test_the_library_keeps_within_its_ceiling():
    lines = sum(len(p.read_text(encoding="utf-8").splitlines()) for p in LIBRARY.rglob("*.py"))
    assert LIBRARY_LINE_BUDGET <= LIBRARY_LINE_CEILING
    assert lines <= LIBRARY_LINE_CEILING, (
        f"cwgrpo/ is {lines:,} lines, over its ceiling of {LIBRARY_LINE_CEILING:,} (budget {LIBRARY_LINE_BUDGET:,})"
    )
