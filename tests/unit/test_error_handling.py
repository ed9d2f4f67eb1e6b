"""Error handling: every kind of bad input or fault gets a clear error naming it, or a defined result.

Three tables, one test each:

- ``RAISES``: a library call with one bad input raises ``ConfigError`` / ``ResultFileError`` /
  ``ValueError`` / ``FileNotFoundError`` whose message names the offending key, value or file, and the
  outputs the call would have written do not exist afterwards;
- ``DEFINED``: a bad input that has a documented, graded result instead of an error (NaN log-probs give
  finite weights, a checkpoint without its completion flag is ignored, ...);
- ``CLI``: ``python -m cwgrpo.cli ...`` exits with status 2 and one ``cwgrpo CMD: error: ...`` line naming
  the problem, with no traceback and no output file. Kept few: each one costs a Python start.

Pathological completions graded in bounded time are in test_scoring.py. Cases that need a model use the
session's ``tiny_model_dir`` (read-only) or a broken copy of it in ``tmp_path``. The only slow import is TRL
(``cwgrpo.trainer``), once, for the training-option cases.
"""

from __future__ import annotations

import json
import math
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import torch

from cwgrpo import weighting as W
from cwgrpo.configs import ConfigError, build_config, parse_overrides
from cwgrpo.data.registry import DATASETS, get_dataset, load_records, normalise, prepare
from cwgrpo.evaluate.options import EvalConfig
from cwgrpo.evaluate.run import ModelJobs, evaluate_models
from cwgrpo.generation import check_model_dir
from cwgrpo.grading import rewards as rewards_mod
from cwgrpo.io import ResultFileError
from cwgrpo_workflow.report import claims as claims_mod
from cwgrpo_workflow.report.load import cov_samples, metrics_frame, summaries_frame
from cwgrpo_workflow.report.options import TableConfig
from tests.conftest import TWO_STEP_TRL

REPO = Path(__file__).resolve().parents[2]
REC = {"id": "p-0", "problem": "1+1", "answer": "2", "source": "test"}
MB = 1_000_000


# ------------------------------------------------------------------------------------------ helpers


class Ctx:
    """What a case may use: a fresh ``tmp`` folder and, built on first use, the session's tiny model."""

    def __init__(self, tmp: Path, request: pytest.FixtureRequest) -> None:
        self.tmp = tmp
        self._request = request

    @property
    def model(self) -> Path:
        return self._request.getfixturevalue("tiny_model_dir")

    def write(self, name: str, text: str | bytes) -> Path:
        path = self.tmp / name
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(text, bytes):
            path.write_bytes(text)
        else:
            path.write_text(text, encoding="utf-8")
        return path

    def records(self, name: str = "train.jsonl", n: int = 2) -> Path:
        lines = [json.dumps({**REC, "id": f"p-{i}"}) for i in range(n)]
        return self.write(name, "\n".join(lines) + "\n")

    def model_copy(self, name: str, drop: tuple[str, ...] = (), no_chat_template: bool = False) -> Path:
        """A copy of the tiny model without the files in ``drop`` (and, optionally, its chat template)."""
        out = self.tmp / name
        shutil.copytree(self.model, out)
        for f in drop:
            (out / f).unlink()
        if no_chat_template:
            (out / "chat_template.jinja").unlink(missing_ok=True)
            cfg_path = out / "tokenizer_config.json"
            cfg = json.loads(cfg_path.read_text())
            cfg.pop("chat_template", None)
            cfg_path.write_text(json.dumps(cfg))
        return out


def _summary(ctx: Ctx, name: str = "s.summary.json") -> Path:
    tags = {"size": "small", "method": "grpo", "seed": 0, "step": 100}
    return ctx.write(name, json.dumps({"benchmark": "b1", "tags": tags, "k": 1, "pass1": 0.5, "avg_k": 0.5}))


def _split(options: dict[str, Any]):
    from cwgrpo.train.options import split_options

    return split_options(options)


def _trl(**kw: Any):
    from cwgrpo.trainer import CWGRPOConfig

    return CWGRPOConfig(output_dir="unused", report_to="none", use_cpu=True, bf16=False, **kw)


def _train(ctx: Ctx, model_dir: Path, trl: dict[str, Any], **job: Any):
    """``cwgrpo.train.run.train`` into ``ctx.tmp / 'run'`` (CPU settings; no GPU is assumed)."""
    from cwgrpo.train.options import build_train_config
    from cwgrpo.train.run import train

    trl = {"use_cpu": True, "bf16": False, "max_steps": 1, **trl}
    return train(
        model_dir, ctx.records(), ctx.tmp / "run", build_train_config({**job, **trl}, ctx.tmp / "run")
    )


def _prepare(ctx: Ctx, name: str, rows: list[dict]):
    return prepare(DATASETS[name], ctx.tmp / f"{name}.jsonl", rows=rows)


def _eval_cfg(**kw: Any):
    return build_config(EvalConfig, None, kw)


def _evaluate(ctx: Ctx, model_dir: Path, benchmark: Path | None = None):
    bench = benchmark or ctx.records("bench.jsonl")
    jobs = [(bench, ctx.tmp / "out.jsonl", ctx.tmp / "out.summary.json")]
    return evaluate_models([ModelJobs(model_dir, {}, jobs)], EvalConfig())


def _cw(logps, adv, mask, variant="released"):
    return W.cw_weights(logps, adv, mask, variant=variant)


def _cw_broken(logps=lambda x: x, adv=lambda x: x, mask=lambda x: x, variant="released"):
    """``cw_weights`` on a small valid batch with one of its inputs transformed into a bad one."""
    lp, a, m = _batch()
    return W.cw_weights(logps(lp), adv(a), mask(m), variant=variant)


def _batch(b: int = 4, t: int = 6, seed: int = 0, dtype: torch.dtype = torch.float32):
    g = torch.Generator().manual_seed(seed)
    logps = -3 * torch.rand(b, t, generator=g, dtype=torch.float64)
    adv = torch.randn(b, generator=g, dtype=torch.float64)
    mask = torch.ones(b, t, dtype=torch.long)
    mask[1, 4:] = 0  # some padding
    return logps.to(dtype), adv.to(dtype), mask


def _with(x: torch.Tensor, index: tuple[int, ...], value: float) -> torch.Tensor:
    x = x.clone()
    x[index] = value
    return x


_OPTS = W.MethodOptions("released", 0.5, -1e9, 1e9, 0.5, 1.0, 0.2, 0.2, None, None, None)


# ---------------------------------------------------------------------------------- RAISES table


@dataclass(frozen=True)
class Raises:
    category: str
    name: str
    call: Callable[[Ctx], Any]
    error: type[BaseException]
    match: str  # regex searched in the message: names the key / value / file
    outputs: tuple[str, ...] = ()  # paths under tmp that must not exist after the failure

    @property
    def id(self) -> str:
        return f"{self.category}-{self.name}"


RAISES = [
    # -- configs: --set syntax, unknown keys, wrong types, non-mapping files ----------------------
    Raises(
        "configs",
        "set-without-equals",
        lambda c: parse_overrides(["k4"]),
        ConfigError,
        r"key=value, got 'k4'",
    ),
    Raises(
        "configs", "set-empty-key", lambda c: parse_overrides(["=4"]), ConfigError, r"key=value, got '=4'"
    ),
    Raises("configs", "unknown-key", lambda c: _eval_cfg(kk=4), ConfigError, r"unknown option\(s\) \['kk'\]"),
    Raises(
        "configs", "int-given-str", lambda c: _eval_cfg(k="four"), ConfigError, r"k: expected int, got 'four'"
    ),
    Raises(
        "configs", "int-given-float", lambda c: _eval_cfg(k=2.5), ConfigError, r"k: expected int, got 2.5"
    ),
    Raises(
        "configs", "int-given-bool", lambda c: _eval_cfg(k=True), ConfigError, r"k: expected int, got True"
    ),
    Raises(
        "configs",
        "float-given-list",
        lambda c: _eval_cfg(temperature=[1]),
        ConfigError,
        r"temperature: expected float",
    ),
    Raises(
        "configs",
        "float-nan",
        lambda c: _eval_cfg(temperature=math.nan),
        ConfigError,
        r"temperature must be .*nan",
    ),
    Raises(
        "configs",
        "list-given-str",
        lambda c: build_config(TableConfig, None, {"benchmarks": "b1"}),
        ConfigError,
        r"benchmarks: expected a list, got 'b1'",
    ),
    Raises(
        "configs",
        "yaml-list",
        lambda c: build_config(EvalConfig, c.write("c.yaml", "- k\n- 4\n")),
        ConfigError,
        r"c\.yaml: expected a mapping of options, got list",
    ),
    Raises(
        "configs",
        "yaml-scalar",
        lambda c: build_config(EvalConfig, c.write("c.yaml", "k=4\n")),
        ConfigError,
        r"c\.yaml: expected a mapping of options, got str",
    ),
    Raises(
        "configs",
        "yaml-invalid",
        lambda c: build_config(EvalConfig, c.write("c.yaml", "k: [1, 2\n")),
        ResultFileError,
        r"c\.yaml is not valid YAML",
    ),
    Raises(
        "configs",
        "yaml-missing",
        lambda c: build_config(EvalConfig, c.tmp / "absent.yaml"),
        ResultFileError,
        r"missing file: .*absent\.yaml",
    ),
    Raises("configs", "k-zero", lambda c: _eval_cfg(k=0), ConfigError, r"k must be >= 1, got 0"),
    Raises(
        "configs",
        "top-p-zero",
        lambda c: _eval_cfg(top_p=0),
        ConfigError,
        r"top_p must be in \(0, 1\], got 0",
    ),
    Raises(
        "configs",
        "max-new-tokens-zero",
        lambda c: _eval_cfg(max_new_tokens=0),
        ConfigError,
        r"max_new_tokens",
    ),
    Raises(
        "configs",
        "grading-timeout-nan",
        lambda c: _eval_cfg(grading_timeout_s=math.nan),
        ConfigError,
        r"grading_timeout_s must be .*nan",
    ),
    Raises(
        "configs",
        "unknown-backend",
        lambda c: _eval_cfg(backend="sglang"),
        ConfigError,
        r"backend 'sglang'.*vllm",
    ),
    Raises(
        "configs",
        "unknown-prompt-set",
        lambda c: _eval_cfg(prompt_set="openrs"),
        ConfigError,
        r"'openrs'.*open_rs",
    ),
    Raises(
        "configs",
        "unknown-dataset",
        lambda c: get_dataset("math5000"),
        ConfigError,
        r"unknown dataset 'math5000'; known: .*math500",
    ),
    Raises(
        "configs",
        "unknown-reward",
        lambda c: rewards_mod.get_reward("acc"),
        ConfigError,
        r"unknown reward 'acc'; known: \['accuracy', 'accuracy_released', 'format', 'number_accuracy'\]",
    ),
    Raises(
        "configs",
        "table-decimals-negative",
        lambda c: build_config(TableConfig, None, {"decimals": -1}),
        ConfigError,
        r"decimals: .*-1",
    ),
    Raises(
        "configs",
        "claims-entropy-stat",
        lambda c: build_config(claims_mod.ClaimsConfig, None, {"entropy_stat": "var"}),
        ConfigError,
        r"entropy_stat: .*'var'",
    ),
    # -- training options (TrainJob + CWGRPOConfig); TRL is imported once for these -----------------
    Raises(
        "train",
        "unknown-key",
        lambda c: _split({"learning_rat": 1e-6}),
        ConfigError,
        r"unknown training option 'learning_rat': .*; did you mean 'learning_rate'\?",
    ),
    Raises(
        "train",
        "unknown-reward",
        lambda c: _split({"reward_funcs": ["acc"]}),
        ConfigError,
        r"unknown reward 'acc'",
    ),
    Raises(
        "train",
        "reward-funcs-not-a-list",
        lambda c: _split({"reward_funcs": "accuracy"}),
        ConfigError,
        r"reward_funcs: expected a list, got 'accuracy'",
    ),
    Raises(
        "train",
        "unknown-prompt-set",
        lambda c: _split({"prompt_set": "nope"}),
        ConfigError,
        r"prompt set 'nope'",
    ),
    Raises(
        "train", "unknown-launcher", lambda c: _split({"launcher": "slurm"}), ConfigError, r"launcher='slurm'"
    ),
    Raises("train", "train-limit-zero", lambda c: _split({"train_limit": 0}), ConfigError, r"train_limit=0"),
    Raises(
        "train",
        "max-steps-str",
        lambda c: _split({"max_steps": "abc"}),
        ConfigError,
        r"max_steps: expected int, got 'abc'",
    ),
    Raises(
        "train",
        "ratio-str",
        lambda c: _split({"kl_cov_ratio": "big"}),
        ConfigError,
        r"kl_cov_ratio: expected float, got 'big'",
    ),
    Raises(
        "train",
        "unknown-method",
        lambda c: _trl(cw_method="ppo"),
        ValueError,
        r"cw_method='ppo'; valid: .*cw_grpo",
    ),
    Raises(
        "train",
        "unknown-variant",
        lambda c: _trl(cw_variant="paper"),
        ValueError,
        r"cw_variant='paper'.*released",
    ),
    Raises(
        "train",
        "unknown-centring-knob",
        lambda c: _trl(cw_centring="token"),
        ValueError,
        r"cw_centring='token'; valid: \['batch', 'sequence'\]",
    ),
    Raises(
        "train",
        "unknown-normaliser-knob",
        lambda c: _trl(cw_normaliser="N"),
        ValueError,
        r"cw_normaliser='N'; valid: \['valid', 'padded'\]",
    ),
    Raises(
        "train",
        "clip-cov-lb-ge-ub",
        lambda c: _trl(clip_cov_lb=5.0, clip_cov_ub=5.0),
        ValueError,
        r"clip_cov_lb=5.0 must be below clip_cov_ub=5.0",
    ),
    Raises(
        "train",
        "ratio-zero",
        lambda c: _trl(clip_cov_ratio=0.0),
        ValueError,
        r"clip_cov_ratio=0.0: must be in \(0, 1\]",
    ),
    Raises("train", "ratio-above-one", lambda c: _trl(kl_cov_ratio=1.5), ValueError, r"kl_cov_ratio=1.5"),
    Raises(
        "train",
        "batch-not-divisible-by-group",
        lambda c: _trl(per_device_train_batch_size=3, num_generations=2),
        ValueError,
        r"\(3\) must be divisible by num_generations \(2\)",
    ),
    Raises(
        "train",
        "group-of-one",
        lambda c: _trl(per_device_train_batch_size=4, num_generations=1),
        ValueError,
        r"at least 2 generations",
    ),
    Raises(
        "train",
        "max-steps-zero",
        lambda c: _train(c, c.tmp / "no-model", {"max_steps": 0}),
        ConfigError,
        r"max_steps=0",
        ("run",),
    ),
    Raises(
        "train",
        "max-steps-negative",
        lambda c: _train(c, c.tmp / "no-model", {"max_steps": -5}),
        ConfigError,
        r"max_steps=-5",
        ("run",),
    ),
    Raises(
        "train",
        "unknown-method-via-train",
        lambda c: _train(c, c.tmp / "no-model", {"cw_method": "ppo"}),
        ConfigError,
        r"invalid training options: cw_method='ppo'; valid: \[",
        ("run",),
    ),
    # -- data ---------------------------------------------------------------------------------------
    Raises(
        "data",
        "jsonl-missing-columns",
        lambda c: load_records(c.write("d.jsonl", json.dumps({"id": "a", "problem": "p"}) + "\n")),
        ResultFileError,
        r"record 0 lacks \['answer', 'source'\]",
    ),
    Raises(
        "data",
        "jsonl-empty",
        lambda c: load_records(c.write("d.jsonl", "")),
        ResultFileError,
        r"d\.jsonl: no records",
    ),
    Raises(
        "data",
        "jsonl-only-blank-lines",
        lambda c: load_records(c.write("d.jsonl", "\n  \n\n")),
        ResultFileError,
        r"d\.jsonl: no records",
    ),
    Raises(
        "data",
        "jsonl-duplicate-ids",
        lambda c: load_records(c.write("d.jsonl", (json.dumps(REC) + "\n") * 2)),
        ResultFileError,
        r"duplicate id 'p-0' \(record 1\)",
    ),
    Raises(
        "data",
        "jsonl-not-utf8",
        lambda c: load_records(c.write("d.jsonl", json.dumps(REC).encode() + b'\n{"id": "\xff\xfe"}\n')),
        ResultFileError,
        r"d\.jsonl is not UTF-8 text",
    ),
    Raises(
        "data",
        "jsonl-truncated-line",
        lambda c: load_records(
            c.write("d.jsonl", json.dumps(REC) + "\n" + json.dumps({**REC, "id": "p-1"})[:25])
        ),
        ResultFileError,
        r"d\.jsonl:2 is not valid JSON \(truncated\?\)",
    ),
    Raises(
        "data",
        "jsonl-line-not-an-object",
        lambda c: load_records(c.write("d.jsonl", "[1, 2]\n")),
        ResultFileError,
        r"record 0 is not a JSON object",
    ),
    Raises(
        "data",
        "jsonl-answer-not-a-string",
        lambda c: load_records(c.write("d.jsonl", json.dumps({**REC, "answer": 2}) + "\n")),
        ResultFileError,
        r"record 0 has an empty or non-string 'answer'",
    ),
    Raises(
        "data",
        "jsonl-missing-file",
        lambda c: load_records(c.tmp / "absent.jsonl"),
        ResultFileError,
        r"missing file",
    ),
    Raises(
        "data",
        "registry-missing-column",
        lambda c: normalise(DATASETS["olympiadbench"], [{"problem": "p", "answer": "1"}]),
        ValueError,
        r"olympiadbench .*missing column 'question' in row 0; columns found: \['answer', 'problem'\]",
    ),
    Raises(
        "data",
        "registry-no-boxed-answer",
        lambda c: normalise(DATASETS["minerva"], [{"problem": "p", "solution": "so it is 4"}]),
        ValueError,
        r"minerva \(knoveleng/Minerva-Math\): row 0 has no \\boxed",
    ),
    Raises(
        "data",
        "registry-wrong-row-count",
        lambda c: _prepare(c, "aime24", [{"problem": f"p{i}", "answer": "1"} for i in range(3)]),
        ValueError,
        r"aime24: expected 30 rows, found 3",
        ("aime24.jsonl", "aime24.manifest.json"),
    ),
    # -- models -------------------------------------------------------------------------------------
    Raises(
        "models",
        "missing-dir",
        lambda c: check_model_dir(c.tmp / "absent"),
        FileNotFoundError,
        r"model folder not found: .*absent",
    ),
    Raises(
        "models",
        "no-config-json",
        lambda c: check_model_dir(c.model_copy("m", drop=("config.json",))),
        FileNotFoundError,
        r"is not a model folder \(no config\.json\)",
    ),
    Raises(
        "models",
        "no-tokenizer-files",
        lambda c: check_model_dir(c.model_copy("m", drop=("tokenizer.json", "tokenizer_config.json"))),
        FileNotFoundError,
        r"has no tokenizer",
    ),
    Raises(
        "models",
        "evaluate-without-tokenizer",
        lambda c: _evaluate(c, c.model_copy("m", drop=("tokenizer.json",))),
        FileNotFoundError,
        r"has no tokenizer",
        ("out.jsonl", "out.summary.json"),
    ),
    Raises(
        "models",
        "train-missing-model",
        lambda c: _train(c, c.tmp / "absent", {}),
        FileNotFoundError,
        r"model folder not found",
        ("run",),
    ),
    Raises(
        "models",
        "train-tokenizer-without-chat-template",
        lambda c: _train(c, c.model_copy("m", no_chat_template=True), {}),
        ConfigError,
        r"no chat template",
        ("run",),
    ),
    # -- tensors (cwgrpo.weighting) -----------------------------------------------------------------
    Raises(
        "tensors",
        "advantages-wrong-shape",
        lambda c: _cw_broken(adv=lambda a: a[:3]),
        ValueError,
        r"advantages must have shape \(B,\) = \(4,\), got \(3,\)",
    ),
    Raises(
        "tensors",
        "mask-wrong-shape",
        lambda c: _cw_broken(mask=lambda m: m[:, :3]),
        ValueError,
        r"mask shape \(4, 3\) must equal logps shape \(4, 6\)",
    ),
    Raises(
        "tensors",
        "logps-1d",
        lambda c: _cw_broken(logps=lambda lp: lp[0]),
        ValueError,
        r"logps must be 2-D \(B, T\), got shape \(6,\)",
    ),
    Raises(
        "tensors",
        "logps-integer",
        lambda c: _cw_broken(logps=lambda lp: lp.long()),
        ValueError,
        r"logps must be a floating-point tensor",
    ),
    Raises(
        "tensors",
        "mask-holds-2",
        lambda c: _cw_broken(mask=lambda m: m * 2),
        ValueError,
        r"mask must be bool or hold only 0/1 values",
    ),
    Raises(
        "tensors",
        "mask-holds-half",
        lambda c: _cw_broken(mask=lambda m: m * 0.5),
        ValueError,
        r"mask must be bool or hold only 0/1 values",
    ),
    Raises(
        "tensors",
        "unknown-variant",
        lambda c: _cw_broken(variant="paper"),
        ValueError,
        r"unknown variant 'paper'; valid: \['released', 'described'\]",
    ),
    Raises(
        "tensors",
        "unknown-centring",
        lambda c: W.token_covariance(*_batch(), centring="global"),
        ValueError,
        r"unknown centring 'global'",
    ),
    Raises(
        "tensors", "unknown-method", lambda c: W.get_method("ppo"), ValueError, r"unknown method 'ppo'; known"
    ),
    Raises(
        "tensors",
        "clip-cov-without-generator",
        lambda c: W.clip_cov_select(_batch()[0], _batch()[2], ratio=0.5, lb=0, ub=1, generator=None),
        ValueError,
        r"needs a seeded torch\.Generator",
    ),
    Raises(
        "tensors",
        "kl-cov-ratio-out-of-range",
        lambda c: W.kl_cov_select(_batch()[0], _batch()[2], ratio=2.0),
        ValueError,
        r"ratio=2\.0: must be in \(0, 1\]",
    ),
    # -- rewards ------------------------------------------------------------------------------------
    Raises(
        "rewards",
        "accuracy-without-answer-column",
        lambda c: rewards_mod.accuracy_reward(["\\boxed{2}"], problem=["p"]),
        ValueError,
        r"needs the dataset column 'answer'; got columns \['problem'\]",
    ),
    Raises(
        "rewards",
        "accuracy-length-mismatch",
        lambda c: rewards_mod.accuracy_reward(["a", "b"], answer=["2"]),
        ValueError,
        r"2 completions but 1 answers",
    ),
    # -- result files -------------------------------------------------------------------------------
    Raises(
        "files",
        "summary-truncated",
        lambda c: summaries_frame([c.write("s.summary.json", _summary(c).read_text()[:30])]),
        ResultFileError,
        r"s\.summary\.json is not valid JSON \(truncated or corrupt\?\)",
    ),
    Raises(
        "files",
        "summary-missing",
        lambda c: summaries_frame([c.tmp / "absent.summary.json"]),
        ResultFileError,
        r"missing file: .*absent\.summary\.json",
    ),
    Raises(
        "files",
        "summary-not-a-summary",
        lambda c: summaries_frame([c.write("s.summary.json", "[1, 2]")]),
        ResultFileError,
        r"not an evaluation summary",
    ),
    Raises(
        "files",
        "summary-tag-missing",
        lambda c: summaries_frame(
            [c.write("s.summary.json", json.dumps({"benchmark": "b", "tags": {"size": "s"}, "pass1": 0.5}))]
        ),
        ResultFileError,
        r"tags lack 'method'",
    ),
    Raises(
        "files",
        "run-json-missing",
        lambda c: metrics_frame([c.tmp]),
        ResultFileError,
        r"missing file: .*run\.json",
    ),
    Raises(
        "files",
        "cov-samples-missing",
        lambda c: cov_samples(c.tmp),
        ResultFileError,
        r"missing file: .*cov_samples\.jsonl",
    ),
    Raises(
        "files",
        "evaluate-truncated-benchmark",
        lambda c: _evaluate(c, c.tmp / "never-loaded", c.write("b.jsonl", json.dumps(REC)[:20])),
        ResultFileError,
        r"b\.jsonl:1 is not valid JSON",
        ("out.jsonl", "out.summary.json"),
    ),
]


# ------------------------------------------------------- faults of runs, outputs, logs, grading and files

# A run of 2 steps with a checkpoint at each, trained once per session and copied by the cases that need
# a finished (or, with checkpoint-2 removed, a killed) run.
RUN_TRL = {**TWO_STEP_TRL, "learning_rate": 1e-4}


@pytest.fixture(scope="session")
def trained_run(tmp_path_factory, tiny_model_dir):
    """(pristine copy, working folder) of a finished 2-step run with its model and data.

    The run's options name its folder (``output_dir``), so a case works in the same folder each time,
    restored from the pristine copy by :func:`_run_copy` (cases run one after the other).
    """
    from cwgrpo.train.options import build_train_config
    from cwgrpo.train.run import train

    root = tmp_path_factory.mktemp("trained-run")
    work = root / "work"
    shutil.copytree(tiny_model_dir, work / "model")
    (work / "train.jsonl").write_text("".join(json.dumps({**REC, "id": f"p-{i}"}) + "\n" for i in range(2)))
    run = work / "run"
    assert train(work / "model", work / "train.jsonl", run, build_train_config(dict(RUN_TRL), run)) == 0
    shutil.copytree(work, root / "pristine")
    return root / "pristine", work


def _run_copy(ctx: Ctx) -> tuple[Path, Path, Path]:
    """(model, data, run folder) of the session's finished run, restored to how it was trained."""
    pristine, work = ctx._request.getfixturevalue("trained_run")
    shutil.rmtree(work)
    shutil.copytree(pristine, work)
    return work / "model", work / "train.jsonl", work / "run"


def _retrain(model: Path, data: Path, run: Path, **trl: Any) -> int:
    from cwgrpo.train.options import build_train_config
    from cwgrpo.train.run import train

    return train(model, data, run, build_train_config({**RUN_TRL, **trl}, run))


def _changed_model(ctx: Ctx):
    from cwgrpo.models.tiny import save_tiny

    model, data, run = _run_copy(ctx)
    save_tiny(model, "small", seed=1)  # `cwgrpo sft` rewrote the base model
    return _retrain(model, data, run)


def _changed_data(ctx: Ctx):
    model, data, run = _run_copy(ctx)
    data.write_text(data.read_text().replace('"answer": "2"', '"answer": "3"'))
    return _retrain(model, data, run)


def _changed_revision(ctx: Ctx):
    model, data, run = _run_copy(ctx)
    model.with_name("model.json").write_text(json.dumps({"model_id": "a/b", "commit": "c0ffee"}))
    return _retrain(model, data, run)


def _killed_run_without_live_logs(ctx: Ctx):
    model, data, run = _run_copy(ctx)
    shutil.rmtree(run / "checkpoint-2")  # killed after checkpoint 1 ...
    shutil.rmtree(run / "live")  # ... and the live logs are lost
    return _retrain(model, data, run)


def _finished_run_without_live_logs(ctx: Ctx):
    model, data, run = _run_copy(ctx)
    shutil.rmtree(run / "live")
    return _retrain(model, data, run)


def _metrics_with_a_gap(ctx: Ctx):
    from cwgrpo_workflow.report.load import metrics_frame

    run = ctx.tmp / "run"
    run.mkdir()
    tags = {"size": "small", "method": "grpo", "seed": 0}
    (run / "run.json").write_text(json.dumps({"tags": tags, "config": {"trl": {"logging_steps": 1}}}))
    (run / "metrics.jsonl").write_text(
        "".join(json.dumps({"step": s, "loss": 0.0}) + "\n" for s in range(9, 17))
    )
    return metrics_frame([run])


def _evaluate_onto(ctx: Ctx, which: str):
    bench = ctx.records("bench.jsonl")
    before = bench.read_bytes()
    out, summary = (bench, ctx.tmp / "s.json") if which == "out" else (ctx.tmp / "o.jsonl", bench)
    try:
        evaluate_models(
            [ModelJobs(ctx.model, {}, [(bench, out, summary)])],
            EvalConfig(prompt_set="tiny", max_new_tokens=4),
        )
    finally:
        assert bench.read_bytes() == before, "the benchmark was overwritten"


def _claims_onto_summary(ctx: Ctx):
    summary = _summary(ctx)
    before = summary.read_bytes()
    try:
        claims_mod.run(
            _ns(summaries=[summary], runs=[ctx.tmp], out_json=summary, out_md=ctx.tmp / "c.md", reported=None)
        )
    finally:
        assert summary.read_bytes() == before


def _ns(**kw: Any):
    import argparse

    return argparse.Namespace(config=None, overrides=[], **kw)


def _locked_run(ctx: Ctx):
    """Another `cwgrpo train` (here: a process holding the run folder's lock) is training into it."""
    run = ctx.tmp / "run"
    run.mkdir()
    code = "import sys; from cwgrpo.train.runguard import RunLock; RunLock(sys.argv[1]).acquire(); print('held', flush=True); sys.stdin.read()"
    holder = subprocess.Popen(
        [sys.executable, "-c", code, str(run)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    try:
        assert holder.stdout.readline().strip() == "held"
        _train(
            ctx,
            ctx.model,
            {"max_steps": 1, "save_steps": 1, "num_generations": 2, "per_device_train_batch_size": 2},
        )
    finally:
        holder.stdin.close()
        holder.wait(timeout=30)
    assert not list(run.glob("checkpoint-*")), "trained into a folder another trainer holds"


def _huge_problem_file(ctx: Ctx, chars: int = 10_000_000) -> Path:
    return ctx.write("huge.jsonl", json.dumps({**REC, "problem": "1+" * (chars // 2) + "1"}) + "\n")


def _evaluate_huge_problem(ctx: Ctx):
    start = time.perf_counter()
    try:
        jobs = [(_huge_problem_file(ctx), ctx.tmp / "out.jsonl", ctx.tmp / "out.summary.json")]
        evaluate_models([ModelJobs(ctx.model, {}, jobs)], EvalConfig(prompt_set="tiny", max_new_tokens=4))
    finally:
        assert time.perf_counter() - start < 30, "the check itself took too long"


def _train_huge_problem(ctx: Ctx, chars: int):
    from cwgrpo.train.options import build_train_config
    from cwgrpo.train.run import train

    trl = {"use_cpu": True, "bf16": False, "max_steps": 1}
    return train(
        ctx.model, _huge_problem_file(ctx, chars), ctx.tmp / "run", build_train_config(trl, ctx.tmp / "run")
    )


def _truncated_checkpoint_model(ctx: Ctx) -> Path:
    _, _, run = _run_copy(ctx)
    weights = run / "checkpoint-2" / "model.safetensors"
    with open(weights, "r+b") as fh:
        fh.truncate(weights.stat().st_size // 2)
    return run / "checkpoint-2"


def _truncated_model(ctx: Ctx) -> Path:
    model = ctx.model_copy("m")
    weights = model / "model.safetensors"
    with open(weights, "r+b") as fh:
        fh.truncate(weights.stat().st_size - 1)
    return model


def _summary_with(ctx: Ctx, **values: Any):
    from cwgrpo_workflow.report.load import summaries_frame

    path = _summary(ctx)
    data = json.loads(path.read_text())
    data.update(values)
    path.write_text(json.dumps(data))  # json writes NaN for float("nan"), as a careless tool would
    return summaries_frame([path])


def _failing_trainer_start(ctx: Ctx, monkeypatch_target: str = "_train_locked"):
    import cwgrpo.train.run as train_mod

    original = getattr(train_mod, monkeypatch_target)

    def boom(*args: Any, **kwargs: Any):
        raise ValueError("TRL refused an option after the run folder was made")

    setattr(train_mod, monkeypatch_target, boom)
    try:
        _train(ctx, ctx.model, {})
    finally:
        setattr(train_mod, monkeypatch_target, original)


FAULT_RAISES = [
    # the run's identity covers the base model, its revision and the training data
    Raises("faults", "base-model-changed-after-training", _changed_model, ConfigError, r"changed the base model"),
    Raises("faults", "training-data-changed-after-training", _changed_data, ConfigError, r"the training data"),
    Raises("faults", "model-revision-changed", _changed_revision, ConfigError, r"the base model \(marker"),
    # no command writes over one of its inputs
    Raises("faults", "evaluate-out-is-the-benchmark", lambda c: _evaluate_onto(c, "out"), ValueError, r"would overwrite the input"),
    Raises("faults", "evaluate-summary-is-the-benchmark", lambda c: _evaluate_onto(c, "summary"), ValueError, r"would overwrite the input"),
    Raises("faults", "claims-out-is-a-summary", _claims_onto_summary, ValueError, r"would overwrite the input", ("c.md",)),
    # a resume needs every log line before its resume point; figures refuse gaps
    Raises("faults", "resume-after-live-logs-lost", _killed_run_without_live_logs, ConfigError, r"lacks the logs of step\(s\) 1 before the resume point 1"),
    Raises("faults", "finished-run-after-live-logs-lost", _finished_run_without_live_logs, ConfigError, r"lacks the logs of step\(s\) 1, 2"),
    Raises("faults", "figure-metrics-with-a-gap", _metrics_with_a_gap, ResultFileError, r"no line for step\(s\) 1-8"),
    # the grading budget is validated by the Python API too
    Raises("faults", "grade-timeout-zero", lambda c: _grade("\\boxed{9^{9^{9^{9}}}}", "1", 0), ValueError, r"timeout_s .* got 0"),
    Raises("faults", "grade-timeout-negative", lambda c: _grade("\\boxed{1}", "1", -1), ValueError, r"timeout_s .* got -1"),
    Raises("faults", "grade-many-timeout-nan", lambda c: _grade_many(math.nan), ValueError, r"timeout_s .* got nan"),
    # one trainer per run folder
    Raises("faults", "train-into-a-locked-run-folder", _locked_run, ConfigError, r"being trained into by another `cwgrpo train` \(pid \d+ on host"),
    # damaged checkpoints and models, huge prompts, bad summary values, NaN options, a failed start
    Raises("faults", "evaluate-truncated-checkpoint", lambda c: _evaluate(c, _truncated_checkpoint_model(c)), ResultFileError, r"checkpoint-2/model.safetensors has \d+ bytes, \d+ when the checkpoint was saved", ("out.jsonl", "out.summary.json")),
    Raises("faults", "resume-past-a-truncated-checkpoint", lambda c: _resume_past_a_truncated_checkpoint(c), ConfigError, r"checkpoint-2/model.safetensors has \d+ bytes.*previous complete checkpoint checkpoint-1 holds no optimiser state"),
    Raises("faults", "evaluate-truncated-model-without-flag", lambda c: _evaluate(c, _truncated_model(c)), ResultFileError, r"m/model.safetensors is truncated or corrupt \(\d+ bytes, its header needs \d+\)", ("out.jsonl", "out.summary.json")),
    Raises("faults", "evaluate-10mb-problem", _evaluate_huge_problem, ConfigError, r"huge.jsonl: prompt 0 has \d+ characters", ("out.jsonl", "out.summary.json")),
    Raises("faults", "train-10mb-problem", lambda c: _train_huge_problem(c, 10 * MB), ConfigError, r"training prompt 0 has \d+ characters", ("run",)),
    Raises("faults", "train-prompt-longer-than-context", lambda c: _train_huge_problem(c, 600), ConfigError, r"training prompt 0 has \d+ tokens, more than the model's context of 256", ("run",)),
    Raises("faults", "summary-pass1-nan", lambda c: _summary_with(c, pass1=math.nan), ResultFileError, r"pass1 must be a finite number, got nan"),
    Raises("faults", "summary-pass1-above-1", lambda c: _summary_with(c, pass1=1.7), ResultFileError, r"pass1=1.7 is outside \[0, 1\]"),
    Raises("faults", "train-learning-rate-nan", lambda c: _train(c, c.model, {"learning_rate": math.nan}), ConfigError, r"learning_rate=nan", ("run",)),
    Raises("faults", "train-learning-rate-nan-in-options", lambda c: _split({"learning_rate": math.nan}), ConfigError, r"learning_rate=nan"),
    Raises("faults", "train-failure-after-the-folder-was-made", _failing_trainer_start, ValueError, r"TRL refused", ("run",)),
]  # fmt: skip


def _grade(completion: Any, gold: Any, timeout_s: Any):
    from cwgrpo.grading.scoring import grade

    return grade(completion, gold, timeout_s=timeout_s)


def _grade_many(timeout_s: float):
    from cwgrpo.grading.scoring import grade_many

    return grade_many([("\\boxed{1}", "1")], processes=1, timeout_s=timeout_s)


RAISES += FAULT_RAISES


@pytest.mark.parametrize("case", RAISES, ids=[c.id for c in RAISES])
def test_bad_input_raises_a_clear_error(case: Raises, tmp_path, request):
    ctx = Ctx(tmp_path, request)
    with pytest.raises(case.error, match=case.match) as info:
        case.call(ctx)
    assert isinstance(info.value, (ConfigError, ResultFileError, ValueError, FileNotFoundError))
    left = [p for p in case.outputs if (tmp_path / p).exists()]
    assert not left, f"outputs left behind after the failure: {left}"


# --------------------------------------------------------------------------------- DEFINED table


@dataclass(frozen=True)
class Defined:
    category: str
    name: str
    check: Callable[[Ctx], None]  # asserts the defined result itself

    @property
    def id(self) -> str:
        return f"{self.category}-{self.name}"


def _finite_and_like_masked(variant: str, value: float) -> None:
    """A valid token with a non-finite log-prob is treated as padding: the same weights as masking it."""
    logps, adv, mask = _batch()
    bad = _with(logps, (0, 2), value)
    w = _cw(bad, adv, mask, variant)
    assert bool(torch.isfinite(w).all())
    assert w[0, 2] == 0
    torch.testing.assert_close(w, _cw(logps, adv, _with(mask, (0, 2), 0), variant), rtol=0, atol=0)
    cov = W.token_covariance(bad, adv, mask, centring=W.VARIANT_KNOBS[variant].centring)
    assert bool(torch.isfinite(cov).all()) and cov[0, 2] == 0


def _nan_advantage(variant: str) -> None:
    logps, adv, mask = _batch()
    w = _cw(logps, _with(adv, (1,), math.nan), mask, variant)
    assert bool(torch.isfinite(w).all())
    assert bool((w[1] == 0).all())  # the whole completion is dropped
    assert bool((w[0] > 0).all())


def _nan_gradient_finite() -> None:
    logps, adv, mask = _batch(dtype=torch.float64)
    bad = _with(logps, (2, 3), math.nan).requires_grad_(True)
    _cw(bad, adv, mask, "released").sum().backward()
    assert bool(torch.isfinite(bad.grad).all())
    assert bad.grad[2, 3] == 0


def _methods_finite_on_nan() -> None:
    logps, adv, mask = _batch()
    bad = _with(logps, (0, 0), math.nan)
    for name, method in W.METHODS.items():
        out = method(W.MethodInputs(bad, None, adv, mask, torch.Generator().manual_seed(0)), _OPTS)
        assert bool(torch.isfinite(out.multipliers).all()), name


def _sigma_zero(variant: str) -> None:
    logps, _, mask = _batch()
    w = _cw(logps, torch.ones(4), mask, variant)  # equal advantages: every c = 0, sigma = 0
    m = mask.bool()
    expected = 1.0 if variant == "described" else mask.numel() / int(m.sum())
    torch.testing.assert_close(w[m], torch.full((int(m.sum()),), expected))
    assert bool((w[~m] == 0).all())


def _empty_mask(variant: str) -> None:
    logps, adv, mask = _batch()
    assert bool((_cw(logps, adv, torch.zeros_like(mask), variant) == 0).all())
    assert _cw(torch.zeros(0, 6), torch.zeros(0), torch.zeros(0, 6), variant).shape == (0, 6)


def _bf16(variant: str) -> None:
    logps, adv, mask = _batch(dtype=torch.bfloat16)
    w = _cw(logps, adv, mask, variant)
    assert w.dtype == torch.float32
    torch.testing.assert_close(w, _cw(logps.float(), adv.float(), mask, variant), rtol=1e-6, atol=1e-6)


def _partial_checkpoint(ctx: Ctx) -> None:
    from cwgrpo.train.checkpoints import complete_checkpoints, remove_incomplete_checkpoints
    from cwgrpo.train.runguard import COMPLETE_FLAG

    run = ctx.tmp / "run"
    for step in (10, 20):
        (run / f"checkpoint-{step}").mkdir(parents=True)
        (run / f"checkpoint-{step}" / "model.safetensors").write_bytes(b"\0" * 16)
    (run / "checkpoint-10" / COMPLETE_FLAG).write_text('{"step": 10}')
    (run / "checkpoint-30").mkdir()  # an empty folder, cut before anything was written
    assert list(complete_checkpoints(run)) == [10]
    remove_incomplete_checkpoints(run)
    assert sorted(p.name for p in run.iterdir()) == ["checkpoint-10"]


def _cut_log_line(ctx: Ctx) -> None:
    from cwgrpo.train.checkpoints import truncate_log

    log = ctx.write("metrics.jsonl", '{"step": 1}\n{"step": 2}\n{"step": 3, "lo')
    truncate_log(log, 5)
    assert log.read_text() == '{"step": 1}\n{"step": 2}\n'


def _no_chat_template_evaluate(ctx: Ctx) -> None:
    """Generation has a documented fallback without a chat template: the message contents, joined."""
    from cwgrpo.generation import encode_prompt, get_backend, messages_to_text

    backend = get_backend("transformers", ctx.model_copy("m", no_chat_template=True), progress=False)
    assert not backend.tokenizer.chat_template
    messages = [{"role": "user", "content": "1+1"}]
    assert (
        encode_prompt(backend.tokenizer, messages)
        == backend.tokenizer(messages_to_text(messages))["input_ids"]
    )


def _failed_prepare_keeps_old_file(ctx: Ctx) -> None:
    """A failed rewrite leaves the previous complete file untouched (atomic writes), never a partial one."""
    out = ctx.tmp / "aime24.jsonl"
    good = [{"problem": f"p{i}", "answer": str(i)} for i in range(30)]
    prepare(DATASETS["aime24"], out, rows=good)
    before = out.read_bytes()
    with pytest.raises(ValueError, match="missing column 'answer' in row 29"):
        prepare(DATASETS["aime24"], out, rows=[*good[:29], {"problem": "p"}])
    assert out.read_bytes() == before
    files = sorted(p.name for p in ctx.tmp.iterdir())
    assert files == ["aime24.jsonl", "aime24.manifest.json"], f"temporary files left behind: {files}"


DEFINED = [
    *(
        Defined("tensors", f"{label}-logp-{v}", lambda c, v=v, x=x: _finite_and_like_masked(v, x))
        for v in W.CW_VARIANTS
        for label, x in (("nan", math.nan), ("neg-inf", -math.inf), ("pos-inf", math.inf))
    ),
    *(Defined("tensors", f"nan-advantage-{v}", lambda c, v=v: _nan_advantage(v)) for v in W.CW_VARIANTS),
    Defined("tensors", "nan-logp-gradient-finite", lambda c: _nan_gradient_finite()),
    Defined("tensors", "nan-logp-every-method-finite", lambda c: _methods_finite_on_nan()),
    *(Defined("tensors", f"sigma-zero-{v}", lambda c, v=v: _sigma_zero(v)) for v in W.CW_VARIANTS),
    *(Defined("tensors", f"empty-mask-{v}", lambda c, v=v: _empty_mask(v)) for v in W.CW_VARIANTS),
    *(Defined("tensors", f"bf16-{v}", lambda c, v=v: _bf16(v)) for v in W.CW_VARIANTS),
    Defined("files", "checkpoint-without-completion-flag", _partial_checkpoint),
    Defined("files", "metrics-line-cut-by-a-kill", _cut_log_line),
    Defined("files", "failed-prepare-keeps-previous-file", _failed_prepare_keeps_old_file),
    Defined("models", "evaluate-tokenizer-without-chat-template", _no_chat_template_evaluate),
]


def _user_checkpoint_copies_kept(ctx: Ctx) -> None:
    from cwgrpo.train.checkpoints import remove_incomplete_checkpoints
    from cwgrpo.train.runguard import COMPLETE_FLAG

    run = ctx.tmp / "run"
    for name in ("checkpoint-8", "checkpoint-8.bak", "checkpoint-final", "checkpoint-9"):
        (run / name).mkdir(parents=True)
        (run / name / "model.safetensors").write_bytes(b"\0" * 16)
    for name in ("checkpoint-8", "checkpoint-8.bak"):
        (run / name / COMPLETE_FLAG).write_text('{"step": 8}')
    remove_incomplete_checkpoints(run)  # only checkpoint-9 was cut by a kill
    assert sorted(p.name for p in run.iterdir()) == ["checkpoint-8", "checkpoint-8.bak", "checkpoint-final"]


def _resume_past_a_truncated_checkpoint(ctx: Ctx) -> int:
    """The newest checkpoint's weights were cut after it was saved; the previous one was pruned by then."""
    model, data, run = _run_copy(ctx)
    weights = run / "checkpoint-2" / "model.safetensors"
    with open(weights, "r+b") as fh:
        fh.truncate(100)
    return _retrain(model, data, run)


def _disk_full_names_the_folder(ctx: Ctx) -> None:
    import shutil as sh

    from cwgrpo.train.runguard import check_free_space

    (ctx.tmp / "checkpoint-4").mkdir()
    (ctx.tmp / "checkpoint-4" / "model.safetensors").write_bytes(b"\0" * 4096)
    real = sh.disk_usage
    sh.disk_usage = lambda p: real(p)._replace(free=100)
    try:
        with pytest.raises(OSError, match=r"not enough free space in .*: 0 MiB free") as info:
            check_free_space(ctx.tmp)
    finally:
        sh.disk_usage = real
    assert str(ctx.tmp) in str(info.value)


def _disk_full_stops_training_before_a_save(ctx: Ctx) -> None:
    import shutil as sh

    real = sh.disk_usage
    sh.disk_usage = lambda p: real(p)._replace(free=0)
    try:
        with pytest.raises(OSError, match=r"not enough free space in .*run for the next checkpoint"):
            _train(
                ctx,
                ctx.model,
                {"max_steps": 1, "save_steps": 1, "num_generations": 2, "per_device_train_batch_size": 2},
            )
    finally:
        sh.disk_usage = real
    assert not (ctx.tmp / "run").exists(), "no checkpoint was saved, and the new run folder is removed"


def _write_error_names_the_file(ctx: Ctx) -> None:
    import errno

    from cwgrpo.io import write_text

    target = ctx.tmp / "out" / "metrics.jsonl"
    real = Path.write_text

    def full(self, *a, **k):
        raise OSError(errno.ENOSPC, "No space left on device")

    Path.write_text = full
    try:
        with pytest.raises(OSError, match=r"cannot write .*metrics.jsonl: No space left on device"):
            write_text(target, "x")
    finally:
        Path.write_text = real
    assert not target.exists() and not list(target.parent.iterdir()), "a temporary file was left behind"


def _fetch_model_network_down(ctx: Ctx) -> None:
    """An HTTP-stack error while downloading is one line naming the model, not a traceback."""
    import huggingface_hub

    from cwgrpo.models import hub

    class ConnectError(Exception):
        pass

    ConnectError.__module__ = "httpx"  # what the HTTP stack raises, without importing it

    def refuse(*args, **kwargs):
        raise ConnectError("[Errno 111] Connection refused\n(a second line of the traceback)")

    saved = huggingface_hub.HfApi.model_info, hub.hub_offline
    huggingface_hub.HfApi.model_info, hub.hub_offline = refuse, lambda: False  # the tests run offline
    try:
        with pytest.raises(
            ConfigError,
            match=r"cannot fetch Hub model a/b@main: ConnectError: \[Errno 111\] Connection refused$",
        ):
            hub._fetch_hub(hub.parse_source("a/b", "main"), ctx.tmp / "m", hub.FetchConfig())
    finally:
        huggingface_hub.HfApi.model_info, hub.hub_offline = saved


def _repeated_list_flags_extend(ctx: Ctx) -> None:
    import argparse

    from cwgrpo_workflow.report import claims, figures, table

    for module, argv, attr in (
        (figures, ["--kind", "training", "--out-pdf", "f.pdf", "--out-png", "f.png", "--runs", "A", "B", "--runs", "C"], "runs"),
        (table, [*(a for n in TABLE_FILES for a in (f"--out-{n}", n)), "--summaries", "A", "B", "--summaries", "C"], "summaries"),
        (claims, ["--out-json", "c.json", "--out-md", "c.md", "--runs", "R", "--summaries", "A", "B", "--summaries", "C"], "summaries"),
    ):  # fmt: skip
        parser = argparse.ArgumentParser()
        module.configure_parser(parser)
        assert getattr(parser.parse_args(argv), attr) == [Path("A"), Path("B"), Path("C")], module.__name__


def _unparseable_gold_is_unscorable(ctx: Ctx) -> None:
    from cwgrpo.grading.scoring import grade_detailed

    for gold in ("\\frac{", "???"):
        result = grade_detailed("\\boxed{" + gold + "}", gold)  # the same string: no longer "correct"
        assert result.unscorable and not result.correct, (gold, result)
    for gold in ("\\text{Evelyn}", "(A)", "\\frac{1}{2}", "2,3"):
        assert not grade_detailed("", gold).unscorable, gold


def _unfinished_reasoning_has_no_answer(ctx: Ctx) -> None:
    from cwgrpo.grading.scoring import grade_detailed

    result = grade_detailed("<think>\n88-52=", "88")
    assert result.extracted is None and not result.correct
    inside = grade_detailed("<think>\n88-52=36\n\\boxed{36}", "36")  # boxed, but inside unfinished reasoning
    assert inside.extracted is None and not inside.correct
    assert grade_detailed("<think>\n88-52=36\n</think>\n\\boxed{36}", "36").correct  # finished: graded
    assert grade_detailed("The answer is \\boxed{36}", "36").correct  # no think block at all: graded


def _grade_type_errors(ctx: Ctx) -> None:
    for args, name in (((None, "1"), "completion"), (("\\boxed{1}", 1), "gold")):
        with pytest.raises(TypeError, match=rf"{name} must be a str"):
            _grade(*args, 3.0)


def _diagnostics_of_no_tokens(ctx: Ctx) -> None:
    for shape in ((0, 0), (0, 5), (3, 0)):
        empty = torch.zeros(shape)
        stats = W.covariance_diagnostics(empty, empty, empty.bool())
        full = W.covariance_diagnostics(*(torch.ones(2, 2),) * 2, torch.ones(2, 2, dtype=torch.bool))
        assert set(stats) == set(full)
        assert all(float(v) == 0.0 for v in stats.values()), shape


def _huge_but_finite_inputs(variant: str) -> None:
    logps, adv, mask = _batch()
    expected_shape = logps.shape
    for lp, a in ((_with(logps, (0, 0), -1e20), adv), (logps, _with(adv, (0,), 1e30))):
        w = W.cw_weights(lp, a, mask, variant=variant)
        assert w.shape == expected_shape and torch.isfinite(w).all(), variant
        assert (w[mask.bool()] > 0).all()
    # the scaling changes nothing where nothing overflows
    plain = W.cw_weights(logps, adv, mask, variant=variant)
    assert torch.equal(plain, W.cw_weights(logps.clone(), adv.clone(), mask, variant=variant))


FAULT_DEFINED = [
    Defined("faults", "user-checkpoint-copies-are-kept", _user_checkpoint_copies_kept),
    Defined("faults", "disk-full-names-the-folder", _disk_full_names_the_folder),
    Defined("faults", "disk-full-stops-training-before-a-save", _disk_full_stops_training_before_a_save),
    Defined("faults", "write-error-names-the-file", _write_error_names_the_file),
    Defined("faults", "fetch-model-network-down", _fetch_model_network_down),
    Defined("faults", "repeated-list-flags-extend", _repeated_list_flags_extend),
    Defined("faults", "unparseable-gold-is-unscorable", _unparseable_gold_is_unscorable),
    Defined("faults", "unfinished-reasoning-has-no-answer", _unfinished_reasoning_has_no_answer),
    Defined("faults", "grade-type-errors-name-the-argument", _grade_type_errors),
    Defined("faults", "diagnostics-of-no-tokens-are-zeros", _diagnostics_of_no_tokens),
    *(Defined("faults", f"huge-finite-inputs-finite-weights-{v}", lambda c, v=v: _huge_but_finite_inputs(v)) for v in W.CW_VARIANTS),
]  # fmt: skip
DEFINED += FAULT_DEFINED


@pytest.mark.parametrize("case", DEFINED, ids=[c.id for c in DEFINED])
def test_bad_input_has_a_defined_result(case: Defined, tmp_path, request):
    case.check(Ctx(tmp_path, request))


# ------------------------------------------------------------------------------------- CLI table


@dataclass(frozen=True)
class Cli:
    name: str
    argv: Callable[[Ctx], list[str]]
    command: str  # the `cwgrpo <command>` the error line names ('' for the top-level parser)
    match: str  # substring of the error line: the offending name or value
    outputs: tuple[str, ...] = ()  # paths under tmp that must not exist after the failure


def _eval_argv(ctx: Ctx) -> list[str]:
    return [
        "evaluate",
        "--model-dir",
        str(ctx.tmp / "model"),
        "--benchmark-file",
        str(ctx.records("bench.jsonl")),
        "--out",
        str(ctx.tmp / "out.jsonl"),
        "--summary",
        str(ctx.tmp / "out.summary.json"),
        "--set",
        "prompt_set=tiny",
    ]


EVAL_OUT = ("out.jsonl", "out.summary.json")
TABLE_FILES = {
    "pdf": "table.pdf",
    "csv": "t/table1.csv",
    "tex": "t/table1.tex",
    "md": "t/table1.md",
    "reported-csv": "t/reported_vs_ours.csv",
    "reported-md": "t/reported_vs_ours.md",
    "sensitivity-csv": "t/metric_sensitivity.csv",
    "sensitivity-md": "t/metric_sensitivity.md",
    "provenance": "t/table1.provenance.json",
}
TABLE_OUT = tuple(TABLE_FILES.values())


def _table_out_flags(ctx: Ctx) -> list[str]:
    return [arg for name, rel in TABLE_FILES.items() for arg in (f"--out-{name}", str(ctx.tmp / rel))]


CLI = [
    Cli("unknown-command", lambda c: ["frobnicate"], "", "unknown command 'frobnicate'"),
    Cli(
        "evaluate-unknown-option", lambda c: [*_eval_argv(c), "--set", "kk=4"], "evaluate", "['kk']", EVAL_OUT
    ),
    Cli(
        "evaluate-set-without-equals",
        lambda c: [*_eval_argv(c), "--set", "k"],
        "evaluate",
        "got 'k'",
        EVAL_OUT,
    ),
    Cli(
        "evaluate-k-zero", lambda c: [*_eval_argv(c), "--set", "k=0"], "evaluate", "k must be >= 1", EVAL_OUT
    ),
    Cli(
        "evaluate-invalid-yaml",
        lambda c: [*_eval_argv(c), "--config", str(c.write("c.yaml", "k: [1,\n  2\n"))],
        "evaluate",
        "c.yaml is not valid YAML",
        EVAL_OUT,
    ),
    Cli("evaluate-missing-model", lambda c: _eval_argv(c), "evaluate", "model folder not found", EVAL_OUT),
    Cli(
        "evaluate-missing-required-flag",
        lambda c: _eval_argv(c)[:-4],
        "evaluate",
        "the following arguments are required: --summary",
        EVAL_OUT,
    ),
    Cli(
        "train-yaml-not-a-mapping",
        lambda c: [
            "train",
            "--model-dir",
            str(c.tmp / "model"),
            "--train-data",
            str(c.records()),
            "--run-dir",
            str(c.tmp / "run"),
            "--config",
            str(c.write("c.yaml", "- max_steps\n- 4\n")),
        ],
        "train",
        "expected a mapping of options, got list",
        ("run",),
    ),
    Cli(
        "prepare-data-unknown-dataset",
        lambda c: ["prepare-data", "--dataset", "math5000", "--out", str(c.tmp / "d.jsonl")],
        "prepare-data",
        "unknown dataset 'math5000'",
        ("d.jsonl", "d.manifest.json"),
    ),
    Cli(
        "table-truncated-summary",
        lambda c: [
            "table",
            "--summaries",
            str(c.write("s.summary.json", _summary(c).read_text()[:40])),
            *_table_out_flags(c),
        ],
        "table",
        "is not valid JSON (truncated or corrupt?)",
        TABLE_OUT,
    ),
    Cli(
        "doctor-malformed-configfile",
        lambda c: [
            "doctor",
            "--offline",
            "--configfile",
            str(c.write("cfg.yaml", "name: x\nkind: [tiny,\n")),
        ],
        "doctor",
        "cfg.yaml is not valid YAML",
    ),
    Cli(
        "doctor-missing-configfile",
        lambda c: ["doctor", "--offline", "--configfile", str(c.tmp / "absent.yaml")],
        "doctor",
        "missing file: ",
    ),
    Cli(
        "claims-missing-run",
        lambda c: [
            "claims",
            "--summaries",
            str(_summary(c)),
            "--runs",
            str(c.tmp / "runs" / "absent"),
            "--out-json",
            str(c.tmp / "claims.json"),
            "--out-md",
            str(c.tmp / "claims.md"),
        ],
        "claims",
        "missing file",
        ("claims.json", "claims.md"),
    ),
]


@pytest.mark.parametrize("case", CLI, ids=[c.name for c in CLI])
def test_cli_bad_input_exits_2_with_one_clear_line(case: Cli, tmp_path, request):
    ctx = Ctx(tmp_path, request)
    env = {k: v for k, v in os.environ.items() if k != "CWGRPO_DEBUG"}
    env["CWGRPO_LOG_LEVEL"] = "WARNING"
    env["PYTHONPATH"] = os.pathsep.join([str(REPO), env.get("PYTHONPATH", "")])
    res = subprocess.run(
        [sys.executable, "-m", "cwgrpo.cli", *case.argv(ctx)],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert res.returncode == 2, res.stderr
    assert "Traceback" not in res.stderr, res.stderr
    prefix = f"cwgrpo {case.command}: error: " if case.command else "cwgrpo: error: "
    lines = [line for line in res.stderr.splitlines() if line.startswith(prefix)]
    assert len(lines) == 1, res.stderr
    assert res.stderr.rstrip("\n").splitlines()[-1] == lines[0], "the error must be one line, and the last"
    assert case.match in lines[0], lines[0]
    left = [p for p in case.outputs if (tmp_path / p).exists()]
    assert not left, f"outputs left behind after the failure: {left}"
