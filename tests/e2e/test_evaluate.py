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
    "truncated",
    "tokens",
}
SUMMARY_KEYS = {
    "benchmark", "tags", "n_problems", "k", "pass1", "avg_k", "avg_k_se", "avg_k_ci95",
    "n_samples", "n_truncated", "n_unscorable", "settings", "provenance", "primary_metric", "by_metric",
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
        (["--tag", "seed=zero"], "--tag seed must be an integer"),
    ],
)
def test_evaluate_bad_options_exit_2_and_write_nothing(tmp_path, capsys, benchmark_file, extra, message):
    out_dir = tmp_path / "out"
    assert cli.main(evaluate_args(tmp_path, benchmark_file, out_dir, *extra)) == 2
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
