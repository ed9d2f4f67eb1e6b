"""`cwgrpo samples`: which samples the page holds, their counts and flags, escaping, and bad input named.

The page is parsed back with :mod:`html.parser` (what a browser builds from it); tests/e2e/test_samples_page.py
clicks its filters in Chromium.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
from html.parser import HTMLParser
from pathlib import Path

import pytest

from cwgrpo import cli
from cwgrpo_workflow.report.samples import clip, render_page
from cwgrpo_workflow.report.samples_load import SamplesConfig, load_cells


def row(
    i: int, *, strict: bool, paper: bool | None = None, truncated: bool = False, completion: str = ""
) -> dict:
    r = {"id": f"p{i // 2}", "sample": i % 2, "completion": completion or f"so the answer is {i}",
         "extracted": str(i), "gold": "7", "correct": strict, "correct_strict": strict,
         "unscorable": False, "truncated": truncated, "tokens": 5}  # fmt: skip
    if paper is not None:
        r |= {"correct_paper": paper, "paper_pred": [f"{i}"], "paper_reason": None}
    return r


def write_cell(
    folder: Path,
    rows: list,
    *,
    method: str = "grpo",
    step: int = 4,
    benchmark: str = "syn_math500",
    graded: bool = True,
    extra_lines: tuple[str, ...] = (),
    data: Path | None = None,
) -> Path:
    """An evaluation's samples file and summary as `cwgrpo evaluate` (+ `grade`) name them."""  # fmt: skip
    stem = f"{benchmark}.graded" if graded else benchmark
    folder.mkdir(parents=True, exist_ok=True)
    lines = [json.dumps(r) for r in rows] + list(extra_lines)
    (folder / f"{stem}.jsonl").write_text("\n".join(lines) + "\n")
    summary = {"benchmark": benchmark, "benchmark_display": "Syn-L1",
               "tags": {"size": "small", "method": method, "seed": 0, "step": step},
               "primary_metric": "strict", "by_metric": {"strict": {}, **({"paper": {}} if graded else {})}}  # fmt: skip
    if data is not None:
        sha = hashlib.sha256(data.read_bytes()).hexdigest()
        summary["provenance"] = {"benchmark_file": str(data), "benchmark_sha256": sha}
    path = folder / f"{stem}.summary.json"
    path.write_text(json.dumps(summary))
    return path


class Articles(HTMLParser):
    """The data-* attributes and text of every sample <article>, and every <script> element."""

    def __init__(self) -> None:
        super().__init__()
        self.articles: list[dict] = []
        self.scripts = 0
        self._depth = 0

    def handle_starttag(self, tag, attrs):
        if tag == "script":
            self.scripts += 1
        if tag == "article":
            self.articles.append({**{k[5:]: v for k, v in attrs if k.startswith("data-")}, "text": ""})
            self._depth = 1
        elif self._depth and tag != "br":
            self._depth += 1

    def handle_endtag(self, tag):
        if self._depth:
            self._depth -= 1

    def handle_data(self, data):
        if self._depth:
            self.articles[-1]["text"] += data


def parse(page: str) -> Articles:
    parser = Articles()
    parser.feed(page)
    return parser


def test_each_cell_shows_a_fixed_seeded_choice_and_counts_the_whole_file(tmp_path):
    rows = [row(i, strict=i % 3 == 0, paper=i % 4 == 0, truncated=i % 5 == 0) for i in range(30)]
    summary = write_cell(tmp_path / "a", rows)
    cfg = SamplesConfig(kind="tiny", per_cell=8)
    (cell,), issues = load_cells([summary], cfg)
    assert issues == []
    assert len(cell.rows) == 30 and len(cell.shown) == 8
    assert [s.line for s in cell.shown] == sorted(s.line for s in cell.shown)  # file order
    assert cell.counts() == {
        "samples": 30,
        "wrong": sum(i % 3 != 0 for i in range(30)),
        "disagree": sum((i % 3 == 0) != (i % 4 == 0) for i in range(30)),
        "truncated": 6,
    }
    again = load_cells([summary], cfg)[0][0]
    other = load_cells([summary], SamplesConfig(kind="tiny", per_cell=8, sample_seed=1))[0][0]
    assert [s.line for s in again.shown] == [s.line for s in cell.shown]
    assert [s.line for s in other.shown] != [s.line for s in cell.shown]


def test_every_sample_carries_the_flags_the_filters_read(tmp_path):
    rows = [row(i, strict=i < 3, paper=i in (1, 2, 4), truncated=i in (0, 4)) for i in range(6)]
    a = write_cell(tmp_path / "a", rows)
    b = write_cell(tmp_path / "b", rows[:2], method="cw_grpo", step=8)
    cfg = SamplesConfig(kind="tiny")
    cells, _ = load_cells([a, b], cfg)
    page = parse(render_page("t", cells, [], cfg))
    arts = page.articles
    assert len(arts) == 8
    by_method = [a for a in arts if a["method"] == "grpo"]
    assert [a["wrong"] for a in by_method] == ["0", "0", "0", "1", "1", "1"]
    assert [a["disagree"] for a in by_method] == ["1", "0", "0", "0", "1", "0"]
    assert [a["truncated"] for a in by_method] == ["1", "0", "0", "0", "1", "0"]
    assert {(a["method"], a["step"], a["benchmark"], a["size"], a["seed"]) for a in arts} == {
        ("grpo", "4", "syn_math500", "small", "0"),
        ("cw_grpo", "8", "syn_math500", "small", "0"),
    }
    assert (
        "strict (ours): correct" in by_method[0]["text"]
        and "paper (lighteval): wrong" in by_method[0]["text"]
    )


def test_model_output_is_text_never_markup(tmp_path):
    evil = "<script>document.title='pwned'</script><img src=x onerror=alert(1)> & </pre>"
    rows = [row(0, strict=False, paper=False, completion=evil)]
    rows[0]["extracted"] = "<b>2</b>"
    rows[0]["gold"] = '"><script>x</script>'
    summary = write_cell(tmp_path / "a", rows)
    cfg = SamplesConfig(kind="tiny")
    cells, _ = load_cells([summary], cfg)
    html_text = render_page("<i>title</i>", cells, [], cfg)
    parsed = parse(html_text)
    assert parsed.scripts == 1  # the page's own filter script only
    assert "<img" not in html_text and "<b>2" not in html_text and "<i>title" not in html_text
    assert "&lt;script&gt;document.title=&#39;pwned&#39;&lt;/script&gt;" in html_text
    (article,) = parsed.articles
    assert evil in article["text"] and "<b>2</b>" in article["text"] and rows[0]["gold"] in article["text"]


def test_a_malformed_line_is_named_on_the_page_and_in_a_warning_and_the_rest_is_shown(tmp_path, caplog):
    rows = [row(i, strict=True, paper=True) for i in range(3)]
    bad = ("{not json", json.dumps({"id": "p9", "sample": 0, "gold": "1"}), json.dumps([1, 2]))
    summary = write_cell(tmp_path / "a", rows, extra_lines=bad)
    samples_file = summary.with_name("syn_math500.graded.jsonl")
    broken = tmp_path / "b" / "x.summary.json"
    broken.parent.mkdir()
    broken.write_text("{")
    out = tmp_path / "site" / "samples.html"
    with caplog.at_level(logging.WARNING):
        code = cli.main(["samples", "--summaries", str(summary), str(broken), "--out-html", str(out)])
    assert code == 0
    page = out.read_text()
    expected = [
        (f"{samples_file}:4", "not JSON"),
        (f"{samples_file}:5", "no string &#39;completion&#39;"),
        (f"{samples_file}:6", "not a JSON object but list"),
        (str(broken), "not JSON"),
    ]
    for where, why in expected:
        assert f"<code>{where}</code>: {why}" in page
        assert any(where in r.getMessage() for r in caplog.records if r.levelno == logging.WARNING), where
    assert len(parse(page).articles) == 3
    assert "4 issues with the inputs" in page


def test_the_problem_comes_from_the_benchmark_file_the_summary_names_if_unchanged(tmp_path):
    data = tmp_path / "syn_math500.jsonl"
    data.write_text(
        json.dumps({"id": "p0", "problem": "What is 3 + 4?", "answer": "7", "source": "s"}) + "\n"
    )
    summary = write_cell(tmp_path / "a", [row(0, strict=True)], graded=False, data=data)
    cfg = SamplesConfig(kind="tiny")
    cells, issues = load_cells([summary], cfg)
    assert issues == [] and cells[0].shown[0].problem == "What is 3 + 4?"
    assert cells[0].metrics == ("strict",)
    page = render_page("t", cells, issues, cfg)
    assert "What is 3 + 4?" in page and 'name="disagree" disabled' in page  # one metric: nothing to compare
    data.write_text(data.read_text().replace("3 + 4", "3 + 5"))
    cells, issues = load_cells([summary], cfg)
    assert cells[0].shown[0].problem is None
    assert [i.why for i in issues] == ["benchmark file changed since the evaluation: problems not shown"]


def test_a_long_completion_keeps_its_head_and_its_end():
    text = "start " + "x" * 10_000 + " the answer is 7"
    shown = clip(text, 600)
    assert shown.startswith("start ") and shown.endswith("the answer is 7") and len(shown) < 700
    assert "characters not shown" in shown and clip("short", 600) == "short"


def test_a_huge_problem_gold_and_answer_are_clipped_like_a_completion(tmp_path):
    """A 300,000-character problem, gold and extracted answer give a page of a few kB per sample, saying
    how much was left out."""
    huge = "1+" * 150_000 + "1"
    data = tmp_path / "syn_math500.jsonl"
    data.write_text(json.dumps({"id": "p0", "problem": huge, "answer": huge, "source": "s"}) + "\n")
    rows = [{**row(i, strict=False), "gold": huge, "extracted": huge} for i in range(2)]
    cfg = SamplesConfig(kind="tiny")
    cells, issues = load_cells([write_cell(tmp_path / "a", rows, graded=False, data=data)], cfg)
    assert issues == [] and cells[0].shown[0].problem == huge
    page = render_page("t", cells, issues, cfg)
    assert len(page) < len(render_page("t", [], [], cfg)) + 2 * 4 * (cfg.max_chars + 200)
    assert (
        page.count(f"[… {len(huge) - cfg.max_chars:,} characters not shown …]") == 2 * 3
    )  # problem, gold, answer


def test_the_page_never_overwrites_an_input_and_bad_options_are_one_line(tmp_path, capsys):
    summary = write_cell(tmp_path / "a", [row(0, strict=True)])
    samples_file = summary.with_name("syn_math500.graded.jsonl")
    before = samples_file.read_bytes()
    assert cli.main(["samples", "--summaries", str(summary), "--out-html", str(samples_file)]) == 2
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert "would overwrite the input" in line and samples_file.read_bytes() == before
    out = tmp_path / "p.html"
    assert (
        cli.main(["samples", "--summaries", str(summary), "--out-html", str(out), "--set", "per_cell=0"]) == 2
    )
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert "per_cell" in line and not out.exists()


@pytest.mark.parametrize("name", ["x.jsonl", "summary.json"])
def test_a_file_that_is_not_a_summary_is_named(tmp_path, name):
    path = tmp_path / name
    path.write_text("{}")
    cells, issues = load_cells([path], SamplesConfig(kind="tiny"))
    assert cells == [] and [i.where for i in issues] == [str(path)]


def test_a_summary_without_its_samples_file_is_named(tmp_path):
    summary = write_cell(tmp_path / "a", [row(0, strict=True)])
    summary.with_name("syn_math500.graded.jsonl").unlink()
    cells, issues = load_cells([summary], SamplesConfig(kind="tiny"))
    assert cells == [] and [(i.where, i.why) for i in issues] == [
        (str(summary.with_name("syn_math500.graded.jsonl")), f"samples file of {summary} not found")
    ]


def _samples(summary, out, *more):
    return cli.main(["samples", "--summaries", str(summary), *map(str, more), "--out-html", str(out)])


def test_samples_a_line_with_a_lone_surrogate_is_named_and_the_rest_shown(tmp_path):
    rows = [row(0, strict=True, paper=False, completion="bad \ud800 text"), row(1, strict=False, paper=False)]
    summary = write_cell(tmp_path / "cell", rows)
    out = tmp_path / "page.html"
    assert _samples(summary, out) == 0
    page = out.read_text(encoding="utf-8")
    assert "syn_math500.graded.jsonl:1</code>: text that is not valid Unicode" in page
    assert page.count('<article class="sample"') == 1  # the good line


def test_samples_a_folder_whose_name_is_not_utf8_still_gives_the_page(tmp_path):
    folder = tmp_path / os.fsdecode(b"run-\xff")  # Python reads such a name as a lone surrogate
    summary = write_cell(folder, [row(0, strict=True, paper=False)])
    out = tmp_path / "page.html"
    assert _samples(summary, out) == 0
    assert "run-\\udcff" in out.read_text(encoding="utf-8")  # shown as an escape


def test_samples_steps_that_only_look_like_numbers_sort_after_the_numbers(tmp_path):
    summaries = []
    for i, step in enumerate(["--5", "²", "4"]):
        summary = write_cell(tmp_path / f"c{i}", [row(0, strict=True, paper=False)])
        data = json.loads(summary.read_text())
        data["tags"]["step"] = step
        summary.write_text(json.dumps(data))
        summaries.append(summary)
    out = tmp_path / "page.html"
    assert _samples(*summaries[:1], out, *summaries[1:]) == 0
    page = out.read_text(encoding="utf-8")
    assert page.index('data-step="4"') < page.index('data-step="--5"')


def test_samples_never_writes_over_the_benchmark_file_it_reads(tmp_path, capsys):
    bench = tmp_path / "bench.jsonl"
    bench.write_text(json.dumps({"id": "p0", "problem": "2+2"}) + "\n")
    before = bench.read_bytes()
    summary = write_cell(tmp_path / "cell", [row(0, strict=True, paper=False)], data=bench)
    assert _samples(summary, bench) == 2
    assert bench.read_bytes() == before
    assert "would overwrite the input" in capsys.readouterr().err


def test_samples_a_missing_summary_is_an_error_before_anything_is_written(tmp_path, capsys):
    good = write_cell(tmp_path / "cell", [row(0, strict=True, paper=False)])
    out = tmp_path / "page.html"
    assert _samples(good, out, tmp_path / "typo.summary.json") == 2
    assert not out.exists()
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].endswith(f"missing file: {tmp_path / 'typo.summary.json'}")


def test_samples_a_summary_named_twice_is_one_cell(tmp_path):
    summary = write_cell(tmp_path / "cell", [row(0, strict=True, paper=False)])
    out = tmp_path / "page.html"
    assert _samples(summary, out, tmp_path / "cell" / ".." / "cell" / summary.name) == 0
    assert out.read_text(encoding="utf-8").count('<section class="cell"') == 1


def write_train_completions(run_dir: Path, steps: list[int], rows: int = 6, method: str = "grpo") -> None:
    """A run folder's run.json and the files TRL's log_completions writes (GRPOTrainer.log: a DataFrame of
    the generation batch to <output_dir>/completions/completions_<step:05d>.parquet)."""
    import pandas as pd

    (run_dir / "completions").mkdir(parents=True)
    (run_dir / "run.json").write_text(json.dumps({"tags": {"size": "small", "method": method, "seed": 0}}))
    for step in steps:
        table = {
            "step": [step] * rows,
            "prompt": [[{"role": "system", "content": "Think."}, {"role": "user", "content": f"{i}+1"}] for i in range(rows)],
            "completion": [[{"role": "assistant", "content": f"<b>{i + step}</b>"}] for i in range(rows)],
            "accuracy_reward": [float(i % 2) for i in range(rows)],
            "advantage": [0.5 - i % 2 for i in range(rows)],
        }  # fmt: skip
        pd.DataFrame(table).to_parquet(run_dir / "completions" / f"completions_{step:05d}.parquet")


def test_training_completions_follow_the_evaluation_samples(tmp_path):
    """With --runs, each run's first and last logged step of TRL's log_completions, per_cell rows each,
    in their own section; model output stays text."""
    summary = write_cell(tmp_path / "eval", [row(0, strict=True, paper=True)])
    run_dir = tmp_path / "runs" / "grpo"
    write_train_completions(run_dir, [1, 2, 3])
    out = tmp_path / "p.html"
    argv = ["samples", "--summaries", str(summary), "--runs", str(run_dir), "--out-html", str(out)]
    assert cli.main([*argv, "--set", "per_cell=4"]) == 0
    page = out.read_text()
    training = page.split('<section id="training">', 1)[1]
    arts = parse(training).articles
    assert len(arts) == 8  # steps 1 and 3, 4 rows each
    assert (
        "GRPO · small (≈1.5B) · seed 0 · step 1" in training
        and "· step 3" in training
        and "· step 2" not in training
    )
    assert "4 of 6 completions of this step" in training
    assert "system: Think.\nuser: 0+1" in arts[0]["text"] and "<b>1</b>" in arts[0]["text"]
    assert "accuracy_reward 0, advantage +0.5" in arts[0]["text"]
    assert "<b>1</b>" not in page  # escaped
    assert len(parse(page.split('<section id="training">', 1)[0]).articles) == 1  # the evaluation sample


def test_a_plain_trl_output_dir_shows_its_completions_named_by_its_folder(tmp_path):
    """A drop-in user's TRL output_dir has no run.json: its completions are shown, named by the folder."""
    summary = write_cell(tmp_path / "eval", [row(0, strict=True, paper=True)])
    run_dir = tmp_path / "my-trl-run"
    write_train_completions(run_dir, [5])
    (run_dir / "run.json").unlink()
    out = tmp_path / "p.html"
    argv = ["samples", "--summaries", str(summary), "--runs", str(run_dir), "--out-html", str(out)]
    assert cli.main(argv) == 0
    training = out.read_text().split('<section id="training">', 1)[1]
    assert f"{run_dir} · — · seed — · step 5" in training
    assert len(parse(training).articles) == 6


def test_runs_without_training_completions_say_how_to_get_them(tmp_path):
    summary = write_cell(tmp_path / "eval", [row(0, strict=True, paper=True)])
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    (run_dir / "run.json").write_text(json.dumps({"tags": {"size": "small", "method": "grpo", "seed": 0}}))
    out = tmp_path / "p.html"
    assert (
        cli.main(["samples", "--summaries", str(summary), "--runs", str(run_dir), "--out-html", str(out)])
        == 0
    )
    assert "with log_completions: true in the preset&#39;s train: section" in out.read_text()
    bad = tmp_path / "bad"
    write_train_completions(bad, [2])
    (bad / "completions" / "completions_00002.parquet").write_bytes(b"not parquet")
    assert cli.main(["samples", "--summaries", str(summary), "--runs", str(bad), "--out-html", str(out)]) == 0
    assert "completions_00002.parquet</code>: not a readable completions file" in out.read_text()


def test_plain_trl_folders_are_named_by_their_path_and_a_missing_one_is_an_issue(tmp_path):
    """Campaign #61-#63: two TRL output_dirs of one name were indistinguishable, `--runs .` had no name, and
    a mistyped folder passed silently."""
    from cwgrpo_workflow.report.samples import load_train_steps
    from cwgrpo_workflow.report.samples_load import SamplesConfig

    for parent in ("a", "b"):
        write_train_completions(tmp_path / parent / "output", [1])
        (tmp_path / parent / "output" / "run.json").unlink()
    runs = [tmp_path / "a" / "output", tmp_path / "b" / "output", tmp_path / "nope"]
    steps, issues = load_train_steps(runs, SamplesConfig(kind="tiny"))
    assert [s.tags["method"] for s in steps] == [str(runs[0]), str(runs[1])]
    assert [(i.where, i.why) for i in issues] == [(str(runs[2]), "no such run folder")]
