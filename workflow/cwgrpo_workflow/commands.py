"""The workflow's ``cwgrpo`` commands, found by the library's CLI through the ``cwgrpo.commands`` entry point.

Same shape as :data:`cwgrpo.cli.LIBRARY_COMMANDS`: name -> (module, one-line help), in the pipeline's order.
"""

COMMANDS: dict[str, tuple[str, str]] = {
    "table": (
        "cwgrpo_workflow.report.table",
        "Table 1 (PDF, CSV, TeX, Markdown) and the reported-vs-ours table",
    ),
    "figure": (
        "cwgrpo_workflow.report.figures",
        "entropy, checkpoint, covariance, training-curve and kept-share figures",
    ),
    "claims": (
        "cwgrpo_workflow.report.claims",
        "test the paper's four claims over seeds and write a JSON + Markdown report",
    ),
    "samples": (
        "cwgrpo_workflow.report.samples",
        "a static HTML page of sampled completions with both metrics' answers and verdicts, to read",
    ),
    "study": (
        "cwgrpo_workflow.report.study",
        "the pre-registered study's analysis: claims table, regime check, ablation, power",
    ),
    "plan": (
        "cwgrpo_workflow.dag.plan",
        "a preset's jobs, resources, estimates and wall time, without running it",
    ),
    "doctor": (
        "cwgrpo_workflow.doctor",
        "say what will and will not work on this machine, and which preset to run",
    ),
}

# The report commands need the `workflow` extra's libraries, all checked before the command starts (a report
# command would otherwise stop half-way, e.g. at its PDF, after writing its CSV files).
EXTRA_OF_PACKAGE = {"cwgrpo_workflow.report": "workflow"}
