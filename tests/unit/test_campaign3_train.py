"""Third fault campaign (issue 25), the training and workflow side: the learning-signal option, vLLM's
completion budget, run folders the claims read, failed jobs' log tails and the GPU acceptance script's
arguments, tried as a hostile user would. Each test failed before its fix."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from cwgrpo.configs import ConfigError
from cwgrpo.context_budget import completion_budget
from cwgrpo.io import ResultFileError
from cwgrpo.optioncheck import OptionError, check_train_options
from cwgrpo.report.claim_checks import silent_runs
from cwgrpo.train_config import build_train_config, split_options

REPO = Path(__file__).resolve().parents[2]


# -- options refused where they are parsed, not after the model has loaded -------------------------------
def test_a_negative_no_signal_stretch_is_refused_at_parse_time(tmp_path):
    with pytest.raises(OptionError, match=r"cw_no_signal_steps=-1: must be an integer >= 0") as err:
        check_train_options({"cw_no_signal_steps": -1})
    assert err.value.key == "cw_no_signal_steps"
    with pytest.raises(ConfigError, match=r"cw_no_signal_steps=-1"):
        build_train_config({"cw_no_signal_steps": -1, "use_cpu": True, "bf16": False}, tmp_path / "run")
    assert not (tmp_path / "run").exists()


def test_a_completion_budget_below_one_token_is_refused_before_a_request():
    with pytest.raises(OptionError, match=r"generation_kwargs.max_tokens=0: .*>= 1") as err:
        check_train_options({"use_vllm": True, "vllm_mode": "server", "generation_kwargs": {"max_tokens": 0}})
    assert err.value.key == "generation_kwargs"
    with pytest.raises(ValueError, match="max_tokens=-5"):
        completion_budget(10, 100, -5)
    assert completion_budget(10, 100, None) == 90


def test_a_system_prompt_with_a_lone_surrogate_is_refused_before_the_model_loads():
    from cwgrpo.configs import build_config
    from cwgrpo.evaluate import EvalConfig

    bad = "Think step by step \ud800"  # YAML's "\ud800" escape; the tokenizer fails on it with a TypeError
    with pytest.raises(ConfigError, match="system_prompt: character 19 is a lone surrogate"):
        build_config(EvalConfig, None, {"system_prompt": bad})
    with pytest.raises(OptionError, match="system_prompt: character 19 is a lone surrogate"):
        check_train_options({"system_prompt": bad})
    assert build_config(EvalConfig, None, {"system_prompt": "Réfléchis, 答"}).system_prompt == "Réfléchis, 答"


def test_an_unknown_vllm_mode_is_refused_at_parse_time():
    with pytest.raises(OptionError, match=r"vllm_mode='colocated': 'colocate' .* or 'server'") as err:
        check_train_options({"use_vllm": True, "vllm_mode": "colocated"})
    assert err.value.key == "vllm_mode"
    with pytest.raises(ConfigError, match=r"vllm_mode='colocated'"):
        split_options({"use_vllm": True, "vllm_mode": "colocated"})
    check_train_options({"use_vllm": True, "vllm_mode": "server"})


# -- run folders the claims and the table read -----------------------------------------------------------
@pytest.mark.parametrize(
    "recorded", ["yes", {"cause": "zero_reward_spread"}, [{"foo": 1}], ["a"], [{"cause": 5, "from_step": 1}]]
)
def test_a_foreign_learning_signal_record_is_named_not_a_traceback(tmp_path, recorded):
    run = tmp_path / "small" / "grpo" / "seed0"
    run.mkdir(parents=True)
    tags = {"size": "small", "method": "grpo", "seed": 0}
    (run / "run.json").write_text(json.dumps({"tags": tags, "learning_signal": recorded}))
    with pytest.raises(ResultFileError, match=rf"{re.escape(str(run / 'run.json'))}: 'learning_signal'"):
        silent_runs([run])


@pytest.mark.parametrize(
    "line",
    [{"step": 1, "cov": {"a": 1}}, {"step": 1, "cov": [[1.0], [2.0, 3.0]]}, {"step": "x", "cov": [1.0]}],
)
def test_a_foreign_covariance_sample_line_is_named_not_a_traceback(tmp_path, line):
    from cwgrpo.report.load import cov_samples

    (tmp_path / "cov_samples.jsonl").write_text(
        json.dumps({"step": 0, "cov": [0.5]}) + "\n" + json.dumps(line)
    )
    with pytest.raises(ResultFileError, match=rf"{re.escape(str(tmp_path / 'cov_samples.jsonl'))}:2: 'step'"):
        cov_samples(tmp_path)


# -- a failed job's log tail (workflow/rules/failures.smk) -----------------------------------------------
def _failed_job_logs():
    namespace = {"re": re, "Path": Path}
    exec(
        compile((REPO / "workflow" / "rules" / "failures.smk").read_text(), "failures.smk", "exec"), namespace
    )
    return namespace["failed_job_logs"]


def _scheduler(log: Path) -> SimpleNamespace:
    job = SimpleNamespace(log=[str(log)], rule=SimpleNamespace(name="train_small"))
    return SimpleNamespace(failed=[job])


def test_a_huge_log_line_is_clipped_and_terminal_escapes_are_shown_not_sent(tmp_path):
    log = tmp_path / "train.log"
    log.write_bytes(b"start\n" + b"x" * 5_000_000 + b"\n\x1b]0;owned\x07\x1b[2J\x00\xff binary\nlast line\n")
    text = _failed_job_logs()(_scheduler(log))
    assert len(text) < 2_000
    assert "\x1b" not in text and "\x07" not in text and "\x00" not in text
    assert "\\x1b]0;owned\\x07" in text and "last line" in text
    assert "characters" in text  # the clipped line says so


# -- benchmarks/gpu_acceptance.py: bad arguments before any model is built -------------------------------
@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["--arch", "nope"], "--arch 'nope': one of"),
        (["--arch", "nope", "--server-memory", "0"], "--server-memory 0.0: a share of the GPU's memory"),
        (["--arch", "nope", "--out", "."], "--out .: a folder"),
    ],
)
def test_gpu_acceptance_bad_arguments_are_one_line_before_anything_runs(args, expected):
    done = subprocess.run(
        [sys.executable, str(REPO / "benchmarks" / "gpu_acceptance.py"), "--paths", "server", *args],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 2, done.stderr[-2000:]
    assert expected in done.stderr.strip().splitlines()[-1]
    assert "Traceback" not in done.stderr


# -- make vllm (and the other environments) --------------------------------------------------------------
@pytest.mark.parametrize("variable", ["VLLM_VENV", "LIGHTEVAL_VENV", "VENV"])
def test_make_refuses_an_environment_folder_with_a_space_before_any_recipe(tmp_path, variable):
    if shutil.which("make") is None:
        pytest.skip("no make here")
    folder = tmp_path / "my envs" / "vllm"
    done = subprocess.run(
        ["make", "-C", str(REPO), "-n", "vllm", f"{variable}={folder}"], capture_output=True, text=True
    )
    assert done.returncode != 0
    assert f"{variable}='{folder}': give one folder path without spaces" in done.stderr
    assert "venv" not in done.stdout  # no recipe line printed: `python -m venv` would make two folders
