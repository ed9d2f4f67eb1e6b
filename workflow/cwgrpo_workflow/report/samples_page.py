"""The HTML of ``cwgrpo samples``: one self-contained page (its style and script inline, nothing fetched).

Every sample is rendered here, as escaped text, so that the page reads without its script; the script
(``workflow/cwgrpo_workflow/resources/samples.html``, with the style) only hides what the filters leave out and counts the
rest. Model output is text: every string from a result file goes through :func:`html.escape`.

Training completions follow the evaluation samples (``--runs``), from what TRL's ``log_completions``
saved: with ``log_completions: true`` (a preset's ``train:`` section, or ``cwgrpo train --set
log_completions=true``) TRL 1.16 writes the latest generation batch at every logging step to
``<output_dir>/completions/completions_<step>.parquet`` (step, prompt, completion, each reward, advantage);
``cwgrpo train``'s ``output_dir`` is the run folder. The page shows, per run, the first and the last logged
step, ``per_cell`` rows of each: the first rows, so whole groups of one prompt.
"""

from __future__ import annotations

import base64
import hashlib
import re
from dataclasses import dataclass
from html import escape
from pathlib import Path
from typing import Any

from cwgrpo_workflow.report.samples_load import Cell, Issue, Sample, SamplesConfig

TEMPLATE = Path(__file__).resolve().parent.parent / "resources" / "samples.html"
METRIC_NAMES = {"strict": "strict (ours)", "paper": "paper (lighteval)"}
FLAGS = ("disagree", "wrong", "truncated")  # the checkbox filters, each a data-* attribute of a sample
FLAG_LABELS = {"disagree": "the metrics disagree", "wrong": "wrong", "truncated": "truncated"}
OVERVIEW_HEADINGS = [
    "benchmark",
    "method",
    "size",
    "seed",
    "checkpoint",
    "samples",
    "wrong",
    "disagree",
    "truncated",
    "shown",
]


def clip(text: str, max_chars: int) -> str:
    """``text``, or its head and (longer) tail around a note of what is left out: a completion's answer
    is at its end. Every text of a sample is clipped so (the problem, the gold and the answers too), so
    the page's size is bounded by its number of samples."""
    if len(text) <= max_chars:
        return text
    head = max_chars // 3
    tail = max_chars - head
    return f"{text[:head]}\n\n[… {len(text) - max_chars:,} characters not shown …]\n\n{text[-tail:]}"


def plural(n: int, noun: str) -> str:
    return f"{n} {noun}{'s' if n != 1 else ''}"


def _attrs(values: dict[str, str]) -> str:
    return "".join(f' data-{k}="{escape(v)}"' for k, v in values.items())


def cell_attrs(cell: Cell) -> dict[str, str]:
    return {"benchmark": cell.benchmark, **cell.tags}


def checkpoint_label(tags: dict[str, str]) -> str:
    return f"step {tags['step']}"


def cell_title(cell: Cell, cfg: SamplesConfig) -> str:
    t = cell.tags
    bench = cfg.benchmark_name(cell.benchmark)
    return f"{bench} · {cfg.method_name(t['method'])} · {cfg.size_name(t['size'])} · seed {t['seed']} · " + (
        checkpoint_label(t)
    )


def verdict_badge(metric: str, correct: bool, primary: bool) -> str:
    word = "correct" if correct else "wrong"
    mark = " primary" if primary else ""
    return f'<span class="verdict {word}{mark}" data-metric="{metric}">{escape(METRIC_NAMES.get(metric, metric))}: {word}</span>'


def sample_html(s: Sample, cell: Cell, cfg: SamplesConfig) -> str:
    flags = {"wrong": not s.correct, "disagree": s.disagree, "truncated": s.truncated}
    data = {**cell_attrs(cell), "id": s.problem_id, "sample": str(s.index)}
    data |= {k: "1" if v else "0" for k, v in flags.items()}
    badges = [verdict_badge(m, s.verdicts[m], m == cell.primary) for m in cell.metrics]
    if s.truncated:
        badges.append('<span class="flag truncated">truncated</span>')
    if s.disagree:
        badges.append('<span class="flag disagree">metrics disagree</span>')
    if s.unscorable:
        badges.append('<span class="flag">gold unscorable</span>')
    answers = "".join(
        f"<dt>{escape(METRIC_NAMES.get(m, m))} extracted</dt>"
        f'<dd class="answer" data-metric="{m}">{_text_or_none(s.answers[m], cfg.max_chars)}</dd>'
        for m in cell.metrics
    )
    problem = _text_or_none(s.problem, cfg.max_chars, "(the benchmark file is not available)")
    where = f"{cell.samples_path}:{s.line}"
    return (
        f'<article class="sample"{_attrs(data)}>'
        f'<header><span class="id">{escape(s.problem_id)} · sample {s.index}</span> {" ".join(badges)}'
        f'<span class="where">{escape(where)}</span></header>'
        f'<dl><dt>problem</dt><dd class="problem">{problem}</dd>'
        f'<dt>gold</dt><dd class="gold">{escape(clip(s.gold, cfg.max_chars))}</dd>{answers}</dl>'
        f'<pre class="completion">{escape(clip(s.completion, cfg.max_chars))}</pre></article>'
    )


def _text_or_none(text: str | None, max_chars: int, none: str = "(none)") -> str:
    """Escaped text clipped to ``max_chars`` (a problem, a gold or an answer can be megabytes too)."""
    return escape(clip(text, max_chars)) if text else f'<span class="none">{escape(none)}</span>'


def cell_html(cell: Cell, cfg: SamplesConfig) -> str:
    c = cell.counts()
    counts = (
        f"{c['samples']} samples in the file: {c['wrong']} wrong, {c['truncated']} truncated"
        + (f", {c['disagree']} where the metrics disagree" if len(cell.metrics) > 1 else "")
        + f"; {len(cell.shown)} shown"
    )
    samples = "".join(sample_html(s, cell, cfg) for s in cell.shown)
    return (
        f'<section class="cell"{_attrs(cell_attrs(cell))}><h2>{escape(cell_title(cell, cfg))}</h2>'
        f'<p class="counts">{escape(counts)}</p>{samples}</section>'
    )


def overview_html(cells: list[Cell], cfg: SamplesConfig) -> str:
    """One row per cell with its counts over the whole file (filtered with the page's selects)."""
    head = "".join(f"<th>{h}</th>" for h in OVERVIEW_HEADINGS)
    rows = []
    for cell in cells:
        c, t = cell.counts(), cell.tags
        bench = cfg.benchmark_name(cell.benchmark)
        disagree = str(c["disagree"]) if len(cell.metrics) > 1 else "—"
        values = [
            bench,
            cfg.method_name(t["method"]),
            cfg.size_name(t["size"]),
            t["seed"],
            checkpoint_label(t),
        ]
        values += [str(c["samples"]), str(c["wrong"]), disagree, str(c["truncated"]), str(len(cell.shown))]
        rows.append(
            f"<tr{_attrs(cell_attrs(cell))}>" + "".join(f"<td>{escape(v)}</td>" for v in values) + "</tr>"
        )
    return f'<table id="cells"><thead><tr>{head}</tr></thead><tbody>{"".join(rows)}</tbody></table>'


def filters_html(cells: list[Cell], cfg: SamplesConfig) -> str:
    both = any(len(c.metrics) > 1 for c in cells)
    boxes = []
    for flag in FLAGS:
        off = "" if flag != "disagree" or both else ' disabled title="only one metric was scored"'
        boxes.append(f'<label><input type="checkbox" name="{flag}"{off}> {FLAG_LABELS[flag]}</label>')
    selects = []
    names = {
        "benchmark": cfg.benchmark_name,
        "method": cfg.method_name,
        "step": lambda v: f"step {v}",
        "size": cfg.size_name,
        "seed": lambda v: f"seed {v}",
    }
    labels = {"step": "checkpoint"}
    for key, name in names.items():
        values = list(dict.fromkeys(cell_attrs(c)[key] for c in cells))
        if key == "step":
            values.sort(key=lambda v: (len(v), v))
        options = "".join(f'<option value="{escape(v)}">{escape(name(v))}</option>' for v in values)
        selects.append(
            f'<label>{labels.get(key, key)} <select name="{key}"><option value="">all</option>{options}</select></label>'
        )
    return (
        f'<form id="filters">{"".join(boxes)}{"".join(selects)}'
        f'<output id="count" aria-live="polite"></output></form>'
    )


def issues_html(issues: list[Issue]) -> str:
    if not issues:
        return ""
    items = "".join(f"<li><code>{escape(i.where)}</code>: {escape(i.why)}</li>" for i in issues)
    return f'<section id="issues"><h2>{plural(len(issues), "issue")} with the inputs (also warnings in the log)</h2><ul>{items}</ul></section>'


def render_page(
    title: str,
    cells: list[Cell],
    issues: list[Issue],
    cfg: SamplesConfig,
    training: str = "",
) -> str:
    """The page; ``training``, the training completions' section (:func:`train_html`), follows
    the evaluation samples."""
    shown = sum(len(c.shown) for c in cells)
    total = sum(len(c.rows) for c in cells)
    metrics = sorted({m for c in cells for m in c.metrics}, key=list(METRIC_NAMES).index)
    primary = sorted({c.primary for c in cells})
    lede = (
        f"{shown} of {total} samples in {plural(len(cells), 'evaluation file')}: up to {cfg.per_cell} per benchmark × "
        f"method × checkpoint, a fixed choice (seed {cfg.sample_seed}). Metrics: "
        f"{', '.join(METRIC_NAMES.get(m, m) for m in metrics) or 'none'}; “wrong” is the verdict of "
        f"{' / '.join(primary) or 'the primary metric'}."
    )
    # no link to the section: the address's fragment holds the filters (a jump would clear them)
    jump = " Training completions follow them, at the end of the page." if training else ""
    body = (
        f'<header><h1>{escape(title)}</h1><p class="lede">{escape(lede + jump)}</p></header>{issues_html(issues)}'
        f"{filters_html(cells, cfg) if cells else ''}{overview_html(cells, cfg)}"
        f'<main id="samples">{"".join(cell_html(c, cfg) for c in cells)}</main>{training}'
    )
    page = TEMPLATE.read_text(encoding="utf-8")
    page = page.replace("<!--SCRIPT_SHA256-->", script_sha256(page))
    page = page.replace("<!--TITLE-->", escape(title)).replace("<!--BODY-->", body)
    # a file name that is not UTF-8 reaches Python as lone surrogates: shown as escapes, not a failed page
    return page.encode("utf-8", "backslashreplace").decode("utf-8")


def script_sha256(page: str) -> str:
    """The page's Content-Security-Policy allows its own script only (by hash): were a completion ever
    rendered unescaped, a script in it would not run."""
    script = page.split("<script>", 1)[1].split("</script>", 1)[0]
    return base64.b64encode(hashlib.sha256(script.encode()).digest()).decode()


# -- the training completions' section --------------------------------------------------------------
FOLDER = "completions"  # TRL's, under output_dir
_STEP = re.compile(r"completions_(\d+)\.parquet")
_NOT_REWARDS = ("step", "prompt", "completion", "advantage", "image", "images")
HINT = (
    "No training completions saved: with log_completions: true in the preset's train: section, TRL writes "
    "each logged step's completions to the run folder's completions/ and they appear here."
)


@dataclass(frozen=True)
class TrainStep:
    """The rows shown of one logged step of one run."""

    tags: dict[str, str]  # size, method, seed (the run's run.json)
    step: int
    path: Path
    total: int  # rows in the file
    rows: list[dict[str, Any]]


def message_text(value: Any) -> str:
    """A prompt or completion as text: a conversation's messages as ``role: content`` lines."""
    if isinstance(value, list):
        return "\n".join(
            f"{m.get('role', '?')}: {m.get('content', '')}" if isinstance(m, dict) else str(m) for m in value
        )
    return "" if value is None else str(value)


def logged_steps(run_dir: Path) -> dict[int, Path]:
    """Step -> its completions file, for every file TRL wrote under ``run_dir``."""
    found = {}
    for path in (run_dir / FOLDER).glob("completions_*.parquet"):
        if match := _STEP.fullmatch(path.name):
            found[int(match.group(1))] = path
    return dict(sorted(found.items()))


def read_step(path: Path, tags: dict[str, str], step: int, per_step: int) -> TrainStep:
    import pyarrow.parquet as pq  # datasets' dependency, so TRL's

    records = pq.read_table(path).to_pylist()
    rows = [
        {
            "prompt": message_text(r.get("prompt")),
            "completion": message_text(r.get("completion")),
            "advantage": r.get("advantage"),
            "rewards": {
                k: v
                for k, v in r.items()
                if k not in _NOT_REWARDS and isinstance(v, int | float) and v is not None
            },
        }
        for r in records[:per_step]
    ]
    return TrainStep(tags, step, path, len(records), rows)


def load_train_steps(run_dirs: list[Path], cfg: SamplesConfig) -> tuple[list[TrainStep], list[Issue]]:
    """The first and last logged step of each run that saved completions; a file that cannot be read is
    an issue, not a failed page."""
    from cwgrpo.io import ResultFileError
    from cwgrpo_workflow.report.load import run_info

    shown, issues = [], []
    for run_dir in run_dirs:
        steps = logged_steps(Path(run_dir))
        if not steps:
            continue
        try:
            info = run_info(run_dir)
        except ResultFileError as err:
            issues.append(Issue(str(Path(run_dir) / "run.json"), str(err)))
            continue
        tags = {k: str(info[k]) for k in ("size", "method", "seed")}
        for step in dict.fromkeys([min(steps), max(steps)]):
            try:
                shown.append(read_step(steps[step], tags, step, cfg.per_cell))
            except Exception as err:  # pyarrow's errors have no common base: a damaged file of any kind
                issues.append(Issue(str(steps[step]), f"not a readable completions file: {err}"))
    return shown, issues


def train_html(steps: list[TrainStep], cfg: SamplesConfig) -> str:
    """The page's training section (id ``training``): one block per run and step."""
    blocks = []
    for s in steps:
        t = s.tags
        title = (
            f"{cfg.method_name(t['method'])} · {cfg.size_name(t['size'])} · seed {t['seed']} · step {s.step}"
        )
        items = []
        for i, row in enumerate(s.rows):
            scores = [f"{name} {value:.3g}" for name, value in row["rewards"].items()]
            if row["advantage"] is not None:
                scores.append(f"advantage {row['advantage']:+.3g}")
            items.append(
                f'<article class="train"><header><span class="id">row {i + 1}</span> '
                f'<span class="flag">{escape(", ".join(scores))}</span></header>'
                f'<dl><dt>prompt</dt><dd class="problem">{escape(clip(row["prompt"], cfg.max_chars))}</dd></dl>'
                f'<pre class="completion">{escape(clip(row["completion"], cfg.max_chars))}</pre></article>'
            )
        blocks.append(
            f"<section><h3>{escape(title)}</h3><p class='counts'>{len(s.rows)} of {s.total} completions of "
            f"this step (<code>{escape(str(s.path))}</code>)</p>{''.join(items)}</section>"
        )
    body = "".join(blocks) or f'<p class="none">{escape(HINT)}</p>'
    return f'<section id="training"><h2>Training completions (TRL log_completions)</h2>{body}</section>'
