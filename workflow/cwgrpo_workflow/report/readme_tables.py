"""The tiny-preset tables of ``docs/tiny-results/README.md``, generated from the run copied there.

That page holds each table between ``<!-- generated: NAME -->`` and ``<!-- /generated: NAME -->``; this
module renders them from that run's ``table1.md`` and ``claims.md`` (what ``cwgrpo table`` and ``cwgrpo
claims`` wrote), so that every number there is one of the run's. ``--check`` (the default) says whether
the page is what the files give; ``--write`` rewrites the blocks in place::

    python -m cwgrpo_workflow.report.readme_tables --results docs/tiny-results --readme docs/tiny-results/README.md --write
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

from cwgrpo.io import write_text
from cwgrpo_workflow.report.options import markdown_table

REPORTS = ("table1.md", "claims.md")  # what the blocks are rendered from
BLOCK = re.compile(
    r"(<!-- generated: (?P<name>[\w-]+) -->\n)(?P<body>.*?)(<!-- /generated: (?P=name) -->)", re.S
)


def markdown_rows(text: str) -> list[list[str]]:
    """The cells of every Markdown table row in ``text`` (separator rows left out), stripped."""
    rows = []
    for line in text.splitlines():
        if line.startswith("|") and not re.fullmatch(r"\|[-:| ]+\|", line):
            rows.append([cell.strip() for cell in line.strip()[1:-1].split(" | ")])
    return rows


def _plain(cell: str) -> str:
    return cell.replace("**", "")


def _table(header: list[str], rows: list[list[str]], align: str = "r") -> str:
    """The first column left-aligned, the others as ``align`` says (:func:`markdown_table`)."""
    return "\n".join(markdown_table(header, rows, "l" + align * (len(header) - 1))) + "\n"


def table1_blocks(table1_md: str) -> dict[str, str]:
    """``tiny-base``: each size's base model per benchmark (no interval); ``tiny-rl``: each method's Avg
    with its interval at the Table 1 step, one row per size."""
    header, *rows = markdown_rows(table1_md)
    benchmarks = header[2:-2]
    sizes: dict[str, list[list[str]]] = {}
    size = ""
    for row in rows:
        size = row[0] or size
        sizes.setdefault(size, []).append(row)
    base = [[s, *(_plain(c).split(" ± ")[0] for c in rs[0][2:-1])] for s, rs in sizes.items()]
    methods = [r[1] for r in next(iter(sizes.values()))[1:]]
    rl = [[s, *(_plain(r[-2]) for r in rs[1:])] for s, rs in sizes.items()]
    return {
        "tiny-base": _table(["size", *benchmarks, "Avg"], base),
        "tiny-rl": _table(["size", *methods], rl),
    }


def claims_block(claims_md: str) -> str:
    """``tiny-claims``: per claim, each size's effect with its interval, and the overall verdict."""
    overview = [r for r in markdown_rows(claims_md) if len(r) == 3 and r[0].isdigit()]
    sections = re.split(r"^## (.*)$", claims_md, flags=re.M)  # each section ends at the next heading
    per_claim = {
        m.group(1): markdown_rows(sections[i + 1])[1:]
        for i in range(1, len(sections) - 1, 2)
        if (m := re.match(r"Claim (\d+):", sections[i]))
    }
    sizes = [r[0] for r in next(iter(per_claim.values()))]
    rows = []
    for number, title, verdict in overview:
        cells = [f"{r[1]} {r[2]}" if r[2].startswith("[") else r[1] for r in per_claim[number]]
        rows.append([number, title, *cells, verdict])
    return _table(["#", "claim", *sizes, "verdict"], rows, align="l")


def render_blocks(results: Path) -> dict[str, str]:
    """Every generated block of the page from the run in ``results`` (its table1.md and claims.md)."""
    blocks = {}
    for name, render in zip(REPORTS, (table1_blocks, claims_block), strict=True):
        text = (results / name).read_text(encoding="utf-8")
        try:
            rendered = render(text)
        except (ValueError, IndexError, KeyError, StopIteration) as err:  # not the file the report wrote
            raise ValueError(
                f"{results / name}: not a {name} that cwgrpo wrote ({type(err).__name__})"
            ) from None
        blocks |= rendered if isinstance(rendered, dict) else {"tiny-claims": rendered}
    return blocks


def update(text: str, blocks: dict[str, str], page: str | Path) -> str:
    """``text`` (of the file ``page``) with each generated block replaced; a block the text lacks, or one it
    names that ``blocks`` lacks, is an error naming ``page`` (a renamed marker would leave stale numbers)."""
    found = {m.group("name") for m in BLOCK.finditer(text)}
    if found != set(blocks):
        raise ValueError(
            f"{page}: generated blocks {sorted(found)} != those rendered {sorted(blocks)}; "
            "mark each with <!-- generated: NAME --> and <!-- /generated: NAME -->"
        )
    return BLOCK.sub(lambda m: m.group(1) + blocks[m.group("name")] + m.group(4), text)


OUTPUTS = ("readme",)  # read and rewritten in place
NAMED_INPUT_FOLDERS = ("results",)  # only its two reports are read (file_arguments); the README may sit in it


def file_arguments(args: argparse.Namespace) -> tuple[list[Path], list[Path]]:
    """The run's two reports, read: the README may not be one of them (``cwgrpo.cli``'s check)."""
    return [args.results / name for name in REPORTS], []


def rewrite(page: Path, blocks: dict[str, str], write: bool, differs: str) -> int:
    """``page`` with its generated blocks replaced: written with ``write``, else 1 (``differs`` on stderr)
    where the page is not what ``blocks`` give. A missing or foreign file: one line, the page untouched."""
    text = page.read_text(encoding="utf-8")
    new = update(text, blocks, page)
    if write:
        write_text(page, new)
    elif new != text:
        print(differs, file=sys.stderr)
        return 1
    return 0


def run(args: argparse.Namespace) -> int:
    differs = f"{args.readme}: its tiny tables differ from {args.results}; run with --write"
    return rewrite(args.readme, render_blocks(args.results), args.write, differs)


def main(argv: list[str] | None = None) -> int:
    from cwgrpo.cli import run_checked

    parser = argparse.ArgumentParser(prog="readme_tables", description=__doc__.split("\n\n")[0])
    parser.add_argument("--results", type=Path, default=Path("docs/tiny-results"))
    parser.add_argument("--readme", type=Path, default=Path("docs/tiny-results/README.md"))
    parser.add_argument("--write", action="store_true", help="rewrite the page's blocks in place")
    return run_checked(sys.modules[__name__], parser, argv, run)


if __name__ == "__main__":
    sys.exit(main())
