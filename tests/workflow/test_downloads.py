"""Where the paper preset's downloads run under the Slurm profile: on the submit host by default (compute
nodes often have no network), as cluster jobs with data.downloads_on_submit_host: false.

A dry run does not show it (every job of a dry run is printed as local), so this runs the Slurm executor
for one download with a stand-in `cwgrpo` (fake_cwgrpo.py) and stand-in Slurm commands that refuse
everything: a job on the submit host runs and succeeds, a cluster job fails at submission.
"""

from __future__ import annotations

import re

import pytest
from test_gpu_box import _fake_cwgrpo
from test_workflow import PRESETS, REPO, run_snakemake

NO_SLURM = "#!/bin/sh\necho 'stand-in: no Slurm here' >&2\nexit 1\n"


@pytest.mark.parametrize("on_submit_host", [True, False])
def test_paper_downloads_run_on_the_submit_host_unless_configured(on_submit_host, tmp_path):
    bin_dir, records = _fake_cwgrpo(tmp_path)
    for name in ("sbatch", "sacct", "sinfo", "squeue", "scontrol", "sacctmgr", "sshare"):
        (bin_dir / name).write_text(NO_SLURM)
        (bin_dir / name).chmod(0o755)
    overlay = tmp_path / "overlay.yaml"
    overlay.write_text(f"data: {{downloads_on_submit_host: {str(on_submit_host).lower()}}}\n")
    proc, out = run_snakemake(
        tmp_path / "work",
        "results/paper/data/aime24.jsonl",
        "--profile",
        str(REPO / "profiles" / "slurm"),
        "--slurm-init-seconds-before-status-checks",
        "1",
        "--retries",
        "0",
        "--configfile",  # last: it takes several files, merged in order
        str(PRESETS["paper"]),
        str(overlay),
        path_prefix=bin_dir,
        env={"RECORD_DIR": str(records)},
    )
    heads = set(re.findall(r"^((?:local)?rule) prepare_data:$", out, re.M))
    if on_submit_host:
        assert proc.returncode == 0, out[-3000:]
        assert heads == {"localrule"} and len(list(records.iterdir())) == 1
    else:
        assert proc.returncode != 0 and "Job submission failed" in out, out[-3000:]
        assert heads == {"rule"} and list(records.iterdir()) == []
