"""cwgrpo.grading.paper_metric.worker: the standalone lighteval worker, run by path in lighteval's own
environment. Its verdicts against lighteval itself are test_paper_metric.py's (they need that environment)."""

from __future__ import annotations

import sys
from pathlib import Path

from cwgrpo.grading import paper_metric
from cwgrpo.grading.paper_metric import worker


def test_the_caller_runs_this_file():
    assert Path(worker.__file__) == paper_metric.WORKER


def test_worker_imports_only_lighteval_and_the_standard_library():
    source = Path(worker.__file__).read_text()
    imported = {
        line.split()[1].split(".")[0]
        for line in source.splitlines()
        if line.strip().startswith(("import ", "from ")) and not line.strip().startswith("from __future__")
    }
    assert "cwgrpo" not in imported
    assert imported - set(sys.stdlib_module_names) == {"lighteval"}


def test_every_benchmarks_gold_kind_is_one_the_worker_scores():
    from cwgrpo.data.registry import DATASETS

    kinds = {spec.gold_kind for spec in DATASETS.values()} - {None}
    assert kinds == set(worker.GOLD_KINDS)
