"""The project's Python by kind at a commit: lines, modules near the size cap, and the arrows between folders.

Reads the commit's own tree (``git ls-tree``/``git show``), so one script measures any two commits alike::

    python benchmarks/code_size.py 0c01888 HEAD      # a Markdown table, one column per commit

Kinds go by folder, wherever a folder lives (``cwgrpo/report`` and ``workflow/cwgrpo_workflow/report`` are
both reports): the method (``weighting``, ``trainer``), grading, the rest of the library, the workflow's own
code, reports and studies, benchmarks, tests. Arrows are imports between the stage folders (a function-level
import counts); a cycle is a set of folders that import each other.
"""

from __future__ import annotations

import argparse
import ast
import subprocess
from collections import defaultdict
from collections.abc import Iterable

PACKAGES = ("cwgrpo", "cwgrpo_workflow")
METHOD = {"weighting", "trainer"}
REPORTS = {"report", "studies"}
WORKFLOW = {"dag", "launch", "train"}
# Stage folders whose imports of each other must form layers.
STAGES = ("data", "grading", "evaluate", "train", "launch", "generation", "models", "trainer", "weighting")


def git(*args: str) -> str:
    return subprocess.run(["git", *args], capture_output=True, text=True, check=True).stdout


def python_files(commit: str) -> dict[str, str]:
    """path -> text of every tracked ``.py`` file at ``commit``."""
    paths = [p for p in git("ls-tree", "-r", "--name-only", commit).splitlines() if p.endswith(".py")]
    return {p: git("show", f"{commit}:{p}") for p in paths}


def folder(path: str) -> tuple[str, str]:
    """(package, first folder inside it) of a module path; ("", "") outside the packages."""
    parts = path.split("/")
    for i, part in enumerate(parts[:-1]):
        if part in PACKAGES:
            inner = parts[i + 1 : -1]
            return part, inner[0] if inner else ""
    return "", ""


def kind(path: str) -> str:
    if path.startswith("tests/"):
        return "tests"
    if path.startswith("studies/") or "/study" in path.removeprefix("benchmarks"):
        return "reports and studies"
    if path.startswith("benchmarks/"):
        return "benchmarks"
    package, sub = folder(path)
    if sub in METHOD:
        return "method"
    if sub == "grading":
        return "grading"
    if sub in REPORTS or path.endswith("doctor.py"):
        return "reports and studies"
    if package == "cwgrpo_workflow" or sub in WORKFLOW or path.startswith("workflow/"):
        return "workflow glue"
    return "library, other" if package == "cwgrpo" else "other"


def imported_folders(text: str) -> set[str]:
    """The stage folders a module imports (``cwgrpo.X...`` or ``cwgrpo_workflow.X...``)."""
    found = set()
    for node in ast.walk(ast.parse(text)):
        names: Iterable[str] = []
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
        elif isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        for name in names:
            parts = name.split(".")
            if parts[0] in PACKAGES and len(parts) > 1:
                found.add(parts[1])
    return found


def arrows(files: dict[str, str]) -> set[tuple[str, str]]:
    edges = set()
    for path, text in files.items():
        package, sub = folder(path)
        if package and sub in STAGES:
            edges |= {(sub, other) for other in imported_folders(text) if other in STAGES and other != sub}
    return edges


def cycles(edges: set[tuple[str, str]]) -> list[list[str]]:
    """Strongly connected sets of two or more folders (Tarjan's algorithm)."""
    graph: dict[str, list[str]] = defaultdict(list)
    for a, b in sorted(edges):
        graph[a].append(b)
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for nxt in graph[node]:
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            group = []
            while True:
                top = stack.pop()
                group.append(top)
                if top == node:
                    break
            if len(group) > 1:
                found.append(sorted(group))

    for node in sorted({n for edge in edges for n in edge}):
        if node not in index:
            visit(node)
    return sorted(found)


def measure(commit: str) -> dict[str, str]:
    files = python_files(commit)
    lines = {path: text.count("\n") for path, text in files.items()}
    by_kind: dict[str, int] = defaultdict(int)
    for path, n in lines.items():
        by_kind[kind(path)] += n
    library = sum(n for p, n in lines.items() if p.startswith("cwgrpo/"))
    outside_tests = sum(n for p, n in lines.items() if not p.startswith("tests/"))
    near_cap = sorted(p for p, n in lines.items() if 360 <= n <= 400 and not p.startswith("tests/"))
    edges = arrows(files)
    rows = {
        "`cwgrpo/` modules / lines": f"{sum(p.startswith('cwgrpo/') for p in lines)} / {library:,}",
        "method (weighting + trainer) / grading": f"{by_kind['method']:,} / {by_kind['grading']:,}",
        "library, other": f"{by_kind['library, other']:,}",
        "workflow glue (dag, train, launch, workflow package)": f"{by_kind['workflow glue']:,}",
        "reports and studies (report, doctor, studies)": f"{by_kind['reports and studies']:,}",
        "benchmarks": f"{by_kind['benchmarks']:,}",
        "other Python outside tests": f"{by_kind['other']:,}",
        "**all Python outside `tests/`**": f"**{outside_tests:,}**",
        "tests": f"{by_kind['tests']:,}",
        "modules at 360–400 lines": str(len(near_cap)),
        "arrows between stage folders": str(len(edges)),
        "cycles": "; ".join(" ↔ ".join(c) for c in cycles(edges)) or "none",
    }
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("commits", nargs="+", help="commits to measure (e.g. 0c01888 HEAD)")
    args = parser.parse_args(argv)
    columns = {c: measure(c) for c in args.commits}
    names = [git("rev-parse", "--short", c).strip() for c in args.commits]
    print("| | " + " | ".join(f"`{n}`" for n in names) + " |")
    print("|---|" + "---|" * len(names))
    for row in next(iter(columns.values())):
        print(f"| {row} | " + " | ".join(columns[c][row] for c in args.commits) + " |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
