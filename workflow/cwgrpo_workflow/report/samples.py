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
Reading is :mod:`cwgrpo_workflow.report.samples_load`, the page :mod:`cwgrpo_workflow.report.samples_page`.
"""

from __future__ import annotations

import argparse
import logging
from pathlib import Path

from cwgrpo.configs import add_config_arguments, config_from_args, describe_options
from cwgrpo.io import ResultFileError, check_arguments_not_overwritten, write_text
from cwgrpo_workflow.report.load import add_input_arguments
from cwgrpo_workflow.report.samples_load import SamplesConfig, benchmark_files, load_cells, samples_path_of
from cwgrpo_workflow.report.samples_page import load_train_steps, render_page

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
