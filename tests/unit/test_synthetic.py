"""Unit tests of the synthetic arithmetic task (cwgrpo.data.synthetic)."""

from __future__ import annotations

import random
import re

import pytest

from cwgrpo.data import synthetic
from cwgrpo.data.synthetic import BENCHMARKS, SPLITS, generate_split, solve, worked_solution


@pytest.fixture(scope="module")
def splits() -> dict[str, list[dict]]:
    return {name: generate_split(name) for name in SPLITS}


def test_generate_split_deterministic(splits):
    for name in SPLITS:
        assert generate_split(name) == splits[name]


def test_generate_split_row_counts_and_fields(splits):
    for name, spec in SPLITS.items():
        rows = splits[name]
        assert len(rows) == spec.n
        assert [r["id"] for r in rows] == [f"{name}-{i:04d}" for i in range(spec.n)]
        assert {r["source"] for r in rows} == {f"synthetic:{name}"}
        assert all(set(r) == {"id", "problem", "answer", "source"} for r in rows)
        assert len({r["problem"] for r in rows}) == spec.n  # no duplicates within a split


def test_generate_split_answers_correct(splits):
    for rows in splits.values():
        for r in rows:
            expected = eval(r["problem"])  # plain integer + and -, left to right as Python does
            assert r["answer"] == str(expected)
            assert 10 <= expected <= 99


def test_generate_split_steps_carry_free(splits):
    for rows in splits.values():
        for r in rows:
            for line in worked_solution(r["problem"]).split("\n")[1:-2]:
                a, op, b, c = re.fullmatch(r"(\d\d)([+-])(\d\d)=(\d\d)", line).groups()
                for da, db, dc in zip(a, b, c, strict=True):  # digit-wise: no carry, no borrow
                    assert int(dc) == (int(da) + int(db) if op == "+" else int(da) - int(db))


def test_generate_split_levels_match_spec(splits):
    for name, spec in SPLITS.items():
        levels = [synthetic.level(r["problem"]) for r in splits[name]]
        assert levels == [len(re.findall(r"[+-]", r["problem"])) for r in splits[name]]
        assert set(levels) == set(spec.levels)
        for lv in set(spec.levels):  # a level listed twice is drawn twice as often
            assert levels.count(lv) / len(levels) == pytest.approx(
                spec.levels.count(lv) / len(spec.levels), abs=0.01
            )


def test_generate_split_heldout_disjoint_from_train(splits):
    """Every training split (syn_train, and syn_train_l1 of the third study) misses every held-out one."""
    train = {r["problem"] for name, spec in SPLITS.items() if spec.pool == "train" for r in splits[name]}
    heldout = [name for name, spec in SPLITS.items() if spec.pool != "train"]
    assert {"syn_dev", "syn_math500"} <= set(heldout) and len(train) > 4000
    for name in heldout:
        assert train.isdisjoint(r["problem"] for r in splits[name]), name
    for i, a in enumerate(heldout):
        for b in heldout[i + 1 :]:
            assert {r["problem"] for r in splits[a]}.isdisjoint(r["problem"] for r in splits[b])


def test_pool_assignment_disjoint_by_construction():
    # Any problem the generator could draw lands in exactly one pool, whatever split asks for it.
    rng = random.Random(0)
    pools = {synthetic._pool(synthetic.make_problem(level, rng)) for level in range(1, 6) for _ in range(200)}
    assert pools == {"train", "dev", "benchmark"}


def test_benchmarks_ordered_easiest_first():
    assert BENCHMARKS == ("syn_math500", "syn_amc23", "syn_olympiad", "syn_minerva", "syn_aime24")
    assert [SPLITS[b].mirrors for b in BENCHMARKS] == [
        "math500",
        "amc23",
        "olympiadbench",
        "minerva",
        "aime24",
    ]
    assert [SPLITS[b].levels for b in BENCHMARKS] == [(1,), (2,), (3,), (4,), (5,)]
    assert SPLITS["syn_train"].mirrors is None
    assert SPLITS["syn_math500"].display == "Syn-L1 (≈MATH-500)"


def test_worked_solution_format():
    assert worked_solution("12+35-8") == "<think>\n12+35=47\n47-8=39\n</think>\n\\boxed{39}"


def test_worked_solution_boxed_answer_matches(splits):
    for rows in splits.values():
        for r in rows[:50]:
            sol = worked_solution(r["problem"])
            assert sol.count("\n</think>\n") == 1
            assert sol.startswith("<think>\n")
            assert re.fullmatch(r"[\s\S]*\n</think>\n\\boxed\{(\d+)\}", sol).group(1) == r["answer"]


def test_solve_and_worked_solution_reject_non_problems():
    for bad in ("", "12", "12+", "1 + 2", "3*4", "abc"):
        with pytest.raises(ValueError, match="not a synthetic problem"):
            solve(bad)
        with pytest.raises(ValueError, match="not a synthetic problem"):
            worked_solution(bad)


def test_generate_split_unknown_name_lists_valid():
    with pytest.raises(ValueError, match=r"unknown synthetic split 'nope'.*syn_train"):
        generate_split("nope")


def test_make_problem_rejects_bad_level():
    with pytest.raises(ValueError, match=rf"level must be in 1\.\.{synthetic.MAX_LEVEL}, got 0"):
        synthetic.make_problem(0, random.Random(0))
