"""Facts that live in one place each, tied to every other place that must agree with them.

The paper's names are in :mod:`cwgrpo.paper`, the methods in :data:`cwgrpo.weighting.METHODS`, the
stand-in benchmarks in :data:`cwgrpo.data.synthetic.SPLITS`; the dataset registry, the packaged reported
numbers, the presets, the workflow and the plotting style must agree with them.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

from cwgrpo import paper, weighting
from cwgrpo.data import registry as data
from cwgrpo.data import synthetic
from cwgrpo_workflow.report import style
from cwgrpo_workflow.report.load import load_reported
from cwgrpo_workflow.report.options import AVG

REPO = Path(__file__).resolve().parents[2]


def test_dataset_registry_uses_the_papers_names():
    for name in (paper.TRAIN_SET, *paper.BENCHMARKS):
        assert name in data.DATASETS
    for name in paper.BENCHMARKS:
        assert data.DATASETS[name].display == paper.BENCHMARK_DISPLAY[name]


def test_reported_numbers_cover_exactly_the_papers_benchmarks_and_sizes():
    reported = load_reported()
    assert tuple(reported["benchmark_order"]) == paper.BENCHMARKS
    for row in reported["table1"]["rows"]:
        assert set(row) >= {*paper.BENCHMARKS, AVG}, row
        assert row["size"] in paper.SIZES


def test_stand_in_benchmarks_mirror_paper_benchmarks():
    for name in synthetic.BENCHMARKS:
        split = synthetic.SPLITS[name]
        assert split.mirrors in paper.BENCHMARKS
        assert paper.BENCHMARK_DISPLAY[split.mirrors] in split.display
        assert data.DATASETS[name].display == split.display


def test_each_registered_benchmark_names_its_mirror_once():
    """The registry is where a benchmark's mirror lives: a paper benchmark mirrors itself, a stand-in the
    paper benchmark its synthetic split names."""
    for name in paper.BENCHMARKS:
        assert data.DATASETS[name].mirrors == name
    for name, split in synthetic.SPLITS.items():
        assert data.DATASETS[name].mirrors == split.mirrors


@pytest.mark.parametrize("preset", sorted(p.name for p in (REPO / "config").glob("*.yaml")))
def test_presets_do_not_restate_what_the_data_carries(preset):
    """A preset may override a benchmark's display name or mirror, never repeat the registry's (a second
    copy that could drift)."""
    report = (yaml.safe_load((REPO / "config" / preset).read_text()) or {}).get("report") or {}
    for key, field in (("benchmark_display", "display"), ("benchmark_mirrors", "mirrors")):
        for name, value in (report.get(key) or {}).items():
            if name in data.DATASETS:
                assert getattr(data.DATASETS[name], field) != value, (preset, key, name)


def test_style_needs_no_entry_for_a_new_method():
    """A registered method needs no edit of the style: a name it does not list gets a spare colour, the
    same in every figure, and its own name as label. (The workflow's check reads the registry itself:
    tests/unit/test_dag_preset_rules.py.)"""
    for method in weighting.METHODS:
        assert re.fullmatch(r"#[0-9A-F]{6}", style.method_color(method)) and style.method_label(method)
    assert "sign_flip" not in style.METHOD_COLORS and "sign_flip" not in style.METHOD_LABELS
    assert re.fullmatch(r"#[0-9A-F]{6}", style.method_color("sign_flip"))
    assert style.method_label("sign_flip") == "sign_flip"
