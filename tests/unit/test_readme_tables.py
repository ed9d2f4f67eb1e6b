"""docs/tiny-results/README.md's tiny tables are what docs/tiny-results gives (cwgrpo_workflow.report.readme_tables)."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from cwgrpo_workflow.report.readme_tables import main, render_blocks, update

REPO = Path(__file__).resolve().parents[2]


def test_the_tiny_results_pages_tables_are_generated_from_its_files():
    readme = (REPO / "docs" / "tiny-results" / "README.md").read_text(encoding="utf-8")
    blocks = render_blocks(REPO / "docs" / "tiny-results")
    assert update(readme, blocks, "README.md") == readme, (
        "run: python -m cwgrpo_workflow.report.readme_tables --write"
    )
    base = blocks["tiny-base"].splitlines()
    assert len(base) == 4 and base[2].startswith("| Small (for 1.5B) |")  # two sizes, a number each split
    assert "| 1 | CW-GRPO beats GRPO" in blocks["tiny-claims"]
    # a section after the last claim's (the covariance quantiles) adds nothing to that claim's row
    last = blocks["tiny-claims"].splitlines()[-1]
    assert last.startswith("| 4 |") and last.count("|") == 6, last


def test_a_changed_number_is_found_and_rewritten(tmp_path):
    readme = tmp_path / "README.md"
    text = (REPO / "docs" / "tiny-results" / "README.md").read_text(encoding="utf-8")
    first = render_blocks(REPO / "docs" / "tiny-results")["tiny-base"].splitlines()[2]
    readme.write_text(text.replace(first, first.replace(" |", " 9 |", 1)), encoding="utf-8")
    results = str(REPO / "docs" / "tiny-results")
    assert main(["--results", results, "--readme", str(readme)]) == 1
    assert main(["--results", results, "--readme", str(readme), "--write"]) == 0
    assert readme.read_text(encoding="utf-8") == text


def test_a_missing_block_is_an_error():
    with pytest.raises(ValueError, match=r"^page\.md: .*tiny-rl"):
        update(
            "<!-- generated: tiny-base -->\nx\n<!-- /generated: tiny-base -->\n",
            {"tiny-base": "", "tiny-rl": ""},
            "page.md",
        )


def test_readme_tables_bad_inputs_get_one_line_and_leave_the_readme(tmp_path, capsys):
    readme = tmp_path / "README.md"
    readme.write_text("# no generated blocks\n")
    before = hashlib.sha256(readme.read_bytes()).hexdigest()
    empty = tmp_path / "empty"
    empty.mkdir()
    (empty / "table1.md").write_text("")
    (empty / "claims.md").write_text("")
    cases = {
        "No such file or directory": ["--results", str(tmp_path / "none")],
        "not a table1.md that cwgrpo wrote": ["--results", str(empty)],
        f"{readme}: generated blocks": ["--results", str(REPO / "docs" / "tiny-results")],
    }
    for expected, args in cases.items():
        assert main([*args, "--readme", str(readme), "--write"]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and expected in err[0], (args, err)
    assert hashlib.sha256(readme.read_bytes()).hexdigest() == before
