"""The docs' module and command tables are what docs/tables.py generates from the code (module docstrings,
cwgrpo.cli.COMMANDS): a module added, moved or redescribed without regenerating them fails here."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SPEC = importlib.util.spec_from_file_location("docs_tables", REPO / "docs" / "tables.py")
tables = importlib.util.module_from_spec(SPEC)
SPEC.loader.exec_module(tables)


@pytest.mark.parametrize("name", sorted(tables.PAGES))
def test_generated_table_matches_the_code(name):
    page = REPO / tables.PAGES[name]
    text = page.read_text(encoding="utf-8")
    assert tables.update(text, {name: tables.blocks()[name]}, page) == text, (
        f"{tables.PAGES[name]}: its generated {name} table differs from the code; run python docs/tables.py"
    )


def test_every_module_and_command_is_in_a_table():
    modules = {name for top, root in tables.ROOTS.items() for name, _ in tables.module_rows(root, top)}
    files = {p for root in tables.ROOTS.values() for p in root.rglob("*.py")}
    assert len(modules) == len(files)
    assert {"cwgrpo.trainer.grpo", "cwgrpo.__main__", "cwgrpo_workflow.dag.plan"} <= modules
    commands = tables.commands_table()
    assert all(f"`cwgrpo {c}`" in commands for c in tables.COMMANDS)


def test_a_module_without_a_summary_sentence_is_refused(tmp_path):
    bad = tmp_path / "mod.py"
    bad.write_text('"""A summary that runs on\nto the next line."""\n', encoding="utf-8")
    with pytest.raises(ValueError, match="whole sentence"):
        tables.summary(bad)


def test_check_names_the_stale_page_and_the_command(tmp_path, capsys):
    for rel in tables.PAGES.values():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        text = (REPO / rel).read_text(encoding="utf-8")
        (tmp_path / rel).write_text(
            text.replace("| `cwgrpo.cli` |", "| `cwgrpo.cli_old` |"), encoding="utf-8"
        )
    assert tables.main(["--check"], root=tmp_path) == 1
    err = capsys.readouterr().err
    assert "docs/architecture.md" in err and "python docs/tables.py" in err
    assert tables.main([], root=tmp_path) == 0 and tables.main(["--check"], root=tmp_path) == 0


def test_a_page_without_its_block_is_named_in_one_line(tmp_path, capsys):
    for rel in tables.PAGES.values():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text((REPO / rel).read_text(encoding="utf-8"), encoding="utf-8")
    page = tmp_path / tables.PAGES["modules"]
    before = page.read_text(encoding="utf-8")
    page.write_text(before.replace("<!-- /generated: modules -->", ""), encoding="utf-8")
    assert tables.main([], root=tmp_path) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("docs/tables.py: docs/architecture.md: generated blocks"), err
    assert "README" not in err[0]
