"""Shared fixtures: an offline tiny model saved once per test session (no hub access anywhere)."""

from __future__ import annotations

import os

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("MPLBACKEND", "Agg")


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory):
    """A `small` tiny model (random weights) with its tokenizer, saved to disk and loadable by path."""
    from cwgrpo.tiny import save_tiny

    out = tmp_path_factory.mktemp("tiny-small")
    save_tiny(out, "small", seed=0)
    return out
