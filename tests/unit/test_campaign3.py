"""Third fault campaign (issue 25), the report side: the sample browser, the table's outputs, cwgrpo plan and
the README's generated tables, tried as a hostile user would. Each test failed before its fix."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

from cwgrpo import cli
from cwgrpo.report import readme_tables
from tests.unit.test_report_table import TINY, make_results, out_flags
from tests.unit.test_samples_page import row, write_cell

REPO = Path(__file__).resolve().parents[2]


def _samples(summary, out, *more):
    return cli.main(["samples", "--summaries", str(summary), *map(str, more), "--out-html", str(out)])


# -- cwgrpo samples ---------------------------------------------------------------------------------------
def test_samples_a_line_with_a_lone_surrogate_is_named_and_the_rest_shown(tmp_path):
    rows = [row(0, strict=True, paper=False, completion="bad \ud800 text"), row(1, strict=False, paper=False)]
    summary = write_cell(tmp_path / "cell", rows)
    out = tmp_path / "page.html"
    assert _samples(summary, out) == 0
    page = out.read_text(encoding="utf-8")
    assert "syn_math500.graded.jsonl:1</code>: text that is not valid Unicode" in page
    assert page.count('<article class="sample"') == 1  # the good line


def test_samples_a_folder_whose_name_is_not_utf8_still_gives_the_page(tmp_path):
    folder = tmp_path / os.fsdecode(b"run-\xff")  # Python reads such a name as a lone surrogate
    summary = write_cell(folder, [row(0, strict=True, paper=False)])
    out = tmp_path / "page.html"
    assert _samples(summary, out) == 0
    assert "run-\\udcff" in out.read_text(encoding="utf-8")  # shown as an escape


def test_samples_steps_that_only_look_like_numbers_sort_after_the_numbers(tmp_path):
    summaries = []
    for i, step in enumerate(["--5", "²", "4"]):
        summary = write_cell(tmp_path / f"c{i}", [row(0, strict=True, paper=False)])
        data = json.loads(summary.read_text())
        data["tags"]["step"] = step
        summary.write_text(json.dumps(data))
        summaries.append(summary)
    out = tmp_path / "page.html"
    assert _samples(*summaries[:1], out, *summaries[1:]) == 0
    page = out.read_text(encoding="utf-8")
    assert page.index('data-step="4"') < page.index('data-step="--5"')


def test_samples_never_writes_over_the_benchmark_file_it_reads(tmp_path, capsys):
    bench = tmp_path / "bench.jsonl"
    bench.write_text(json.dumps({"id": "p0", "problem": "2+2"}) + "\n")
    before = bench.read_bytes()
    summary = write_cell(tmp_path / "cell", [row(0, strict=True, paper=False)], data=bench)
    assert _samples(summary, bench) == 2
    assert bench.read_bytes() == before
    assert "would overwrite the input" in capsys.readouterr().err


def test_samples_a_missing_summary_is_an_error_before_anything_is_written(tmp_path, capsys):
    good = write_cell(tmp_path / "cell", [row(0, strict=True, paper=False)])
    out = tmp_path / "page.html"
    assert _samples(good, out, tmp_path / "typo.summary.json") == 2
    assert not out.exists()
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].endswith(f"missing file: {tmp_path / 'typo.summary.json'}")


def test_samples_a_summary_named_twice_is_one_cell(tmp_path):
    summary = write_cell(tmp_path / "cell", [row(0, strict=True, paper=False)])
    out = tmp_path / "page.html"
    assert _samples(summary, out, tmp_path / "cell" / ".." / "cell" / summary.name) == 0
    assert out.read_text(encoding="utf-8").count('<section class="cell"') == 1


# -- cwgrpo table's outputs (and every command's) --------------------------------------------------------
def _table_args(tmp_path):
    paths = make_results(tmp_path / "r")
    cfg = tmp_path / "tiny.yaml"
    cfg.write_text(json.dumps(TINY))
    flags = out_flags(tmp_path / "f" / "table1.pdf", tmp_path / "res")
    return ["table", "--summaries", *map(str, paths), *flags, "--config", str(cfg), "--set", "step=100"]


def test_two_outputs_naming_one_file_are_refused_before_anything_is_written(tmp_path, capsys):
    pdf = tmp_path / "f" / "table1.pdf"
    args = [*_table_args(tmp_path), "--out-avg-pdf", str(pdf), "--out-avg-png", str(tmp_path / "a.png")]
    assert cli.main(args) == 2
    assert "are one file" in capsys.readouterr().err
    assert not pdf.exists() and not (tmp_path / "res").exists()


def test_an_output_that_is_a_folder_is_refused_before_anything_is_written(tmp_path, capsys):
    folder = tmp_path / "folder"
    folder.mkdir()
    args = [*_table_args(tmp_path), "--out-avg-pdf", str(folder), "--out-avg-png", str(tmp_path / "a.png")]
    assert cli.main(args) == 2
    assert f"--out-avg-pdf {folder}: a folder" in capsys.readouterr().err
    assert not (tmp_path / "res").exists()


# -- cwgrpo plan -----------------------------------------------------------------------------------------
def test_plan_names_what_the_schema_refuses_in_a_preset(tmp_path, capsys):
    preset = tmp_path / "odd.yaml"
    preset.write_text("name: p1\nkind: paper\nsizes: {1.5b: {}}\n")  # no methods
    assert cli.main(["plan", "--configfile", str(preset)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "methods: missing (required)" in err[0] and "data: missing (required)" in err[0]


def test_plan_a_folder_as_configfile_is_called_a_folder(tmp_path, capsys):
    assert cli.main(["plan", "--configfile", str(tmp_path)]) == 2
    assert f"--configfile {tmp_path}: a folder, not a file" in capsys.readouterr().err


# -- python -m cwgrpo.report.readme_tables ---------------------------------------------------------------
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
        "generated blocks in the README": ["--results", str(REPO / "docs" / "tiny-results")],
    }
    for expected, args in cases.items():
        assert readme_tables.main([*args, "--readme", str(readme), "--write"]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and expected in err[0], (args, err)
    assert hashlib.sha256(readme.read_bytes()).hexdigest() == before
