"""The paper's own names, defined once: training set, benchmarks in Table 1's order, model sizes.

``tests/unit/test_facts.py`` ties them to the other places that must agree.
"""

from __future__ import annotations

TRAIN_SET = "open_rs"
BENCHMARKS: tuple[str, ...] = ("aime24", "math500", "amc23", "minerva", "olympiadbench")
BENCHMARK_DISPLAY: dict[str, str] = {
    "aime24": "AIME24",
    "math500": "MATH-500",
    "amc23": "AMC23",
    "minerva": "Minerva",
    "olympiadbench": "OlympiadBench",
}
SIZES: tuple[str, ...] = ("1.5b", "7b")
SIZE_DISPLAY: dict[str, str] = {"1.5b": "1.5B", "7b": "7B"}
