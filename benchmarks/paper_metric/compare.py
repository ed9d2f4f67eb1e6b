"""Tables of the paper-metric parity study (docs/paper-metric.md) from the verdict files.

    python benchmarks/paper_metric/compare.py ITEMS.jsonl PAPER.jsonl STRICT.jsonl REFERENCE.jsonl OUT.json

ITEMS: the ``{id, completion, gold, gold_kind}`` lines graded; PAPER/STRICT: ``cwgrpo grade`` verdicts;
REFERENCE: ``reference.py`` (lighteval's metric function called directly). Writes agreement overall,
by gold kind and by model, the paper-vs-reference mismatches, and the disagreements between the two
metrics (ids, for reading them), as JSON; prints a summary.
"""

from __future__ import annotations

import collections
import json
import re
import sys

from cwgrpo.io import read_jsonl


def gold_class(gold: str) -> str:
    """``number`` (integer, decimal, fraction), ``text`` (has an English word) or ``expression``."""
    g = gold.strip()
    if re.fullmatch(r"-?\d+(\.\d+)?(/\d+)?", g):
        return "number"
    words = [w for w in re.findall(r"[A-Za-z]{3,}", g) if w.lower() not in ("sqrt", "frac", "sum", "cdots")]
    return "text" if words else "expression"


def _block(pairs: list[tuple[bool, bool]]) -> dict:
    n = len(pairs)
    return {
        "n": n,
        "paper_accuracy": sum(p for p, _ in pairs) / n,
        "strict_accuracy": sum(s for _, s in pairs) / n,
        "agreement": sum(p == s for p, s in pairs) / n,
        "paper_only": sum(p and not s for p, s in pairs),
        "strict_only": sum(s and not p for p, s in pairs),
    }


def main(items_path: str, paper_path: str, strict_path: str, ref_path: str, out_path: str) -> None:
    items, paper, strict, ref = (read_jsonl(p) for p in (items_path, paper_path, strict_path, ref_path))
    assert len(items) == len(paper) == len(strict) == len(ref), "files do not line up"
    groups: dict[str, list[tuple[bool, bool]]] = collections.defaultdict(list)
    mismatches, disagreements = [], []
    for it, p, s, r in zip(items, paper, strict, ref, strict=True):
        model = it["id"].split("|")[1]
        boxed = "boxed" if "\\boxed" in it["completion"] else "unboxed"
        pair = (bool(p["correct"]), bool(s["correct"]))
        for key in ("all", f"kind={it['gold_kind']}", f"model={model}", f"{it['gold_kind']}/{boxed}"):
            groups[key].append(pair)
        if p["correct"] != r["correct"]:
            mismatches.append({"id": it["id"], "gold_kind": it["gold_kind"], "paper": p, "reference": r})
        if pair[0] != pair[1]:
            disagreements.append(
                {
                    "id": it["id"],
                    "gold_kind": it["gold_kind"],
                    "gold": it["gold"],
                    "paper": p["correct"],
                    "paper_pred": p["pred"],
                    "paper_gold": p["gold"],
                    "paper_reason": p["reason"],
                    "strict_pred": s["pred"],
                    "strict_reason": s["reason"],
                }
            )
    categories = collections.Counter(
        (
            "paper-only" if d["paper"] else "strict-only",
            d["gold_kind"],
            gold_class(d["gold"]),
            "gold not extracted" if (d["paper_reason"] or "").startswith("gold not") else "gold extracted",
        )
        for d in disagreements
    )
    result = {
        "groups": {k: _block(v) for k, v in sorted(groups.items())},
        "categories": [[*k, n] for k, n in categories.most_common()],
        "paper_vs_reference_mismatches": mismatches,
        "paper_timeouts": sum(1 for p in paper if (p["reason"] or "").startswith("timeout")),
        "disagreements": disagreements,
    }
    with open(out_path, "w", encoding="utf-8") as f:
        json.dump(result, f, indent=1, ensure_ascii=False)
    for k, b in result["groups"].items():
        print(
            f"{k:28s} n={b['n']:6d} paper {100 * b['paper_accuracy']:5.1f} strict {100 * b['strict_accuracy']:5.1f}"
            f" agree {100 * b['agreement']:5.1f}  paper-only {b['paper_only']:4d} strict-only {b['strict_only']:4d}"
        )
    for *k, n in result["categories"]:
        print(f"{n:5d}  {' / '.join(k)}")
    print(f"paper vs reference mismatches: {len(mismatches)}; timeouts: {result['paper_timeouts']}")


if __name__ == "__main__":
    main(*sys.argv[1:])
