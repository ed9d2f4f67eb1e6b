"""Every entry point of the package (each ``python -m cwgrpo....`` module and each console script) goes
through ``cwgrpo.cli.run_checked``, so none writes over what it reads.

The entry points are found in the source (every module with ``if __name__ == "__main__"``, every
``__main__.py``, every ``[project.scripts]`` target), so a new one must be listed here: either with a case
whose output is one of its inputs, or as one that writes no file a user names.
"""

from __future__ import annotations

import ast
import importlib
import importlib.util
import shutil
import tomllib
from collections.abc import Callable
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
# Each package and the folder its dotted names start from.
PACKAGES = {REPO / "cwgrpo": REPO, REPO / "workflow" / "cwgrpo_workflow": REPO / "workflow"}

WRITES_NO_NAMED_FILE = {
    "cwgrpo.__main__": "the `cwgrpo` command line; every command is walked in test_no_overwrite.py",
    "cwgrpo.cli": "the `cwgrpo` command line; every command is walked in test_no_overwrite.py",
    "cwgrpo.launch.multinode": "takes GPU positions and a command to exec; names no file",
    "cwgrpo.launch.workers": "accelerate's launcher tied to its parent; the training command it starts is `cwgrpo`",
    "cwgrpo.grading.paper_metric.worker": "reads stdin, writes stdout",
    "cwgrpo.train.probe": "the dry run's checks of training options and rewards in the jobs' Python: reads stdin, writes stdout",
}


def _study_pair(tmp: Path) -> tuple[list[str], Path]:
    """``--figure`` naming the first study's study.json (the PNG would be written over it)."""
    for folder in ("results", "results-regime"):
        (tmp / "docs/study" / folder).mkdir(parents=True)
        shutil.copy(REPO / "docs/study" / folder / "study.json", tmp / "docs/study" / folder)
    shutil.copy(REPO / "docs/study/README.md", tmp / "docs/study/README.md")
    return ["--write", "--figure", "docs/study/results/study.json"], tmp / "docs/study/results/study.json"


def _readme_tables(tmp: Path) -> tuple[list[str], Path]:
    """``--readme`` naming the run's claims.md, which the blocks are rendered from."""
    for name in ("table1.md", "claims.md"):
        shutil.copy(REPO / "docs/tiny-results" / name, tmp / name)
    return ["--results", str(tmp), "--readme", str(tmp / "claims.md"), "--write"], tmp / "claims.md"


CASES: dict[str, Callable[[Path], tuple[list[str], Path]]] = {
    "cwgrpo_workflow.report.study_pair": _study_pair,
    "cwgrpo_workflow.report.readme_tables": _readme_tables,
}


def _is_main_guard(node: ast.AST) -> bool:
    return (
        isinstance(node, ast.If)
        and isinstance(node.test, ast.Compare)
        and isinstance(node.test.left, ast.Name)
        and node.test.left.id == "__name__"
        and any(isinstance(c, ast.Constant) and c.value == "__main__" for c in node.test.comparators)
    )


def entry_points() -> set[str]:
    """Dotted names of every runnable module of the package and of every console script's module."""
    found = set()
    for package, root in PACKAGES.items():
        for path in package.rglob("*.py"):
            name = ".".join(path.relative_to(root).with_suffix("").parts)
            tree = ast.parse(path.read_text(encoding="utf-8"))
            if path.name == "__main__.py" or any(_is_main_guard(n) for n in tree.body):
                found.add(name)
    scripts = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["project"]["scripts"]
    return found | {target.split(":")[0] for target in scripts.values()}


def test_every_entry_point_is_listed_here():
    assert entry_points() == set(WRITES_NO_NAMED_FILE) | set(CASES)


def _calls_run_checked(module: str) -> bool:
    tree = ast.parse(Path(importlib.util.find_spec(module).origin).read_text(encoding="utf-8"))
    return any(
        isinstance(n, ast.Call) and getattr(n.func, "id", getattr(n.func, "attr", None)) == "run_checked"
        for n in ast.walk(tree)
    )


@pytest.mark.parametrize("module", sorted(CASES))
def test_every_entry_point_refuses_an_output_that_is_one_of_its_inputs(module, tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    argv, source = CASES[module](tmp_path)
    before = source.read_bytes()
    assert importlib.import_module(module).main(argv) == 2
    err = capsys.readouterr().err
    assert "would overwrite the input" in err and err.count("\n") == 1, err
    assert source.read_bytes() == before
    assert _calls_run_checked(module)


def test_study_pair_refuses_a_figure_whose_pdf_is_the_figure(tmp_path, capsys, monkeypatch):
    """``--figure x.pdf``: the PDF beside the PNG would be the PNG itself."""
    from cwgrpo_workflow.report import study_pair

    monkeypatch.chdir(tmp_path)
    argv, _ = _study_pair(tmp_path)
    assert study_pair.main([*argv[:2], "regimes.pdf"]) == 2
    assert "are one file" in capsys.readouterr().err
    assert not (tmp_path / "regimes.pdf").exists()


def test_an_entry_point_reports_a_missing_input_in_one_line(tmp_path, capsys, monkeypatch):
    """Outside the repository the first study's file is missing: one line and status 2, no traceback."""
    from cwgrpo_workflow.report import study_pair

    monkeypatch.chdir(tmp_path)
    assert study_pair.main([]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "missing file: docs/study/results/study.json" in err, err
