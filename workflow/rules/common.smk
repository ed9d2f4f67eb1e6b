"""The workflow's paths (docs/architecture.md), constants and input/params functions; the logic they call is
cwgrpo_workflow.dag.
"""

import functools
import os
import re
import shlex
import sys
from pathlib import Path

from snakemake.exceptions import WorkflowError
from snakemake.logging import logger
from snakemake.utils import validate

# cwgrpo and the workflow's own package from this checkout (a bare Snakemake environment may lack them)
sys.path[:0] = [str(Path(workflow.basedir)), str(Path(workflow.basedir) / "workflow")]
from cwgrpo.trainer import learning_signal
from cwgrpo_workflow.dag.preset_files import (
    collect,
    error_text,
    preset_errors,
    seeds_from_command_line,
    shorten,
)
from cwgrpo_workflow.dag import (
    command_options,
    commands,
    machine,
    options,
    preset_rules,
    profile,
    resources,
    user_rewards,
)
from cwgrpo_workflow.dag.options import BASE


def stop_on(lines):
    if lines:
        raise WorkflowError(error_text(lines))


SCHEMA = Path(workflow.basedir) / "workflow/schemas/config.schema.yaml"


NOTES = []  # what the dry run says besides errors, by the main process only (a cluster job parses again)
# files that remember the training options TRL's config passed, written once the parse succeeds
TRL_PASSED = []


def preset_checks():
    """Every parse-time check of the preset; the main process judges the training options in the jobs' Python."""
    settings = profile.run_settings(workflow, list(config["sizes"]))
    train_check = None
    if workflow.is_main_process and config.get("name"):
        cache = Path("results", config["name"], "options", "train", "checked")
        judge = command_options.judged_in_jobs_python(os.environ, cache, NOTES, TRL_PASSED)
        train_check = functools.partial(command_options.train_errors, config, judge)
    return preset_rules.preset_checks(config, *settings, os.cpu_count() or 1, train_check)


seeds_from_command_line(config)
# Every schema error at once (validate alone stops at the first), then the schema's defaults filled in.
stop_on(preset_errors(config, SCHEMA, workflow.configfiles, preset_checks))
validate(config, schema=SCHEMA, set_default=True)


# ---------------------------------------------------------------- constants

FIGURES = {  # output name -> (`cwgrpo figure --kind`, what it reads)
    "entropy": ("entropy", "runs"),
    "checkpoints": ("checkpoints", "summaries"),
    "covariance": ("covariance", "runs"),
    "training_curves": ("training", "runs"),
}
STUDY_FIGURES = ("study_ablation", "study_power")

PRESET = config["name"]
KIND = config["kind"]
# Paper kind: downloads run where Snakemake runs (a login node has the network; compute nodes often not).
DOWNLOADS_LOCAL = KIND == "paper" and config["data"]["downloads_on_submit_host"]
RES = f"results/{PRESET}"
FIG = f"figures/{PRESET}"  # a preset's figures: its own folder, so its report collects only its own
LOGS = f"logs/{PRESET}"
SAMPLES_PAGE = f"{FIG}/samples.html"  # `cwgrpo samples`: completions to read
# Table 1 where the README's `snakemake ... figures/table1.pdf` asks for it: a copy of the table of the preset
# this run names (its footer and table1.provenance.json name that preset); each preset's own stays in FIG.
SHOWN_TABLE = "figures/table1.pdf"
SIZES = list(config["sizes"])
BUILT = options.built_sizes(config)  # size -> tiny architecture, for the sizes built here (build-tiny + sft)
METHODS = list(config["methods"])
SEEDS = config["seeds"]
BENCHMARKS = list(config["data"]["benchmarks"])
PAPER_METRIC = config["evaluate"]["paper_metric"]
DATASETS = options.datasets(config)


# ---------------------------------------------------------------- conda environments

# The env files install this package with `-e ${CWGRPO_WORKFLOW_DIR}`. Snakemake copies an env file to
# .snakemake/conda/<hash>.yaml (or a temporary file, for a remote workflow) and conda runs pip from that
# copy's folder, so a relative path there would name the copy's folder, not this repository; pip expands
# ${NAME} in requirement lines, and conda's pip inherits this process's environment (envs/README.md).
# Set here, never read from the user (so not an `envvars:` entry).
os.environ.update(CWGRPO_WORKFLOW_DIR=str(Path(workflow.basedir).resolve()))


def conda_env(stage):
    """The `conda:` env file for a stage (train, eval, cpu): a tiny-kind preset's jobs all get `cpu`."""
    return f"../../envs/{'cpu' if KIND == 'tiny' else stage}.yaml"


# ---------------------------------------------------------------- options and resources


saved_steps = functools.partial(options.saved_steps, config)
rule_threads = functools.partial(resources.rule_threads, config)
fixed_resources = functools.partial(resources.fixed_resources, config)
train_resources = functools.partial(resources.train_resources, config)
preset_contents = functools.partial(options.preset_contents, config)  # the report captions' last sentence
train_rule_name = resources.train_rule_name
size_resources = functools.partial(resources.size_resources, config)


def check_machine():
    """Before the first job, once Snakemake has chosen its executor: the GPU cap, and what a CPU training job
    needs (DeepSpeed, a compiler)."""
    cap = profile.run_settings(workflow, SIZES)[1]
    error, warning = resources.local_run_problems(config, workflow.executor_plugin.name, cap, os.environ)
    if warning:
        logger.warning(warning)
    if error:
        raise WorkflowError(error)
    stop_on(machine.deepspeed_errors(config, profile.run_settings(workflow, SIZES)[0], os.environ))


# A reward of the user's: imported (and called on local data) as the jobs will.
USER_REWARDS = [lambda: user_rewards.reward_errors(config, os.environ, NOTES)]
stop_on(collect(preset_checks() + (USER_REWARDS if workflow.is_main_process else [])))
NOTES += [options.prompt_note(config), options.resume_note(config)]
for line in filter(None, NOTES if workflow.is_main_process else []):
    print(line, file=sys.stderr)


wildcard_constraints:
    size="|".join(map(re.escape, SIZES)),
    method="|".join(map(re.escape, [*METHODS, BASE])),
    seed=r"\d+",
    step=r"\d+",
    dataset="|".join(map(re.escape, DATASETS)),
    benchmark="|".join(map(re.escape, BENCHMARKS)),


# ---------------------------------------------------------------- options files


OPTION_FILES = options.option_files(f"{RES}/options", config)  # job name -> (path, text)
stop_on(options.write_option_files(OPTION_FILES.values()))
options.write_option_files((path, "") for path in TRL_PASSED)  # one not written is judged again


def options_file(*name):
    """The options file of one job; a name with wildcards ("{size}") gives an input function."""
    if not any("{" in part for part in name):
        return str(OPTION_FILES[name][0])
    return lambda wildcards: str(OPTION_FILES[tuple(p.format(**dict(wildcards.items())) for p in name)][0])


def own_dataset_options(wildcards):
    return (
        [options_file("prepare_data", wildcards.dataset)] if wildcards.dataset in config["datasets"] else []
    )


# ---------------------------------------------------------------- paths


def data_file(dataset):
    return f"{RES}/data/{dataset}.jsonl"


def model_dir(size, stage):
    return f"{RES}/models/{size}/{stage}"


def model_marker(size, stage):
    return f"{model_dir(size, stage)}.json"


def base_marker(size):
    return model_marker(size, "base")


def run_prefix(size, method, seed):
    return f"{RES}/runs/{size}/{method}/seed{seed}"


def run_files(size, method, seed):
    prefix = run_prefix(size, method, seed)
    return [f"{prefix}/run.json", f"{prefix}/metrics.jsonl", f"{prefix}/cov_samples.jsonl"]


EVAL_DIR = f"{RES}/eval/{{size}}/{{method}}/seed{{seed}}/step{{step}}"  # the evaluate rules' output folder


def eval_prefix(size, method, seed, step):
    return f"{RES}/eval/{size}/{method}/seed{seed}/step{step}"


def eval_points():
    """(size, method, seed, step) of every evaluation: each base model (first seed, step 0), then each run's."""
    points = [(size, BASE, SEEDS[0], 0) for size in SIZES]
    for size in SIZES:
        points += [(size, m, seed, step) for m in METHODS for seed in SEEDS for step in saved_steps(size)]
    return points


def all_summaries():
    suffix = "graded.summary.json" if PAPER_METRIC else "summary.json"
    return [f"{eval_prefix(*p)}/{b}.{suffix}" for p in eval_points() for b in BENCHMARKS]


def all_run_files():
    return [f for size in SIZES for m in METHODS for seed in SEEDS for f in run_files(size, m, seed)]


def figure_inputs(name):
    return all_run_files() if FIGURES[name][1] == "runs" else all_summaries()


def study_outputs():
    if not config.get("study"):
        return []
    figures = [f"{FIG}/{name}.{ext}" for name in STUDY_FIGURES for ext in ("pdf", "png")]
    return [f"{RES}/study.json", f"{RES}/study.md", *figures]


def study_power_file():
    """The registration's power file; a relative path is the repository's."""
    path = config["study"]["power"]
    return [path if Path(path).is_absolute() else str(Path(workflow.basedir) / path)] if path else []


def get_final_output():
    figures = [f"{FIG}/{name}.{ext}" for name in FIGURES for ext in ("pdf", "png")]
    return [
        f"{FIG}/table1.pdf",
        SHOWN_TABLE,
        *(f"{FIG}/table1_avg.{ext}" for ext in ("pdf", "png")),  # requested, so an older run makes them
        *figures,
        f"{RES}/claims.json",
        f"{RES}/claims.md",
        SAMPLES_PAGE,
        *study_outputs(),
    ]


def finished_run_message():
    shown = [
        ("Table 1", f"{RES}/table1.md"),
        (f"Table 1 of preset {PRESET}", SHOWN_TABLE),
        ("figures", f"{FIG}/"),
        ("claims", f"{RES}/claims.md"),
    ]
    table1 = Path(f"{RES}/table1.md")
    runs = [run_prefix(size, m, seed) for size in SIZES for m in METHODS for seed in SEEDS]
    return commands.finished_message(
        [(what, path) for what, path in shown if Path(path).exists()],
        table1.read_text(encoding="utf-8") if table1.exists() else None,
        learning_signal.runs_without_signal(learning_signal.read_recorded(runs)),
        commands.configfile_args(workflow.overwrite_configfiles or []),
        f"{FIG}/report.html",  # one per preset, as its figures
    )


# ---------------------------------------------------------------- input and params functions

from cwgrpo_workflow.dag.commands import eval_files, grade_files, job_tags, runs_arg, summaries_arg

fetch_args = functools.partial(commands.fetch_args, config)
grade_args = commands.grade_args(config)


def eval_model_marker(wildcards):
    step = int(wildcards.step)
    if wildcards.method == BASE:
        if step != 0:
            raise WorkflowError(f"the base model is evaluated at step 0 only, not step {step}")
        return base_marker(wildcards.size)
    if step not in saved_steps(wildcards.size):
        raise WorkflowError(
            f"step {step} is not a saved step of size {wildcards.size}: {saved_steps(wildcards.size)}"
        )
    return f"{run_prefix(wildcards.size, wildcards.method, wildcards.seed)}/steps/step{step}.json"


def eval_model_dir(wildcards):
    if wildcards.method == BASE:
        return model_dir(wildcards.size, "base")
    return f"{run_prefix(wildcards.size, wildcards.method, wildcards.seed)}/checkpoint-{wildcards.step}"


def eval_run_outputs(size, key):
    suffix = "jsonl" if key == "samples" else "summary.json"
    prefix = f"{RES}/eval/{{size}}/{{method}}/seed{{seed}}"  # the rule constrains size to `size`
    return [f"{prefix}/step{n}/{b}.{suffix}" for n in saved_steps(size) for b in BENCHMARKS]


def eval_run_markers(wildcards):
    prefix = run_prefix(wildcards.size, wildcards.method, wildcards.seed)
    return [f"{prefix}/steps/step{n}.json" for n in saved_steps(wildcards.size)]


def eval_run_models(wildcards, input, output):
    prefix = run_prefix(wildcards.size, wildcards.method, wildcards.seed)
    checkpoints = {n: f"{prefix}/checkpoint-{n}" for n in saved_steps(wildcards.size)}
    return commands.eval_run_models(wildcards, input, output, checkpoints)


def model_dir_of(stage):
    return lambda wildcards: model_dir(wildcards.size, stage)


def run_dir_of(wildcards):
    return run_prefix(wildcards.size, wildcards.method, wildcards.seed)


# ---------------------------------------------------------------- the profile (after every rule exists)


def check_profile():
    stop_on(profile.profile_errors(workflow, config, sys.argv[1:], os.environ))
    line = profile.slurm_line(workflow, SIZES, sys.argv[1:], os.environ)
    if line:
        print(line, file=sys.stderr)
