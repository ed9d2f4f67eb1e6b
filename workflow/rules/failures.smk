# A failed job's cause, in the workflow's own output: the last lines of each of its logs, printed by the
# `onerror:` handler (Snakefile) for local and cluster runs alike. A job's shell command sends its output
# to its log, so without this the cause is only in that file.

FAILED_LOG_LINES = 20


def failed_job_logs(scheduler, lines=FAILED_LOG_LINES):
    """The last ``lines`` lines of every text log (not the JSONL data logs) of every job that failed."""
    blocks = []
    for failed in sorted(getattr(scheduler, "failed", ()), key=str):
        for job in getattr(failed, "jobs", [failed]):  # a group job fails as a whole
            for path in map(str, job.log):
                if path.endswith(".jsonl"):
                    continue
                try:
                    tail = Path(path).read_text(errors="replace").splitlines()[-lines:]
                except OSError as err:
                    tail = [f"(cannot read it: {err.strerror})"]
                header = f"{job.rule.name} failed; the last {lines} lines of {path}:"
                blocks.append("\n".join([header, *(f"    {line}" for line in tail or ["(empty)"])]))
    return "\n".join(blocks)
