"""``cwgrpo evaluate``: sample k answers per benchmark problem, grade them, write samples and a summary.

Several models in one process: each ``--model-dir`` takes the ``--tag``, ``--benchmark-file``, ``--out``
and ``--summary`` after it, and its files are byte-identical to those of one call per model. Outputs:
docs/architecture.md. Everything is checked before the model is loaded.
"""

from __future__ import annotations

import argparse
import dataclasses
import hashlib
import logging
from pathlib import Path
from typing import Any

from cwgrpo.configs import (
    ConfigError,
    add_config_arguments,
    config_from_args,
    config_hash,
    describe_options,
    parse_tags,
)
from cwgrpo.data.prompts import eval_messages
from cwgrpo.data.registry import load_records
from cwgrpo.evaluate.options import EvalConfig
from cwgrpo.evaluate.summary import benchmark_identity, sample_rows, summarise, summary_line
from cwgrpo.generation import check_model_dir
from cwgrpo.io import ResultFileError, check_outputs_not_inputs, write_json, write_jsonl
from cwgrpo.launch.devices import one_gpu

logger = logging.getLogger(__name__)


@dataclasses.dataclass
class ModelJobs:
    """One model to evaluate: its folder, its summaries' tags and its (benchmark, samples, summary) files."""

    model_dir: Path
    tags: dict[str, Any]
    jobs: list[tuple[Path, Path, Path]]


def evaluate_models(models: list[ModelJobs], cfg: EvalConfig) -> list[list[dict[str, Any]]]:
    """Evaluate several models in one process, one at a time, every input checked before the first loads."""
    import gc

    from cwgrpo.generation import get_backend
    from cwgrpo.seeding import seed_everything

    if not models:
        raise ConfigError("no --model-dir given")
    outputs = [Path(p).resolve() for m in models for _, out, summary in m.jobs for p in (out, summary)]
    if len(set(outputs)) != len(outputs):
        raise ConfigError(f"the --out/--summary paths must all differ: {[str(p) for p in outputs]}")
    inputs = [p for m in models for p in (m.model_dir, *(b for b, _, _ in m.jobs))]
    check_outputs_not_inputs(inputs, outputs)
    loaded_by_model = []
    for m in models:
        if not m.jobs:
            raise ConfigError(f"no benchmark given for --model-dir {m.model_dir}")
        loaded = []
        for benchmark_file, _, _ in m.jobs:
            records = load_records(benchmark_file)
            loaded.append(records[: cfg.limit] if cfg.limit is not None else records)
        check_model_dir(m.model_dir)
        check_model_readable(m.model_dir)
        check_benchmarks_fit(m.model_dir, [b for b, _, _ in m.jobs], loaded, cfg)
        loaded_by_model.append(loaded)

    results = []
    for m, loaded in zip(models, loaded_by_model, strict=True):
        backend = get_backend(cfg.backend, m.model_dir, **cfg.backend_options())
        summaries = []
        for (benchmark_file, out, summary_path), records in zip(m.jobs, loaded, strict=True):
            seed_everything(cfg.seed)  # each benchmark's samples do not depend on which others ran before
            summaries.append(
                _evaluate_one(backend, m.model_dir, benchmark_file, records, out, summary_path, cfg, m.tags)
            )
        results.append(summaries)
        del backend  # one model in memory at a time
        gc.collect()
    return results


def check_model_readable(model_dir: Path) -> None:
    """A checkpoint (or model) whose weights are truncated or corrupt is named before anything loads."""
    from cwgrpo.train.runguard import verify_checkpoint

    problem = verify_checkpoint(Path(model_dir))
    if problem is not None:
        raise ResultFileError(f"cannot evaluate {model_dir}: {problem}")


def check_benchmarks_fit(
    model_dir: Path, files: list[Path], loaded: list[list[dict]], cfg: EvalConfig
) -> None:
    """Every prompt, as the backend will build it, fits the model's context (before any generation)."""
    from transformers import AutoTokenizer

    from cwgrpo.generation import check_prompts_fit, messages_to_text, model_context

    context = model_context(model_dir)
    if context is None:
        return
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    for path, records in zip(files, loaded, strict=True):
        messages = [eval_messages(cfg.prompts(), rec["problem"]) for rec in records]
        texts = [
            tokenizer.apply_chat_template(m, add_generation_prompt=True, tokenize=False)
            if tokenizer.chat_template
            else messages_to_text(m)
            for m in messages
        ]
        check_prompts_fit(
            texts, tokenizer, context, cfg.max_new_tokens, f"{path}: prompt", cfg.add_special_tokens
        )


def _evaluate_one(
    backend, model_dir, benchmark_file, records, out, summary_path, cfg, tags
) -> dict[str, Any]:
    from cwgrpo.grading.scoring import answer_in_form, grade_many
    from cwgrpo.provenance import provenance

    identity = benchmark_identity(benchmark_file)
    name = identity["benchmark"]
    prompt_set = cfg.prompts()
    prompts = [eval_messages(prompt_set, rec["problem"]) for rec in records]
    logger.info("%s: %d problems x %d samples with %s", name, len(records), cfg.k, cfg.backend)
    completions = backend.generate(prompts, cfg.k, cfg.sampling())
    pairs = [(c.text, rec["answer"]) for rec, outs in zip(records, completions, strict=True) for c in outs]
    grades = grade_many(pairs, processes=cfg.grading_processes, timeout_s=cfg.grading_timeout_s)
    grades = [answer_in_form(g, cfg.answer_form) for g in grades]
    rows = sample_rows(records, completions, grades)

    settings = dataclasses.asdict(cfg)
    summary = {
        **identity,
        "tags": tags,
        **summarise(rows, cfg.k, cfg.seed),
        "settings": settings,
        "provenance": provenance(
            config_hash=config_hash(settings),
            model_dir=str(model_dir),
            benchmark_file=str(benchmark_file),
            benchmark_sha256=hashlib.sha256(Path(benchmark_file).read_bytes()).hexdigest(),
        ),
    }
    write_jsonl(out, rows)
    write_json(summary_path, summary)
    logger.info("%s", summary_line(name, summary))
    return summary


class _InOrder(argparse.Action):
    """``action="append"`` that also records the order of the per-model options (``model_jobs``)."""

    def __call__(self, parser, namespace, values, option_string=None):
        getattr(namespace, self.dest).append(values)
        namespace.in_order.append((self.dest, values))


PER_MODEL = ("model_dir", "tag", "benchmark_file", "out", "summary")


OUTPUTS = ("out", "summary")  # every other path argument is read (cwgrpo.cli)


def configure_parser(parser: argparse.ArgumentParser) -> None:
    parser.set_defaults(in_order=[], **{dest: [] for dest in PER_MODEL})
    parser.add_argument(
        "--model-dir",
        type=Path,
        action=_InOrder,
        help="local model folder; repeat to evaluate several models in one process (each --model-dir "
        "takes the --tag, --benchmark-file, --out and --summary given after it)",
    )
    parser.add_argument(
        "--benchmark-file",
        type=Path,
        action=_InOrder,
        help="problem records JSONL; repeat (with --out and --summary) to evaluate several with one model load",
    )
    parser.add_argument("--out", type=Path, action=_InOrder, help="per-sample JSONL to write")
    parser.add_argument("--summary", type=Path, action=_InOrder, help="summary JSON (written last)")
    parser.add_argument(
        "--tag",
        action=_InOrder,
        metavar="KEY=VALUE",
        help="label stored in the summary (seed and step as integers); repeatable",
    )
    add_config_arguments(parser)
    parser.epilog = describe_options(EvalConfig)


def model_jobs(in_order: list[tuple[str, Any]]) -> list[ModelJobs]:
    """The per-model options in command-line order -> one ``ModelJobs`` per ``--model-dir``."""
    groups: list[dict[str, list]] = []
    pending: dict[str, list] = {dest: [] for dest in PER_MODEL}  # before the first --model-dir
    for dest, value in in_order:
        if dest == "model_dir":
            groups.append({**({d: [] for d in PER_MODEL} if groups else pending), "model_dir": [value]})
        else:
            (groups[-1] if groups else pending)[dest].append(value)
    if not groups:
        raise ConfigError("the following arguments are required: --model-dir")
    models = []
    for g in groups:
        model_dir = g["model_dir"][0]
        missing = [f"--{d.replace('_', '-')}" for d in ("benchmark_file", "out", "summary") if not g[d]]
        if missing:
            where = f" (for --model-dir {model_dir})" if len(groups) > 1 else ""
            raise ConfigError(f"the following arguments are required: {', '.join(missing)}{where}")
        n = (len(g["benchmark_file"]), len(g["out"]), len(g["summary"]))
        if len(set(n)) != 1:
            raise ConfigError(
                f"--model-dir {model_dir}: give one --out and one --summary per --benchmark-file (got "
                f"{n[0]} benchmark files, {n[1]} --out, {n[2]} --summary)"
            )
        jobs = list(zip(g["benchmark_file"], g["out"], g["summary"], strict=True))
        models.append(ModelJobs(model_dir, parse_tags(g["tag"]), jobs))
    return models


def run(args: argparse.Namespace) -> int:
    cfg = config_from_args(EvalConfig, args)
    models = model_jobs(args.in_order)
    with one_gpu():  # a device no other job holds, on a machine with GPUs
        evaluate_models(models, cfg)
    return 0
