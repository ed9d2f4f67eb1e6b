# Base models: built and warmed up offline (every size of the tiny kind, and a size whose `model` is
# `tiny:ARCH`) or fetched from a model source (the other sizes). Model folders are not declared outputs
# (Snakemake would delete them on failure); the markers are.

if BUILT:

    rule build_tiny:
        input:
            options=options_file("build", "{size}"),
        output:
            marker=model_marker("{size}", "init"),
        log:
            f"{LOGS}/build_tiny/{{size}}.log",
        wildcard_constraints:
            size="|".join(map(re.escape, BUILT)),
        conda:
            conda_env("train")
        threads: rule_threads("build_tiny")
        resources:
            **fixed_resources("build_tiny"),
        params:
            arch=lambda wildcards: BUILT[wildcards.size],
            out_dir=model_dir_of("init"),
        shell:
            "cwgrpo build-tiny --size {params.arch:q} --out-dir {params.out_dir:q}"
            " --marker {output.marker:q} --config {input.options:q} > {log:q} 2>&1"

    rule sft:
        input:
            init=rules.build_tiny.output.marker,
            train_data=data_file(config["data"]["train"]),
            dev_data=data_file(config["data"]["dev"]),
            options=options_file("sft", "{size}"),
        output:
            marker=model_marker("{size}", "base"),
        log:
            f"{LOGS}/sft/{{size}}.log",
        wildcard_constraints:
            size="|".join(map(re.escape, BUILT)),
        priority: 2  # start every warm-up before anything else: RL waits on them (the longest chain)
        conda:
            conda_env("train")
        threads: rule_threads("sft")
        resources:
            **fixed_resources("sft"),
        params:
            model_dir=model_dir_of("init"),
            out_dir=model_dir_of("base"),
        shell:
            "cwgrpo sft --model-dir {params.model_dir:q} --train-data {input.train_data:q}"
            " --dev-data {input.dev_data:q} --out-dir {params.out_dir:q} --marker {output.marker:q}"
            " --config {input.options:q} > {log:q} 2>&1"


if set(SIZES) - set(BUILT):

    rule fetch_model:
        output:
            marker=model_marker("{size}", "base"),
        log:
            f"{LOGS}/fetch_model/{{size}}.log",
        wildcard_constraints:
            size="|".join(re.escape(s) for s in SIZES if s not in BUILT),
        localrule: DOWNLOADS_LOCAL  # data.downloads_on_submit_host
        conda:
            conda_env("cpu")
        threads: rule_threads("fetch_model")
        resources:
            **fixed_resources("fetch_model"),
        params:
            source=fetch_args,
            out_dir=model_dir_of("base"),
        shell:
            "cwgrpo fetch-model {params.source}"
            " --out-dir {params.out_dir:q} --marker {output.marker:q} > {log:q} 2>&1"
