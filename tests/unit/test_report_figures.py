"""Unit tests of ``cwgrpo figure`` (cwgrpo_workflow.report.figures) and the plotting style.

Inputs are tiny run folders and summaries written by hand into ``tmp_path``.
"""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

import matplotlib.colors
import numpy as np
import pandas as pd
import pytest

from cwgrpo.cli import main
from cwgrpo.io import ResultFileError
from cwgrpo_workflow.report.figures import FigureConfig, make_figure, seed_band
from cwgrpo_workflow.report.load import metrics_frame
from cwgrpo_workflow.report.style import METHOD_COLORS, method_color, save_figure
from tests.hand import T975_2
from tests.summaries import write_summary

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
MIRRORS = {"syn_math500": "math500", "syn_olympiad": "olympiadbench"}


def write_run(root: Path, size: str, method: str, seed: int, steps: int = 12) -> Path:
    run = root / "runs" / size / method / f"seed{seed}"
    run.mkdir(parents=True)
    (run / "run.json").write_text(
        json.dumps(
            {"tags": {"size": size, "method": method, "seed": seed}, "config": {}, "config_hash": "abc"}
        )
    )
    rng = np.random.default_rng(seed)
    lines = []
    for step in range(1, steps + 1):
        wobble = 0.2 * (step % 2) if method == "grpo" else 0.01 * (step % 2)
        lines.append(
            {
                "step": step,
                "entropy": 0.5 + wobble + 0.01 * seed,
                "entropy_per_completion": 0.6 + wobble + 0.01 * seed,
                "reward": 0.3 + 0.02 * step,
                "completions/mean_length": 20 + step,
                "cw/cov_q0.0001": -3.0,
                "cw/cov_q0.4": -0.1,
                "cw/cov_q0.6": 0.1,
                "cw/cov_q0.9999": 3.0,
            }
        )
    (run / "metrics.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))
    cov_lines = []
    for step in (4, 8, 12):
        cov = rng.standard_t(2, 300) * 0.05
        weight = np.exp(-(cov**2) / (2 * 0.1**2))
        cov_lines.append({"step": step, "cov": cov.tolist(), "weight": (weight / weight.mean()).tolist()})
    (run / "cov_samples.jsonl").write_text("".join(json.dumps(x) + "\n" for x in cov_lines))
    return run


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> list[Path]:
    root = tmp_path_factory.mktemp("runs")
    return [
        write_run(root, size, method, seed)
        for size in ("small", "large")
        for method in ("grpo", "cw_grpo")
        for seed in (0, 1)
    ]


@pytest.fixture(scope="module")
def summaries(tmp_path_factory) -> list[Path]:
    root = tmp_path_factory.mktemp("sums")
    paths = []
    for size in ("small", "large"):
        for bench in ("syn_math500", "syn_olympiad", "syn_amc23"):
            paths.append(write_summary(root, size, "base", 0, 0, bench, 0.4))
            for method, slope in (("grpo", -0.001), ("cw_grpo", 0.001)):
                for seed in (0, 1):
                    for step in (50, 100, 150):
                        paths.append(write_summary(root, size, method, seed, step, bench, 0.5 + slope * step))
    return paths


def assert_pdf_png(pdf: Path) -> None:
    pdf_bytes = pdf.read_bytes()
    png_bytes = pdf.with_suffix(".png").read_bytes()
    assert pdf_bytes.startswith(b"%PDF") and len(pdf_bytes) > 1000
    assert png_bytes.startswith(PNG_MAGIC) and len(png_bytes) > 1000


# Drawing is the slow part (seconds per figure on 2 cores), so the files are written from one size;
# the tests on two sizes build the figures without saving them.
@pytest.mark.parametrize("kind", ["entropy", "training", "covariance"])
def test_figure_from_runs_writes_pdf_and_png(tmp_path, runs, kind):
    out = tmp_path / "figures" / f"{kind}.pdf"
    small = [r for r in runs if "/small/" in r.as_posix()]
    args = [
        "figure",
        "--kind",
        kind,
        "--runs",
        *map(str, small),
        "--out-pdf",
        str(out),
        "--out-png",
        str(out.with_suffix(".png")),
    ]
    assert main([*args, "--set", "kind=tiny", "--set", "size_display={small: 'Tiny-S (≈1.5B)'}"]) == 0
    assert_pdf_png(out)


@pytest.mark.parametrize("kind", ["tiny", "paper"])
def test_figure_checkpoints_writes_pdf_and_png(tmp_path, summaries, kind):
    out = tmp_path / "checkpoints.pdf"
    small = [p for p in summaries if "/small/" in p.as_posix()]
    args = [
        "figure",
        "--kind",
        "checkpoints",
        "--summaries",
        *map(str, small),
        "--out-pdf",
        str(out),
        "--out-png",
        str(out.with_suffix(".png")),
    ]
    args += ["--set", f"kind={kind}", "--set", f"benchmark_mirrors={json.dumps(MIRRORS)}"]
    assert main(args) == 0
    assert_pdf_png(out)


def test_checkpoints_overlay_only_for_paper_preset(summaries):
    cfg = FigureConfig(kind="paper", benchmark_mirrors=MIRRORS, size_mirrors={"small": "1.5b"})
    fig = make_figure("checkpoints", cfg, [], summaries)
    labels = {t.get_text() for t in fig.legends[0].get_texts()}
    assert {"GRPO (paper)", "CW-GRPO (paper)", "GRPO", "CW-GRPO", "Base (step 0)"} <= labels
    fig = make_figure("checkpoints", FigureConfig(kind="tiny", benchmark_mirrors=MIRRORS), [], summaries)
    assert not any("(paper)" in t.get_text() for t in fig.legends[0].get_texts())


def test_checkpoints_without_a_mirror_names_it(summaries):
    with pytest.raises(ResultFileError, match="olympiadbench"):
        make_figure("checkpoints", FigureConfig(benchmark_mirrors={"syn_math500": "math500"}), [], summaries)


def test_seed_band_minmax_and_ci95_by_hand():
    frame = pd.DataFrame(
        {"step": [1, 1, 1, 2, 2, 2], "seed": [0, 1, 2, 0, 1, 2], "entropy": [0.1, 0.2, 0.3, 1.0, 1.0, 1.6]}
    )
    mm = seed_band(frame, "entropy", FigureConfig(band="minmax")).set_index("step")
    assert mm.loc[1, ["mean", "lo", "hi"]].tolist() == pytest.approx([0.2, 0.1, 0.3])
    assert mm.loc[2, ["mean", "lo", "hi"]].tolist() == pytest.approx([1.2, 1.0, 1.6])
    ci = seed_band(frame, "entropy", FigureConfig(band="ci95")).set_index("step")
    half = T975_2 * 0.1 / math.sqrt(3)  # sd of (0.1, 0.2, 0.3) is 0.1
    assert ci.loc[1, ["lo", "hi"]].tolist() == pytest.approx([0.2 - half, 0.2 + half])


def test_seed_band_smoothing_is_per_seed():
    frame = pd.DataFrame({"step": [1, 2, 3], "seed": [0, 0, 0], "entropy": [0.0, 1.0, 2.0]})
    out = seed_band(frame, "entropy", FigureConfig(smooth=2))
    assert out["mean"].tolist() == pytest.approx([0.0, 0.5, 1.5])


def test_figure_missing_metrics_file_names_it(tmp_path):
    run = write_run(tmp_path, "small", "grpo", 0)
    (run / "metrics.jsonl").unlink()
    with pytest.raises(ResultFileError, match=r"metrics\.jsonl"):
        make_figure("entropy", FigureConfig(), [run], [])


def test_figure_missing_cov_samples_names_it(tmp_path):
    run = write_run(tmp_path, "small", "grpo", 0)
    (run / "cov_samples.jsonl").unlink()
    with pytest.raises(ResultFileError, match=r"cov_samples\.jsonl"):
        make_figure("covariance", FigureConfig(), [run], [])


def test_covariance_skips_empty_samples_but_not_all(tmp_path):
    full = write_run(tmp_path, "small", "grpo", 0)
    empty = write_run(tmp_path, "small", "cw_grpo", 0)
    (empty / "cov_samples.jsonl").write_text("")  # sampling switched off
    fig = make_figure("covariance", FigureConfig(kind="tiny"), [full, empty], [])
    assert {t.get_text() for t in fig.legends[0].get_texts()} == {"GRPO"}
    (full / "cov_samples.jsonl").write_text("")
    with pytest.raises(ResultFileError, match="empty"):
        make_figure("covariance", FigureConfig(), [full, empty], [])


def test_figure_missing_run_json_exits_2(tmp_path, capsys):
    args = [
        "figure",
        "--kind",
        "entropy",
        "--runs",
        str(tmp_path / "nowhere"),
        "--out-pdf",
        str(tmp_path / "e.pdf"),
        "--out-png",
        str(tmp_path / "e.png"),
    ]
    assert main(args) == 2
    assert "run.json" in capsys.readouterr().err


@pytest.mark.parametrize("kind", ["entropy", "training", "covariance", "checkpoints"])
def test_figure_one_row_per_size(runs, summaries, kind):
    r, s = ([], summaries) if kind == "checkpoints" else (runs, [])
    fig = make_figure(kind, FigureConfig(benchmark_mirrors=MIRRORS), r, s)
    titles = " ".join(ax.get_title() for ax in fig.axes)
    assert "small" in titles and "large" in titles
    assert all(ax.get_xlabel() and ax.get_ylabel() for ax in fig.axes)
    assert len(fig.legends) == 1


def test_figure_kind_needs_its_inputs(runs):
    with pytest.raises(ResultFileError, match="--summaries"):
        make_figure("checkpoints", FigureConfig(), runs, [])
    with pytest.raises(ResultFileError, match="--runs"):
        make_figure("entropy", FigureConfig(), [], [])


def test_metrics_frame_is_tagged_from_run_json(runs):
    m = metrics_frame(runs)
    assert set(m["size"]) == {"small", "large"} and set(m["method"]) == {"grpo", "cw_grpo"}
    assert set(m["seed"]) == {0, 1} and len(m) == 8 * 12


def test_method_colours_fixed_and_distinct():
    assert method_color("grpo") == METHOD_COLORS["grpo"] == "#0072B2"
    assert len(set(METHOD_COLORS.values())) == len(METHOD_COLORS)
    assert method_color("some_new_method") == method_color("some_new_method")


def test_same_method_same_colour_in_every_figure(runs, summaries):
    seen: dict[str, set[str]] = {}
    legends = []  # (figure kind, method label) of every legend entry checked
    kinds = (
        ("entropy", runs, []),
        ("training", runs, []),
        ("covariance", runs, []),
        ("checkpoints", [], summaries),
    )
    for kind, r, s in kinds:
        fig = make_figure(kind, FigureConfig(benchmark_mirrors=MIRRORS), r, s)
        for handle, text in zip(fig.legends[0].legend_handles, fig.legends[0].get_texts(), strict=True):
            label = text.get_text().split(" (")[0]
            if label in ("GRPO", "CW-GRPO"):
                colour = handle.get_color() if hasattr(handle, "get_color") else handle.get_edgecolor()
                seen.setdefault(label, set()).add(matplotlib.colors.to_hex(colour).upper())
                legends.append((kind, label))
    assert {kind for kind, _ in legends} == {kind for kind, _, _ in kinds}
    assert seen == {"GRPO": {METHOD_COLORS["grpo"]}, "CW-GRPO": {METHOD_COLORS["cw_grpo"]}}


def test_save_figure_writes_pdf_and_png(tmp_path):
    import matplotlib.pyplot as plt

    fig = plt.figure()
    pdf, png = save_figure(fig, tmp_path / "y.pdf", tmp_path / "y.png")
    assert pdf.read_bytes().startswith(b"%PDF") and png.read_bytes().startswith(PNG_MAGIC)


def test_band_note_only_when_some_line_has_several_seeds():
    from cwgrpo_workflow.report.figures import BAND_TEXT, _band_title

    one = pd.DataFrame({"size": ["s", "s"], "method": ["grpo", "cw_grpo"], "seed": [0, 0]})
    two = pd.DataFrame({"size": ["s", "s"], "method": ["grpo", "grpo"], "seed": [0, 1]})
    assert _band_title(FigureConfig(), one) == ""
    assert _band_title(FigureConfig(band="ci95"), two) == BAND_TEXT["ci95"]


def test_configured_method_colours_override_the_hashed_spare_colours_and_bad_ones_are_refused():
    from cwgrpo.configs import ConfigError
    from cwgrpo_workflow.report.options import ReportConfig
    from cwgrpo_workflow.report.style import method_color

    # the two labels the study preset colours by hand share one hashed spare colour
    assert method_color("cw_knob_normaliser") == method_color("cw_knob_gradient")
    cfg = ReportConfig(method_colors={"cw_knob_gradient": "#9467BD"})
    assert cfg.method_colour("cw_knob_gradient") == "#9467BD"
    assert cfg.method_colour("cw_knob_normaliser") == method_color("cw_knob_normaliser")
    assert cfg.method_colour("grpo") == "#0072B2"  # a package label keeps its colour
    with pytest.raises(ConfigError, match="method_colors"):
        ReportConfig(method_colors={"grpo": "blue"})


def test_checkpoints_of_one_seed_and_one_step_promise_no_bars_and_keep_a_readable_axis(tmp_path):
    """A one-step, one-seed run at zero accuracy: no "bars over seeds" in the legend, the x-axis a step
    each side of the step (not 1.9–2.1), and no negative accuracy ticks."""
    paths = [write_summary(tmp_path, "small", "base", 0, 0, b, 0.0) for b in MIRRORS]
    paths += [write_summary(tmp_path, "small", m, 0, 2, b, 0.0) for m in ("grpo", "cw_grpo") for b in MIRRORS]
    fig = make_figure("checkpoints", FigureConfig(kind="tiny", step=2, benchmark_mirrors=MIRRORS), [], paths)
    assert fig.legends[0].get_title().get_text() == "one seed: no bars"
    ax = fig.axes[0]
    assert ax.get_xlim() == (1.0, 3.0)
    lo, hi = ax.get_ylim()
    assert -0.05 < lo < 0 and hi >= 1.0  # a sliver below 0, so that the markers at 0 show whole
    assert all(tick >= 0 for tick in ax.get_yticks() if lo <= tick <= hi)
    paths += [write_summary(tmp_path, "small", m, 0, 1, b, 0.0) for m in ("grpo", "cw_grpo") for b in MIRRORS]
    fig = make_figure("checkpoints", FigureConfig(kind="tiny", step=1, benchmark_mirrors=MIRRORS), [], paths)
    lo, hi = fig.axes[0].get_xlim()
    assert 0.5 < lo < 1 and 2 < hi < 2.5  # two steps: matplotlib's own margins, both in view


def test_checkpoints_of_several_seeds_name_their_bars(summaries):
    fig = make_figure("checkpoints", FigureConfig(benchmark_mirrors=MIRRORS), [], summaries)
    assert fig.legends[0].get_title().get_text() == "mean over seeds;\nbars: min–max\nover seeds"


def test_training_curves_of_one_step_span_a_step_each_side(tmp_path):
    run = write_run(tmp_path, "small", "grpo", 0, steps=1)
    fig = make_figure("entropy", FigureConfig(), [run], [])
    assert fig.axes[0].get_xlim() == (0.0, 2.0)


@pytest.mark.parametrize(
    "line",
    [{"step": 1, "cov": {"a": 1}}, {"step": 1, "cov": [[1.0], [2.0, 3.0]]}, {"step": "x", "cov": [1.0]}],
)
def test_a_foreign_covariance_sample_line_is_named_not_a_traceback(tmp_path, line):
    from cwgrpo_workflow.report.load import cov_samples

    (tmp_path / "cov_samples.jsonl").write_text(
        json.dumps({"step": 0, "cov": [0.5]}) + "\n" + json.dumps(line)
    )
    with pytest.raises(ResultFileError, match=rf"{re.escape(str(tmp_path / 'cov_samples.jsonl'))}:2: 'step'"):
        cov_samples(tmp_path)


def test_the_reward_axis_says_what_the_reward_is_made_of_and_its_range_per_size(tmp_path):
    """Accuracy + format reaches 2 where accuracy alone reaches 1: each size's axis names its runs' rewards
    (weights and range where every reward is 0/1); a user's reward has no range to give."""
    plan = {
        "1.5b": (["accuracy", "format"], [1.0, 1.0]),
        "7b": (["accuracy"], [1.0]),
        "own": (["m:r"], [0.5]),
    }
    runs = []
    for size, (funcs, weights) in plan.items():
        run = write_run(tmp_path, size, "grpo", 0)
        info = json.loads((run / "run.json").read_text())
        info["config"] = {"job": {"reward_funcs": funcs}, "trl": {"reward_weights": weights}}
        (run / "run.json").write_text(json.dumps(info))
        runs.append(run)
    fig = make_figure("training", FigureConfig(), runs, [])
    reward_axes = [ax.get_ylabel() for ax in fig.axes if ax.get_ylabel().startswith("mean reward")]
    assert reward_axes == [
        "mean reward: accuracy + format (0 to 2)",
        "mean reward: accuracy (0 to 1)",
        "mean reward: 0.5×m:r",
    ]


def test_the_kept_share_figure_draws_each_outcomes_share_against_the_success_count(tmp_path):
    """From the runs' cw/kept_{positive,negative}_k{k} metrics: mean over a run's steps (a step without a
    group of that count has no value), then over seeds; one panel per size and outcome."""
    runs = []
    for seed, shift in ((0, 0.0), (1, 0.2)):
        run = write_run(tmp_path, "small", "cw_grpo", seed, steps=2)
        lines = [json.loads(x) for x in (run / "metrics.jsonl").read_text().splitlines()]
        lines[0] |= {"cw/kept_positive_k1": 0.4 + shift, "cw/kept_negative_k1": 1.1}
        lines[1] |= {
            "cw/kept_positive_k1": 0.6 + shift,
            "cw/kept_positive_k3": 1.0,
            "cw/kept_negative_k3": 0.5,
        }
        (run / "metrics.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))
        runs.append(run)
    fig = make_figure("kept_share", FigureConfig(), runs, [])
    successes, failures = fig.axes[0], fig.axes[1]
    assert successes.get_title().endswith("successes") and failures.get_title().endswith("failures")
    (line,) = [ln for ln in successes.lines if ln.get_marker() == "o"]
    assert list(line.get_xdata()) == [1, 3] and list(line.get_ydata()) == pytest.approx([0.6, 1.0])
    (line,) = [ln for ln in failures.lines if ln.get_marker() == "o"]
    assert list(line.get_ydata()) == pytest.approx([1.1, 0.5])
    with pytest.raises(ResultFileError, match="no cw/kept_positive_k"):
        make_figure("kept_share", FigureConfig(), [write_run(tmp_path / "plain", "small", "grpo", 0)], [])
