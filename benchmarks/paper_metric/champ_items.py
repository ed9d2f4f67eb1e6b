"""CHAMP's model solutions as grading items, for the paper-metric parity study (docs/paper-metric.md).

    python benchmarks/paper_metric/champ_items.py champ_dataset/dataset_files/v0.json OUT_DIR

CHAMP (Mao et al. 2024, MIT; PyPI ``champ-dataset==1.0.0``): 270 competition problems with gold answers
(``problems[*]["_answer"]``) and model conversations (``problems[*]["conversations"]``, keyed
"MODEL|PROMPT-KIND"). A conversation's full solution is its first message whose role starts with
``Model.`` after the user turn that holds the problem (skipped when the message records an API error). Writes one JSONL per model
(``{key, problem, model, prompt, completion, gold}``), standard library only.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path


def solutions(data: dict) -> list[dict]:
    rows = []
    for pid, prob in data["problems"].items():
        text = prob["_text"]
        for conv_key, conv in prob["conversations"].items():
            model, _, prompt = conv_key.partition("|")
            seen_problem = False
            for msg in conv["messages"]:
                if msg["role"] == "User" and text in msg["text"]:
                    seen_problem = True
                elif seen_problem and msg["role"].startswith("Model."):
                    if msg["error"] is not None or not msg["text"]:  # a failed API call: no solution
                        break
                    rows.append(
                        {
                            "key": f"{pid}|{conv_key}",
                            "problem": pid,
                            "model": model,
                            "prompt": prompt,
                            "completion": msg["text"],
                            "gold": prob["_answer"],
                        }
                    )
                    break
    return rows


def main(src: str, out_dir: str) -> None:
    rows = solutions(json.loads(Path(src).read_text(encoding="utf-8")))
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    by_model: dict[str, list[dict]] = {}
    for r in rows:
        by_model.setdefault(r["model"], []).append(r)
    for model, group in sorted(by_model.items()):
        name = model.replace(" ", "_").replace(".", "")
        with open(out / f"{name}.jsonl", "w", encoding="utf-8") as f:
            f.writelines(json.dumps(r, ensure_ascii=False) + "\n" for r in group)
        print(f"{model}: {len(group)} solutions, {sum('boxed' in r['completion'] for r in group)} boxed")


if __name__ == "__main__":
    main(*sys.argv[1:])
