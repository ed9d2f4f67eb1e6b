"""``cwgrpo samples``: a static page of completions to read, from the evaluation files alone.

    cwgrpo samples --summaries results/tiny/eval/*/*/seed*/step*/*.summary.json \\
        --out-html figures/tiny/samples.html --set per_cell=10

Each ``X.summary.json`` names its cell (benchmark and the tags size, method, seed, step) and its samples
file ``X.jsonl`` beside it (``X.graded.summary.json``: ``X.graded.jsonl``, with the paper metric's
verdicts). Of each cell the page shows a fixed, seeded choice of ``per_cell`` samples with the problem (from
the benchmark file the summary names, when it is still there with the same SHA-256), the gold, each metric's
extracted answer and verdict, and whether the completion was truncated, and counts over the whole file.
With ``--runs``, the runs' training completions (TRL's ``log_completions``) follow in a section of their
own. A malformed line or file is named on the page and in a warning, and the page is built from the rest.
Reading is :mod:`cwgrpo_workflow.report.samples_load`. The page is the Jinja template
``workflow/cwgrpo_workflow/resources/samples.html``, rendered with autoescape on (model output, like every
string from a result file, is text), self-contained and readable without its script.
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import logging
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jinja2

from cwgrpo.configs import add_config_arguments, config_from_args, describe_options
from cwgrpo.io import ResultFileError, check_arguments_not_overwritten, write_text
from cwgrpo_workflow.report.load import add_input_arguments
from cwgrpo_workflow.report.samples_load import (
    Cell,
    Issue,
    Sample,
    SamplesConfig,
    benchmark_files,
    load_cells,
    samples_path_of,
)

TEMPLATE = Path(__file__).resolve().parent.parent / "resources" / "samples.html"
METRIC_NAMES = {"strict": "strict (ours)", "paper": "paper (lighteval)"}
# the checkbox filters, each a data-* attribute of a sample
FLAGS = {"disagree": "the metrics disagree", "wrong": "wrong", "truncated": "truncated"}


def clip(text: str, max_chars: int) -> str:
    """``text``, or its head and (longer) tail around a note of what is left out: a completion's answer
    is at its end. Every text of a sample is clipped so (the problem, the gold and the answers too), so
    the page's size is bounded by its number of samples."""
    if len(text) <= max_chars:
        return text
    head = max_chars // 3
    tail = max_chars - head
    return f"{text[:head]}\n\n[… {len(text) - max_chars:,} characters not shown …]\n\n{text[-tail:]}"


def cell_data(cell: Cell) -> dict[str, str]:
    """The data-* attributes of a cell's elements, which the page's filters read."""
    return {f"data-{k}": v for k, v in {"benchmark": cell.benchmark, **cell.tags}.items()}


def sample_data(s: Sample, cell: Cell) -> dict[str, str]:
    flags = {"wrong": not s.correct, "disagree": s.disagree, "truncated": s.truncated}
    more = {"id": s.problem_id, "sample": str(s.index)} | {k: "1" if v else "0" for k, v in flags.items()}
    return cell_data(cell) | {f"data-{k}": v for k, v in more.items()}


def select_options(cells: list[Cell], cfg: SamplesConfig) -> list[tuple[str, str, list[tuple[str, str]]]]:
    """The page's selects: (attribute, label, [(value, shown)]), values in the cells' order, steps by number."""
    names = {
        "benchmark": cfg.benchmark_name,
        "method": cfg.method_name,
        "step": lambda v: f"step {v}",
        "size": cfg.size_name,
        "seed": lambda v: f"seed {v}",
    }
    selects = []
    for key, name in names.items():
        values = list(dict.fromkeys(cell_data(c)[f"data-{key}"] for c in cells))
        if key == "step":
            values.sort(key=lambda v: (len(v), v))
        selects.append((key, "checkpoint" if key == "step" else key, [(v, name(v)) for v in values]))
    return selects


def scores(row: dict[str, Any]) -> str:
    """A training completion's rewards and advantage, as one line."""
    shown = [f"{name} {value:.3g}" for name, value in row["rewards"].items()]
    if row["advantage"] is not None:
        shown.append(f"advantage {row['advantage']:+.3g}")
    return ", ".join(shown)


def render_page(
    title: str,
    cells: list[Cell],
    issues: list[Issue],
    cfg: SamplesConfig,
    training: list[TrainStep] | None = None,
) -> str:
    """The page; ``training``, the training completions (:func:`load_train_steps`), follows the evaluation
    samples in a section of its own (with a hint how to get them when there are none)."""
    shown = sum(len(c.shown) for c in cells)
    total = sum(len(c.rows) for c in cells)
    metrics = sorted({m for c in cells for m in c.metrics}, key=list(METRIC_NAMES).index)
    primary = sorted({c.primary for c in cells})
    lede = (
        f"{shown} of {total} samples in {len(cells)} evaluation file{'s' * (len(cells) != 1)}: up to {cfg.per_cell} per benchmark × "
        f"method × checkpoint, a fixed choice (seed {cfg.sample_seed}). Metrics: "
        f"{', '.join(METRIC_NAMES.get(m, m) for m in metrics) or 'none'}; “wrong” is the verdict of "
        f"{' / '.join(primary) or 'the primary metric'}."
    )
    # no link to the section: the address's fragment holds the filters (a jump would clear them)
    jump = " Training completions follow them, at the end of the page." if training is not None else ""
    source = TEMPLATE.read_text(encoding="utf-8")
    # the page's Content-Security-Policy allows its own script only (by hash): were a completion ever
    # rendered unescaped, a script in it would not run
    script = source.split("<script>", 1)[1].split("</script>", 1)[0].encode()
    env = jinja2.Environment(
        autoescape=True, trim_blocks=True, lstrip_blocks=True, keep_trailing_newline=True,
        undefined=jinja2.StrictUndefined,
    )  # fmt: skip
    env.filters["clip"] = clip
    page = env.from_string(source).render(
        title=title, lede=lede + jump, cells=cells, issues=issues, cfg=cfg, training=training,
        flags=FLAGS, both_metrics=any(len(c.metrics) > 1 for c in cells), selects=select_options(cells, cfg),
        metric_names=METRIC_NAMES, cell_data=cell_data, sample_data=sample_data, scores=scores, hint=HINT,
        script_sha256=base64.b64encode(hashlib.sha256(script).digest()).decode(),
    )  # fmt: skip
    # a file name that is not UTF-8 reaches Python as lone surrogates: shown as escapes, not a failed page
    return page.encode("utf-8", "backslashreplace").decode("utf-8")


# -- the training completions' section --------------------------------------------------------------
# With log_completions: true, TRL 1.16 writes the latest generation batch at every logging step to
# <output_dir>/completions/completions_<step>.parquet (``cwgrpo train``'s output_dir is the run folder); the
# page shows, per run, the first and the last logged step, ``per_cell`` rows of each (so whole groups).
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
    """The first and last logged step of each run that saved completions (a cwgrpo run, or any TRL
    ``output_dir``, named by its folder); a file that cannot be read is an issue, not a failed page."""
    from cwgrpo.io import ResultFileError
    from cwgrpo_workflow.report.load import run_info

    shown, issues = [], []
    for run_dir in run_dirs:
        if not Path(run_dir).is_dir():
            issues.append(Issue(str(run_dir), "no such run folder"))
            continue
        steps = logged_steps(Path(run_dir))
        if not steps:
            continue
        if not (Path(run_dir) / "run.json").exists():  # a plain TRL output_dir: named by its path as given
            name = str(run_dir) if Path(run_dir).name else Path(run_dir).resolve().name
            tags = {"size": "—", "method": name, "seed": "—"}
        else:
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


log = logging.getLogger(__name__)


def configure_parser(parser: argparse.ArgumentParser) -> None:
    add_input_arguments(parser, runs=False)
    parser.add_argument(
        "--runs",
        nargs="*",
        action="extend",
        type=Path,
        default=None,
        help="run folders: their training completions (TRL's log_completions) in a section of their own",
    )
    parser.add_argument("--out-html", required=True, type=Path, help="e.g. figures/<preset>/samples.html")
    parser.add_argument("--title", default=None, help="the page's title (default: from the output's folder)")
    add_config_arguments(parser)
    parser.epilog = describe_options(SamplesConfig)


OUTPUTS = ("out_html",)  # every other path argument is read (cwgrpo.cli)


def run(args: argparse.Namespace) -> int:
    cfg = config_from_args(SamplesConfig, args)
    summaries = list(args.summaries)
    missing = [p for p in summaries if not p.exists()]
    if missing:  # a mistyped path: named, not a page without it
        raise ResultFileError(
            f"missing file: {missing[0]}" + (f" (and {len(missing) - 1} more)" * (len(missing) > 1))
        )
    samples = [samples_path_of(p) for p in summaries if p.name.endswith(".summary.json")]
    check_arguments_not_overwritten(args, OUTPUTS, [*samples, *benchmark_files(summaries)])
    cells, issues = load_cells(summaries, cfg)
    title = args.title or f"Samples: {args.out_html.resolve().parent.name}"
    training = None
    if args.runs is not None:
        training, train_issues = load_train_steps(args.runs, cfg)
        issues += train_issues
    for issue in issues:
        log.warning("%s: %s", issue.where, issue.why)
    write_text(args.out_html, render_page(title, cells, issues, cfg, training))
    shown = sum(len(c.shown) for c in cells)
    log.info("%s: %d samples of %d cells (%d issues)", args.out_html, shown, len(cells), len(issues))
    return 0
