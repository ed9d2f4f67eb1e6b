"""Synthetic integer-arithmetic task for the tiny preset: a training split and five graded benchmarks.

A problem is a chain of two-digit numbers joined by ``+`` and ``-`` (``43+25-31``), every step
*carry-free*, which a ~1M-parameter model learns within the tiny preset's time budget
(docs/tiny-calibration.md). The five benchmark splits are levels (operations) 1 to 5, a graded ladder
like the paper's benchmarks. Each problem string hashes into one pool (benchmark, dev, train) and a split
draws only from its own, so the splits are disjoint whatever the seeds and row counts.
"""

from __future__ import annotations

import dataclasses
import hashlib
import random
import re

OPERAND_RANGE = (10, 99)  # two-digit numbers throughout; short prompts for the character-level tokenizer
MAX_LEVEL = 5
_POOL_MODULUS = 10  # hash bucket 0 -> benchmark pool, 1 -> dev pool, 2..9 -> train pool


@dataclasses.dataclass(frozen=True)
class SplitSpec:
    """One synthetic split: ``levels`` drawn in turn, from its own hash ``pool``."""

    name: str
    n: int
    seed: int
    levels: tuple[int, ...]
    mirrors: str | None
    display: str
    pool: str


SPLITS: dict[str, SplitSpec] = {
    s.name: s
    for s in (
        SplitSpec("syn_train", 4000, 1000, (1, 1, 2, 2, 3, 4, 5), None, "Syn-train (L1–L5)", "train"),
        SplitSpec("syn_dev", 100, 1001, (1,), None, "Syn-dev (L1)", "dev"),
        SplitSpec("syn_train_l1", 1000, 1002, (1,), None, "Syn-train (L1)", "train"),
        SplitSpec("syn_math500", 200, 1101, (1,), "math500", "Syn-L1 (≈MATH-500)", "benchmark"),
        SplitSpec("syn_amc23", 200, 1102, (2,), "amc23", "Syn-L2 (≈AMC23)", "benchmark"),
        SplitSpec("syn_olympiad", 200, 1103, (3,), "olympiadbench", "Syn-L3 (≈OlympiadBench)", "benchmark"),
        SplitSpec("syn_minerva", 200, 1104, (4,), "minerva", "Syn-L4 (≈Minerva)", "benchmark"),
        SplitSpec("syn_aime24", 200, 1105, (5,), "aime24", "Syn-L5 (≈AIME24)", "benchmark"),
    )
}

# The five held-out benchmark splits, easiest first.
BENCHMARKS: tuple[str, ...] = tuple(name for name, s in SPLITS.items() if s.mirrors is not None)

_TOKEN = re.compile(r"\d+|[+-]")
_PROBLEM = re.compile(r"\d+(?:[+-]\d+)+")


def _pool(problem: str) -> str:
    bucket = int.from_bytes(hashlib.sha256(problem.encode()).digest()[:8], "big") % _POOL_MODULUS
    return "benchmark" if bucket == 0 else "dev" if bucket == 1 else "train"


def _carry_free_moves(value: int) -> dict[str, list[int]]:
    """Two-digit operands that can be added to / subtracted from ``value`` without carry or borrow."""
    lo, hi = OPERAND_RANGE
    tens, units = divmod(value, 10)
    return {
        "+": [b for b in range(lo, hi + 1) if tens + b // 10 <= 9 and units + b % 10 <= 9],
        "-": [b for b in range(lo, hi + 1) if b // 10 < tens and b % 10 <= units],
    }


_MOVES = {v: _carry_free_moves(v) for v in range(OPERAND_RANGE[0], OPERAND_RANGE[1] + 1)}


def make_problem(level: int, rng: random.Random) -> str:
    """Draw one carry-free problem with ``level`` operations, each ``+`` or ``-`` and operand uniform."""
    if not 1 <= level <= MAX_LEVEL:
        raise ValueError(f"level must be in 1..{MAX_LEVEL}, got {level}")
    value = rng.randint(*OPERAND_RANGE)
    parts = [str(value)]
    for _ in range(level):
        ops = [op for op in ("+", "-") if _MOVES[value][op]]
        op = ops[0] if len(ops) == 1 else rng.choice(ops)
        b = rng.choice(_MOVES[value][op])
        parts.append(f"{op}{b}")
        value = value + b if op == "+" else value - b
    return "".join(parts)


def _steps(problem: str) -> list[tuple[int, str, int, int]]:
    """Left-to-right evaluation: a list of (left, op, right, result)."""
    if not _PROBLEM.fullmatch(problem):
        raise ValueError(f"not a synthetic problem (digits joined by + or -): {problem!r}")
    tokens = _TOKEN.findall(problem)
    value = int(tokens[0])
    steps = []
    for op, raw in zip(tokens[1::2], tokens[2::2], strict=True):
        right = int(raw)
        result = value + right if op == "+" else value - right
        steps.append((value, op, right, result))
        value = result
    return steps


def level(problem: str) -> int:
    """Difficulty level of a synthetic problem: its number of operations."""
    return len(_steps(problem))


def solve(problem: str) -> int:
    """The integer answer of a synthetic problem (left-to-right evaluation)."""
    return _steps(problem)[-1][3]


def worked_solution(problem: str) -> str:
    """The supervised target completion: one line per step inside ``<think>``, then the boxed answer.

    >>> worked_solution("12+35-8")
    '<think>\\n12+35=47\\n47-8=39\\n</think>\\n\\\\boxed{39}'
    """
    steps = _steps(problem)
    lines = "\n".join(f"{a}{op}{b}={c}" for a, op, b, c in steps)
    return f"<think>\n{lines}\n</think>\n\\boxed{{{steps[-1][3]}}}"


def generate_split(name: str) -> list[dict]:
    """Problem records ``{id, problem, answer, source}`` of a split; deterministic for its spec."""
    if name not in SPLITS:
        raise ValueError(f"unknown synthetic split {name!r}; known: {sorted(SPLITS)}")
    spec = SPLITS[name]
    rng = random.Random(spec.seed)
    seen: set[str] = set()
    records = []
    attempts = 0
    while len(records) < spec.n:
        level = spec.levels[len(records) % len(spec.levels)]
        problem = make_problem(level, rng)
        attempts += 1
        if attempts > 1000 * spec.n:  # pragma: no cover - only if a spec asks for more than its pool holds
            raise ValueError(f"split {name!r}: cannot draw {spec.n} distinct problems from its pool")
        if problem in seen or _pool(problem) != spec.pool:
            continue
        seen.add(problem)
        records.append(
            {
                "id": f"{name}-{len(records):04d}",
                "problem": problem,
                "answer": str(solve(problem)),
                "source": f"synthetic:{name}",
            }
        )
    return records
