"""Make docs/images/samples.png: the sample browser of a real run, in headless Chromium.

    snakemake --cores all --configfile config/smoke.yaml   # a real run (add an overlay with
                                                           # train: {log_completions: true} for its
                                                           # training completions)
    python docs/images/samples_png.py results/smoke '#method=cw_grpo'

The page is built with `cwgrpo samples` from every evaluation summary and run folder of the run, as the
workflow's `samples` rule does (a graded summary where the paper metric ran; the run's newest `samples`
options), and opened with the view
given (the filters in the address); the screenshot is 1200 x 1300 pixels. Chromium is Debian's package.
The image in the repository: the smoke preset cut to two methods (grpo, cw_grpo) and two benchmarks
(syn_math500, syn_amc23), with log_completions, shot with the view '#method=cw_grpo&step=4'.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

OUT = Path(__file__).resolve().with_name("samples.png")


def summaries(results: Path) -> list[Path]:
    """One summary per evaluation: the graded one where `cwgrpo grade` ran, else the plain one."""
    found = sorted(results.glob("eval/*/*/seed*/step*/*.summary.json"))
    graded = {
        p.name.removesuffix(".graded.summary.json") for p in found if p.name.endswith(".graded.summary.json")
    }
    return [
        p
        for p in found
        if p.name.endswith(".graded.summary.json") or p.name.removesuffix(".summary.json") not in graded
    ]


def main(results: Path, view: str) -> None:
    runs = sorted(p.parent for p in results.glob("runs/*/*/seed*/run.json"))
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if chromium is None:
        sys.exit("no chromium on PATH (Debian: apt-get install chromium)")
    with tempfile.TemporaryDirectory() as scratch:
        page = Path(scratch) / results.name / "samples.html"
        cmd = [sys.executable, "-m", "cwgrpo.cli", "samples", "--summaries", *map(str, summaries(results))]
        options = sorted((results / "options").glob("samples.*.yaml"), key=lambda p: p.stat().st_mtime)
        cmd += ["--config", str(options[-1])] if options else []  # the run's display names, as its page
        subprocess.run([*cmd, "--runs", *map(str, runs), "--out-html", str(page)], check=True)
        subprocess.run(
            [chromium, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
             f"--user-data-dir={Path(scratch) / 'profile'}", "--window-size=1200,1300",
             f"--screenshot={OUT}", page.as_uri() + view],
            check=True, capture_output=True,
        )  # fmt: skip
    print(f"wrote {OUT}")


if __name__ == "__main__":
    main(
        Path(sys.argv[1] if len(sys.argv) > 1 else "results/smoke"), sys.argv[2] if len(sys.argv) > 2 else ""
    )
