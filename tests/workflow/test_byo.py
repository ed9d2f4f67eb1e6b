"""config/byo.yaml, the template for your own model, data and reward: every mistake at once, then the DAG.

The end-to-end test gives the template a tiny model folder (tests/conftest.py), two JSONL files whose
columns are not ours (`question`, `ans`, `source`) and a reward module of its own that reads them by those
names (importable through PYTHONPATH, as docs/usage.md tells a user), shrinks the run to one step and two
problems through a second config file (the user changes only the template's marked lines), and runs every
job up to Table 1. The fast tests are the dry run's refusals of a reward the jobs could not import or call,
and the one prompt training and evaluation share.
"""

from __future__ import annotations

import csv
import json
import os
import time
from pathlib import Path

import pytest
import yaml

from tests.workflow.test_workflow import REPO, job_stats, run_snakemake

TEMPLATE = REPO / "config" / "byo.yaml"


# The user's reward: it reads the user's own columns by their names (`ans`, `source`), as TRL passes them.
OWN_REWARD = """
def exact(completions, ans, source, **kwargs):
    assert set(source) == {"mine"}, source
    texts = [c[-1]["content"] if isinstance(c, list) else c for c in completions]
    return [float(t.strip() == a) for t, a in zip(texts, ans)]

def wants_gold(completions, gold_answer, **kwargs):
    return [0.0 for _ in completions]
"""


def _own_files(root: Path, model: Path, **train: object) -> Path:
    """JSONL files of the user's (other column names, an extra column), a reward module of the user's in
    ``root`` and the config that points at them (``train``: options over the template's)."""
    root.mkdir(parents=True, exist_ok=True)
    rows = [{"question": f"{a}+{a + 1}", "ans": str(2 * a + 1), "source": "mine"} for a in range(8)]
    (root / "train.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    (root / "test.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows[:4]))
    (root / "byo_rewards.py").write_text(OWN_REWARD)
    mine = {
        "sizes": {"my-model": {"model": str(model)}},
        "datasets": {
            "my_train": {"path": str(root / "train.jsonl"), "answer": "ans"},
            "my_bench": {"path": str(root / "test.jsonl"), "answer": "ans"},
        },
        "train": {"system_prompt": None, **train},  # the tiny tokenizer reads digits and operators only
    }
    path = root / "mine.yaml"
    path.write_text(yaml.safe_dump(mine))
    return path


def _importable(folder: Path) -> dict[str, str]:
    """The environment that makes a user's module in ``folder`` importable by the jobs (docs/usage.md)."""
    return {"PYTHONPATH": os.pathsep.join(filter(None, [str(folder), os.environ.get("PYTHONPATH")]))}


SMALLEST = {  # one step, groups of 2, two problems: every job of the DAG still runs once
    "train": {"num_generations": 2, "per_device_train_batch_size": 2, "max_completion_length": 8, "max_steps": 1,
              "save_steps": 1},
    "evaluate": {"limit": 2, "max_new_tokens": 8, "batch_size": 2},
    "report": {"step": 1},
}  # fmt: skip


def test_the_template_as_shipped_names_each_placeholder_path_at_once(tmp_path):
    proc, out = run_snakemake(tmp_path, "-n", configfile=TEMPLATE)
    assert proc.returncode != 0
    assert "3 config errors:" in out, out[-3000:]
    for line in (
        "sizes.my-model.model: /path/to/my/model/folder: no such folder or file",
        "datasets.my_train.path: /path/to/train.jsonl: no such file",
        "datasets.my_bench.path: /path/to/test.jsonl: no such file",
    ):
        assert line in out


def test_a_template_with_four_kinds_of_mistake_gets_one_line_each_in_one_pass(tiny_model_dir, tmp_path):
    """Missing, unknown, duplicate, wrong type and reward weights of the wrong length: all before any job."""
    mine = _own_files(tmp_path / "own", tiny_model_dir)
    text = TEMPLATE.read_text()
    text = text.replace("name: mine ", "# name: mine ")  # missing
    text = text.replace("seeds: [0]", "seeds: zero\ntrian: {}")  # wrong type; unknown key
    text = text.replace("  learning_rate: 1.0e-6\n", "  learning_rate: 1.0e-6\n  learning_rate: 3.0e-6\n")
    text = text.replace("reward_weights: [1.0]", "reward_weights: [1.0, 1.0]")
    broken = tmp_path / "broken.yaml"
    broken.write_text(text)
    proc, out = run_snakemake(tmp_path / "w", "-n", "--configfile", str(broken), str(mine))  # one flag: a
    # second --configfile would replace the first
    assert proc.returncode != 0
    block = out[out.index("config errors:") :].split("\n  File ")[0].splitlines()
    assert out[out.index("config errors:") - 3 : out.index("config errors:")] == "\n5 "
    expected = [
        f"{broken}:", "train.learning_rate: duplicate key (first at line",
        "trian: unknown key; did you mean 'train'?",
        "name: missing (required)",
        "seeds: expected array, got 'zero' (str)",
        "train.reward_weights: 2 weight(s) [1.0, 1.0] for 1 reward function(s) ['accuracy']",
    ]  # fmt: skip
    for part in expected:
        assert any(part in line for line in block[1:]), (part, block)
    assert len(block) == 6, block  # one heading, one line per mistake (jsonschema alone: the whole schema)
    assert not (tmp_path / "w" / "results").exists()


def test_a_completion_budget_longer_than_the_models_context_names_the_fix(tiny_model_dir, tmp_path):
    context = json.loads((tiny_model_dir / "config.json").read_text())["max_position_embeddings"]
    mine = _own_files(tmp_path / "own", tiny_model_dir)
    over = tmp_path / "over.yaml"
    over.write_text(yaml.safe_dump({"train": {"max_completion_length": context}}))
    proc, out = run_snakemake(tmp_path / "w", "-n", "--configfile", str(TEMPLATE), str(mine), str(over))
    assert proc.returncode != 0
    assert (
        f"train.max_completion_length: {context} tokens, but the model's context is {context} tokens" in out
    )
    assert f"set max_completion_length to at most {context // 2}" in out


def test_a_reward_the_jobs_cannot_import_is_refused_in_the_dry_run_naming_the_fix(tiny_model_dir, tmp_path):
    """Issue 37: the dry run passed and the first training job failed 82 s in; the module was not on the
    jobs' path (the jobs run `cwgrpo train` in processes of their own)."""
    mine = _own_files(tmp_path / "own", tiny_model_dir, reward_funcs=["byo_rewards:exact"])
    proc, out = run_snakemake(tmp_path / "w", "-n", "--configfile", str(TEMPLATE), str(mine))  # no PYTHONPATH
    assert proc.returncode != 0
    line = next(line for line in out.splitlines() if "train.reward_funcs: " in line)
    assert "module 'byo_rewards' does not import (ModuleNotFoundError" in line, line
    assert "export PYTHONPATH=FOLDER before snakemake" in line and "pip install -e FOLDER" in line
    assert not (tmp_path / "w" / "results").exists()


def test_a_reward_called_with_keywords_it_lacks_is_refused_naming_the_keywords(tiny_model_dir, tmp_path):
    """Issue 37: the reward wanted a column the data does not have; the TypeError came from the job and did
    not say what it was called with."""
    own = tmp_path / "own"
    mine = _own_files(own, tiny_model_dir, reward_funcs=["byo_rewards:wants_gold"])
    proc, out = run_snakemake(
        tmp_path / "w", "-n", "--configfile", str(TEMPLATE), str(mine), env=_importable(own)
    )
    assert proc.returncode != 0
    line = next(line for line in out.splitlines() if "train.reward_funcs: " in line)
    assert (
        "reward 'byo_rewards:wants_gold', called as TRL calls it on the first 4 training row(s) (2 completions each)"
        in line
    )
    assert "raised TypeError: wants_gold() missing 1 required positional argument: 'gold_answer'" in line
    assert (
        "called with the keywords prompts, completions, completion_ids, answer, ans, question, source,"
        in line
    )


def test_the_training_prompt_is_the_evaluation_prompt_unless_set_apart(tiny_model_dir, tmp_path):
    """Issue 37: byo.yaml's system prompt reached training only; evaluation had none, silently."""
    mine = _own_files(tmp_path / "own", tiny_model_dir, system_prompt="Be brief.")
    proc, out = run_snakemake(tmp_path / "w", "-n", "--configfile", str(TEMPLATE), str(mine))
    assert proc.returncode == 0, out[-3000:]
    [options] = (tmp_path / "w/results/mine/options/evaluate").glob("my-model.*.yaml")
    assert yaml.safe_load(options.read_text())["system_prompt"] == "Be brief."
    assert "prompts set apart" not in out
    apart = tmp_path / "apart.yaml"
    apart.write_text(yaml.safe_dump({"evaluate": {"system_prompt": ""}}))
    proc, out = run_snakemake(tmp_path / "w2", "-n", "--configfile", str(TEMPLATE), str(mine), str(apart))
    assert proc.returncode == 0, out[-3000:]
    [note] = [line for line in out.splitlines() if "prompts set apart" in line]
    assert note == (
        "note: prompts set apart on purpose (evaluate.system_prompt): training (size my-model, grpo) uses "
        "prompt_set tiny, system prompt 'Be brief.'; evaluation uses prompt_set tiny, system prompt none. "
        "Remove evaluate.system_prompt to use one prompt."
    )


@pytest.mark.slow
def test_the_template_runs_end_to_end_on_a_model_folder_jsonl_files_and_a_reward_of_its_own(
    tiny_model_dir, tmp_path
):
    own = tmp_path / "own"
    mine = _own_files(own, tiny_model_dir, reward_funcs=["byo_rewards:exact"])
    smallest = tmp_path / "smallest.yaml"
    smallest.write_text(yaml.safe_dump(SMALLEST))
    work = tmp_path / "w"
    start = time.monotonic()
    proc, out = run_snakemake(
        work,
        "table",
        "--cores",
        "2",
        "--configfile",
        str(TEMPLATE),
        str(mine),
        str(smallest),
        env=_importable(own),
    )
    wall = time.monotonic() - start
    assert proc.returncode == 0, out[-4000:]
    metrics = [
        json.loads(line) for line in (work / "results/mine/runs/my-model/grpo/seed0/metrics.jsonl").open()
    ]
    assert "rewards/exact/mean" in metrics[0], sorted(metrics[0])  # the user's reward, by its own columns
    stats = job_stats(out)
    assert stats == {"fetch_model": 1, "prepare_data": 2, "train_my_model": 2, "evaluate": 1,
                     "evaluate_run_my_model": 2, "table": 1}, stats  # fmt: skip
    data = [json.loads(line) for line in (work / "results/mine/data/my_train.jsonl").read_text().splitlines()]
    assert [(r["problem"], r["answer"]) for r in data[:2]] == [("0+1", "1"), ("1+2", "3")]
    with open(work / "results/mine/table1.csv", newline="") as fh:
        rows = list(csv.DictReader(fh))
    assert {r["method"] for r in rows} == {"base", "grpo", "cw_grpo"}, rows
    print(f"config/byo.yaml end to end (9 jobs, 1 step, 2 problems): {wall:.0f} s")


def test_a_top_level_typo_is_one_line_naming_the_nearest_key(tmp_path):
    """Issue 25: `trian:` printed the whole schema (887 lines on main); now one line."""
    typo = tmp_path / "typo.yaml"
    typo.write_text((REPO / "config/real.yaml").read_text().replace("\ntrain:", "\ntrian: {}\ntrain:"))
    proc, out = run_snakemake(tmp_path / "w", "-n", configfile=typo)
    assert proc.returncode != 0
    assert "config error in trian: unknown key; did you mean 'train'?" in out
    assert len(out.splitlines()) < 20, out[-3000:]
