# A failed job's cause, in the workflow's own output: the last lines of each of its logs, printed by the
# `onerror:` handler (Snakefile) for local and cluster runs alike. A job's shell command sends its output
# to its log, so without this the cause is only in that file.

FAILED_LOG_LINES = 20
FAILED_LOG_BYTES = 64 * 1024  # read from the end only: a log of gigabytes, or without newlines, stays cheap
FAILED_LOG_LINE_CHARS = (
    400  # a longer line keeps its head and tail (cwgrpo_workflow.dag.preset_files.shorten)
)
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")  # terminal escapes of a binary log: shown, not sent


def log_tail(path, lines=FAILED_LOG_LINES):
    """The last ``lines`` lines of a log as safe text: no terminal control characters, none too long."""
    with open(path, "rb") as f:
        f.seek(0, 2)
        f.seek(max(0, f.tell() - FAILED_LOG_BYTES))
        text = f.read().decode("utf-8", errors="replace")
    tail = []
    for line in text.splitlines()[-lines:]:
        line = _CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}", line.expandtabs())
        tail.append(shorten(line, 100, FAILED_LOG_LINE_CHARS - 100))  # whole words only
    return tail


def failed_job_logs(scheduler, lines=FAILED_LOG_LINES):
    """The last ``lines`` lines of every text log (not the JSONL data logs) of every job that failed."""
    blocks = []
    for failed in sorted(getattr(scheduler, "failed", ()), key=str):
        for job in getattr(failed, "jobs", [failed]):  # a group job fails as a whole
            for path in map(str, job.log):
                if path.endswith(".jsonl"):
                    continue
                try:
                    tail = log_tail(path, lines)
                except OSError as err:
                    tail = [f"(cannot read it: {err.strerror})"]
                header = f"{job.rule.name} failed; the last {lines} lines of {path}:"
                blocks.append("\n".join([header, *(f"    {line}" for line in tail or ["(empty)"])]))
    return "\n".join(blocks)
