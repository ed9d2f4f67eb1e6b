"""Record the checkpoint layouts of real ZeRO-2 and ZeRO-3 saves into tests/fixtures/checkpoint_layouts.

    python -m tests.deepspeed.record_layouts [--python .venv-deepspeed/bin/python]

Trains the tests' run (tests/deepspeed/conftest.py: 2 processes, the bundled zero2.yaml / zero3.yaml) in a
temporary folder and writes the newest checkpoint's files, as tests/unit/checkpoint_layouts.py reads them.
tests/deepspeed/test_multirank_saves.py checks, at every CI run, that a real save still matches them.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
from pathlib import Path

from cwgrpo.train.checkpoints import complete_checkpoints
from tests.deepspeed.conftest import OPTIONS, Job, checkpoint_files, find_deepspeed_python
from tests.unit.checkpoint_layouts import LAYOUTS


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--python", type=Path, default=None, help="the DeepSpeed environment's python")
    args = parser.parse_args()
    python = args.python or find_deepspeed_python()
    version = subprocess.run(
        [str(python), "-c", "import importlib.metadata as m; print(m.version('deepspeed'))"],
        capture_output=True, text=True, check=True,
    ).stdout.strip()  # fmt: skip
    with tempfile.TemporaryDirectory() as tmp:
        inputs = Path(tmp)
        for cmd in (
            ["build-tiny", "--size", "small", "--out-dir", "model", "--marker", "model.json"],
            ["prepare-data", "--dataset", "syn_train", "--out", "data/syn_train.jsonl"],
        ):
            subprocess.run([sys.executable, "-m", "cwgrpo.cli", *cmd], cwd=inputs, check=True)
        for stage in (2, 3):
            job = Job(python, inputs, inputs / f"zero{stage}", stage)
            done = job.run()
            if done.returncode != 0:
                raise SystemExit(f"ZeRO-{stage} training failed:\n{done.stdout}")
            newest = complete_checkpoints(job.run_dir)
            files = checkpoint_files(newest[max(newest)])
            header = (
                f"# checkpoint-{max(newest)} of a real ZeRO-{stage} save: deepspeed {version}, "
                f"{OPTIONS['num_processes']} processes, cwgrpo/resources/accelerate/zero{stage}.yaml\n"
                "# written by python -m tests.deepspeed.record_layouts\n"
            )
            (LAYOUTS / f"zero{stage}.txt").write_text(header + "".join(f"{f}\n" for f in files))
            print(f"zero{stage}: {len(files)} files")
    return 0


if __name__ == "__main__":
    sys.exit(main())
