"""``cwgrpo evaluate``: sample k answers per benchmark problem, grade them, write samples and a summary.

    cwgrpo evaluate --model-dir results/tiny/models/small/base \\
        --benchmark-file results/tiny/data/syn_math500.jsonl \\
        --out results/tiny/eval/small/base/seed0/step0/syn_math500.jsonl \\
        --summary results/tiny/eval/small/base/seed0/step0/syn_math500.summary.json \\
        --tag size=small --tag method=base --tag seed=0 --tag step=0 \\
        --set prompt_set=tiny --set k=4 --set max_new_tokens=64

Outputs (``docs/architecture.md``): one JSONL line per (problem, sample) ``{id, sample, completion,
extracted, gold, correct, correct_strict, unscorable, truncated, tokens}`` (``correct`` is the
strict metric's verdict; ``cwgrpo grade --summary-in`` adds the paper metric's and may make it the
primary one), then the summary JSON (``pass1`` = accuracy of sample 0, ``avg_k`` = mean over problems of the share of correct samples, its standard error and a
bootstrap 95 % interval over problems). Samples whose gold answer is unscorable count as incorrect and
are counted in ``n_unscorable``. Everything is checked before the model is loaded, both files are
written atomically (samples first, summary last), and the same inputs and seed give byte-identical
files with the transformers backend (no timings are stored).
"""

from __future__ import annotations

import argparse
import dataclasses
import hashlib
import logging
import math
from dataclasses import field
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
from cwgrpo.data import load_records
from cwgrpo.devices import one_gpu
from cwgrpo.generation import SamplingSettings, check_backend_name, check_model_dir
from cwgrpo.io import ResultFileError, check_outputs_not_inputs, read_json, write_json, write_jsonl
from cwgrpo.prompts import eval_messages, get_prompt_set
from cwgrpo.scoring import DEFAULT_TIMEOUT_S, GradeResult

logger = logging.getLogger(__name__)


@dataclasses.dataclass
class EvalConfig:
    """Options of ``cwgrpo evaluate``."""

    backend: str = field(
        default="transformers", metadata={"help": "generation backend: transformers or vllm"}
    )
    k: int = field(default=1, metadata={"help": "samples per problem (the paper reports one)"})
    temperature: float = field(default=0.6, metadata={"help": "sampling temperature; 0 is greedy"})
    top_p: float = field(default=0.95, metadata={"help": "nucleus sampling mass"})
    max_new_tokens: int = field(
        default=4096, metadata={"help": "most new tokens per answer (paper: 32768 for 1.5B, 4096 for 7B)"}
    )
    seed: int = field(default=0, metadata={"help": "seed of sampling and of the bootstrap interval"})
    batch_size: int = field(
        default=32, metadata={"help": "sequences per generate call (transformers backend)"}
    )
    prompt_set: str = field(
        default="open_rs", metadata={"help": "prompt set (cwgrpo.prompts): open_rs or tiny"}
    )
    limit: int | None = field(
        default=None, metadata={"help": "evaluate only the first N problems (smoke runs)"}
    )
    cpu_threads: int | None = field(
        default=None, metadata={"help": "torch CPU threads for generation (transformers); null keeps torch's"}
    )
    max_model_len: int | None = field(
        default=None,
        metadata={
            "help": "vllm: context length cap (released evaluation: 32768 for 1.5B, 4096 for 7B); null: the model's"
        },
    )
    gpu_memory_utilization: float = field(
        default=0.9, metadata={"help": "vllm: share of GPU memory the engine may take, in (0, 1]"}
    )
    tensor_parallel_size: int = field(default=1, metadata={"help": "vllm: GPUs per model"})
    grading_processes: int = field(default=2, metadata={"help": "worker processes for grading"})
    grading_timeout_s: float = field(
        default=DEFAULT_TIMEOUT_S, metadata={"help": "wall-clock budget for grading one answer, seconds"}
    )

    def __post_init__(self) -> None:
        if self.k < 1:
            raise ConfigError(f"k must be >= 1, got {self.k}")
        if self.batch_size < 1:
            raise ConfigError(f"batch_size must be >= 1, got {self.batch_size}")
        if self.limit is not None and self.limit < 1:
            raise ConfigError(f"limit must be >= 1 or null, got {self.limit}")
        if self.cpu_threads is not None and self.cpu_threads < 1:
            raise ConfigError(f"cpu_threads must be >= 1 or null, got {self.cpu_threads}")
        if self.max_model_len is not None and self.max_model_len < 1:
            raise ConfigError(f"max_model_len must be >= 1 or null, got {self.max_model_len}")
        if not (math.isfinite(self.gpu_memory_utilization) and 0 < self.gpu_memory_utilization <= 1):
            raise ConfigError(f"gpu_memory_utilization must be in (0, 1], got {self.gpu_memory_utilization}")
        if self.tensor_parallel_size < 1:
            raise ConfigError(f"tensor_parallel_size must be >= 1, got {self.tensor_parallel_size}")
        if self.grading_processes < 1:
            raise ConfigError(f"grading_processes must be >= 1, got {self.grading_processes}")
        if not (math.isfinite(self.grading_timeout_s) and self.grading_timeout_s > 0):
            raise ConfigError(f"grading_timeout_s must be a finite number > 0, got {self.grading_timeout_s}")
        check_backend_name(self.backend)
        get_prompt_set(self.prompt_set)
        self.sampling()  # checks temperature, top_p and max_new_tokens

    def sampling(self) -> SamplingSettings:
        return SamplingSettings(self.temperature, self.top_p, self.max_new_tokens, self.seed)

    def backend_options(self) -> dict[str, Any]:
        """Keyword arguments of the backend's constructor; the engine settings go to vllm only."""
        options: dict[str, Any] = {
            "batch_size": self.batch_size,
            "seed": self.seed,
            "cpu_threads": self.cpu_threads,
        }
        if self.backend == "vllm":
            options |= {
                "max_model_len": self.max_model_len,
                "gpu_memory_utilization": self.gpu_memory_utilization,
                "tensor_parallel_size": self.tensor_parallel_size,
            }
        return options


def benchmark_name(path: Path) -> str:
    """The registry name of a benchmark file: from its manifest if there is one, else the file stem."""
    from cwgrpo.data import manifest_path

    manifest = manifest_path(path)
    if manifest.is_file():
        name = read_json(manifest).get("name")
        if isinstance(name, str) and name:
            return name
    return path.name.removesuffix(".jsonl")


def _finite_or_none(x: float) -> float | None:
    return x if math.isfinite(x) else None


def sample_rows(records: list[dict], completions: list[list], grades: list[GradeResult]) -> list[dict]:
    """Per-sample lines, problem-major (grades are in the same order as the flattened completions)."""
    rows = []
    flat = iter(grades)
    for rec, outs in zip(records, completions, strict=True):
        for j, completion in enumerate(outs):
            g = next(flat)
            rows.append(
                {
                    "id": rec["id"],
                    "sample": j,
                    "completion": completion.text,
                    "extracted": g.extracted,
                    "gold": rec["answer"],
                    "correct": g.correct,
                    "correct_strict": g.correct,
                    "unscorable": g.unscorable,
                    "truncated": completion.truncated,
                    "tokens": completion.n_tokens,
                }
            )
    return rows


def accuracy_fields(rows: list[dict], k: int, seed: int, key: str = "correct") -> dict[str, Any]:
    """``pass1``, ``avg_k`` and its SE and interval from the rows' verdicts ``key`` (k rows a problem)."""
    from cwgrpo.stats import accuracy_summary

    table = [[bool(r[key]) for r in rows[i : i + k]] for i in range(0, len(rows), k)]
    acc = accuracy_summary(table, seed=seed)
    return {
        "pass1": acc["pass1"],
        "avg_k": acc["avg_k"],
        "avg_k_se": _finite_or_none(acc["avg_k_se"]),
        "avg_k_ci95": [_finite_or_none(x) for x in acc["avg_k_ci95"]],
    }


def summarise(rows: list[dict], k: int, seed: int, metric: str = "strict") -> dict[str, Any]:
    """Accuracy fields of the summary from the per-sample rows (k rows per problem, in order): those of
    ``correct`` (the primary ``metric``) at the top level, and per metric scored under ``by_metric``."""
    acc = accuracy_fields(rows, k, seed)
    scored = [m for m in ("strict", "paper") if rows and f"correct_{m}" in rows[0]]
    return {
        "n_problems": -(-len(rows) // k),
        "k": k,
        "primary_metric": metric,
        **acc,
        "by_metric": {m: accuracy_fields(rows, k, seed, f"correct_{m}") for m in scored},
        "n_samples": len(rows),
        "n_truncated": sum(bool(r["truncated"]) for r in rows),
        "n_unscorable": sum(bool(r["unscorable"]) for r in rows),
    }


def evaluate(
    model_dir: Path,
    benchmark_file: Path,
    out: Path,
    summary_path: Path,
    cfg: EvalConfig,
    tags: dict[str, Any],
) -> dict[str, Any]:
    """Generate, grade and write one benchmark; returns the summary."""
    return evaluate_many(model_dir, [(benchmark_file, out, summary_path)], cfg, tags)[0]


def evaluate_many(
    model_dir: Path,
    jobs: list[tuple[Path, Path, Path]],
    cfg: EvalConfig,
    tags: dict[str, Any],
) -> list[dict[str, Any]]:
    """Evaluate one model on several (benchmark file, samples out, summary out) with one model load.

    Every input is checked before the model loads, so a bad file fails fast and writes nothing.
    """
    from cwgrpo.generation import get_backend
    from cwgrpo.provenance import seed_everything

    if not jobs:
        raise ConfigError("no benchmark given")
    outputs = [Path(p).resolve() for _, out, summary in jobs for p in (out, summary)]
    if len(set(outputs)) != len(outputs):
        raise ConfigError(f"the --out/--summary paths must all differ: {[str(p) for p in outputs]}")
    check_outputs_not_inputs([model_dir, *(b for b, _, _ in jobs)], outputs)
    loaded = []
    for benchmark_file, _, _ in jobs:
        records = load_records(benchmark_file)
        loaded.append(records[: cfg.limit] if cfg.limit is not None else records)
    check_model_dir(model_dir)
    check_model_readable(model_dir)
    check_benchmarks_fit(model_dir, [b for b, _, _ in jobs], loaded, cfg)

    backend = get_backend(cfg.backend, model_dir, **cfg.backend_options())
    summaries = []
    for (benchmark_file, out, summary_path), records in zip(jobs, loaded, strict=True):
        seed_everything(cfg.seed)  # each benchmark's samples do not depend on which others ran before
        summaries.append(
            _evaluate_one(backend, model_dir, benchmark_file, records, out, summary_path, cfg, tags)
        )
    return summaries


def check_model_readable(model_dir: Path) -> None:
    """A checkpoint (or model) whose weights are truncated or corrupt is named before anything loads."""
    from cwgrpo.runguard import verify_checkpoint

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
        messages = [eval_messages(cfg.prompt_set, rec["problem"]) for rec in records]
        texts = [
            tokenizer.apply_chat_template(m, add_generation_prompt=True, tokenize=False)
            if tokenizer.chat_template
            else messages_to_text(m)
            for m in messages
        ]
        check_prompts_fit(texts, tokenizer, context, cfg.max_new_tokens, f"{path}: prompt")


def _evaluate_one(
    backend, model_dir, benchmark_file, records, out, summary_path, cfg, tags
) -> dict[str, Any]:
    from cwgrpo.provenance import provenance
    from cwgrpo.scoring import grade_many

    name = benchmark_name(benchmark_file)
    prompts = [eval_messages(cfg.prompt_set, rec["problem"]) for rec in records]
    logger.info("%s: %d problems x %d samples with %s", name, len(records), cfg.k, cfg.backend)
    completions = backend.generate(prompts, cfg.k, cfg.sampling())
    pairs = [(c.text, rec["answer"]) for rec, outs in zip(records, completions, strict=True) for c in outs]
    grades = grade_many(pairs, processes=cfg.grading_processes, timeout_s=cfg.grading_timeout_s)
    rows = sample_rows(records, completions, grades)

    settings = dataclasses.asdict(cfg)
    summary = {
        "benchmark": name,
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
    logger.info(
        "%s: pass1 %.3f, avg@%d %.3f [%s, %s]",
        name,
        summary["pass1"],
        cfg.k,
        summary["avg_k"],
        *summary["avg_k_ci95"],
    )
    return summary


def configure_parser(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--model-dir", required=True, type=Path, help="local model folder")
    parser.add_argument(
        "--benchmark-file",
        required=True,
        type=Path,
        action="append",
        help="problem records JSONL; repeat (with --out and --summary) to evaluate several with one model load",
    )
    parser.add_argument("--out", required=True, type=Path, action="append", help="per-sample JSONL to write")
    parser.add_argument(
        "--summary", required=True, type=Path, action="append", help="summary JSON (written last)"
    )
    parser.add_argument(
        "--tag",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="label stored in the summary (seed and step as integers); repeatable",
    )
    add_config_arguments(parser)
    parser.epilog = describe_options(EvalConfig)


def run(args: argparse.Namespace) -> int:
    cfg = config_from_args(EvalConfig, args)
    tags = parse_tags(args.tag)
    if not len(args.benchmark_file) == len(args.out) == len(args.summary):
        raise ConfigError(
            f"give one --out and one --summary per --benchmark-file (got {len(args.benchmark_file)} benchmark "
            f"files, {len(args.out)} --out, {len(args.summary)} --summary)"
        )
    jobs = list(zip(args.benchmark_file, args.out, args.summary, strict=True))
    with one_gpu():  # a device no other job holds, on a machine with GPUs
        evaluate_many(args.model_dir, jobs, cfg, tags)
    return 0
