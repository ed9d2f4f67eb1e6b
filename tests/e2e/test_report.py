"""`snakemake --report` on the smoke DAG's run, opened in headless Chromium: every figure and the table
render, each with its caption.

Snakemake's report is a JavaScript app (React) over data embedded in the HTML file, so only a browser shows
whether it renders; the embedded data alone would contain every file name even if the app showed nothing.
The test therefore reads only what the app put on the page: tests/e2e/report_probe.js, appended to a copy
of the report, clicks through the menu as a reader would and records each result row, the element the
app shows for it (an <img> the browser decoded, an <iframe> for the PDF, a download link for Markdown)
and its caption; `chromium --headless --dump-dom` prints the page with that record.

Expected items come from the workflow, not from the report: one per caption in workflow/report/*.rst (the
study's only with a `study:` section), each the output of that name. Chromium is Debian's package
(`apt-get install chromium`); CI installs it and sets CWGRPO_REQUIRE_CHROMIUM=1, so that there a missing
browser fails the test instead of skipping it.
"""

from __future__ import annotations

import base64
import html
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from urllib.parse import unquote_to_bytes

import pytest
import yaml

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[2]
PROBE = Path(__file__).with_name("report_probe.js")
BROWSERS = ("chromium", "chromium-browser")


def _chromium() -> str:
    found = next((path for name in BROWSERS if (path := shutil.which(name))), None)
    if found:
        return found
    if os.environ.get("CWGRPO_REQUIRE_CHROMIUM"):
        pytest.fail("CWGRPO_REQUIRE_CHROMIUM is set but no chromium is on PATH (.ci/run installs Debian's)")
    pytest.skip("no chromium on PATH (Debian: apt-get install chromium); CI installs it and runs this test")


def expected_items(configfile: Path) -> set[str]:
    """The file-name stems the report must show for a preset: one per caption in workflow/report/."""
    stems = {p.stem for p in (REPO / "workflow" / "report").glob("*.rst")}
    if not yaml.safe_load(configfile.read_text()).get("study"):
        stems = {s for s in stems if not s.startswith("study")}
    return stems


def _data_uri_bytes(uri: str) -> bytes:
    head, _, body = uri.partition(",")
    assert head.startswith("data:"), uri[:80]
    return base64.b64decode(body) if head.endswith(";base64") else unquote_to_bytes(body)


def write_report(workdir: Path, configfile: Path, report: Path) -> None:
    """`snakemake --report REPORT` for the run in ``workdir`` (which it writes into: a log and a lock folder
    under .snakemake/)."""
    snakemake = shutil.which("snakemake", path=str(Path(sys.executable).parent)) or "snakemake"
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    cmd = [snakemake, "-s", str(REPO / "Snakefile"), "-d", str(workdir), "--configfile", str(configfile),
           "--report", str(report)]  # fmt: skip
    proc = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=600, env=env)
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-4000:]


def render(report: Path, scratch: Path, budget_ms: int = 60_000) -> dict:
    """Open a copy of ``report`` with the probe appended in headless Chromium; what the probe saw."""
    page = scratch / "report.probe.html"
    head, body_end, tail = report.read_text(encoding="utf-8").rpartition("</body>")  # the last: the page's
    assert body_end, f"{report}: no </body>"
    page.write_text(f"{head}<script>\n{PROBE.read_text()}\n</script>\n{body_end}{tail}", encoding="utf-8")
    cmd = [_chromium(), "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
           "--no-first-run", f"--user-data-dir={scratch / 'chromium-profile'}",
           f"--virtual-time-budget={budget_ms}", "--dump-dom", page.as_uri()]  # fmt: skip
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-4000:]
    found = re.findall(r'<pre id="cwgrpo-report-probe">(.*?)</pre>', proc.stdout, re.S)
    assert found, f"the probe left no record; chromium said:\n{proc.stderr[-3000:]}"
    return json.loads(html.unescape(found[-1]))


def check_rendered(seen: dict, workdir: Path, stems: set[str]) -> None:
    """Every expected item is one rendered row showing its own file's bytes, with its caption."""
    assert seen["errors"] == [] and seen["done"], seen["errors"]
    by_stem: dict[str, list[dict]] = {}
    for entry in seen["entries"]:
        by_stem.setdefault(Path(entry["path"]).stem, []).append(entry)
    assert set(by_stem) == stems, f"rendered {sorted(by_stem)}, expected {sorted(stems)}"
    for stem, entries in sorted(by_stem.items()):
        (entry,) = entries
        path = workdir / entry["path"]
        kind = {".png": "img", ".pdf": "iframe", ".html": "iframe"}.get(path.suffix, "download")
        assert entry["kind"] == kind, (stem, entry["kind"])
        assert _data_uri_bytes(entry["src"]) == path.read_bytes(), f"{stem}: the page shows other bytes"
        if kind == "img":
            assert entry["width"] > 100 and entry["height"] > 100, (stem, entry["width"], entry["height"])
        caption = (REPO / "workflow" / "report" / f"{stem}.rst").read_text()
        first_words = re.sub(r"[*`]", "", caption.split("\n\n")[0]).split()[:4]
        assert entry["caption"] and " ".join(first_words) in " ".join(entry["caption"].split()), stem


def test_the_smoke_runs_report_renders_every_figure_and_the_table(smoke_run, tmp_path):
    configfile = REPO / "config" / "smoke.yaml"
    stems = expected_items(configfile)
    assert {"table1", "entropy", "checkpoints", "covariance", "training_curves"} <= stems
    # A copy: the shared run is read only, and `snakemake --report` writes a log into .snakemake/.
    workdir = tmp_path / "run"
    shutil.copytree(smoke_run, workdir, symlinks=True)
    report = tmp_path / "report.html"
    write_report(workdir, configfile, report)
    seen = render(report, tmp_path)
    check_rendered(seen, smoke_run, stems)
    assert {"Table 1", "Figures", "Claims"} <= set(seen["categories"])
