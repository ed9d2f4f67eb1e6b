"""A failed job's cause is in the workflow's own output: the last lines of its log (local runs too)."""

from __future__ import annotations

import re
from pathlib import Path
from types import SimpleNamespace

from test_gpu_box import _fake_cwgrpo
from test_workflow import PRESETS, REPO, run_snakemake

CAUSE = "cwgrpo build-tiny: error: fake cause of the failure (FAKE_CWGRPO_FAIL=build-tiny)"


def _failed_build_tiny(tmp_path, **env: str):
    """The tiny preset's first job, failed by the stand-in `cwgrpo` (``env``: more of its settings)."""
    bin_dir, records = _fake_cwgrpo(tmp_path)
    return run_snakemake(
        tmp_path / "work",
        "--cores",
        "1",
        "results/tiny/models/small/init.json",
        configfile=PRESETS["tiny"],
        path_prefix=bin_dir,
        env={
            "FAKE_CWGRPO_FAIL": "build-tiny",
            "RECORD_DIR": str(records),
            "CWGRPO_LOCK_DIR": str(tmp_path),
            **env,
        },
    )


def test_a_failed_job_prints_the_last_lines_of_its_log(tmp_path):
    proc, out = _failed_build_tiny(tmp_path)
    assert proc.returncode != 0
    assert "build_tiny failed; the last 20 lines of logs/tiny/build_tiny/small.log:" in out, out[-3000:]
    assert CAUSE in out.split("the last 20 lines of", 1)[1]  # the cause, printed after the header
    assert "progress line 21" not in out and "progress line 22" in out  # 19 progress lines + the cause


def _failed_job_logs():
    from cwgrpo_workflow.dag.preset_files import shorten

    namespace = {"re": re, "Path": Path, "shorten": shorten}
    exec(
        compile((REPO / "workflow" / "rules" / "failures.smk").read_text(), "failures.smk", "exec"), namespace
    )
    return namespace["failed_job_logs"]


def _scheduler(log: Path) -> SimpleNamespace:
    job = SimpleNamespace(log=[str(log)], rule=SimpleNamespace(name="train_small"))
    return SimpleNamespace(failed=[job])


def test_a_huge_log_line_is_clipped_and_terminal_escapes_are_shown_not_sent(tmp_path):
    log = tmp_path / "train.log"
    log.write_bytes(b"start\n" + b"x" * 5_000_000 + b"\n\x1b]0;owned\x07\x1b[2J\x00\xff binary\nlast line\n")
    text = _failed_job_logs()(_scheduler(log))
    assert len(text) < 2_000
    assert "\x1b" not in text and "\x07" not in text and "\x00" not in text
    assert "\\x1b]0;owned\\x07" in text and "last line" in text
    assert "characters" in text  # the clipped line says so


def test_a_long_last_line_is_shortened_between_words(tmp_path):
    """A refusal naming long paths (the command that keeps a run) is shortened, never cut inside a word."""
    words = [f"word{i:03d}" for i in range(90)]  # 720 characters
    proc, out = _failed_build_tiny(tmp_path, FAKE_CWGRPO_CAUSE=" ".join(words))
    assert proc.returncode != 0
    (line,) = [line.strip() for line in out.splitlines() if "cwgrpo build-tiny: error: word000" in line]
    marker = re.search(r" \[… [\d,]+ characters …\] ", line)
    assert marker and len(line) <= 420, line
    kept = (
        line[: marker.start()].split()[3:] + line[marker.end() :].split()
    )  # after "cwgrpo build-tiny: error:"
    assert kept[0] == "word000" and kept[-1] == "word089" and set(kept) <= set(words)
