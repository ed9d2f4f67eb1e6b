# Table 1, the four figures and the claims report. Captions live in workflow/report/<name>.rst (report()
# paths are relative to this file); `snakemake --report figures/<name>/report.html` embeds every report() output.
# The three commands share the `report` section of the config (step, display names, ...) plus `preset`.


rule table:
    input:
        summaries=all_summaries(),
        runs=all_run_files(),
        options=options_file("table"),
    output:
        pdf=report(f"{FIG}/table1.pdf", caption="../report/table1.rst", category="Table 1"),
        shown_pdf=SHOWN_TABLE,
        avg_pdf=f"{FIG}/table1_avg.pdf",
        avg_png=report(f"{FIG}/table1_avg.png", caption="../report/table1_avg.rst", category="Table 1"),
        csv=f"{RES}/table1.csv",
        tex=f"{RES}/table1.tex",
        md=f"{RES}/table1.md",
        reported_csv=f"{RES}/reported_vs_ours.csv",
        provenance=f"{RES}/table1.provenance.json",
        reported_md=report(
            f"{RES}/reported_vs_ours.md",
            caption="../report/reported_vs_ours.rst",
            category="Table 1",
        ),
        sensitivity_csv=f"{RES}/metric_sensitivity.csv",
        sensitivity_md=report(
            f"{RES}/metric_sensitivity.md",
            caption="../report/metric_sensitivity.rst",
            category="Table 1",
        ),
    log:
        f"{LOGS}/report/table.log",
    conda:
        conda_env("cpu")
    threads: rule_threads("report")
    resources:
        **fixed_resources("report"),
    params:
        runs=runs_arg,
        about=preset_contents(),  # the captions' last sentence (workflow/report/*.rst)
    shell:
        "cwgrpo table --summaries {input.summaries:q} {params.runs} --out-pdf {output.pdf:q}"
        " --out-csv {output.csv:q} --out-tex {output.tex:q} --out-md {output.md:q} --out-reported-csv {output.reported_csv:q}"
        " --out-reported-md {output.reported_md:q} --out-sensitivity-csv {output.sensitivity_csv:q}"
        " --out-sensitivity-md {output.sensitivity_md:q} --out-provenance {output.provenance:q}"
        " --out-avg-pdf {output.avg_pdf:q} --out-avg-png {output.avg_png:q} --out-copy-pdf {output.shown_pdf:q}"
        " --config {input.options:q} > {log:q} 2>&1"


for _name, (_kind, _reads) in FIGURES.items():

    rule:
        name:
            f"figure_{_name}"
        input:
            figure_inputs(_name),
            options=options_file("figure"),
        output:
            pdf=f"{FIG}/{_name}.pdf",
            png=report(
                f"{FIG}/{_name}.png",
                caption=f"../report/{_name}.rst",
                category="Figures",
            ),
        log:
            f"{LOGS}/report/figure_{_name}.log",
        conda:
            conda_env("cpu")
        threads: rule_threads("report")
        resources:
            **fixed_resources("report"),
        params:
            kind=_kind,
            runs=runs_arg,
            summaries=summaries_arg,
            about=preset_contents(),
        shell:
            "cwgrpo figure --kind {params.kind:q} {params.runs} {params.summaries} --out-pdf {output.pdf:q}"
            " --out-png {output.png:q} --config {input.options:q} > {log:q} 2>&1"


rule claims:
    input:
        runs=all_run_files(),
        summaries=all_summaries(),
        options=options_file("claims"),
    output:
        json=f"{RES}/claims.json",
        md=report(f"{RES}/claims.md", caption="../report/claims.rst", category="Claims"),
    log:
        f"{LOGS}/report/claims.log",
    conda:
        conda_env("cpu")
    threads: rule_threads("report")
    resources:
        **fixed_resources("report"),
    params:
        runs=runs_arg,
        about=preset_contents(),
    shell:
        "cwgrpo claims --summaries {input.summaries:q} {params.runs} --out-json {output.json:q}"
        " --out-md {output.md:q} --config {input.options:q} > {log:q} 2>&1"


rule samples:
    input:
        summaries=all_summaries(),
        samples=[s.removesuffix(".summary.json") + ".jsonl" for s in all_summaries()],
        runs=[f for f in all_run_files() if f.endswith("run.json")],  # + completions/ of log_completions
        options=options_file("samples"),
    output:
        html=report(SAMPLES_PAGE, caption="../report/samples.rst", category="Samples"),
    log:
        f"{LOGS}/report/samples.log",
    conda:
        conda_env("cpu")
    threads: rule_threads("report")
    resources:
        **fixed_resources("report"),
    params:
        runs=runs_arg,
    shell:
        "cwgrpo samples --summaries {input.summaries:q} {params.runs} --out-html {output.html:q}"
        " --config {input.options:q} > {log:q} 2>&1"


if config.get("study"):

    rule study:
        input:
            runs=all_run_files(),
            summaries=all_summaries(),
            claims=f"{RES}/claims.json",
            power=study_power_file(),
            options=options_file("study"),
        output:
            json=f"{RES}/study.json",
            md=report(f"{RES}/study.md", caption="../report/study.rst", category="Study"),
            ablation=f"{FIG}/study_ablation.pdf",
            ablation_png=report(
                f"{FIG}/study_ablation.png",
                caption="../report/study_ablation.rst",
                category="Study",
            ),
            power=f"{FIG}/study_power.pdf",
            power_png=report(
                f"{FIG}/study_power.png",
                caption="../report/study_power.rst",
                category="Study",
            ),
        log:
            f"{LOGS}/report/study.log",
        conda:
            conda_env("cpu")
        threads: rule_threads("report")
        resources:
            **fixed_resources("report"),
        params:
            runs=runs_arg,
            power=lambda wildcards, input: (f"--power {shlex.quote(input.power[0])}" if input.power else ""),
            about=preset_contents(),
        shell:
            "cwgrpo study --summaries {input.summaries:q} {params.runs} --claims {input.claims:q}"
            " {params.power} --out-json {output.json:q} --out-md {output.md:q}"
            " --out-ablation {output.ablation:q} --out-ablation-png {output.ablation_png:q}"
            " --out-power {output.power:q} --out-power-png {output.power_png:q}"
            " --config {input.options:q} > {log:q} 2>&1"
