# Training sets and benchmarks as local JSONL files with a manifest (docs/architecture.md, "Records").


rule prepare_data:
    input:
        own=own_dataset_options,
    output:
        data=f"{RES}/data/{{dataset}}.jsonl",
        manifest=f"{RES}/data/{{dataset}}.manifest.json",
    log:
        f"{LOGS}/prepare_data/{{dataset}}.log",
    retries: config["data"]["retries"]  # downloads fail transiently; no other rule retries
    localrule: DOWNLOADS_LOCAL  # data.downloads_on_submit_host
    conda:
        conda_env("cpu")
    threads: rule_threads("prepare_data")
    resources:
        **fixed_resources("prepare_data"),
    params:
        own=lambda wildcards, input: commands.file_args(("--config", input.own)),
    shell:
        "cwgrpo prepare-data --dataset {wildcards.dataset:q} --out {output.data:q} {params.own} > {log:q} 2>&1"
