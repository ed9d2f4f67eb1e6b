"""Unit tests of ``cwgrpo table`` (cwgrpo_workflow.report.table) and the loaders/statistics it uses.

Every input is a small evaluation summary written by hand into ``tmp_path``; expected numbers are
computed by hand in the tests (t quantile t_{0.975, 2} = 4.302652729911275).
"""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

import pandas as pd
import pytest

from cwgrpo.cli import main
from cwgrpo.io import ResultFileError
from cwgrpo.stats import mean_ci, seed_effect
from cwgrpo_workflow.report.load import load_reported, load_summaries, summaries_frame
from cwgrpo_workflow.report.options import TableConfig
from cwgrpo_workflow.report.table import build_table1, write_table
from tests.hand import T975_2, t_interval_3

TINY = {
    "kind": "tiny",
    "methods": ["base", "grpo", "clip_cov", "cw_grpo"],
    "benchmark_display": {"syn_math500": "Syn-L1 (≈MATH-500)", "syn_olympiad": "Syn-L3 (≈OlympiadBench)"},
    "benchmark_mirrors": {"syn_math500": "math500", "syn_olympiad": "olympiadbench"},
    "size_display": {"small": "Tiny-S (≈1.5B)"},
}


def write_summary(root: Path, size, method, seed, step, benchmark, acc, k=1, se=None, ci=None) -> Path:
    path = root / "eval" / size / method / f"seed{seed}" / f"step{step}" / f"{benchmark}.summary.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    summary = {
        "benchmark": benchmark,
        "tags": {"size": size, "method": method, "seed": seed, "step": step},
        "n_problems": 100,
        "k": k,
        "pass1": acc,
        "avg_k": acc,
        "avg_k_se": se,
        "avg_k_ci95": ci,
        "n_samples": 100 * k,
        "n_truncated": 0,
        "n_unscorable": 0,
        "settings": {"backend": "transformers"},
        "provenance": {"version": "0.1.0", "git": {"commit": "0123456789abcdef", "dirty": False}},
        "config_hash": "feedbeef",
    }
    path.write_text(json.dumps(summary))
    return path


# Accuracies by (method, seed) -> (syn_math500, syn_olympiad); base has one seed at step 0.
VALUES = {
    ("base", 0): (0.60, 0.20),
    ("grpo", 0): (0.70, 0.30),
    ("grpo", 1): (0.72, 0.34),
    ("grpo", 2): (0.74, 0.26),
    ("clip_cov", 0): (0.71, 0.32),
    ("clip_cov", 1): (0.73, 0.30),
    ("clip_cov", 2): (0.72, 0.31),
    ("cw_grpo", 0): (0.80, 0.31),
    ("cw_grpo", 1): (0.84, 0.33),
    ("cw_grpo", 2): (0.88, 0.29),
}


def make_results(root: Path, values=VALUES, size="small", step=100) -> list[Path]:
    paths = []
    for (method, seed), accs in values.items():
        s = 0 if method == "base" else step
        for bench, acc in zip(("syn_math500", "syn_olympiad"), accs, strict=True):
            paths.append(write_summary(root, size, method, seed, s, bench, acc))
    return paths


FILE_NAMES = {
    "csv": "table1.csv",
    "tex": "table1.tex",
    "md": "table1.md",
    "reported_csv": "reported_vs_ours.csv",
    "reported_md": "reported_vs_ours.md",
    "sensitivity_csv": "metric_sensitivity.csv",
    "sensitivity_md": "metric_sensitivity.md",
    "provenance": "table1.provenance.json",
}


def outputs(pdf: Path, out_dir: Path) -> dict[str, Path]:
    """The table's output paths: ``pdf`` and the usual file names in ``out_dir``."""
    return {"pdf": pdf, **{name: out_dir / file for name, file in FILE_NAMES.items()}}


def out_flags(pdf: Path, out_dir: Path) -> list[str]:
    return [
        a
        for name, path in outputs(pdf, out_dir).items()
        for a in (f"--out-{name.replace('_', '-')}", str(path))
    ]


def cfg(**kw) -> TableConfig:
    return TableConfig(**{**TINY, **kw})


@pytest.fixture(scope="module")
def tiny_out(tmp_path_factory) -> dict[str, Path]:
    """Every output of one ``write_table`` run on VALUES (drawing the PDF takes a second or two)."""
    root = tmp_path_factory.mktemp("tiny")
    return write_table(
        cfg(), make_results(root / "r"), outputs(root / "figures" / "table1.pdf", root / "out")
    )


def cell(cells: pd.DataFrame, method: str, benchmark: str, size: str = "small") -> pd.Series:
    sel = cells[(cells["size"] == size) & (cells["method"] == method) & (cells["benchmark"] == benchmark)]
    assert len(sel) == 1
    return sel.iloc[0]


# -- statistics --------------------------------------------------------------------------------------
def test_mean_ci_three_seeds_by_hand():
    m, lo, hi = mean_ci([0.80, 0.84, 0.88])
    half = T975_2 * 0.04 / math.sqrt(3)  # sd of (0.80, 0.84, 0.88) is 0.04
    assert m == pytest.approx(0.84)
    assert (lo, hi) == pytest.approx((0.84 - half, 0.84 + half))


def test_mean_ci_one_seed_has_no_interval():
    m, lo, hi = mean_ci([0.5])
    assert m == 0.5 and math.isnan(lo) and math.isnan(hi)


def test_seed_effect_paired_by_seed():
    eff = seed_effect({0: 0.53, 1: 0.54, 2: 0.55}, {0: 0.50, 1: 0.50, 2: 0.50})
    half = T975_2 * 0.01 / math.sqrt(3)
    assert eff.paired and eff.n == 3
    assert (eff.mean, eff.lo, eff.hi) == pytest.approx((0.04, 0.04 - half, 0.04 + half))


def test_seed_effect_unpaired_single_seed_has_no_ci():
    eff = seed_effect({0: 0.6}, {0: 0.5, 1: 0.7, 2: 0.6})
    assert not eff.paired and not eff.has_ci
    assert eff.mean == pytest.approx(0.0)


# -- names -------------------------------------------------------------------------------------------
def test_stand_in_names_say_what_they_mirror():
    c = TableConfig(
        kind="tiny",
        benchmark_display={"syn_math500": "Syn-L1", "syn_amc23": "Syn-L2 (≈AMC23)"},
        benchmark_mirrors={"syn_math500": "math500", "syn_amc23": "amc23"},
        size_display={"large": "Large (for 7B)"},
    )
    assert c.benchmark_name("syn_math500") == "Syn-L1 (≈MATH-500)"
    assert c.benchmark_name("syn_amc23") == "Syn-L2 (≈AMC23)"  # already says it
    assert c.benchmark_name("math500") == "MATH-500"  # the paper's own benchmark
    assert c.size_name("small") == "small (≈1.5B)" and c.size_name("large") == "Large (for 7B)"
    assert c.size_name("7b") == "7B"


def with_names(path: Path, display: str | None, mirror: str | None) -> Path:
    """A summary as `evaluate` writes it from a prepared file: the manifest's names carried along."""
    summary = json.loads(path.read_text())
    path.write_text(json.dumps(summary | {"benchmark_display": display, "benchmark_mirror": mirror}))
    return path


def test_the_report_names_and_places_benchmarks_from_the_summaries(tmp_path):
    """Names and mirrors come with the data; the options override them benchmark by benchmark."""

    def summary(benchmark: str, acc: float) -> Path:
        return write_summary(tmp_path, "small", "grpo", 0, 8, benchmark, acc)

    paths = [
        with_names(summary("syn_math500", 0.5), "Syn-L1 (≈MATH-500)", "math500"),
        with_names(summary("syn_amc23", 0.4), "Syn-L2 (≈AMC23)", "amc23"),
        with_names(summary("champ", 0.1), "CHAMP", None),
        summary("own", 0.3),  # written before summaries carried names
    ]
    c = TableConfig(
        kind="tiny", benchmark_display={"syn_amc23": "Level 2"}, benchmark_mirrors={"own": "aime24"}
    )
    frame = load_summaries(paths, c)
    assert c.benchmark_name("syn_math500") == "Syn-L1 (≈MATH-500)" and c.mirror("syn_math500") == "math500"
    assert c.benchmark_name("syn_amc23") == "Level 2 (≈AMC23)"  # the option wins, the data's mirror stays
    assert c.benchmark_name("champ") == "CHAMP" and c.mirror("champ") is None
    assert c.benchmark_name("own") == "own (≈AIME24)"
    assert c.order_benchmarks(frame["benchmark"]) == ["own", "syn_math500", "syn_amc23", "champ"]


def test_summaries_that_disagree_on_a_benchmarks_names_are_an_error(tmp_path):
    a = with_names(
        write_summary(tmp_path / "a", "small", "grpo", 0, 8, "syn_math500", 0.5), "Syn-L1", "math500"
    )
    b = with_names(
        write_summary(tmp_path / "b", "small", "grpo", 1, 8, "syn_math500", 0.5), "Syn-L1", "amc23"
    )
    with pytest.raises(
        ResultFileError, match="'syn_math500' disagree on benchmark_mirror: \\['amc23', 'math500'\\]"
    ):
        load_summaries([a, b], TableConfig(kind="tiny"))
    c = with_names(write_summary(tmp_path / "c", "small", "grpo", 0, 8, "x", 0.5), "X", "gsm8k")
    with pytest.raises(
        ResultFileError, match=re.escape("benchmark_mirror {'x': 'gsm8k'} is not among the paper's")
    ):
        load_summaries([c], TableConfig(kind="tiny"))


# -- Table 1 -----------------------------------------------------------------------------------------
def test_table_csv_values_equal_inputs(tmp_path):
    values = {k: v for k, v in VALUES.items() if k[1] == 0}  # one seed each: cells are the inputs
    values[("grpo", 0)] = (0.123456789012345, 0.987654321098765)
    paths = make_results(tmp_path / "r", values)
    out = write_table(cfg(), paths, outputs(tmp_path / "fig" / "table1.pdf", tmp_path / "out"))
    csv = pd.read_csv(out["csv"])
    for (method, _), accs in values.items():
        for bench, acc in zip(("syn_math500", "syn_olympiad"), accs, strict=True):
            assert cell(csv, method, bench)["accuracy"] == acc  # exact, not approx
        assert cell(csv, method, "avg")["accuracy"] == pytest.approx(sum(accs) / 2)


def test_table_mean_ci_three_seeds(tmp_path):
    cells, _ = build_table1(summaries_frame(make_results(tmp_path)), cfg())
    c = cell(cells, "cw_grpo", "syn_math500")  # seeds 0.80, 0.84, 0.88
    half = T975_2 * 0.04 / math.sqrt(3)
    assert c["n_seeds"] == 3 and c["seeds"] == "0;1;2"
    assert c["accuracy"] == pytest.approx(0.84)
    assert c["ci95_half"] == pytest.approx(half)
    assert (c["ci95_lo"], c["ci95_hi"]) == pytest.approx((0.84 - half, 0.84 + half))
    assert "t-interval over 3 seeds" in c["ci_kind"]
    # Avg per seed: 0.555, 0.585, 0.585 -> mean 0.575, sd sqrt(0.0003)
    avg = cell(cells, "cw_grpo", "avg")
    assert avg["accuracy"] == pytest.approx(0.575)
    assert avg["ci95_half"] == pytest.approx(T975_2 * math.sqrt(0.0003) / math.sqrt(3))


def test_table_markdown_shows_mean_pm_half_width(tiny_out):
    md = tiny_out["md"].read_text()
    half = 100 * T975_2 * 0.04 / math.sqrt(3)  # 9.9365...
    assert f"84.0 ± {half:.1f}" in md  # "84.0 ± 9.9"
    assert "Syn-L1 (≈MATH-500)" in md and "Tiny-S (≈1.5B)" in md


def test_table_shows_the_papers_rows_marked_as_other_models_and_benchmarks(tiny_out):
    """Table 1 names the paper's rows of the size it mirrors (Tiny-S stands for 1.5B), marked as other
    models and benchmarks, in the Markdown, the TeX caption and so the PDF's notes."""
    md, tex = tiny_out["md"].read_text(), tiny_out["tex"].read_text()
    assert (
        "The paper's Table 1 (step 100; other models and benchmarks, so not comparable cell by cell; its "
        "effects over GRPO are beside ours in reported_vs_ours.md and table1_avg.png), AIME24, MATH-500, "
        "AMC23, Minerva, OlympiadBench, Avg:" in md
    )
    assert (
        "Paper, 1.5B (DeepSeek-R1-Distill-Qwen-1.5B): Base 28.8 / 82.8 / 62.9 / 26.5 / 43.3 / 48.9; "
        "GRPO 33.3 / 85.0 / 67.5 / 27.2 / 49.9 / 52.6; Clip-Cov 33.3 / 85.5 / 70.0 / 29.0 / 50.0 / 53.6; "
        "CW-GRPO 30.0 / 87.0 / 77.5 / 29.8 / 52.0 / 55.3." in md
    )
    assert "Paper, 7B" not in md  # no size here stands for 7B
    assert "Paper, 1.5B (DeepSeek-R1-Distill-Qwen-1.5B): Base 28.8" in tex


def test_table_best_per_column(tmp_path):
    cells, _ = build_table1(summaries_frame(make_results(tmp_path)), cfg())
    best = {(r.method, r.benchmark) for r in cells.itertuples() if r.is_best}
    # syn_math500: cw_grpo 84.0 is best; syn_olympiad: clip_cov 31.0 = cw_grpo 31.0 (tie, both) > grpo 30.0
    # avg: cw 57.5 > clip 51.5 > grpo 51.0 > base 40.0
    assert best == {
        ("cw_grpo", "syn_math500"),
        ("clip_cov", "syn_olympiad"),
        ("cw_grpo", "syn_olympiad"),
        ("cw_grpo", "avg"),
    }


def test_table_best_is_per_size(tmp_path):
    paths = make_results(tmp_path, size="small")
    flipped = {k: (1 - a, 1 - b) for k, (a, b) in VALUES.items()}  # the worst becomes the best
    paths += make_results(tmp_path, flipped, size="large")
    cells, _ = build_table1(summaries_frame(paths), cfg())
    assert cell(cells, "cw_grpo", "syn_math500", "small")["is_best"]
    assert not cell(cells, "cw_grpo", "syn_math500", "large")["is_best"]
    assert cell(cells, "base", "syn_math500", "large")["is_best"]


def test_table_bold_in_markdown_and_tex(tiny_out):
    md, tex = tiny_out["md"].read_text(), tiny_out["tex"].read_text()
    cw_row = next(line for line in md.splitlines() if "| CW-GRPO |" in line)
    grpo_row = next(line for line in md.splitlines() if "| GRPO |" in line)
    assert cw_row.count("**") == 6  # math500, olympiad (tie), avg
    assert "**" not in grpo_row
    assert "\\toprule" in tex and "\\midrule" in tex and "\\bottomrule" in tex
    assert "\\textbf{84.0 $\\pm$ 9.9}" in tex
    assert "Syn-L1 ($\\approx$MATH-500)" in tex


def test_table_delta_vs_grpo_paired(tmp_path):
    cells, _ = build_table1(summaries_frame(make_results(tmp_path)), cfg())
    # per-seed Avg: cw (0.555, 0.585, 0.585), grpo (0.50, 0.53, 0.50) -> diffs (0.055, 0.055, 0.085)
    c = cell(cells, "cw_grpo", "avg")
    diffs = [0.055, 0.055, 0.085]
    mean = sum(diffs) / 3
    sd = math.sqrt(sum((d - mean) ** 2 for d in diffs) / 2)
    half = T975_2 * sd / math.sqrt(3)
    assert c["delta"] == pytest.approx(mean)
    assert (c["delta_ci95_lo"], c["delta_ci95_hi"]) == pytest.approx((mean - half, mean + half))
    assert math.isnan(cell(cells, "grpo", "avg")["delta"])


def test_table_extra_method_rows_follow(tmp_path):
    paths = make_results(tmp_path)
    paths.append(write_summary(tmp_path, "small", "cw_grpo_described", 0, 100, "syn_math500", 0.5))
    paths.append(write_summary(tmp_path, "small", "cw_grpo_described", 0, 100, "syn_olympiad", 0.5))
    cells, _ = build_table1(summaries_frame(paths), cfg())
    assert list(dict.fromkeys(cells["method"])) == [
        "base",
        "grpo",
        "clip_cov",
        "cw_grpo",
        "cw_grpo_described",
    ]


def test_table_one_seed_k_gt_1_uses_summary_interval(tmp_path):
    p1 = write_summary(tmp_path, "small", "grpo", 0, 100, "syn_math500", 0.5, k=4, se=0.02, ci=[0.46, 0.54])
    p2 = write_summary(tmp_path, "small", "grpo", 0, 100, "syn_olympiad", 0.3, k=4, se=0.03, ci=[0.25, 0.36])
    cells, _ = build_table1(summaries_frame([p1, p2]), cfg(methods=["grpo"]))
    c = cell(cells, "grpo", "syn_olympiad")
    assert (c["ci95_lo"], c["ci95_hi"]) == (0.25, 0.36)
    assert c["metric"] == "avg@4" and "summary interval" in c["ci_kind"]
    avg = cell(cells, "grpo", "avg")  # se of a mean of two independent estimates
    assert avg["ci95_half"] == pytest.approx(1.959963984540054 * math.sqrt(0.02**2 + 0.03**2) / 2)


def test_summary_with_undefined_interval_bounds(tmp_path):
    p1 = write_summary(tmp_path, "small", "grpo", 0, 100, "syn_math500", 1.0, k=4, se=0.0, ci=[None, None])
    p2 = write_summary(tmp_path, "small", "grpo", 0, 100, "syn_olympiad", 0.5, k=4, se=None, ci=None)
    cells, _ = build_table1(summaries_frame([p1, p2]), cfg(methods=["grpo"]))
    c = cell(cells, "grpo", "syn_olympiad")
    assert c["accuracy"] == 0.5 and math.isnan(c["ci95_lo"]) and c["ci_kind"] == "unavailable"


def test_table_uses_configured_step(tmp_path):
    paths = make_results(tmp_path, step=100)
    paths += make_results(tmp_path, {k: v for k, v in VALUES.items() if k[0] != "base"}, step=50)
    cells, _ = build_table1(summaries_frame(paths), cfg(step=50))
    assert set(cells.loc[cells["method"] != "base", "step"]) == {50}
    assert set(cells.loc[cells["method"] == "base", "step"]) == {0}


def test_table_missing_file_names_it(tmp_path):
    paths = make_results(tmp_path)
    missing = tmp_path / "eval" / "nope.summary.json"
    with pytest.raises(ResultFileError, match=r"nope\.summary\.json"):
        write_table(cfg(), [*paths, missing], outputs(tmp_path / "t.pdf", tmp_path / "out"))


def test_table_truncated_file_names_it(tmp_path):
    paths = make_results(tmp_path)
    paths[0].write_text('{"benchmark": "syn_math5')
    with pytest.raises(ResultFileError, match=re.escape(str(paths[0]))):
        write_table(cfg(), paths, outputs(tmp_path / "t.pdf", tmp_path / "out"))


def test_table_missing_method_names_it(tmp_path):
    paths = [p for p in make_results(tmp_path) if "/clip_cov/" not in p.as_posix()]
    with pytest.raises(ResultFileError, match=r"size=small method=clip_cov step=100"):
        build_table1(summaries_frame(paths), cfg())


def test_table_missing_benchmark_names_it(tmp_path):
    paths = [
        p for p in make_results(tmp_path) if not ("/grpo/seed1/" in p.as_posix() and "olympiad" in p.name)
    ]
    with pytest.raises(ResultFileError, match=r"\(1, 'syn_olympiad'\)"):
        build_table1(summaries_frame(paths), cfg())


def test_table_duplicate_tags_is_an_error(tmp_path):
    paths = make_results(tmp_path)
    dup = write_summary(tmp_path / "copy", "small", "grpo", 0, 100, "syn_math500", 0.1)
    with pytest.raises(ResultFileError, match="share the tags"):
        summaries_frame([*paths, dup])


def test_table_pdf_and_sidecar(tiny_out):
    out = tiny_out
    data = out["pdf"].read_bytes()
    assert data.startswith(b"%PDF") and len(data) > 1000
    side = json.loads(out["provenance"].read_text())
    assert side["command"] == "table" and side["config_hash"]
    assert side["inputs"]["config_hashes"] == ["feedbeef"]
    assert side["inputs"]["commits"] == ["0123456789ab"]
    assert len(side["inputs"]["files"]) == 20


def test_table_outputs_are_reproducible(tmp_path, tiny_out):
    out = write_table(cfg(), make_results(tmp_path / "r"), outputs(tmp_path / "table1.pdf", tmp_path / "out"))
    for key in ("pdf", "csv", "md", "tex", "reported_csv", "reported_md"):
        assert out[key].read_bytes() == tiny_out[key].read_bytes(), key


# -- reported vs ours --------------------------------------------------------------------------------
def test_reported_json_is_consistent():
    rep = load_reported()
    assert rep["source"]["arxiv"] == "2605.11538"
    for row in rep["table1"]["rows"]:
        mean5 = sum(row[b] for b in rep["benchmark_order"]) / 5
        assert row["avg"] == pytest.approx(mean5, abs=0.051)  # the paper prints one decimal
    by = {(r["size"], r["method"]): r["avg"] for r in rep["table1"]["rows"]}
    for size, gain in rep["claims"]["1"]["effect_points"].items():
        assert by[(size, "cw_grpo")] - by[(size, "grpo")] == pytest.approx(gain)
    assert len(rep["checkpoints"]["rows"]) == 6


def test_reported_vs_ours_tiny_compares_effects_only(tiny_out):
    out = tiny_out
    cmp = pd.read_csv(out["reported_csv"])
    assert set(cmp["comparison"]) == {"effect"}
    row = cmp[(cmp["method"] == "cw_grpo - grpo") & (cmp["benchmark"] == "avg")].iloc[0]
    assert row["paper_pct"] == pytest.approx(55.3 - 52.6)
    assert row["ours_pct"] == pytest.approx(100 * (0.055 + 0.055 + 0.085) / 3)
    assert row["difference_pct"] == pytest.approx(row["ours_pct"] - row["paper_pct"])
    assert bool(row["same_sign"]) is True
    m500 = cmp[(cmp["method"] == "cw_grpo - grpo") & (cmp["benchmark"] == "syn_math500")].iloc[0]
    assert m500["paper_benchmark"] == "math500" and m500["paper_pct"] == pytest.approx(2.0)
    md = out["reported_md"].read_text()
    assert "Only effects are compared" in md and "not comparable" in md


def test_reported_vs_ours_paper_compares_absolute_numbers(tmp_path):
    values = {k: v for k, v in VALUES.items()}
    paths = []
    for (method, seed), accs in values.items():
        s = 0 if method == "base" else 100
        for bench, acc in zip(("math500", "olympiadbench"), accs, strict=True):
            paths.append(write_summary(tmp_path / "r", "1.5b", method, seed, s, bench, acc))
    out = write_table(TableConfig(kind="paper"), paths, outputs(tmp_path / "t.pdf", tmp_path / "out"))
    cmp = pd.read_csv(out["reported_csv"])
    assert {"absolute", "effect"} == set(cmp["comparison"])
    r = cmp[
        (cmp["comparison"] == "absolute") & (cmp["method"] == "grpo") & (cmp["benchmark"] == "math500")
    ].iloc[0]
    assert r["paper_pct"] == 85.0 and r["ours_pct"] == pytest.approx(72.0)
    assert r["difference_pct"] == pytest.approx(72.0 - 85.0)
    md = (tmp_path / "out" / "table1.md").read_text()
    assert "MATH-500" in md and "1.5B" in md  # the paper's display names by default


# -- the command -------------------------------------------------------------------------------------
def test_table_cli_writes_every_output(tmp_path, capsys):
    paths = make_results(tmp_path / "r")
    cfg_file = tmp_path / "tiny.yaml"
    cfg_file.write_text(json.dumps(TINY))  # JSON is YAML
    args = [
        "table",
        "--summaries",
        *map(str, paths),
        *out_flags(tmp_path / "figures" / "table1.pdf", tmp_path / "res"),
    ]
    args += ["--config", str(cfg_file), "--set", "step=100"]
    assert main(args) == 0
    for name in FILE_NAMES.values():
        assert (tmp_path / "res" / name).stat().st_size > 0
    assert (tmp_path / "figures" / "table1.pdf").read_bytes().startswith(b"%PDF")


def test_table_cli_missing_file_exits_2_naming_it(tmp_path, capsys):
    missing = tmp_path / "gone.summary.json"
    args = [
        "table",
        "--summaries",
        str(missing),
        *out_flags(tmp_path / "t.pdf", tmp_path),
    ]
    assert main(args) == 2
    assert "gone.summary.json" in capsys.readouterr().err


# -- metric sensitivity ------------------------------------------------------------------------------


def test_metric_sensitivity_table_from_summaries_with_both_metrics(tmp_path):
    from cwgrpo_workflow.report.table import sensitivity_frame, sensitivity_markdown

    paths = []
    for seed, (strict, paper, disagree) in enumerate([(0.50, 0.56, 8), (0.60, 0.62, 4)]):
        p = write_summary(tmp_path, "small", "grpo", seed, 100, "syn_math500", paper)
        s = json.loads(p.read_text())
        s |= {"primary_metric": "paper", "n_disagree": disagree}
        s["by_metric"] = {
            "strict": {"pass1": strict, "avg_k": strict},
            "paper": {"pass1": paper, "avg_k": paper},
        }
        p.write_text(json.dumps(s))
        paths.append(p)
    paths.append(write_summary(tmp_path, "small", "grpo", 0, 50, "syn_math500", 0.1))  # not the step
    frame = sensitivity_frame(paths, cfg(step=100))
    assert len(frame) == 1
    row = frame.iloc[0]
    assert row["seeds"] == 2
    assert row["strict"] == pytest.approx(0.55) and row["paper"] == pytest.approx(0.59)
    assert row["paper_minus_strict"] == pytest.approx(0.04)
    assert row["disagree"] == pytest.approx((8 + 4) / 200)  # 100 samples each
    md = sensitivity_markdown(frame, cfg(step=100))
    assert "| Tiny-S (≈1.5B) |" in md and "| 55.0 | 59.0 | +4.0 | 6.0 |" in md


def test_metric_sensitivity_of_strict_only_summaries_says_paper_was_not_scored(tmp_path):
    from cwgrpo_workflow.report.table import sensitivity_frame, sensitivity_markdown

    frame = sensitivity_frame(make_results(tmp_path), cfg(step=100))
    assert len(frame) == 8  # 4 methods x 2 benchmarks
    assert frame["paper"].isna().all() and frame["strict"].notna().all()
    assert "not scored (evaluate.paper_metric: false)" in sensitivity_markdown(frame, cfg(step=100))


def test_table_marks_a_method_whose_run_had_no_learning_signal(tmp_path):
    """A run whose run.json records no learning signal: its method's row gets a dagger and a note (the
    row measures a policy that training did not move); rows of runs that learned are unchanged, also one
    whose every completion was clipped (a notice: its rewards still differed)."""
    runs = []
    for method, signal in (
        ("grpo", []),
        ("cw_grpo", [{"cause": "zero_gradient", "from_step": 1, "to_step": 20}]),
        ("clip_cov", [{"cause": "all_clipped", "from_step": 1, "to_step": 20}]),
    ):
        run = tmp_path / "runs" / method
        run.mkdir(parents=True)
        tags = {"size": "small", "method": method, "seed": 0}
        (run / "run.json").write_text(json.dumps({"tags": tags, "learning_signal": signal}))
        runs.append(run)
    out = write_table(
        cfg(), make_results(tmp_path / "r"), outputs(tmp_path / "t.pdf", tmp_path / "o"), runs=runs
    )
    md = out["md"].read_text()
    name = cfg().method_name
    assert (
        f"| {name('cw_grpo')} † |" in md and f"| {name('grpo')} |" in md and f"| {name('clip_cov')} |" in md
    )
    assert (
        f"† No learning signal in training: Tiny-S (≈1.5B) {name('cw_grpo')} (seed 0: zero gradient, steps 1-20)."
        in md
    )
    assert f"{name('cw_grpo')} $\\dagger$" in out["tex"].read_text().replace("\\_", "_")


def test_rows_with_answers_that_ran_out_of_grading_time_are_marked_with_their_counts(tmp_path):
    """An answer whose grading ran out of its CPU-time budget is graded wrong: Table 1 marks the rows that
    hold such answers (at the table's step; the base at its own) and says how many, in every format."""
    paths = make_results(tmp_path / "r")
    for path in paths:
        summary = json.loads(path.read_text())
        tags = summary["tags"]
        late = {("cw_grpo", 1, 100): 2, ("cw_grpo", 2, 100): 1, ("base", 0, 0): 4}
        summary["n_timed_out"] = late.get((tags["method"], tags["seed"], tags["step"]), 0)
        summary["n_timed_out"] *= summary["benchmark"] == "syn_math500"
        path.write_text(json.dumps(summary))
    out = write_table(cfg(), paths, outputs(tmp_path / "t.pdf", tmp_path / "o"))
    md = out["md"].read_text()
    name = cfg().method_name
    assert f"| {name('cw_grpo')} ‡ |" in md and f"| {name('grpo')} |" in md
    assert (
        f"‡ Answers whose grading ran out of its budget of CPU time, counted wrong: Tiny-S (≈1.5B) "
        f"{name('base')}: 4; Tiny-S (≈1.5B) {name('cw_grpo')}: 3 (evaluate's grading_timeout_s sets the budget)."
    ) in md
    assert f"{name('cw_grpo')} $\\ddagger$" in out["tex"].read_text().replace("\\_", "_")
    untouched = write_table(cfg(), make_results(tmp_path / "r2"), outputs(tmp_path / "u.pdf", tmp_path / "u"))
    assert "‡" not in untouched["md"].read_text()
    run = tmp_path / "runs" / "cw_grpo"  # campaign #84: a row with no learning signal too gets both marks
    run.mkdir(parents=True)
    signal = [{"cause": "zero_gradient", "from_step": 1, "to_step": 20}]
    tags = {"size": "small", "method": "cw_grpo", "seed": 1}
    (run / "run.json").write_text(json.dumps({"tags": tags, "learning_signal": signal}))
    both = write_table(cfg(), paths, outputs(tmp_path / "b.pdf", tmp_path / "b"), runs=[run])[
        "md"
    ].read_text()
    assert f"| {name('cw_grpo')} † ‡ |" in both


def test_rows_whose_every_sample_was_cut_at_max_new_tokens_are_named(tmp_path):
    """A row whose every evaluation sample hit max_new_tokens finished no answer: Table 1 says so."""
    paths = make_results(tmp_path / "r")
    for path in paths:
        summary = json.loads(path.read_text())
        if summary["tags"]["method"] == "clip_cov":
            summary["n_truncated"] = summary["n_samples"]
        elif summary["tags"]["method"] == "grpo":
            summary["n_truncated"] = summary["n_samples"] - 1  # one finished answer: not named
        path.write_text(json.dumps(summary))
    md = write_table(cfg(), paths, outputs(tmp_path / "t.pdf", tmp_path / "o"))["md"].read_text()
    name = cfg().method_name
    assert (
        f"Every evaluation sample of Tiny-S (≈1.5B) {name('clip_cov')} was cut at max_new_tokens: no answer "
        "finished (raise evaluate's max_new_tokens)."
    ) in md
    assert md.count("was cut at max_new_tokens") == 1


def test_the_table_as_a_figure_marks_a_method_without_learning_signal_as_the_table_does(tmp_path):
    from cwgrpo_workflow.report.table import avg_figure

    config = cfg()
    cells, _ = build_table1(load_summaries(make_results(tmp_path / "r"), config), config)
    fig = avg_figure(cells, config, load_reported(), "footer", {("small", "cw_grpo")})
    labels = [t.get_text() for t in fig.axes[0].get_yticklabels()]
    assert labels == ["Base", "Clip-Cov", "CW-GRPO †"]
    assert "† no learning signal\nin training" in [t.get_text() for t in fig.legends[0].get_texts()]


def test_notes_and_columns_come_from_the_results_never_a_presets_name(tmp_path):
    """A benchmark cut to its first N problems says so in its column; the note names what in the results
    is not the paper's (from the names the results carry), and no text names a preset."""
    import re

    from cwgrpo_workflow.report.table import reported_markdown, reported_vs_ours, table_grid

    paths = make_results(tmp_path)
    for path in paths:
        if path.name.startswith("syn_olympiad"):
            summary = json.loads(path.read_text())
            summary["settings"]["limit"] = summary["n_problems"] = 4
            path.write_text(json.dumps(summary))
    config = cfg(kind="real", size_display={"small": "My-Model-20M"})
    frame = load_summaries(paths, config)
    cells, per_seed = build_table1(frame, config)
    grid = table_grid(cells, config)
    assert "Syn-L3 (≈OlympiadBench) (first 4)" in grid.header and "Syn-L1 (≈MATH-500)" in grid.header
    note = (
        "Not the paper's own benchmarks Syn-L1 (≈MATH-500), Syn-L3 (≈OlympiadBench) (first 4) and models "
        "My-Model-20M (≈1.5B): the numbers are not comparable with the paper's."
    )
    assert grid.notes[-1] == note
    reported = reported_markdown(reported_vs_ours(cells, per_seed, config, load_reported()), config)
    assert note in reported
    for text in (*grid.notes, reported):
        assert not re.search(r"(?i)\b(tiny|real|paper) preset|SmolLM2|CHAMP", text), text


def test_avg_effects_are_ours_and_the_papers_method_minus_grpo(tmp_path):
    """The figure's data: each method's Avg minus GRPO's in points, ours paired by seed with its interval
    (base: one seed, so a point marked as such), the paper's from its Table 1 rows of the mirrored size."""
    from cwgrpo_workflow.report.table import avg_effects

    config = cfg()
    summaries = make_results(tmp_path)
    cells, _ = build_table1(load_summaries(summaries, config), config)
    e = avg_effects(cells, config, load_reported()).set_index("method")
    assert list(e.index) == ["base", "clip_cov", "cw_grpo"]  # the table's order, GRPO left out
    m, lo, hi = t_interval_3([5.5, 5.5, 8.5])  # CW-GRPO's Avg minus GRPO's per seed, in points
    assert (
        e.loc["cw_grpo", "ours"],
        e.loc["cw_grpo", "ours_lo"],
        e.loc["cw_grpo", "ours_hi"],
    ) == pytest.approx((m, lo, hi))
    assert e.loc["base", "ours"] == pytest.approx(40.0 - 51.0) and e.loc["base", "one_seed"]
    assert math.isnan(e.loc["base", "ours_lo"]) and not e.loc["cw_grpo", "one_seed"]
    assert e["paper"].to_dict() == pytest.approx(
        {"base": 48.9 - 52.6, "clip_cov": 53.6 - 52.6, "cw_grpo": 55.3 - 52.6}
    )
    unmirrored = TableConfig(**{**TINY, "size_mirrors": {}, "size_display": {}})
    cells, _ = build_table1(load_summaries(summaries, unmirrored), unmirrored)
    assert avg_effects(cells, unmirrored, load_reported())["paper"].isna().all()


def test_table1_as_a_figure_draws_effects_beside_the_papers(tmp_path):
    """The picture's dots are the table's Δ Avg cells (with their intervals; an open dot for one seed), the
    paper's effect of the mirrored size an open diamond on the same method's row; ``cwgrpo table`` writes
    it as PDF and PNG."""
    from cwgrpo_workflow.report.table import avg_effects, avg_figure

    config = cfg()
    frame = load_summaries(make_results(tmp_path / "r"), config)
    cells, _ = build_table1(frame, config)
    fig = avg_figure(cells, config, load_reported(), "footer")
    ax = fig.axes[0]
    assert [t.get_text() for t in ax.get_yticklabels()] == ["Base", "Clip-Cov", "CW-GRPO"]  # top down
    assert ax.get_xlabel() == "Δ Avg vs GRPO (points)"
    e = avg_effects(cells, config, load_reported()).set_index("method")
    dots = {round(float(ln.get_ydata()[0])): ln for ln in ax.lines if ln.get_marker() == "o"}
    assert float(dots[0].get_xdata()[0]) == pytest.approx(e.loc["cw_grpo", "ours"])  # the bottom row
    assert dots[2].get_markerfacecolor() == "white"  # base: one seed, an open dot
    diamonds = [ln for ln in ax.lines if ln.get_marker() == "D"]
    assert sorted(float(d.get_xdata()[0]) for d in diamonds) == pytest.approx(sorted(e["paper"]))
    bars = [c for c in ax.collections if len(c.get_segments()) == 1]
    assert len(bars) == 2  # Clip-Cov and CW-GRPO have intervals over seeds; base has none
    widths = sorted(seg[1][0] - seg[0][0] for b in bars for seg in b.get_segments())
    expected = sorted(e.loc[m, "ours_hi"] - e.loc[m, "ours_lo"] for m in ("clip_cov", "cw_grpo"))
    assert widths == pytest.approx(expected)
    out = outputs(tmp_path / "t.pdf", tmp_path / "o")
    args = [
        "table",
        "--summaries",
        *map(str, make_results(tmp_path / "r2")),
        *out_flags(tmp_path / "t.pdf", tmp_path / "o"),
    ]
    args += ["--out-avg-pdf", str(tmp_path / "a.pdf"), "--out-avg-png", str(tmp_path / "a.png")]
    assert (
        main(
            [
                *args,
                "--set",
                "kind=tiny",
                "--set",
                f"benchmark_mirrors={json.dumps(TINY['benchmark_mirrors'])}",
            ]
        )
        == 0
    )
    assert (tmp_path / "a.png").read_bytes()[:4] == b"\x89PNG" and (tmp_path / "a.pdf").read_bytes()[
        :4
    ] == b"%PDF"
    assert out["md"].exists()


def test_no_csv_cell_is_a_spreadsheet_formula(tmp_path):
    """Display names that a spreadsheet would run (``=``, ``+``, ``-``, ``@``, tab, CR) get a leading ``'``
    in every CSV (OWASP's CSV-injection rule); numbers such as negative deltas stay numbers."""
    import csv

    hostile = {"syn_math500": '=HYPERLINK("http://x")', "syn_olympiad": "@SUM(A1)"}
    sizes = {"small": "\t-2+3"}
    out = write_table(
        cfg(benchmark_display=hostile, size_display=sizes),
        make_results(tmp_path / "r"),
        outputs(tmp_path / "fig" / "table1.pdf", tmp_path / "out"),
    )
    negative = 0
    for key in ("csv", "reported_csv", "sensitivity_csv"):
        with open(out[key], newline="", encoding="utf-8") as fh:
            for row in csv.reader(fh):
                for value in row:
                    if value[:1] in ("=", "+", "-", "@", "\t", "\r"):
                        assert float(value) < 0, (key, value)
                        negative += 1
    assert negative > 0  # the deltas below the best method: written as numbers
    cells = pd.read_csv(out["csv"])
    shown = {d for d in cells["benchmark_display"] if d != "Avg"}
    assert {d.split(" (≈")[0] for d in shown} == {"'" + v for v in hostile.values()}
    assert {d.split(" (≈")[0] for d in cells["size_display"]} == {"'\t-2+3"}


def test_the_copy_is_the_presets_table_and_says_so(tmp_path):
    """figures/table1.pdf (the README's target) is a byte copy of the preset's own table, whose footer and
    provenance name the preset."""
    from cwgrpo_workflow.report.provenance import footer_text

    out = outputs(tmp_path / "figures" / "tiny" / "table1.pdf", tmp_path / "out")
    out["copy_pdf"] = tmp_path / "figures" / "table1.pdf"
    write_table(cfg(preset="tiny"), make_results(tmp_path / "r"), out)
    assert out["copy_pdf"].read_bytes() == out["pdf"].read_bytes()
    assert json.loads(out["provenance"].read_text())["config"]["preset"] == "tiny"
    identity = {"files": [], "versions": [], "commits": [], "config_hashes": []}
    assert footer_text(identity, "abc", preset="tiny").startswith("preset tiny · made by cwgrpo")
    assert not footer_text(identity, "abc").startswith("preset")


def _table_args(tmp_path):
    paths = make_results(tmp_path / "r")
    cfg = tmp_path / "tiny.yaml"
    cfg.write_text(json.dumps(TINY))
    flags = out_flags(tmp_path / "f" / "table1.pdf", tmp_path / "res")
    return ["table", "--summaries", *map(str, paths), *flags, "--config", str(cfg), "--set", "step=100"]


def test_two_outputs_naming_one_file_are_refused_before_anything_is_written(tmp_path, capsys):
    pdf = tmp_path / "f" / "table1.pdf"
    args = [*_table_args(tmp_path), "--out-avg-pdf", str(pdf), "--out-avg-png", str(tmp_path / "a.png")]
    assert main(args) == 2
    assert "are one file" in capsys.readouterr().err
    assert not pdf.exists() and not (tmp_path / "res").exists()


def test_an_output_that_is_a_folder_is_refused_before_anything_is_written(tmp_path, capsys):
    folder = tmp_path / "folder"
    folder.mkdir()
    args = [*_table_args(tmp_path), "--out-avg-pdf", str(folder), "--out-avg-png", str(tmp_path / "a.png")]
    assert main(args) == 2
    assert f"--out-avg-pdf {folder}: a folder" in capsys.readouterr().err
    assert not (tmp_path / "res").exists()


@pytest.mark.parametrize("bad", [-2, True, 1.5, "3"])
def test_a_summary_count_that_is_no_count_is_refused_naming_it(tmp_path, bad):
    """Campaign #49: n_timed_out of -2 or true was taken (a true counted 1)."""
    paths = make_results(tmp_path / "r")
    summary = json.loads(paths[0].read_text())
    summary["n_timed_out"] = bad
    paths[0].write_text(json.dumps(summary))
    with pytest.raises(ResultFileError, match=f"n_timed_out must be an integer >= 0, got {bad!r}"):
        load_summaries(paths, cfg())
