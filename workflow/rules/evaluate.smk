# Evaluation of every saved checkpoint of every run, and of each base model (method "base", step 0).
# evaluate.one_job_per_benchmark and evaluate.one_job_per_run pick the granularity: one job per
# checkpoint x benchmark (paper: Slurm spreads them over GPUs), one job per checkpoint for all benchmarks,
# or one job per run for all its checkpoints and benchmarks (tiny: one Python start, ~7 s of CPU, per run
# instead of per checkpoint; base models then keep the per-checkpoint rule). The per-checkpoint variants
# are named `evaluate`, so a cluster profile maps one rule name; the per-run rules are evaluate_run_<size>
# (a rule's outputs cannot depend on a wildcard, and the saved steps depend on the size).

if config["evaluate"]["one_job_per_benchmark"]:

    rule evaluate:
        input:
            model=eval_model_marker,
            benchmark=lambda wildcards: data_file(wildcards.benchmark),
            options=options_file("evaluate", "{size}"),
        output:
            samples=f"{EVAL_DIR}/{{benchmark}}.jsonl",
            summary=f"{EVAL_DIR}/{{benchmark}}.summary.json",
        log:
            f"{LOGS}/evaluate/{{size}}/{{method}}/seed{{seed}}/step{{step}}/{{benchmark}}.log",
        conda:
            conda_env("eval")
        threads: rule_threads("evaluate")
        resources:
            **size_resources("evaluate"),
        params:
            model_dir=eval_model_dir,
            tags=job_tags,
        shell:
            "cwgrpo evaluate --model-dir {params.model_dir:q} --benchmark-file {input.benchmark:q}"
            " --out {output.samples:q} --summary {output.summary:q} {params.tags} --config {input.options:q} > {log:q} 2>&1"

else:

    rule evaluate:
        input:
            model=eval_model_marker,
            benchmarks=[data_file(b) for b in BENCHMARKS],
            options=options_file("evaluate", "{size}"),
        output:
            samples=[f"{EVAL_DIR}/{b}.jsonl" for b in BENCHMARKS],
            summaries=[f"{EVAL_DIR}/{b}.summary.json" for b in BENCHMARKS],
        log:
            f"{LOGS}/evaluate/{{size}}/{{method}}/seed{{seed}}/step{{step}}.log",
        wildcard_constraints:
            method=(
                re.escape(BASE)
                if config["evaluate"]["one_job_per_run"]
                else "|".join(map(re.escape, [*METHODS, BASE]))
            ),
        conda:
            conda_env("eval")
        threads: rule_threads("evaluate")
        resources:
            **size_resources("evaluate"),
        params:
            model_dir=eval_model_dir,
            files=eval_files,
            tags=job_tags,
        shell:
            "cwgrpo evaluate --model-dir {params.model_dir:q} {params.files} {params.tags} --config {input.options:q} > {log:q} 2>&1"


if config["evaluate"]["one_job_per_run"]:
    for _size in SIZES:

        rule:
            name:
                f"evaluate_run_{train_rule_name(_size).removeprefix('train_')}"
            input:
                markers=eval_run_markers,
                benchmarks=[data_file(b) for b in BENCHMARKS],
                options=options_file("evaluate", "{size}"),
            output:
                samples=eval_run_outputs(_size, "samples"),
                summaries=eval_run_outputs(_size, "summary"),
            log:
                f"{LOGS}/evaluate/{{size}}/{{method}}/seed{{seed}}.log",
            wildcard_constraints:
                size=re.escape(_size),
                method="|".join(map(re.escape, METHODS)),
            conda:
                conda_env("eval")
            threads: rule_threads("evaluate")
            resources:
                **size_resources("evaluate"),
            params:
                models=eval_run_models,
            shell:
                "cwgrpo evaluate {params.models} --config {input.options:q} > {log:q} 2>&1"


# The paper's metric (lighteval 0.8.1, in its own environment) beside ours, for every evaluation output:
# samples with both verdicts and a summary recomputed from evaluate.primary_metric (docs/architecture.md).
# Same granularity as `evaluate`: one job per output, or one per checkpoint (one lighteval start, ~10 s).
if PAPER_METRIC and config["evaluate"]["one_job_per_benchmark"]:

    rule grade_paper:
        input:
            samples=f"{EVAL_DIR}/{{benchmark}}.jsonl",
            summary=f"{EVAL_DIR}/{{benchmark}}.summary.json",
        output:
            samples=f"{EVAL_DIR}/{{benchmark}}.graded.jsonl",
            summary=f"{EVAL_DIR}/{{benchmark}}.graded.summary.json",
        log:
            f"{LOGS}/grade_paper/{{size}}/{{method}}/seed{{seed}}/step{{step}}/{{benchmark}}.log",
        conda:
            "../../envs/lighteval.yaml"
        threads: rule_threads("grade")
        resources:
            **fixed_resources("grade"),
        params:
            options=grade_args,
        shell:
            "cwgrpo grade --metric paper --in {input.samples:q} --out {output.samples:q}"
            " --summary-in {input.summary:q} --summary-out {output.summary:q} {params.options} > {log:q} 2>&1"

elif PAPER_METRIC:

    rule grade_paper:
        input:
            samples=[f"{EVAL_DIR}/{b}.jsonl" for b in BENCHMARKS],
            summaries=[f"{EVAL_DIR}/{b}.summary.json" for b in BENCHMARKS],
        output:
            samples=[f"{EVAL_DIR}/{b}.graded.jsonl" for b in BENCHMARKS],
            summaries=[f"{EVAL_DIR}/{b}.graded.summary.json" for b in BENCHMARKS],
        log:
            f"{LOGS}/grade_paper/{{size}}/{{method}}/seed{{seed}}/step{{step}}.log",
        conda:
            "../../envs/lighteval.yaml"
        threads: rule_threads("grade")
        resources:
            **fixed_resources("grade"),
        params:
            files=grade_files,
            options=grade_args,
        shell:
            "cwgrpo grade --metric paper {params.files} {params.options} > {log:q} 2>&1"
