"""Every command's options, checked at the workflow's parse by the command's own config.

An error names the section a bad key came from: a typo must fail ``snakemake -n``, not a job hours later.
Training options are judged by TRL's config as ``cwgrpo train`` builds it, in the jobs' interpreter, once
per options set.
"""

from __future__ import annotations

import dataclasses
import sys
from collections.abc import Callable, Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

from cwgrpo.configs import ConfigError, OptionError, check_together, nearest, options_digest, options_text
from cwgrpo_workflow.dag.options import (
    built_sizes,
    evaluate_options,
    report_options,
    stage_options,
    study_options,
    train_options,
    train_sources,
    untrained,
    where_set,
)
from cwgrpo_workflow.dag.resources import Error

TRL_BUDGET_S = 300.0  # the jobs' interpreter's start, TRL's import and every config it builds


Verdicts = list[list[tuple[str | None, str]]]  # per options text, its (key, message) errors


def train_errors(config: Mapping[str, Any], judge: Callable[[list[str]], Verdicts]) -> Iterator[Error]:
    """Each size's and method's training options, as its first seed's job gets them, judged by ``judge``,
    each error named by the preset key that sets its option."""
    seed = config["seeds"][0]
    runs: dict[str, list[tuple[str, str]]] = {}  # options text -> the (size, method) runs it trains
    for size in config["sizes"]:
        for method in config["methods"]:
            text = options_text(train_options(config, size, method, seed))
            runs.setdefault(text, []).append((size, method))
    for text, errors in zip(runs, judge(list(runs)), strict=True):
        for size, method in runs[text]:
            found = [OptionError(key, message) for key, message in errors]
            yield from sourced(found, train_sources(config, size, method))


def judged_in_jobs_python(
    env: Mapping[str, str], cache: Path, notes: list[str], passed: list[Path]
) -> Callable[[list[str]], Verdicts]:
    """``cwgrpo.train.probe.judge_options`` in the jobs' interpreter for every text without a file in
    ``cache`` (named by the hash of the text and that interpreter); the files of those that pass now are
    appended to ``passed``, written once the parse succeeds. Where it cannot judge, ``notes`` says so."""
    from cwgrpo_workflow.dag.machine import ask_train_python, train_python

    def judge(texts: list[str]) -> Verdicts:
        python = train_python(env)
        marks = {text: cache / options_digest(f"{python}\n{text}") for text in texts}
        todo = [text for text in texts if not marks[text].exists()]
        try:
            asked = (
                ask_train_python({"ask": "options", "texts": todo}, env, TRL_BUDGET_S, "the training options")
                if todo
                else []
            )
        except ConfigError as err:
            notes.append(f"note: {err}; each training job checks its options before it starts")
            return [[] for _ in texts]
        answers = dict(zip(todo, asked, strict=True))
        passed.extend(marks[text] for text in todo if not answers[text])
        return [answers.get(text, []) for text in texts]

    return judge


def check_options(cls: type, options: Mapping[str, Any]) -> None:
    """Options of a command whose config is the dataclass ``cls``: unknown keys by name, then the values."""
    known = {f.name for f in dataclasses.fields(cls)}
    for key in options:
        if key not in known:
            guess = nearest(key, known)
            hint = f"did you mean {guess!r}?" if guess else f"known: {sorted(known)}"
            raise OptionError(key, f"unknown option {key!r} for {cls.__name__}; {hint}")
    check_together(cls, options)


def sourced(errors: Iterable[OptionError], sources: list[tuple[str, Mapping]]) -> Iterator[Error]:
    sources = [(name, m) for name, m in sources if m]
    for err in errors:
        where = where_set(sources, err.key) or (sources[-1][0] if sources else "?")
        yield (f"{where}.{err.key}" if err.key else where), str(err)


def _checked(check: Any, options: Mapping, sources: list[tuple[str, Mapping]]) -> Iterator[Error]:
    try:
        check(options)
    except OptionError as err:
        yield from sourced([err], sources)


def stage_option_errors(config: Mapping[str, Any], size: str) -> Iterator[Error]:
    from cwgrpo.evaluate.options import EvalConfig
    from cwgrpo.models.sft import SftConfig
    from cwgrpo.models.tiny import TinyConfig

    spec = config["sizes"][size]
    stages = [("evaluate", EvalConfig, evaluate_options(config, size), config["evaluate"])]
    if size in built_sizes(config):
        for stage, cls in (("build", TinyConfig), ("sft", SftConfig)):
            stages.append((stage, cls, stage_options(config, stage, size), config.get(stage, {})))
    for section, cls, opts, top in stages:
        sources = [(section, top), (f"sizes.{size}.{section}", spec.get(section, {}))]
        yield from _checked(lambda o, cls=cls: check_options(cls, o), opts, sources)


def report_option_errors(config: Mapping[str, Any]) -> Iterator[Error]:
    try:  # the report commands need pandas, which a bare Snakemake environment may lack
        from cwgrpo_workflow.report.claim_checks import ClaimsConfig
        from cwgrpo_workflow.report.figures import FigureConfig
        from cwgrpo_workflow.report.options import TableConfig
        from cwgrpo_workflow.report.samples_load import SamplesConfig
    except ImportError as err:
        print(f"note: report options not checked at parse time ({err})", file=sys.stderr)
        return
    classes = {"table": TableConfig, "figure": FigureConfig, "claims": ClaimsConfig, "samples": SamplesConfig}
    for command, cls in classes.items():
        sources = [("report", config["report"]), (command, config[command])]
        yield from _checked(
            lambda o, cls=cls: check_options(cls, o), report_options(config, command), sources
        )
    table = TableConfig(**report_options(config, "table"))
    methods = list(config["methods"])
    for key in ("methods", "effect_methods"):
        missing = untrained(config, getattr(table, key), table.base_method)
        if missing:
            yield (
                "report.methods / table.methods" if key == "methods" else "table.effect_methods",
                f"{missing} not trained by this preset (methods: {', '.join(methods)}); "
                f"Table 1 needs each: list only this preset's methods (default {key}: "
                f"{getattr(TableConfig(kind=config['kind']), key)})",
            )
    yield from paper_mirror_errors(config, table, FigureConfig(**report_options(config, "figure")))
    if config.get("study"):
        from cwgrpo_workflow.report.study import StudyConfig

        sources = [("report", config["report"]), ("study", config["study"])]
        preset_key = {
            "study.treatment_method": "study.treatment",
            "study.mechanism_method": "study.mechanism",
        }
        for key, message in _checked(lambda o: check_options(StudyConfig, o), study_options(config), sources):
            yield preset_key.get(key, key), message


def paper_mirror_errors(config: Mapping[str, Any], table: Any, figure: Any) -> Iterator[Error]:
    from cwgrpo import paper
    from cwgrpo.data.registry import DATASETS

    own = config.get("datasets") or {}

    def mirror(b: str) -> str | None:
        return table.mirror(b) or own.get(b, {}).get("mirrors") or getattr(DATASETS.get(b), "mirrors", None)

    sizes = list(config["sizes"])
    if not any(table.size_mirror(s) for s in sizes):
        yield (
            "report.size_mirrors",
            f"no size of this preset ({', '.join(sizes)}) stands in for a paper size ({', '.join(paper.SIZES)}), "
            "so Table 1's comparison with the paper (cwgrpo table) would fail after the runs; set "
            f"report.size_mirrors, e.g. {{{sizes[0]}: {next(iter(paper.SIZES))}}}",
        )
    mirrored = {mirror(b) for b in config["data"]["benchmarks"]}
    missing = [b for b in figure.checkpoint_benchmarks if b not in mirrored]
    if missing:
        yield (
            "figure.checkpoint_benchmarks",
            f"{missing}: no benchmark of this preset stands in for it (data.benchmarks mirror "
            f"{sorted(m for m in mirrored if m)}), so the checkpoint figure would fail after the runs; list "
            "paper benchmarks that data.benchmarks mirror",
        )
