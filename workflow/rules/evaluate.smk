# Evaluation of every saved checkpoint of every run, and of each base model (method "base", step 0).
# evaluate.one_job_per_benchmark picks the granularity: one job per checkpoint x benchmark (paper: Slurm
# spreads them over GPUs) or one job per checkpoint for all benchmarks (tiny: one Python start, ~6 s of
# CPU, instead of five). Both variants are named `evaluate`, so a cluster profile maps one rule name.

if config["evaluate"]["one_job_per_benchmark"]:

    rule evaluate:
        input:
            model=eval_model_marker,
            benchmark=lambda wildcards: data_file(wildcards.benchmark),
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
            options=eval_args,
        shell:
            "cwgrpo evaluate --model-dir {params.model_dir:q} --benchmark-file {input.benchmark:q}"
            " --out {output.samples:q} --summary {output.summary:q} {params.options} > {log:q} 2>&1"

else:

    rule evaluate:
        input:
            model=eval_model_marker,
            benchmarks=[data_file(b) for b in BENCHMARKS],
        output:
            samples=[f"{EVAL_DIR}/{b}.jsonl" for b in BENCHMARKS],
            summaries=[f"{EVAL_DIR}/{b}.summary.json" for b in BENCHMARKS],
        log:
            f"{LOGS}/evaluate/{{size}}/{{method}}/seed{{seed}}/step{{step}}.log",
        conda:
            conda_env("eval")
        threads: rule_threads("evaluate")
        resources:
            **size_resources("evaluate"),
        params:
            model_dir=eval_model_dir,
            files=eval_files,
            options=eval_args,
        shell:
            "cwgrpo evaluate --model-dir {params.model_dir:q} {params.files} {params.options} > {log:q} 2>&1"
