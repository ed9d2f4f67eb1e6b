"""The Snakemake workflow: lint, dry-run job counts of each preset, Slurm profile (conda envs: test_envs.py).

Dry runs only (`snakemake -n` with `--directory` a temporary folder, so nothing is written into the
repository); the `cwgrpo` subcommands are never called. Job counts are derived here from the spec
(experiments.md), not read back from the presets.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
PRESETS = {
    name: REPO / "config" / f"{file}.yaml"
    for name, file in [("tiny", "config"), ("smoke", "smoke"), ("paper", "paper"), ("real", "real")]
}
FIGURE_RULES = ("figure_entropy", "figure_checkpoints", "figure_covariance", "figure_training_curves")


def snakemake_bin() -> str:
    local = Path(sys.executable).with_name("snakemake")
    return str(local) if local.exists() else (shutil.which("snakemake") or "snakemake")


def run_snakemake(
    workdir: Path,
    *args: str,
    configfile: Path | None = None,
    path_prefix: Path | None = None,
    env: dict[str, str] | None = None,
):
    """`snakemake -s <repo>/Snakefile -d workdir ARGS` (plus --configfile last: it takes several values),
    with `path_prefix` first on PATH and `env` added to the environment."""
    cmd = [snakemake_bin(), "-s", str(REPO / "Snakefile"), "-d", str(workdir), *args]
    if configfile is not None:
        cmd += ["--configfile", str(configfile)]
    path = os.pathsep.join(str(p) for p in (path_prefix, Path(sys.executable).parent) if p)
    env = {**os.environ, **(env or {}), "PATH": f"{path}{os.pathsep}{os.environ.get('PATH', '')}"}
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=REPO, env=env, timeout=600)
    return proc, proc.stdout + proc.stderr


def job_stats(output: str) -> dict[str, int]:
    """The 'Job stats' table of a dry run: rule -> number of jobs."""
    lines = output.split("Job stats:", 1)[1].splitlines()
    counts = {}
    for line in lines[3:]:
        parts = line.split()
        if len(parts) != 2 or parts[0] == "total":
            break
        counts[parts[0]] = int(parts[1])
    return counts


def jobs(output: str) -> list[dict]:
    """Each job of a dry run: {'rule', 'output', 'log', 'wildcards', 'resources'} parsed from its block."""
    found = []
    for block in re.split(r"\n(?=(?:local)?rule \S+:\n)", output):
        head = re.match(r"(?:local)?rule (\S+):\n", block)
        if not head:
            continue
        job = {"rule": head.group(1), "output": [], "log": [], "wildcards": {}, "resources": {}}
        for line in block.splitlines()[1:]:
            key, _, value = line.strip().partition(": ")
            if key in ("output", "log"):
                job[key] = value.split(", ")
            elif key in ("wildcards", "resources"):
                job[key] = dict(item.split("=", 1) for item in value.split(", "))
        found.append(job)
    return found


@pytest.fixture(scope="module")
def dry_runs(tmp_path_factory) -> dict[str, str]:
    """Output of `snakemake -n` for each preset (run once per module)."""
    outputs = {}
    for name, configfile in PRESETS.items():
        proc, out = run_snakemake(tmp_path_factory.mktemp(f"dry-{name}"), "-n", configfile=configfile)
        assert proc.returncode == 0, f"{name}: dry run failed\n{out[-3000:]}"
        outputs[name] = out
    return outputs


# -- lint ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("preset", sorted(PRESETS))
def test_lint_is_clean(preset, tmp_path):
    # Rules are defined per preset (tiny: build_tiny/sft; paper: fetch_model), so lint each one.
    proc, out = run_snakemake(tmp_path, "--lint", configfile=PRESETS[preset])
    assert proc.returncode == 0, out[-4000:]


def test_default_preset_is_tiny(tmp_path):
    """Without --configfile the Snakefile reads config/config.yaml (relative to the working folder)."""
    (tmp_path / "config").symlink_to(REPO / "config")
    proc, out = run_snakemake(tmp_path, "-n")
    assert proc.returncode == 0, out[-3000:]
    assert "results/tiny/claims.json" in out


def test_make_tiny_builds_the_default_target():
    """`snakemake --report` collects the report() outputs of the default target's jobs (Table 1, the
    figures, the Markdown tables, the claims; test_tiny_and_smoke_dry_runs counts those jobs), and fails
    on any that is missing: `make tiny` must build that whole target, not one file of it."""
    recipe = re.search(r"^tiny:.*\n((?:\t.*\n)+)", (REPO / "Makefile").read_text(), re.M)
    assert recipe, "no `tiny` target in the Makefile"
    (command,) = [line.strip() for line in recipe.group(1).splitlines() if "snakemake" in line]
    assert command.split("snakemake", 1)[1].split() == ["--cores", "all"], command


# -- job counts ----------------------------------------------------------------------------------


def test_paper_dry_run_job_counts_match_the_spec(dry_runs):
    # experiments.md: 1 training set + 5 benchmarks; 2 models; 2 sizes x 3 methods (GRPO, Clip-Cov,
    # CW-GRPO) x 1 seed (2025); checkpoints every 50 steps to 300 (1.5B: 6) and 150 (7B: 3); every saved
    # step of every run and each base model on 5 benchmarks, one job each.
    methods, seeds, benchmarks = 3, 1, 5
    saved = {"1.5b": 300 // 50, "7b": 150 // 50}
    evaluations = sum(methods * seeds * n * benchmarks for n in saved.values()) + 2 * benchmarks
    assert evaluations == 145
    expected = {
        "prepare_data": 6,
        "fetch_model": 2,
        "train_1_5b": methods * seeds,
        "train_7b": methods * seeds,
        "evaluate": evaluations,
        "grade_paper": evaluations,  # the paper's metric beside ours, per evaluation output
        "table": 1,
        **dict.fromkeys(FIGURE_RULES, 1),
        "claims": 1,
        "samples": 1,
        "all": 1,
    }
    assert job_stats(dry_runs["paper"]) == expected


def test_real_dry_run_fetches_the_gguf_model_and_evaluates_champ(dry_runs):
    # 1 size (any name) x 2 methods x 1 seed, one saved step; the base model and each run on CHAMP.
    expected = {
        "prepare_data": 2,
        "fetch_model": 1,
        "train_135m": 2,
        "evaluate": 1,  # the base model; each run's one checkpoint in its run's job (one_job_per_run)
        "evaluate_run_135m": 2,
        "table": 1,
        **dict.fromkeys(FIGURE_RULES, 1),
        "claims": 1,
        "samples": 1,
        "all": 1,
    }
    assert job_stats(dry_runs["real"]) == expected


def _tiny_like_counts(config: dict) -> dict[str, int]:
    """Expected jobs of a tiny-kind preset: one evaluation job per base model, one per run (all its
    checkpoints and benchmarks) when evaluate.one_job_per_run is on, else one per checkpoint."""
    sizes, methods, seeds = config["sizes"], config["methods"], config["seeds"]
    max_steps, save_steps = config["train"]["max_steps"], config["train"]["save_steps"]
    saved = len(range(save_steps, max_steps + 1, save_steps)) + (max_steps % save_steps != 0)
    datasets = 1 + 1 + len(config["data"]["benchmarks"])  # train, dev, benchmarks
    counts = {
        "prepare_data": datasets,
        "build_tiny": len(sizes),
        "sft": len(sizes),
        **{f"train_{size}": len(methods) * len(seeds) for size in sizes},
        "table": 1,
        **dict.fromkeys(FIGURE_RULES, 1),
        "claims": 1,
        "samples": 1,
        "all": 1,
    }
    if config["evaluate"].get("one_job_per_run"):
        counts["evaluate"] = len(sizes)
        counts |= {f"evaluate_run_{size}": len(methods) * len(seeds) for size in sizes}
    else:
        counts["evaluate"] = len(sizes) * (1 + len(methods) * len(seeds) * saved)
    return counts


def evaluated_checkpoints(config: dict) -> int:
    """Checkpoints (and base models) a tiny-kind preset evaluates."""
    max_steps, save_steps = config["train"]["max_steps"], config["train"]["save_steps"]
    saved = len(range(save_steps, max_steps + 1, save_steps)) + (max_steps % save_steps != 0)
    return len(config["sizes"]) * (1 + len(config["methods"]) * len(config["seeds"]) * saved)


@pytest.mark.parametrize("preset", ["tiny", "smoke"])
def test_tiny_and_smoke_dry_runs(preset, dry_runs):
    config = yaml.safe_load(PRESETS[preset].read_text())
    assert config["evaluate"]["one_job_per_benchmark"] is False
    assert config["evaluate"]["one_job_per_run"] is True
    assert job_stats(dry_runs[preset]) == _tiny_like_counts(config)


def test_seeds_from_the_command_line(tmp_path):
    """The multi-seed command (config/config.yaml): Snakemake reads `--config` lists as strings."""
    proc, out = run_snakemake(tmp_path, "-n", "--config", "seeds=[0,1,2]", configfile=PRESETS["tiny"])
    assert proc.returncode == 0, out[-3000:]
    config = yaml.safe_load(PRESETS["tiny"].read_text())
    expected = _tiny_like_counts({**config, "seeds": [0, 1, 2]})
    assert job_stats(out) == expected
    assert "seed2" in out


def test_paper_metric_switch_adds_grade_jobs_as_evaluate_has_them(tmp_path):
    config = yaml.safe_load(PRESETS["smoke"].read_text())
    config["evaluate"] |= {"paper_metric": True, "primary_metric": "paper"}
    on = tmp_path / "on.yaml"
    on.write_text(yaml.safe_dump(config))
    proc, out = run_snakemake(tmp_path / "w", "-n", "-p", configfile=on)
    assert proc.returncode == 0, out[-3000:]
    counts = job_stats(out)
    # smoke evaluates all benchmarks of a checkpoint in one job, and grades one job per checkpoint: one
    # lighteval start each (its evaluation jobs are one per run, each covering all the run's checkpoints).
    assert config["evaluate"]["one_job_per_benchmark"] is False
    assert counts["grade_paper"] == evaluated_checkpoints(config)
    shell = [line.split("Shell command:", 1)[-1].strip() for line in out.splitlines()]
    grades = [line for line in shell if line.startswith("cwgrpo grade ")]
    assert len(grades) == counts["grade_paper"]
    n_benchmarks = len(config["data"]["benchmarks"])
    for g in grades:
        assert "--metric paper" in g and "--primary paper" in g
        assert g.count("--in ") == g.count("--summary-out ") == n_benchmarks
        # Each file's gold kind comes from its summary's benchmark mirror (tests/unit/test_paper_metric.py).
        assert "--gold-kind" not in g
    (table,) = [line for line in shell if line.startswith("cwgrpo table ")]
    assert ".graded.summary.json" in table and ".jsonl.summary" not in table

    config["evaluate"] |= {"paper_metric": False}
    off = tmp_path / "off.yaml"
    off.write_text(yaml.safe_dump(config))
    proc, out = run_snakemake(tmp_path / "w2", "-n", configfile=off)
    assert proc.returncode != 0
    assert "primary_metric" in out and "paper_metric is false" in out


def test_tiny_preset_shape():
    """The tiny preset mirrors the paper: two sizes, the four run labels, and an early checkpoint reported
    (the paper's step 100 of 300) with a later one left for the late-degradation claim."""
    config = yaml.safe_load(PRESETS["tiny"].read_text())
    assert list(config["sizes"]) == ["small", "large"]
    assert set(config["methods"]) == {"grpo", "cw_grpo", "clip_cov", "cw_grpo_described"}
    train = config["train"]
    saved = list(range(train["save_steps"], train["max_steps"] + 1, train["save_steps"]))
    assert config["report"]["step"] in saved[:-1]
    assert train["use_cpu"] is True and train["bf16"] is False and train["gradient_checkpointing"] is False
    assert train["loss_type"] == "grpo"


def test_training_outputs_are_markers_not_checkpoints(dry_runs):
    (job,) = [
        j for j in jobs(dry_runs["paper"]) if j["rule"] == "train_7b" and j["wildcards"]["method"] == "grpo"
    ]
    run = "results/paper/runs/7b/grpo/seed2025"
    assert job["output"] == [
        f"{run}/run.json",
        f"{run}/metrics.jsonl",
        f"{run}/cov_samples.jsonl",
        *[f"{run}/steps/step{n}.json" for n in (50, 100, 150)],
    ]
    # the wall-clock log `cwgrpo train --timings` writes: declared, as a log (it differs in every run)
    assert job["log"] == ["logs/paper/train/7b/grpo/seed2025.log", f"{run}/timings.jsonl"]
    assert not any("checkpoint-" in f for j in jobs(dry_runs["paper"]) for f in j["output"])


def test_outputs_follow_the_architecture_layout(dry_runs):
    """Every output sits where docs/architecture.md puts it."""
    patterns = [
        r"results/paper/data/[a-z0-9_]+\.(jsonl|manifest\.json)",
        r"results/paper/models/(1\.5b|7b)/base\.json",
        r"results/paper/runs/(1\.5b|7b)/[a-z_]+/seed\d+/(run\.json|metrics\.jsonl|cov_samples\.jsonl|steps/step\d+\.json)",
        r"results/paper/eval/(1\.5b|7b)/[a-z_]+/seed\d+/step\d+/[a-z0-9]+\.(jsonl|summary\.json|graded\.jsonl|graded\.summary\.json)",
        r"results/paper/(table1\.(csv|tex|md|provenance\.json)|reported_vs_ours\.(csv|md)|metric_sensitivity\.(csv|md)|claims\.(json|md))",
        r"figures/paper/(table1\.pdf|(table1_avg|entropy|checkpoints|covariance|training_curves)\.(pdf|png))",
        r"figures/paper/samples\.html",
        r"figures/table1\.pdf",  # the README's target: a copy of the preset's Table 1
    ]
    outputs = [f for j in jobs(dry_runs["paper"]) for f in j["output"]]
    assert outputs
    stray = [f for f in outputs if not any(re.fullmatch(p, f) for p in patterns)]
    assert not stray, stray[:10]


# -- Slurm profile -------------------------------------------------------------------------------


def _profile() -> dict:
    return yaml.safe_load((REPO / "profiles" / "slurm" / "config.yaml").read_text())


def test_profile_set_resources_names_existing_rules(tmp_path):
    """A misspelt rule name under set-resources is silently ignored by Snakemake: check each one."""
    proc, out = run_snakemake(tmp_path, "--list-rules", configfile=PRESETS["paper"])
    assert proc.returncode == 0, out[-3000:]
    rules = set(re.findall(r"^(\w+)$", proc.stdout, flags=re.M))
    assert {"evaluate", "train_1_5b", "train_7b", "fetch_model"} <= rules
    named = set(_profile()["set-resources"])
    assert named and named <= rules, f"not rules of the paper preset: {sorted(named - rules)}"


def test_profile_uses_the_slurm_executor_without_forbidden_extras():
    from snakemake_executor_plugin_slurm.validation import get_forbidden_slurm_options

    profile = _profile()
    assert profile["executor"] == "slurm" and profile["jobs"] > 0 and profile["latency-wait"] > 0
    extras = [
        r.get("slurm_extra", "") for r in [profile["default-resources"], *profile["set-resources"].values()]
    ]
    paper = yaml.safe_load(PRESETS["paper"].read_text())
    extras += [r.get("slurm_extra", "") for r in paper["resources"].values()]
    for extra in filter(None, extras):
        for pattern, what in get_forbidden_slurm_options().items():
            assert not re.search(pattern, extra), (
                f"slurm_extra {extra!r} sets the {what}, which the plugin rejects"
            )


def test_paper_dry_run_with_slurm_profile_shows_each_rules_resources(tmp_path):
    proc, out = run_snakemake(
        tmp_path, "-n", "--profile", str(REPO / "profiles" / "slurm"), configfile=PRESETS["paper"]
    )
    assert proc.returncode == 0, out[-3000:]
    by_rule: dict[str, list[dict]] = {}
    for job in jobs(out):
        by_rule.setdefault(job["rule"], []).append(job["resources"])
    gpus = {"train_1_5b": "4", "train_7b": "4", "evaluate": "1"}
    for rule, resources in by_rule.items():
        if rule == "all":
            continue
        for res in resources:
            assert res.get("gpu", "0") == gpus.get(rule, "0"), f"{rule}: gpu={res.get('gpu')}"
            assert "gpu_model" in res if rule in gpus else "gpu_model" not in res, rule
            for key in ("mem_mb", "runtime", "cpus_per_task", "slurm_partition", "slurm_account"):
                assert key in res, f"{rule} requests no {key}: {res}"
    # The paper's 4-GPU training jobs get their runtime and CPUs; 1.5B evaluations (32k tokens) run longer.
    assert {r["runtime"] for r in by_rule["train_1_5b"]} == {"2880"}
    assert int(by_rule["train_7b"][0]["cpus_per_task"]) >= 4
    runtimes = {}
    for job in jobs(out):
        if job["rule"] == "evaluate":
            runtimes.setdefault(job["wildcards"]["size"], set()).add(int(job["resources"]["runtime"]))
    assert min(runtimes["1.5b"]) > max(runtimes["7b"])


def test_only_data_preparation_retries():
    text = {p.name: p.read_text() for p in (REPO / "workflow" / "rules").glob("*.smk")}
    assert [name for name, body in text.items() if "retries:" in body] == ["data.smk"]


PRE_QUOTED = {
    "params.options",
    "params.tags",  # cwgrpo_workflow.dag.commands.job_tags
    "params.files",
    "params.models",  # eval_run_models: every path and tag shell-quoted
    "params.runs",
    "params.summaries",
    "params.model_id",
    "params.revision",
    "params.source",
    "params.own",
    "params.power",
}


def test_every_interpolated_value_in_a_shell_command_is_quoted():
    """A value from the config or a wildcard reaches the shell only through `:q` (Snakemake's shell quoting)
    or a params function that builds the string with shlex.quote (the names in PRE_QUOTED)."""
    unquoted, seen = [], 0
    for path in sorted((REPO / "workflow" / "rules").glob("*.smk")):
        text = path.read_text()
        for block in re.findall(r"shell:\n((?:\s+\".*\"\n)+)", text):
            for field in re.findall(r"(?<!{){([^{}]+)}(?!})", block):
                seen += 1
                if not field.endswith(":q") and field not in PRE_QUOTED:
                    unquoted.append(f"{path.name}: {{{field}}}")
    assert seen > 40, f"only {seen} interpolations found: the pattern no longer matches the rules"
    assert not unquoted, unquoted


def test_slurm_partition_and_gpu_come_from_the_config_whatever_the_size_is_called(tmp_path):
    """A size of any name gets its Slurm partition and GPUs from the preset's `resources`, so a cluster
    needs no profile entry per rule name (train_<size>)."""
    config = yaml.safe_load((REPO / "config/real.yaml").read_text())
    config["sizes"] = {"my-model": config["sizes"]["135m"]}
    config["report"]["size_mirrors"] = {"my-model": "1.5b"}
    config["report"]["size_display"] = {}
    config["resources"] |= {"train": {"slurm_partition": "gpu", "gpu": 1, "gpu_model": "h100"}}
    configfile = tmp_path / "mine.yaml"
    configfile.write_text(yaml.safe_dump(config))
    proc, out = run_snakemake(tmp_path, "-n", configfile=configfile)
    assert proc.returncode == 0, out[-3000:]
    trains = [j for j in jobs(out) if j["rule"] == "train_my_model"]
    assert len(trains) == 2
    for job in trains:
        assert {k: job["resources"].get(k) for k in ("slurm_partition", "gpu", "gpu_model")} == {
            "slurm_partition": "gpu",
            "gpu": "1",
            "gpu_model": "h100",
        }
