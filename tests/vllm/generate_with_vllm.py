"""Run in vLLM's environment: the package's vLLM backend on each job of a JSON file; write the completions.

    python tests/vllm/generate_with_vllm.py JOBS.json OUT.json

``JOBS.json``: ``[{"model_dir", "dtype", "max_model_len" (optional), "tasks": [{"name", "prompts", "n", "temperature", "top_p",
"max_new_tokens", "seed"}]}]``. ``OUT.json``: per job, per task name, the completions as
``[[{"text", "n_tokens", "truncated", "token_ids"}, ...], ...]``, plus the engine's start-up seconds,
its dtype and its context length as vLLM resolved them.
One engine per job, started once for all its tasks (each start costs 40-60 s on a CPU); a task whose
generation raises records the error's message instead (the caller asserts on it).
"""

from __future__ import annotations

import dataclasses
import gc
import json
import sys
import time
from pathlib import Path


def main(jobs_path: str, out_path: str) -> None:
    from cwgrpo.generation import SamplingSettings, get_backend

    results = []
    for job in json.loads(Path(jobs_path).read_text(encoding="utf-8")):
        start = time.perf_counter()
        backend = get_backend(
            "vllm",
            job["model_dir"],
            dtype=job["dtype"],
            max_model_len=job.get("max_model_len"),
            enforce_eager=True,  # no compilation: a start of seconds instead of minutes on a CPU
            progress=False,
        )
        engine = backend.llm.llm_engine.model_config
        done = {
            "model_dir": job["model_dir"],
            "start_s": round(time.perf_counter() - start, 1),
            "engine_dtype": str(engine.dtype),
            "max_model_len": engine.max_model_len,
            "tasks": {},
        }
        for task in job["tasks"]:
            settings = SamplingSettings(
                task["temperature"], task["top_p"], task["max_new_tokens"], task["seed"]
            )
            try:
                out = backend.generate(task["prompts"], task["n"], settings)
            except Exception as err:  # recorded for the test to report, not hidden
                done["tasks"][task["name"]] = {"error": f"{type(err).__name__}: {err}"}
                continue
            done["tasks"][task["name"]] = [[dataclasses.asdict(c) for c in row] for row in out]
        results.append(done)
        del backend
        gc.collect()
    Path(out_path).write_text(json.dumps(results), encoding="utf-8")


if __name__ == "__main__":  # vLLM's engine starts with spawn: the guard is required
    main(*sys.argv[1:])
