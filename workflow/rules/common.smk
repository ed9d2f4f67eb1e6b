"""All Python of the workflow: config validation, cross-field checks, paths, option strings, resources.

The rule files only call what is defined here. Paths follow docs/architecture.md ("Layout of
results/<preset name>/"); every option of a `cwgrpo` call is built by `sets()` from the merged config
sections and passed as `--set key=value`, the value in YAML flow syntax and shell-quoted.
"""

import functools
import json
import math
import os
import re
import shlex
import subprocess
from pathlib import Path

from snakemake.exceptions import WorkflowError
from snakemake.logging import logger
from snakemake.utils import validate


def _seeds_from_command_line(cfg):
    """`--config 'seeds=[0,1,2]'` arrives as ["0", "1", "2"]: Snakemake reads list values with YAML's
    BaseLoader, which keeps every scalar a string. Whole numbers become ints before validation."""
    seeds = cfg.get("seeds")
    if isinstance(seeds, list):
        cfg["seeds"] = [int(s) if isinstance(s, str) and s.strip().isdigit() else s for s in seeds]


_seeds_from_command_line(config)
# Fills in the schema's defaults.
validate(config, schema="../schemas/config.schema.yaml")


# ---------------------------------------------------------------- constants

SIZE_NAMES = {"tiny": ("small", "large"), "paper": ("1.5b", "7b")}
CW_METHODS = ("grpo", "cw_grpo", "clip_cov", "kl_cov")
BASE = "base"  # method label of the untrained model, evaluated at step 0
# Options that fix the step markers or the seed wildcard: never set per method.
RUN_FIXED = ("max_steps", "save_steps", "seed")
EVAL_SWITCHES = ("one_job_per_benchmark",)  # workflow keys of `evaluate`, not passed on
RESOURCE_KINDS = (
    "prepare_data",
    "fetch_model",
    "build_tiny",
    "sft",
    "train",
    "evaluate",
    "report",
)
FIGURES = {  # output name -> (`cwgrpo figure --kind`, what it reads)
    "entropy": ("entropy", "runs"),
    "checkpoints": ("checkpoints", "summaries"),
    "covariance": ("covariance", "runs"),
    "training_curves": ("training", "runs"),
}

PRESET = config["name"]
# Paper kind: downloads run where Snakemake runs (a login node has the network; compute nodes often not).
DOWNLOADS_LOCAL = config["kind"] == "paper" and config["data"]["downloads_on_submit_host"]
KIND = config["kind"]
RES = f"results/{PRESET}"
LOGS = f"logs/{PRESET}"
SIZES = list(config["sizes"])
METHODS = list(config["methods"])
SEEDS = [int(s) for s in config["seeds"]]
BENCHMARKS = list(config["data"]["benchmarks"])
DATASETS = list(
    dict.fromkeys(
        [
            config["data"]["train"],
            *([config["data"]["dev"]] if KIND == "tiny" else []),
            *BENCHMARKS,
        ]
    )
)


def fail(key, message):
    """Stop at parse time, before any job starts, naming the config key at fault."""
    raise WorkflowError(f"config error in {key}: {message}")


# ---------------------------------------------------------------- conda environments

# The env files install this package with `-e ${CWGRPO_WORKFLOW_DIR}`. Snakemake copies an env file to
# .snakemake/conda/<hash>.yaml (or a temporary file, for a remote workflow) and conda runs pip from that
# copy's folder, so a relative path there would name the copy's folder, not this repository; pip expands
# ${NAME} in requirement lines, and conda's pip inherits this process's environment (envs/README.md).
# Set here, never read from the user (so not an `envvars:` entry).
os.environ.update(CWGRPO_WORKFLOW_DIR=str(Path(workflow.basedir).resolve()))

GPU_ENVS = ("train", "eval")  # the paper preset's envs by stage; every tiny-kind job uses envs/cpu.yaml


def conda_env(stage):
    """The `conda:` env file for a stage, relative to the files in workflow/rules. Every job of a tiny-kind
    preset gets `cpu`; a paper preset gets the stage's own env (GPU ones: Linux x86_64 only)."""
    if stage not in (*GPU_ENVS, "cpu"):
        raise WorkflowError(f"unknown conda env stage {stage!r}; known: {[*GPU_ENVS, 'cpu']}")
    name = "cpu" if KIND == "tiny" else stage
    return f"../../envs/{name}.yaml"


# ---------------------------------------------------------------- merged options


def train_options(size, method, seed=None):
    """Options of `cwgrpo train`: train, then sizes.<size>.train, then methods.<method>, then the seed."""
    opts = {
        **config["train"],
        **config["sizes"][size].get("train", {}),
        **config["methods"][method],
    }
    if seed is not None:
        opts["seed"] = int(seed)
    return opts


def evaluate_options(size):
    """Options of `cwgrpo evaluate`: evaluate (less the workflow switches), then sizes.<size>.evaluate."""
    opts = {k: v for k, v in config["evaluate"].items() if k not in EVAL_SWITCHES}
    return {**opts, **config["sizes"][size].get("evaluate", {})}


def stage_options(stage, size):
    """Options of build-tiny / sft: the top-level section, then the size's own."""
    return {**config.get(stage, {}), **config["sizes"][size].get(stage, {})}


def report_options(command):
    """Options of table / figure / claims: the shared `report` section, the preset kind, the command's own."""
    return {**config["report"], "preset": KIND, **config[command]}


def saved_steps(size):
    """Steps with a checkpoint marker: multiples of save_steps up to max_steps, plus max_steps itself."""
    opts = train_options(size, METHODS[0])
    max_steps, save_steps = opts["max_steps"], opts["save_steps"]
    steps = list(range(save_steps, max_steps + 1, save_steps))
    return steps if steps[-1] == max_steps else [*steps, max_steps]


# ---------------------------------------------------------------- cross-field checks


def _positive_int(value):
    return isinstance(value, int) and not isinstance(value, bool) and value > 0


def _check_sizes():
    allowed = SIZE_NAMES[KIND]
    for size, spec in config["sizes"].items():
        if size not in allowed:
            fail(
                f"sizes.{size}",
                f"{size!r} is not a size of a {KIND} preset; known: {', '.join(allowed)}",
            )
        for key in ("model_id", "revision"):
            if KIND == "paper" and not spec.get(key):
                fail(
                    f"sizes.{size}.{key}",
                    "missing; a paper preset downloads each size's model at a revision",
                )
        for stage in ("build", "sft"):
            if KIND == "paper" and spec.get(stage):
                fail(
                    f"sizes.{size}.{stage}",
                    "only a tiny preset builds and warms up its models",
                )
        for kind, res in spec.get("resources", {}).items():
            if kind not in RESOURCE_KINDS:
                fail(
                    f"sizes.{size}.resources.{kind}",
                    f"unknown kind of job; known: {', '.join(RESOURCE_KINDS)}",
                )
            extra = sorted(set(res) - set(rule_resources(kind)))
            if extra:
                fail(
                    f"sizes.{size}.resources.{kind}",
                    f"{extra} must also be set in resources.{kind} or .default",
                )


def _check_data():
    dev = config["data"].get("dev")
    if KIND == "tiny" and not dev:
        fail(
            "data.dev",
            "missing; the tiny warm-up (`cwgrpo sft --dev-data`) needs a dev set",
        )
    if KIND == "tiny" and dev in BENCHMARKS:
        fail(
            "data.dev",
            f"{dev!r} is a benchmark; early stopping on it would select on the test set",
        )
    if config["data"]["train"] in BENCHMARKS:
        fail("data.train", f"{config['data']['train']!r} is also a benchmark")


def _check_methods():
    for method, overrides in config["methods"].items():
        if method == BASE or not re.fullmatch(r"[A-Za-z0-9_]+", method):
            fail(
                f"methods.{method}",
                f"a run label is letters, digits and _, and not {BASE!r}",
            )
        for key in RUN_FIXED:
            if key in overrides:
                fail(
                    f"methods.{method}.{key}",
                    "set it in train or sizes.<size>.train, not per method",
                )
        cw_method = train_options(SIZES[0], method).get("cw_method")
        if cw_method not in CW_METHODS:
            fail(
                f"methods.{method}.cw_method",
                f"unknown or missing method {cw_method!r}; known: {', '.join(CW_METHODS)}",
            )


def _check_steps():
    for size in SIZES:
        opts = train_options(size, METHODS[0])
        for key in ("max_steps", "save_steps"):
            if not _positive_int(opts.get(key)):
                fail(
                    f"train.{key}",
                    f"must be a positive integer (size {size!r}), got {opts.get(key)!r}",
                )
        if opts["save_steps"] > opts["max_steps"]:
            fail(
                "train.save_steps",
                f"save interval {opts['save_steps']} > max_steps {opts['max_steps']} (size {size!r})",
            )
        for method in METHODS:
            # Unset means the command's default (TRL: 8), which is fine.
            group = train_options(size, method).get("num_generations", 2)
            if not _positive_int(group) or group < 2:
                fail(
                    "train.num_generations",
                    f"group size must be an integer >= 2 (GRPO normalises rewards within a group), "
                    f"got {group!r} (size {size!r}, method {method!r})",
                )
        step = config["report"]["step"]
        if step not in saved_steps(size):
            fail(
                "report.step",
                f"{step} is not a saved step of size {size!r}: {saved_steps(size)}",
            )


def _check_study():
    """A pre-registered study's floor: enough seeds for its intervals, a schedule that ends at max_steps."""
    study = config.get("study")
    if not study:
        return
    seeds = config["seeds"]
    if len(seeds) < study["min_seeds"]:
        fail(
            "seeds",
            f"{len(seeds)} seed(s) {seeds}, but the study needs >= {study['min_seeds']} "
            "(study.min_seeds): every claim is a t-interval over seeds, which needs at least 2",
        )
    for size in SIZES:
        opts = train_options(size, METHODS[0])
        max_steps, save_steps = opts["max_steps"], opts["save_steps"]
        if max_steps % save_steps:
            fail(
                "train.save_steps",
                f"checkpoints every {save_steps} steps do not reach max_steps {max_steps} (size {size!r}): "
                "the last interval would be shorter; make max_steps a multiple of save_steps",
            )
        if len(saved_steps(size)) < study["min_checkpoints"]:
            fail(
                "train.save_steps",
                f"{len(saved_steps(size))} checkpoint(s) {saved_steps(size)} (size {size!r}), but the study "
                f"needs >= {study['min_checkpoints']} (study.min_checkpoints)",
            )


def _check_report():
    for key, known in (
        ("benchmark_display", BENCHMARKS),
        ("benchmark_mirrors", BENCHMARKS),
        ("size_display", SIZES),
    ):
        unknown = sorted(set(config["report"].get(key, {})) - set(known))
        if unknown:
            fail(f"report.{key}", f"unknown name(s) {unknown}; known: {known}")


# ---------------------------------------------------------------- option strings


def _yaml(value):
    """``value`` in YAML flow syntax that `yaml.safe_load` (the commands' --set parser) reads back unchanged.

    JSON would do but for floats: YAML 1.1 reads 1e-06 as a string, so a float always gets a '.' in its
    mantissa and a sign in its exponent (1.0e-06).
    """
    if isinstance(value, bool) or value is None:
        return json.dumps(value)
    if isinstance(value, float):
        if not math.isfinite(value):
            return ".nan" if math.isnan(value) else (".inf" if value > 0 else "-.inf")
        mantissa, e, exponent = repr(value).partition("e")
        if "." not in mantissa:
            mantissa += ".0"
        if e and exponent[0] not in "+-":
            exponent = f"+{exponent}"
        return f"{mantissa}{e}{exponent}"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
    if isinstance(value, dict):
        items = ", ".join(
            f"{json.dumps(str(k), ensure_ascii=False)}: {_yaml(v)}"
            for k, v in value.items()
        )
        return f"{{{items}}}"
    if isinstance(value, (list, tuple)):
        items = ", ".join(_yaml(v) for v in value)
        return f"[{items}]"
    raise WorkflowError(
        f"cannot pass {value!r} ({type(value).__name__}) as a --set value"
    )


def sets(options):
    """`--set key=value ...` for a mapping of options, each shell-quoted."""
    return " ".join(
        f"--set {shlex.quote(f'{k}={_yaml(v)}')}" for k, v in options.items()
    )


def tags(**values):
    return " ".join(f"--tag {shlex.quote(f'{k}={v}')}" for k, v in values.items())


# ---------------------------------------------------------------- paths


def data_file(dataset):
    return f"{RES}/data/{dataset}.jsonl"


def base_marker(size):
    return f"{RES}/models/{size}/base.json"


def run_prefix(size, method, seed):
    return f"{RES}/runs/{size}/{method}/seed{seed}"


def run_files(size, method, seed):
    prefix = run_prefix(size, method, seed)
    return [
        f"{prefix}/run.json",
        f"{prefix}/metrics.jsonl",
        f"{prefix}/cov_samples.jsonl",
    ]


# Output folder pattern of the evaluate rules (wildcards kept).
EVAL_DIR = f"{RES}/eval/{{size}}/{{method}}/seed{{seed}}/step{{step}}"


def eval_prefix(size, method, seed, step):
    return f"{RES}/eval/{size}/{method}/seed{seed}/step{step}"


def eval_points():
    """(size, method, seed, step) of every evaluation: each base model (tagged with the first seed, step 0),
    then each saved step of each run."""
    points = [(size, BASE, SEEDS[0], 0) for size in SIZES]
    for size in SIZES:
        for method in METHODS:
            for seed in SEEDS:
                points += [(size, method, seed, step) for step in saved_steps(size)]
    return points


def all_summaries():
    return [
        f"{eval_prefix(*p)}/{b}.summary.json" for p in eval_points() for b in BENCHMARKS
    ]


def all_run_files():
    return [
        f
        for size in SIZES
        for m in METHODS
        for seed in SEEDS
        for f in run_files(size, m, seed)
    ]


def figure_inputs(name):
    """Inputs of one figure: the run files or the evaluation summaries, whichever its kind reads."""
    return all_run_files() if FIGURES[name][1] == "runs" else all_summaries()


def train_rule_name(size):
    """Training job name of one size (train_small, train_1_5b, ...)."""
    safe = re.sub(r"\W", "_", size)
    return f"train_{safe}"


def get_final_output():
    figures = [f"figures/{name}.{ext}" for name in FIGURES for ext in ("pdf", "png")]
    return ["figures/table1.pdf", *figures, f"{RES}/claims.json", f"{RES}/claims.md"]


# ---------------------------------------------------------------- input and params functions


def eval_model_marker(wildcards):
    """The file that says the model to evaluate is complete: the step marker, or the base model's marker."""
    step = int(wildcards.step)
    if wildcards.method == BASE:
        if step != 0:
            raise WorkflowError(
                f"the base model is evaluated at step 0 only, not step {step}"
            )
        return base_marker(wildcards.size)
    if step not in saved_steps(wildcards.size):
        raise WorkflowError(
            f"step {step} is not a saved step of size {wildcards.size}: {saved_steps(wildcards.size)}"
        )
    return f"{run_prefix(wildcards.size, wildcards.method, wildcards.seed)}/steps/step{step}.json"


def eval_model_dir(wildcards):
    if wildcards.method == BASE:
        return f"{RES}/models/{wildcards.size}/base"
    return f"{run_prefix(wildcards.size, wildcards.method, wildcards.seed)}/checkpoint-{wildcards.step}"


def eval_args(wildcards):
    """Tags and options of one evaluation (the same for every benchmark of a checkpoint)."""
    tag = tags(
        size=wildcards.size,
        method=wildcards.method,
        seed=wildcards.seed,
        step=wildcards.step,
    )
    return f"{tag} {sets(evaluate_options(wildcards.size))}"


def eval_files(wildcards, input, output):
    """`--benchmark-file F --out O --summary S` per benchmark, for a one-job-per-checkpoint evaluation."""
    triples = zip(input.benchmarks, output.samples, output.summaries, strict=True)
    return " ".join(
        f"--benchmark-file {shlex.quote(b)} --out {shlex.quote(o)} --summary {shlex.quote(s)}"
        for b, o, s in triples
    )


def train_args(wildcards):
    opts = train_options(wildcards.size, wildcards.method, wildcards.seed)
    return f"{tags(size=wildcards.size, method=wildcards.method, seed=wildcards.seed)} {sets(opts)}"


def parent_dir(name):
    """Params function: the folder of output `name` (so no rule hard-codes a prefix)."""
    return lambda wildcards, output: str(Path(output[name]).parent)


def sibling_dir(name):
    """Params function: the model folder beside output marker `name` (models/S/base.json -> models/S/base)."""
    return lambda wildcards, output: str(Path(output[name]).with_suffix(""))


def input_dir(name):
    """Params function: the model folder beside input marker `name`."""
    return lambda wildcards, input: str(Path(input[name]).with_suffix(""))


def runs_arg(wildcards, input):
    """`--runs DIR ...` from the run.json files among the inputs (empty if there are none)."""
    dirs = [
        shlex.quote(str(Path(f).parent)) for f in input if Path(f).name == "run.json"
    ]
    return f"--runs {' '.join(dirs)}" if dirs else ""


def summaries_arg(wildcards, input):
    """`--summaries FILE ...` from the evaluation summaries among the inputs (empty if there are none)."""
    files = [shlex.quote(f) for f in input if f.endswith(".summary.json")]
    return f"--summaries {' '.join(files)}" if files else ""


# ---------------------------------------------------------------- resources


def rule_resources(kind, size=None):
    """Resources of one kind of job: resources.default, then resources.<kind>, then the size's own."""
    merged = {
        **config["resources"].get("default", {}),
        **config["resources"].get(kind, {}),
    }
    if size is not None:
        merged.update(config["sizes"][size].get("resources", {}).get(kind, {}))
    return merged


def rule_threads(kind, size=None):
    return int(rule_resources(kind, size).get("threads", 1))


def fixed_resources(kind, size=None):
    """Resources of jobs that all have one size (or none). `threads` becomes the rule's threads and, when
    the preset sets it, also cpus_per_task: what Slurm gets, shown by a dry run (threads are not).
    """
    res = dict(rule_resources(kind, size))
    if "threads" in res:
        res["cpus_per_task"] = int(res.pop("threads"))
    return res


def _size_resource(kind, key, wildcards):
    return fixed_resources(kind, wildcards.size)[key]


def size_resources(kind):
    """Resources of jobs that span sizes: each value looked up from the job's size wildcard."""
    return {
        key: functools.partial(_size_resource, kind, key)
        for key in fixed_resources(kind)
    }


# ---------------------------------------------------------------- GPUs on one machine


def gpu_needs():
    """Kind of job (and size) -> GPUs per job, for the kinds that ask for any."""
    needs = {}
    for kind in RESOURCE_KINDS:
        for size in SIZES:
            gpus = int(rule_resources(kind, size).get("gpu", 0))
            if gpus:
                needs[f"{kind} ({size})"] = gpus
    return needs


def _gpu_cap():
    cap = workflow.global_resources.get("gpu")
    return None if cap is None or cap.value is None else int(cap.value)


def _check_gpu_cap():
    """Snakemake scales a job's `gpu` down to `--resources gpu=N` without a word (as it does threads): a
    4-GPU training job would start on a 2-GPU cap and fail in its launcher. Refuse that here."""
    cap = _gpu_cap()
    too_big = {job: n for job, n in gpu_needs().items() if cap is not None and n > cap}
    if too_big:
        fail(
            "resources",
            f"--resources gpu={cap}, but jobs need more GPUs each: {too_big}. Give the machine's GPU count, "
            "or use a preset for fewer GPUs (docs/hardware.md)",
        )


def visible_gpu_count():
    """GPUs this machine shows: CUDA_VISIBLE_DEVICES if set, else nvidia-smi's list, else None (unknown).
    The same rule as cwgrpo.devices.gpu_pool, which the jobs use (the Snakemake process may lack cwgrpo)."""
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")  # optional, so not an `envvars:` entry
    if visible is not None:
        return len([g for g in visible.split(",") if g.strip()])
    try:
        out = subprocess.run(
            ["nvidia-smi", "--query-gpu=index", "--format=csv,noheader"],
            capture_output=True,
            text=True,
            check=True,
        )
    except (OSError, subprocess.CalledProcessError):
        return None
    return len(out.stdout.split())


def check_local_gpus():
    """Before the first job of a local run: the GPU cap must not exceed the GPUs this machine shows, and a
    preset with GPU jobs should have a cap (without one, jobs queue on cwgrpo's device locks instead)."""
    needs = gpu_needs()
    if workflow.executor_plugin.name != "local" or not needs:
        return
    cap, seen = _gpu_cap(), visible_gpu_count()
    if cap is None:
        logger.warning(
            f"jobs of this preset need GPUs ({needs}) and nothing caps them: Snakemake will start more than "
            "fit, and they will wait for free devices. Give the machine's count with --resources gpu=N, or "
            "use --profile profiles/gpu-box (docs/hardware.md)."
        )
    elif seen is not None and cap > seen:
        raise WorkflowError(f"--resources gpu={cap}, but this machine shows {seen} GPUs; give gpu={seen}")
    elif seen is None and cap > 0:
        raise WorkflowError(
            f"--resources gpu={cap}, but this machine shows no GPU (no nvidia-smi, CUDA_VISIBLE_DEVICES unset)"
        )


_check_sizes()
_check_data()
_check_methods()
_check_steps()
_check_study()
_check_report()
_check_gpu_cap()


wildcard_constraints:
    size="|".join(map(re.escape, SIZES)),
    method="|".join(map(re.escape, [*METHODS, BASE])),
    seed=r"\d+",
    step=r"\d+",
    dataset="|".join(map(re.escape, DATASETS)),
    benchmark="|".join(map(re.escape, BENCHMARKS)),
