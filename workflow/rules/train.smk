# RL training: one job per (size, method, seed). The saved steps depend on the size's max_steps and
# save_steps, and a rule's outputs cannot depend on a wildcard, so there is one rule per size
# (train_<size>, e.g. train_small, train_1_5b). Checkpoint folders are not outputs: Snakemake deletes
# the outputs of a failed job, and a rerun of `cwgrpo train` resumes from the newest complete checkpoint.
# The wall-clock log (--timings) is a log, not an output: it differs in every run and is no result.

RUN = run_prefix("{size}", "{method}", "{seed}")  # the run folder's pattern; run_dir_of fills it in

for _size in SIZES:

    rule:
        name:
            train_rule_name(_size)
        input:
            model=base_marker(_size),
            train_data=data_file(config["data"]["train"]),
            options=options_file("train", "{size}", "{method}", "seed{seed}"),
        output:
            run=f"{RUN}/run.json",
            metrics=f"{RUN}/metrics.jsonl",
            cov_samples=f"{RUN}/cov_samples.jsonl",
            steps=[f"{RUN}/steps/step{n}.json" for n in saved_steps(_size)],
        log:
            out=f"{LOGS}/train/{{size}}/{{method}}/seed{{seed}}.log",
            timings=f"{RUN}/timings.jsonl",
        wildcard_constraints:
            size=re.escape(_size),
            method="|".join(map(re.escape, METHODS)),
        priority: 1  # training before evaluation: long jobs first pack the cores best
        conda:
            conda_env("train")
        threads: rule_threads("train", _size)
        resources:
            **train_resources(_size),
        params:
            model_dir=model_dir_of("base"),
            run_dir=run_dir_of,
            tags=job_tags,
        shell:
            "cwgrpo train --model-dir {params.model_dir:q} --train-data {input.train_data:q}"
            " --run-dir {params.run_dir:q} --timings {log.timings:q} {params.tags} --config {input.options:q}"
            " > {log.out:q} 2>&1"
