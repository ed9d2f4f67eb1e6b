"""Grading throughput of ``cwgrpo.grading.scoring.grade_many`` with the per-answer time budget on.

Run from the repository root::

    python benchmarks/bench_grading.py                     # writes benchmarks/results/grading.json
    python benchmarks/bench_grading.py --n 8000 --processes 2 4 --mix pessimistic

Completions are R1-style (about 1,500 characters of reasoning inside ``<think>``, then a final line with
the answer); everything is seeded. Two workloads (``--mix``):

- ``paper`` (default): an evaluation like the paper's, k = 4 samples per problem. Gold answers: 65 %
  integers (AIME, AMC, most of MATH-500), 30 % LaTeX (fractions, roots, intervals, tuples, multiples
  of pi, polynomials), 5 % decimals (Minerva). Each sample is right (55 %, the same string for all right
  samples of a problem, in an equivalent form for LaTeX), wrong (35 %), or has no boxed answer (10 %);
  one sample in 1,000 is pathological (an exponent tower that spends the whole budget).
- ``pessimistic``: every answer string distinct, so math-verify's parse caches never help: 50 %
  integers, 40 % LaTeX, 9 % without a box, 1 % pathological.

Rows: one process (in the calling process), then ``grade_many`` with each ``--processes`` count, wall time
including starting the pool. The goal in the issue is >= 500 answers/s on 2 processes.
"""

from __future__ import annotations

import random
import time
from pathlib import Path

from bench_common import command_line, machine, write_report

from cwgrpo.grading.scoring import DEFAULT_TIMEOUT_S, grade_many

GOAL_PER_S = 500.0
FILLER = "Let me reconsider the previous step and check the arithmetic once more. "


def _latex_pair(rng: random.Random, right: bool) -> tuple[str, str]:
    """(gold, predicted) LaTeX answers; the prediction is an equivalent form when ``right``."""
    a, b = rng.randint(1, 97), rng.randint(2, 89)
    kind = rng.randrange(6)
    if kind == 0:
        gold, pred = f"\\frac{{{a}}}{{{b}}}", f"\\dfrac{{{a}}}{{{b}}}"
        wrong = f"\\frac{{{a + 1}}}{{{b}}}"
    elif kind == 1:
        gold, pred, wrong = f"{a}\\sqrt{{{b}}}", f"\\sqrt{{{a * a * b}}}", f"{a}\\sqrt{{{b + 1}}}"
    elif kind == 2:
        gold, pred, wrong = f"[{a}, {a + b})", f"[{a},{a + b})", f"[{a},{a + b}]"
    elif kind == 3:
        gold, pred, wrong = f"({a}, {b})", f"\\left({a},{b}\\right)", f"({b}, {a})"
    elif kind == 4:
        gold, pred, wrong = (
            f"\\frac{{{a}\\pi}}{{{b}}}",
            f"\\frac{{{a}}}{{{b}}}\\pi",
            f"\\frac{{{a}\\pi}}{{{b + 1}}}",
        )
    else:
        gold, pred, wrong = f"x^2+{a}x+{b}", f"{b}+{a}x+x^2", f"x^2+{a}x-{b}"
    return gold, pred if right else wrong


def _completion(rng: random.Random, i: int, final: str) -> str:
    return "<think>\n" + FILLER * rng.randint(15, 25) + f"(step {i})\n</think>\n" + final


def _boxed_line(answer: str) -> str:
    return f"Therefore, the final answer is: $\\boxed{{{answer}}}$."


TOWER = "\\boxed{2^{2^{2^{2^{2^{100}}}}}}"


def pessimistic_workload(n: int, seed: int) -> list[tuple[str, str]]:
    rng = random.Random(seed)
    pairs = []
    for i in range(n):
        u = rng.random()
        if u < 0.50:
            gold = str(rng.randint(0, 999))
            pred = gold if rng.random() < 0.5 else str(int(gold) + rng.randint(1, 9))
            pairs.append((_completion(rng, i, _boxed_line(pred)), gold))
        elif u < 0.90:
            gold, pred = _latex_pair(rng, rng.random() < 0.5)
            pairs.append((_completion(rng, i, _boxed_line(pred)), gold))
        elif u < 0.99:
            gold = str(rng.randint(0, 999))
            pairs.append((_completion(rng, i, f"So the final answer is ${gold}$."), gold))
        else:
            pairs.append((_completion(rng, i, TOWER), "5"))
    return pairs


def paper_workload(n: int, seed: int, k: int = 4) -> list[tuple[str, str]]:
    rng = random.Random(seed)
    pairs = []
    for problem in range((n + k - 1) // k):
        u = rng.random()
        if u < 0.65:
            gold = str(rng.randint(0, 999))
            right, wrong = gold, str(int(gold) + rng.randint(1, 9))
        elif u < 0.95:
            gold, right = _latex_pair(rng, True)
            wrong = _latex_pair(random.Random(problem), False)[1]
        else:
            gold = f"{rng.randint(1, 99)}.{rng.randint(1, 99)}"
            right, wrong = gold + "0", f"{float(gold) + 0.5:.2f}"
        for _ in range(k):
            v = rng.random()
            if rng.random() < 0.001:
                final = TOWER
            elif v < 0.55:
                final = _boxed_line(right)
            elif v < 0.90:
                final = _boxed_line(wrong)
            else:
                final = f"So the final answer is ${right}$."
            pairs.append((_completion(rng, len(pairs), final), gold))
    return pairs[:n]


WORKLOADS = {"paper": paper_workload, "pessimistic": pessimistic_workload}


def time_rows(pairs, processes: list[int], timeout_s: float) -> list[dict]:
    rows = []
    for procs in [1, *processes]:
        start = time.perf_counter()
        results = grade_many(pairs, processes=procs, timeout_s=timeout_s)
        wall = time.perf_counter() - start
        rows.append(
            {
                "processes": procs,
                "answers": len(pairs),
                "wall_s": round(wall, 3),
                "answers_per_s": round(len(pairs) / wall, 1),
                "correct": sum(r.correct for r in results),
            }
        )
    return rows


def main() -> None:
    parser = command_line(__doc__)
    parser.add_argument("--n", type=int, default=4000, help="answers to grade")
    parser.add_argument("--processes", type=int, nargs="+", default=[2], help="pool sizes to time")
    parser.add_argument("--timeout-s", type=float, default=DEFAULT_TIMEOUT_S, help="per-answer budget")
    parser.add_argument("--mix", choices=sorted(WORKLOADS), default="paper", help="workload (see above)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, default=None, help="default benchmarks/results/grading_MIX.json")
    args = parser.parse_args()

    args.out = args.out or Path(f"benchmarks/results/grading_{args.mix}.json")
    pairs = WORKLOADS[args.mix](args.n, args.seed)
    rows = time_rows(pairs, args.processes, args.timeout_s)
    print(f"{'processes':>9} {'answers':>8} {'wall s':>8} {'answers/s':>10} {'correct':>8}")
    for r in rows:
        print(
            f"{r['processes']:>9} {r['answers']:>8} {r['wall_s']:>8.2f} {r['answers_per_s']:>10.1f} {r['correct']:>8}"
        )
    best = max(r["answers_per_s"] for r in rows if r["processes"] == 2) if 2 in args.processes else None
    if best is not None:
        print(
            f"goal >= {GOAL_PER_S:.0f} answers/s on 2 processes: {'met' if best >= GOAL_PER_S else 'NOT met'}"
        )
    report = {
        "benchmark": "grading",
        "goal_answers_per_s_2_processes": GOAL_PER_S,
        "mix": args.mix,
        "timeout_s": args.timeout_s,
        "seed": args.seed,
        "rows": rows,
        "machine": machine(),
    }
    write_report(args.out, report)
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
