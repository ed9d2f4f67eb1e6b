"""The docs' tables that the code already says: modules (docs/architecture.md) and commands (docs/usage.md).

Each table sits between ``<!-- generated: NAME -->`` and ``<!-- /generated: NAME -->``. The module table is
each module's docstring summary line, grouped by package in the pipeline's order; the command table is
``cwgrpo.cli.COMMANDS``. ``--check`` exits 1 naming each page that differs; no flag rewrites; either
exits 2 naming a page without its block::

    python docs/tables.py          # rewrite the blocks in place
    python docs/tables.py --check  # tests/unit/test_docs_tables.py
"""

from __future__ import annotations

import argparse
import ast
import re
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO), str(REPO / "workflow")]  # the checkout's packages, also when run by path

from cwgrpo.cli import COMMANDS  # noqa: E402
from cwgrpo_workflow.report.options import markdown_table  # noqa: E402
from cwgrpo_workflow.report.readme_tables import update  # noqa: E402

# Each package's folders in the order of the pipeline; "" is the package's top (the edges), last.
PACKAGES = {
    "cwgrpo": (
        "data",
        "models",
        "train",
        "trainer",
        "weighting",
        "launch",
        "generation",
        "grading",
        "grading.paper_metric",
        "evaluate",
        "",
    ),
    "cwgrpo_workflow": ("report", "dag", ""),
}
ROOTS = {"cwgrpo": REPO / "cwgrpo", "cwgrpo_workflow": REPO / "workflow" / "cwgrpo_workflow"}
PAGES = {"modules": "docs/architecture.md", "commands": "docs/usage.md"}


def summary(path: Path) -> str:
    """A module's docstring summary line as Markdown; a module without one is an error naming it."""
    doc = ast.get_docstring(ast.parse(path.read_text(encoding="utf-8")))
    line = doc.strip().splitlines()[0] if doc else ""
    if not line.endswith((".", "?")):
        shown = path.relative_to(REPO) if path.is_relative_to(REPO) else path
        raise ValueError(f"{shown}: its docstring's first line must be a whole sentence")
    line = re.sub(r":\w+:`~?([^`]+)`", r"`\1`", line).replace("``", "`")
    return line.replace("|", "\\|")


def module_rows(package: Path, top: str = "cwgrpo") -> list[tuple[str, str]]:
    """(dotted name, summary) of every module of the package ``top`` under ``package``, packages first, in
    PACKAGES order."""
    groups: dict[str, list[tuple[str, str]]] = {name: [] for name in PACKAGES[top]}
    for path in sorted(package.rglob("*.py")):
        parts = path.relative_to(package).with_suffix("").parts
        folder = ".".join(parts[:-1])
        if folder not in groups:
            raise ValueError(f"{top}/{folder.replace('.', '/')}: a package docs/tables.py does not order")
        if parts[-1] == "__init__":
            groups[folder].insert(0, (".".join([top, *parts[:-1]]), summary(path)))
        else:
            groups[folder].append((".".join([top, *parts]), summary(path)))
    return [row for name in PACKAGES[top] for row in groups[name]]


def modules_table() -> str:
    rows = []
    for top, package in ROOTS.items():
        for name, text in module_rows(package, top):
            is_package = (package.parent / name.replace(".", "/") / "__init__.py").exists()
            rows.append([f"**`{name}`**" if is_package else f"`{name}`", text])
    return "\n".join(markdown_table(["module", "what it is"], rows)) + "\n"


def commands_table() -> str:
    rows = [[f"`cwgrpo {command}`", f"`{module}`", text] for command, (module, text) in COMMANDS.items()]
    return "\n".join(markdown_table(["command", "module", "what it does"], rows)) + "\n"


def blocks() -> dict[str, str]:
    return {"modules": modules_table(), "commands": commands_table()}


def main(argv: list[str] | None = None, root: Path = REPO) -> int:
    """Rewrite (or with ``--check`` compare) the generated blocks of the pages under ``root``."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="say which pages differ; write nothing")
    args = parser.parse_args(argv)
    stale = []
    try:
        rendered = blocks()
        pages = {name: (root / PAGES[name]).read_text(encoding="utf-8") for name in rendered}
        updated = {name: update(pages[name], {name: rendered[name]}, PAGES[name]) for name in rendered}
    except (OSError, ValueError) as err:
        print(f"docs/tables.py: {err}", file=sys.stderr)
        return 2
    for name, new in updated.items():
        page, old = root / PAGES[name], pages[name]
        if new != old:
            stale.append(PAGES[name])
            if not args.check:
                page.write_text(new, encoding="utf-8")
    if args.check and stale:
        print(
            f"generated tables differ from the code in {', '.join(stale)}: run python docs/tables.py",
            file=sys.stderr,
        )
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
