"""A failed job's cause is in the workflow's own output: the last lines of its log (local runs too)."""

from __future__ import annotations

from test_gpu_box import _fake_cwgrpo
from test_workflow import PRESETS, run_snakemake

CAUSE = "cwgrpo build-tiny: error: fake cause of the failure (FAKE_CWGRPO_FAIL=build-tiny)"


def test_a_failed_job_prints_the_last_lines_of_its_log(tmp_path):
    bin_dir, records = _fake_cwgrpo(tmp_path)
    proc, out = run_snakemake(
        tmp_path / "work",
        "--cores",
        "1",
        "results/tiny/models/small/init.json",
        configfile=PRESETS["tiny"],
        path_prefix=bin_dir,
        env={"FAKE_CWGRPO_FAIL": "build-tiny", "RECORD_DIR": str(records), "CWGRPO_LOCK_DIR": str(tmp_path)},
    )
    assert proc.returncode != 0
    assert "build_tiny failed; the last 20 lines of logs/tiny/build_tiny/small.log:" in out, out[-3000:]
    assert CAUSE in out.split("the last 20 lines of", 1)[1]  # the cause, printed after the header
    assert "progress line 21" not in out and "progress line 22" in out  # 19 progress lines + the cause
