"""What the side-by-side benchmarks share: their command line, the machine they ran on, CPU seconds, and
their JSON report (in the order it was built, as benchmarks/results/ holds them)."""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
from pathlib import Path
from typing import Any


def command_line(doc: str) -> argparse.ArgumentParser:
    """The benchmark's command line, ``doc`` (its module docstring) as help, example commands kept."""
    return argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)


def machine(**extra: Any) -> dict[str, Any]:
    """The machine a benchmark ran on, ``extra`` (library versions) before its load average."""
    return {"cpus": os.cpu_count(), "python": platform.python_version(), **extra, "load_avg": os.getloadavg()}


def cpu_s(who: int = resource.RUSAGE_SELF) -> float:
    """User + system CPU seconds of this process (or, ``RUSAGE_CHILDREN``, of its finished children)."""
    usage = resource.getrusage(who)
    return usage.ru_utime + usage.ru_stime


def write_report(path: Path, report: dict[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(report, indent=2) + "\n")
