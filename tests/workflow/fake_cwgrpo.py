"""A stand-in for the `cwgrpo` command in scheduling tests: it claims the job's GPUs as the real launchers
do (cwgrpo.launch.devices, over the fake devices of CUDA_VISIBLE_DEVICES), holds them for a moment, records what
it held and when in $RECORD_DIR, and writes the outputs (and `train`'s timings log) the rule declares.
Nothing is trained. With FAKE_CWGRPO_FAIL=COMMAND, that command fails, its cause (FAKE_CWGRPO_CAUSE, or a
fixed one) on its last line.

GPUs per job, as the real commands claim them: `train`, num_processes + 1 with vllm_server_gpu set;
`evaluate`, 1 on a machine with GPUs; the other commands none.
"""

from __future__ import annotations

import json
import os
import sys
import time
import uuid
from pathlib import Path

import yaml

from cwgrpo.launch.devices import gpu_pool, lease

HOLD_S = {"train": 1.0, "evaluate": 0.3}


def _flags(argv: list[str]) -> tuple[dict[str, list[str]], dict]:
    """`--flag value` lists by flag, and the options of the `--config` file and `--set key=value`."""
    flags: dict[str, list[str]] = {}
    key = None
    for arg in argv:
        if arg.startswith("--"):
            key = arg
            flags.setdefault(key, [])
        elif key is not None:
            flags[key].append(arg)
    options = (yaml.safe_load(Path(flags["--config"][0]).read_text()) or {}) if "--config" in flags else {}
    for item in flags.get("--set", []):
        name, _, value = item.partition("=")
        options[name] = yaml.safe_load(value)
    return flags, options


def _write(path: str | Path, text: str = "{}\n") -> None:
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    Path(path).write_text(text)


def write_outputs(command: str, flags: dict[str, list[str]], options: dict) -> None:
    if command == "prepare-data":
        (out,) = flags["--out"]
        _write(out, "")
        _write(out.removesuffix(".jsonl") + ".manifest.json")
    elif command == "fetch-model":
        _write(flags["--marker"][0])
    elif command == "train":
        run = Path(flags["--run-dir"][0])
        for name in ("run.json", "metrics.jsonl", "cov_samples.jsonl"):
            _write(run / name)
        _write(flags["--timings"][0], "")  # the rule's declared log
        last, every = options["max_steps"], options["save_steps"]
        for step in sorted({*range(every, last + 1, every), last}):
            _write(run / "steps" / f"step{step}.json")
    elif command == "evaluate":
        for path in [*flags["--out"], *flags["--summary"]]:
            _write(path)
    else:
        raise SystemExit(f"fake cwgrpo: {command} is not faked")


def main(argv: list[str]) -> int:
    command = argv[0]
    if command == os.environ.get("FAKE_CWGRPO_FAIL"):  # a job failing with its cause on its last line
        print("\n".join(f"fake cwgrpo: progress line {i}" for i in range(1, 41)), file=sys.stderr)
        cause = os.environ.get("FAKE_CWGRPO_CAUSE", f"fake cause of the failure (FAKE_CWGRPO_FAIL={command})")
        raise SystemExit(f"cwgrpo {command}: error: {cause}")
    flags, options = _flags(argv[1:])
    if command == "train":
        gpus = options.get("num_processes", 1) + (options.get("vllm_server_gpu") is not None)
    else:
        gpus = 1 if command == "evaluate" and gpu_pool(os.environ) else 0
    with lease(gpus, 0) as held:
        start = time.time()
        time.sleep(HOLD_S.get(command, 0.0))
        record = {"command": command, "gpus": list(held.gpus), "start": start, "end": time.time()}
    _write(Path(os.environ["RECORD_DIR"]) / f"{uuid.uuid4().hex}.json", json.dumps(record))
    write_outputs(command, flags, options)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
