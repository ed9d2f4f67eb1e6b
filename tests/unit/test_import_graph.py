"""No import cycle among cwgrpo's modules.

The graph is read from the source with ``ast``, never by importing: every ``import``/``from ... import``
statement anywhere in a module counts, at the top level, inside functions and methods (the package
imports heavy libraries lazily, so most of its imports are there), and under ``if TYPE_CHECKING:`` (a
type-only import still ties two modules for a reader and a type checker). An edge goes to the module
named: ``from cwgrpo import paper`` to ``cwgrpo.paper`` when that is a module, else to ``cwgrpo``;
the parent packages that Python initialises on the way are not edges (none of cwgrpo's ``__init__``
modules imports a submodule at import time). A module importing its own package's ``__init__`` (for
``__version__``) is no cycle unless that ``__init__`` imports it back, which would show as an edge.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable, Mapping
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "cwgrpo"


def module_files(root: Path) -> dict[str, Path]:
    """Dotted module name -> file, for every ``.py`` file under the package folder ``root``."""
    out = {}
    for path in sorted(root.rglob("*.py")):
        parts = path.relative_to(root.parent).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        out[name] = path
    return out


def _absolute(module: str, is_package: bool, node: ast.ImportFrom) -> str:
    """The absolute module a ``from`` import names (``from .x import y`` inside ``module``)."""
    if not node.level:
        return node.module or ""
    base = module.split(".") if is_package else module.split(".")[:-1]
    base = base[: len(base) - (node.level - 1)]
    return ".".join([*base, *([node.module] if node.module else [])])


def imported_modules(module: str, path: Path, modules: Iterable[str]) -> dict[str, int]:
    """{module among ``modules`` that the file imports: first line that does}, wherever the import stands."""
    known = set(modules)

    def owner(name: str) -> str:  # the deepest known module of a dotted name (`cwgrpo.x.NAME` -> cwgrpo.x)
        while name and name not in known:
            name = name.rpartition(".")[0]
        return name

    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    is_package = path.name == "__init__.py"
    found: dict[str, int] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            targets = [owner(alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            source = _absolute(module, is_package, node)
            targets = [owner(f"{source}.{alias.name}") for alias in node.names]  # a submodule, or source
        else:
            continue
        for target in targets:
            if target and target != module and (target not in found or node.lineno < found[target]):
                found[target] = node.lineno
    return dict(sorted(found.items()))


def import_graph(root: Path) -> dict[str, dict[str, int]]:
    """module -> {module of the package it imports: first line that does}."""
    files = module_files(root)
    return {name: imported_modules(name, path, files) for name, path in files.items()}


def cycles(graph: Mapping[str, Iterable[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan), each sorted; sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in graph.get(node, ()):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return sorted(found)


def _describe(graph: Mapping[str, Mapping[str, int]], component: list[str], files: Mapping[str, Path]) -> str:
    members = set(component)
    edges = [
        f"  {a} -> {b} ({files[a].relative_to(PACKAGE.parent)}:{line})"
        for a in component
        for b, line in sorted(graph[a].items())
        if b in members
    ]
    return f"{{{', '.join(component)}}}:\n" + "\n".join(edges)


def test_cwgrpo_has_no_import_cycle():
    graph = import_graph(PACKAGE)
    found = cycles(graph)
    files = module_files(PACKAGE)
    assert not found, "import cycles among cwgrpo's modules:\n" + "\n".join(
        _describe(graph, c, files) for c in found
    )


def test_the_checker_finds_function_level_and_type_only_cycles(tmp_path):
    """A cycle closed by a function-level import and a TYPE_CHECKING import is found; the graph holds
    the package's real edges (so an empty result above is not an empty graph)."""
    pkg = tmp_path / "pkg"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "__init__.py").write_text("__version__ = '1'\n")
    (pkg / "sub" / "__init__.py").write_text("")
    (pkg / "a.py").write_text("def f():\n    from pkg.sub import b\n")
    (pkg / "sub" / "b.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from ..a import f\nfrom pkg import __version__\n"
    )
    (pkg / "c.py").write_text("import pkg.a\n")
    graph = import_graph(pkg)
    assert graph["pkg.a"] == {"pkg.sub.b": 2}
    assert graph["pkg.sub.b"] == {"pkg.a": 3, "pkg": 4}
    assert cycles(graph) == [["pkg.a", "pkg.sub.b"]]
    real = import_graph(PACKAGE)
    assert "cwgrpo.weighting" in real["cwgrpo.trainer.grpo"]
    assert "cwgrpo.configs" in real["cwgrpo.train.run"]
