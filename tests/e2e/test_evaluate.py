"""`cwgrpo evaluate` end to end on the offline tiny model, and its input errors (nothing written)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from cwgrpo import cli

SAMPLE_KEYS = {
    "id",
    "sample",
    "completion",
    "extracted",
    "gold",
    "correct",
    "correct_strict",
    "unscorable",
    "timed_out_strict",
    "truncated",
    "tokens",
}
SUMMARY_KEYS = {
    "benchmark", "benchmark_display", "benchmark_mirror", "tags", "n_problems", "k", "pass1", "avg_k",
    "avg_k_se", "avg_k_ci95", "n_samples", "n_truncated", "n_unscorable", "n_timed_out", "settings", "provenance",
    "primary_metric", "by_metric",
}  # fmt: skip


@pytest.fixture(scope="module")
def benchmark_file(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("data") / "syn_math500.jsonl"
    assert cli.main(["prepare-data", "--dataset", "syn_math500", "--out", str(out)]) == 0
    return out


def evaluate_args(model_dir, benchmark, out_dir: Path, *extra: str) -> list[str]:
    return [
        "evaluate",
        "--model-dir", str(model_dir),
        "--benchmark-file", str(benchmark),
        "--out", str(out_dir / "syn_math500.jsonl"),
        "--summary", str(out_dir / "syn_math500.summary.json"),
        *extra,
    ]  # fmt: skip


@pytest.mark.slow
def test_evaluate_cli_writes_samples_and_summary_byte_identically(tiny_model_dir, benchmark_file, tmp_path):
    settings = ["--set", "prompt_set=tiny", "--set", "k=2", "--set", "max_new_tokens=16", "--set", "limit=6"]
    settings += ["--set", "batch_size=4", "--set", "cpu_threads=1", "--set", "temperature=1.0"]
    tags = ["--tag", "size=small", "--tag", "method=base", "--tag", "seed=0", "--tag", "step=0"]
    env = {**os.environ, "CWGRPO_LOG_LEVEL": "WARNING"}
    runs = []
    for name in ("a", "b"):
        out_dir = tmp_path / name
        cmd = [sys.executable, "-m", "cwgrpo.cli", *evaluate_args(tiny_model_dir, benchmark_file, out_dir)]
        proc = subprocess.run(cmd + settings + tags, capture_output=True, text=True, env=env, timeout=600)
        assert proc.returncode == 0, proc.stderr[-3000:]
        runs.append(out_dir)

    a, b = runs
    for fname in ("syn_math500.jsonl", "syn_math500.summary.json"):
        assert (a / fname).read_bytes() == (b / fname).read_bytes(), fname

    rows = [json.loads(line) for line in (a / "syn_math500.jsonl").read_text().splitlines()]
    assert len(rows) == 12
    assert all(set(r) == SAMPLE_KEYS for r in rows)
    assert [r["sample"] for r in rows[:4]] == [0, 1, 0, 1]
    assert all(1 <= r["tokens"] <= 16 for r in rows)
    assert all(r["tokens"] == 16 for r in rows if r["truncated"])

    summary = json.loads((a / "syn_math500.summary.json").read_text())
    assert set(summary) == SUMMARY_KEYS
    assert summary["benchmark"] == "syn_math500"
    # The manifest's names ride along, so that the report names and places the split from the files alone.
    assert (summary["benchmark_display"], summary["benchmark_mirror"]) == ("Syn-L1 (≈MATH-500)", "math500")
    assert summary["tags"] == {"size": "small", "method": "base", "seed": 0, "step": 0}
    assert (summary["n_problems"], summary["k"], summary["n_samples"]) == (6, 2, 12)
    assert summary["pass1"] == sum(r["correct"] for r in rows if r["sample"] == 0) / 6
    assert summary["avg_k"] == pytest.approx(sum(r["correct"] for r in rows) / 12)
    lo, hi = summary["avg_k_ci95"]
    assert lo <= summary["avg_k"] <= hi
    assert summary["n_truncated"] == sum(r["truncated"] for r in rows)
    assert summary["settings"]["backend"] == "transformers" and summary["settings"]["k"] == 2
    assert "git" in summary["provenance"]


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--set", "k=0"], "k must be >= 1"),
        (["--set", "backend=hf"], "unknown generation backend 'hf'"),
        (["--set", "prompt_set=r1"], "unknown prompt set 'r1'"),
        (["--set", "top_p=0"], "top_p must be in (0, 1]"),
        (["--set", "kk=2"], "unknown option(s) ['kk']"),
        (["--set", "system_prompt=[a]"], "system_prompt: expected str, got ['a'] (list)"),
        (["--tag", "seed=zero"], "--tag seed must be an integer"),
    ],
)
def test_evaluate_bad_options_exit_2_and_write_nothing(tmp_path, capsys, benchmark_file, extra, message):
    model_dir, out_dir = tmp_path / "model", tmp_path / "out"  # an output inside an input is refused first
    model_dir.mkdir()
    assert cli.main(evaluate_args(model_dir, benchmark_file, out_dir, *extra)) == 2
    assert message in capsys.readouterr().err
    assert not out_dir.exists()


def test_evaluate_missing_model_dir_exit_2(tmp_path, capsys, benchmark_file):
    out_dir = tmp_path / "out"
    assert cli.main(evaluate_args(tmp_path / "no-model", benchmark_file, out_dir)) == 2
    assert "model folder not found" in capsys.readouterr().err
    assert not out_dir.exists()


def test_evaluate_bad_benchmark_file_exit_2(tmp_path, capsys):
    bad = tmp_path / "bench.jsonl"
    bad.write_text('{"id": "x", "problem": "1+1"}\n')
    out_dir = tmp_path / "out"
    model_dir = tmp_path / "model"  # not tmp_path itself: outputs inside an input folder are refused
    model_dir.mkdir()
    assert cli.main(evaluate_args(model_dir, bad, out_dir)) == 2
    assert "lacks ['answer', 'source']" in capsys.readouterr().err
    assert not out_dir.exists()


@pytest.fixture(scope="module")
def second_tiny_model_dir(tmp_path_factory) -> Path:
    """A second `small` tiny model (other random weights), so that the two models' samples differ."""
    from cwgrpo.models.tiny import save_tiny

    out = tmp_path_factory.mktemp("tiny-small-seed1")
    save_tiny(out, "small", seed=1)
    return out


@pytest.mark.slow
def test_evaluate_several_models_in_one_process_writes_the_files_of_one_process_each(
    tiny_model_dir, second_tiny_model_dir, benchmark_file, tmp_path
):
    """The workflow evaluates every checkpoint of a run in one process: each model's files must be the
    bytes that one `cwgrpo evaluate` per model writes."""
    settings = ["--set", "prompt_set=tiny", "--set", "k=2", "--set", "max_new_tokens=12", "--set", "limit=5"]
    settings += ["--set", "cpu_threads=1", "--set", "temperature=1.0", "--set", "batch_size=4"]
    env = {**os.environ, "CWGRPO_LOG_LEVEL": "WARNING"}
    models = {"step1": tiny_model_dir, "step2": second_tiny_model_dir}

    def model_args(step: str, out_dir: Path) -> list[str]:
        tags = ["--tag", "method=grpo", "--tag", f"step={step.removeprefix('step')}"]
        return [*evaluate_args(models[step], benchmark_file, out_dir / step)[1:], *tags]

    def cwgrpo_evaluate(*args: str) -> None:
        cmd = [sys.executable, "-m", "cwgrpo.cli", "evaluate", *args, *settings]
        proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=600)
        assert proc.returncode == 0, proc.stderr[-3000:]

    for step in models:
        cwgrpo_evaluate(*model_args(step, tmp_path / "apart"))
    cwgrpo_evaluate(*model_args("step1", tmp_path / "together"), *model_args("step2", tmp_path / "together"))

    for step in models:
        for fname in ("syn_math500.jsonl", "syn_math500.summary.json"):
            apart = (tmp_path / "apart" / step / fname).read_bytes()
            assert (tmp_path / "together" / step / fname).read_bytes() == apart, (step, fname)
    steps = [json.loads((tmp_path / "together" / s / "syn_math500.summary.json").read_text()) for s in models]
    assert [s["tags"] for s in steps] == [{"method": "grpo", "step": 1}, {"method": "grpo", "step": 2}]
    assert steps[0]["provenance"]["model_dir"] != steps[1]["provenance"]["model_dir"]
    samples = [(tmp_path / "together" / s / "syn_math500.jsonl").read_bytes() for s in models]
    assert samples[0] != samples[1], "two different models gave the same samples: the test shows nothing"


def test_evaluate_several_models_checks_every_model_before_writing_anything(
    tiny_model_dir, benchmark_file, tmp_path, capsys
):
    """A bad second model fails the whole command before the first model's files are written."""
    first = evaluate_args(tiny_model_dir, benchmark_file, tmp_path / "a")[1:]
    second = evaluate_args(tmp_path / "no-model", benchmark_file, tmp_path / "b")[1:]
    assert cli.main(["evaluate", *first, *second, "--set", "prompt_set=tiny"]) == 2
    assert "model folder not found" in capsys.readouterr().err
    assert not (tmp_path / "a").exists() and not (tmp_path / "b").exists()


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--benchmark-file", "b.jsonl", "--out", "o.jsonl", "--summary", "s.json"], "required: --model-dir"),
        (["--model-dir", "m", "--benchmark-file", "b.jsonl", "--out", "o.jsonl"], "required: --summary"),
        (
            ["--model-dir", "m", "--benchmark-file", "b.jsonl", "--out", "o.jsonl", "--summary", "s.json",
             "--model-dir", "m2", "--benchmark-file", "b.jsonl"],
            "required: --out, --summary (for --model-dir m2)",
        ),
        (
            ["--model-dir", "m", "--benchmark-file", "b.jsonl", "--benchmark-file", "c.jsonl", "--out", "o.jsonl",
             "--summary", "s.json"],
            "got 2 benchmark files, 1 --out, 1 --summary",
        ),
    ],
)  # fmt: skip
def test_evaluate_per_model_options_are_checked(tmp_path, capsys, monkeypatch, argv, message):
    monkeypatch.chdir(tmp_path)
    assert cli.main(["evaluate", *argv]) == 2
    assert message in capsys.readouterr().err
    assert not (tmp_path / "o.jsonl").exists()
