"""Checkpoint layouts recorded from real saves (tests/fixtures/checkpoint_layouts/zeroN.txt, written by
tests/deepspeed/record_layouts.py): one file a line, relative to the checkpoint folder, its step written
``{step}``; ``#`` lines say how it was recorded. tests/deepspeed checks them against a real save."""

from __future__ import annotations

import struct
from pathlib import Path

LAYOUTS = Path(__file__).resolve().parents[1] / "fixtures" / "checkpoint_layouts"


def recorded_layout(stage: int) -> list[str]:
    text = (LAYOUTS / f"zero{stage}.txt").read_text()
    return sorted(line for line in text.splitlines() if line and not line.startswith("#"))


def make_checkpoint(run: Path, step: int, stage: int) -> Path:
    """``run/checkpoint-STEP`` with every file of the recorded ZeRO-``stage`` layout, no completion flag:
    each file holds its name, a ``.safetensors`` one an empty but well-formed safetensors file."""
    ckpt = run / f"checkpoint-{step}"
    for name in recorded_layout(stage):
        path = ckpt / name.replace("{step}", str(step))
        path.parent.mkdir(parents=True, exist_ok=True)
        if name.endswith(".safetensors"):
            path.write_bytes(struct.pack("<Q", 2) + b"{}")
        else:
            path.write_text(name)
    return ckpt
