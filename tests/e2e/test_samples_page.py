"""The sample browser in headless Chromium: the page `cwgrpo samples` builds from real evaluation files,
each filter clicked, the samples the browser then lays out counted against the files, and a screenshot.

The evaluation files come from the real `cwgrpo evaluate` on the random tiny model (and the real
`cwgrpo grade --metric paper` where lighteval's environment is there), plus one hand-written cell whose
verdicts differ from each other (a random model's answers are all wrong), with a completion holding a
script and a malformed line. Expected counts are read from those files here, never from the page.
tests/e2e/samples_probe.js does the clicking; Chromium is Debian's, as in tests/e2e/test_report.py.
"""

from __future__ import annotations

import base64
import hashlib
import html
import json
import os
import re
import struct
import subprocess
from pathlib import Path

import pytest

from tests.e2e.conftest import cwgrpo
from tests.e2e.test_report import _chromium

pytestmark = pytest.mark.slow

PROBE = Path(__file__).with_name("samples_probe.js")
EVIL = "<script>document.title='pwned'</script> so the answer is \\boxed{7}"
HAND_ROWS = [  # (strict, paper, truncated, completion)
    (True, True, False, "3 + 4 = 7, so the answer is \\boxed{7}"),
    (True, False, False, "The answer is 7."),
    (False, True, True, "Adding, 3 + 4 = \\boxed{7"),
    (False, False, True, EVIL),
    (False, False, False, "so the answer is \\boxed{8}"),
]


def _lighteval_python() -> str | None:
    from cwgrpo.configs import ConfigError
    from cwgrpo.grading import paper_metric

    try:
        return str(paper_metric.find_lighteval_python())
    except ConfigError as err:
        if os.environ.get("CWGRPO_REQUIRE_LIGHTEVAL") == "1":
            pytest.fail(f"CWGRPO_REQUIRE_LIGHTEVAL=1 but {err}")
        return None


def _hand_cell(folder: Path) -> Path:
    folder.mkdir(parents=True)
    data = folder / "problems.jsonl"
    data.write_text(
        "".join(json.dumps({"id": f"h{i}", "problem": f"What is 3 + 4? ({i})"}) + "\n" for i in range(5))
    )
    rows = [
        {"id": f"h{i}", "sample": 0, "completion": text, "extracted": "7" if strict else "8", "gold": "7",
         "correct": strict, "correct_strict": strict, "correct_paper": paper, "paper_pred": ["7"] if paper else [],
         "unscorable": False, "truncated": truncated, "tokens": 12}
        for i, (strict, paper, truncated, text) in enumerate(HAND_ROWS)
    ]  # fmt: skip
    lines = [json.dumps(r) for r in rows] + ['{"id": "h9", "sample": 0, "completion": 3}']
    (folder / "syn_amc23.graded.jsonl").write_text("\n".join(lines) + "\n")
    summary = {"benchmark": "syn_amc23", "benchmark_display": "Syn-L3", "benchmark_mirror": "amc23",
               "tags": {"size": "small", "method": "cw_grpo", "seed": 0, "step": 4},
               "primary_metric": "strict", "by_metric": {"strict": {}, "paper": {}},
               "provenance": {"benchmark_file": str(data),
                              "benchmark_sha256": hashlib.sha256(data.read_bytes()).hexdigest()}}  # fmt: skip
    path = folder / "syn_amc23.graded.summary.json"
    path.write_text(json.dumps(summary))
    return path


@pytest.fixture(scope="module")
def evaluations(e2e_inputs, tmp_path_factory) -> list[Path]:
    """Summaries of two real evaluations (base at step 0, `grpo` at step 4: the same random model, tagged
    twice) and of the hand-written cell, in a preset's layout (results/demo/eval/...) under the folder
    the page is built in (``.parents[7]`` of each)."""
    run = tmp_path_factory.mktemp("samples-run")
    root = run / "results" / "demo" / "eval" / "small"
    data = e2e_inputs / "data" / "syn_math500.jsonl"
    args = ["evaluate", "--set", "prompt_set=tiny", "--set", "k=2", "--set", "max_new_tokens=12",
            "--set", "limit=3", "--set", "batch_size=6", "--set", "cpu_threads=1", "--set", "grading_processes=1",
            "--set", "temperature=1.0"]  # fmt: skip
    folders = {(m, step): root / m / "seed0" / f"step{step}" for m, step in (("base", 0), ("grpo", 4))}
    for (method, step), folder in folders.items():
        args += ["--model-dir", str(e2e_inputs / "model"), "--benchmark-file", str(data),
                 "--out", str(folder / "syn_math500.jsonl"), "--summary", str(folder / "syn_math500.summary.json"),
                 "--tag", "size=small", "--tag", f"method={method}", "--tag", "seed=0", "--tag", f"step={step}"]  # fmt: skip
    cwgrpo(*args, cwd=run)
    summaries = [folder / "syn_math500.summary.json" for folder in folders.values()]
    python = _lighteval_python()
    if python is not None:
        grade = ["grade", "--metric", "paper", "--lighteval-python", python, "--processes", "1"]
        for s in summaries:
            stem = s.parent / "syn_math500"
            grade += ["--in", f"{stem}.jsonl", "--out", f"{stem}.graded.jsonl", "--summary-in", str(s),
                      "--summary-out", f"{stem}.graded.summary.json"]  # fmt: skip
        cwgrpo(*grade, cwd=run)
        summaries = [s.with_name("syn_math500.graded.summary.json") for s in summaries]
    return [*summaries, _hand_cell(root / "cw_grpo" / "seed0" / "step4")]


def _rows(summary: Path) -> list[dict]:
    """The good lines of a summary's samples file, read here independently of the page."""
    samples = summary.with_name(summary.name.removesuffix(".summary.json") + ".jsonl")
    cell = json.loads(summary.read_text())
    out = []
    for line in samples.read_text().splitlines():
        row = json.loads(line)
        if isinstance(row.get("completion"), str):
            out.append({**row, **cell["tags"], "benchmark": cell["benchmark"]})
    return out


def _chromium_run(page: Path, scratch: Path, *extra: str, uri: str = "") -> subprocess.CompletedProcess:
    cmd = [_chromium(), "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
           "--no-first-run", f"--user-data-dir={scratch / 'chromium-profile'}", *extra, uri or page.as_uri()]  # fmt: skip
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-4000:]
    return proc


def _with_script(page: str, script: str, allowed: bool) -> str:
    """The page with ``script`` inline at its end; ``allowed``: its hash added to the page's CSP."""
    body = f"\n{script}\n"
    if allowed:
        digest = base64.b64encode(hashlib.sha256(body.encode()).digest()).decode()
        page = re.sub(r"(script-src 'sha256-[^']+')", rf"\1 'sha256-{digest}'", page, count=1)
    head, end, tail = page.rpartition("</body>")
    return f"{head}<script>{body}</script>{end}{tail}"


def test_the_sample_browser_filters_in_chromium(evaluations, tmp_path):
    run = evaluations[0].parents[7]
    relative = [str(s.relative_to(run)) for s in evaluations]
    cwgrpo("samples", "--summaries", *relative, "--out-html", "figures/demo/samples.html", "--set", "per_cell=50",
           cwd=run)  # fmt: skip
    page = run / "figures" / "demo" / "samples.html"
    text = page.read_text()
    probe_page = tmp_path / "probe.html"
    probe_page.write_text(_with_script(text, PROBE.read_text(), allowed=True))
    dom = _chromium_run(probe_page, tmp_path, "--virtual-time-budget=10000", "--dump-dom").stdout
    found = re.findall(r'<pre id="cwgrpo-samples-probe">(.*?)</pre>', dom, re.S)
    assert found, dom[-2000:]
    seen = json.loads(html.unescape(found[-1]))
    assert seen["errors"] == [] and seen["done"], seen["errors"]
    steps = {s["name"]: s for s in seen["steps"]}

    rows = [r for s in evaluations for r in _rows(s)]
    both = [r for r in rows if "correct_paper" in r]
    expected = {
        "all": rows,
        "wrong": [r for r in rows if not r["correct"]],
        "disagree": [r for r in both if r["correct_strict"] != r["correct_paper"]],
        "truncated": [r for r in rows if r["truncated"]],
        "wrong+truncated": [r for r in rows if r["truncated"] and not r["correct"]],
        "cleared": rows,
        "method=cw_grpo": [r for r in rows if r["method"] == "cw_grpo"],
        "step=0": [r for r in rows if r["step"] == 0],
        "benchmark=syn_math500": [r for r in rows if r["benchmark"] == "syn_math500"],
    }
    assert len(expected["disagree"]) >= 2 and len(expected["wrong"]) < len(rows)
    for name, want in expected.items():
        got = steps[name]["samples"]
        assert len(got) == len(want), (name, len(got), len(want))
        assert steps[name]["count"] == f"showing {len(want)} of {len(rows)} samples", name
        key = [(r["method"], str(r["step"]), r["id"], r["sample"]) for r in want]
        assert sorted(key) == sorted((s["method"], s["step"], s["id"], int(s["sample"])) for s in got), name
    for s in steps["wrong"]["samples"]:
        assert s["wrong"] == "1" and "strict (ours): wrong" in s["verdicts"]
    for s in steps["disagree"]["samples"]:
        assert sorted(v.split(": ")[1] for v in s["verdicts"]) == ["correct", "wrong"]
    assert steps["method=cw_grpo"]["rows"] == 1 and steps["all"]["rows"] == len(evaluations)

    # model output is text: the script in a completion shows as written and never ran
    assert seen["title"] == "Samples: demo" and EVIL in seen["completions"]
    bad_line = f"{Path(relative[-1]).with_name('syn_amc23.graded.jsonl')}:6: no string 'completion'"
    assert bad_line in seen["issues"]

    # the page's CSP lets only its own script run: were a completion ever unescaped, it would not run
    injected = tmp_path / "injected.html"
    injected.write_text(_with_script(text, "document.title = 'pwned';", allowed=False))
    assert "<title>pwned" not in _chromium_run(injected, tmp_path, "--dump-dom").stdout

    # a view in the address: the page opens with those filters set (as docs/images/samples_png.py uses)
    view = page.as_uri() + "#method=cw_grpo"
    linked = _chromium_run(page, tmp_path, "--dump-dom", uri=view).stdout
    assert re.search(rf'<output id="count"[^>]*>showing 5 of {len(rows)} samples<', linked), linked[-3000:]
    shot = tmp_path / "samples.png"
    _chromium_run(
        page, tmp_path, "--window-size=1200,1300", "--hide-scrollbars", f"--screenshot={shot}", uri=view
    )
    png = shot.read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and struct.unpack(">II", png[16:24]) == (1200, 1300)
