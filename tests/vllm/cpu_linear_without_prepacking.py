"""Test-only shim: vLLM's CPU linear layers computed by plain ``F.linear`` on their own weight.

vLLM's CPU build pre-packs each linear layer's weight for its GEMM kernels at load time
(``dispatch_cpu_unquantized_gemm(layer, remove_weight=True)``) and replaces the weight by an empty
parameter, so TRL's colocated weight sync (``model.load_weights``) finds no weight to load into
(``'Parameter' object has no attribute 'weight_loader'``). With this shim the weights stay where vLLM's
loaders write them and each forward reads them, so the sync can be tested on a CPU. It changes vLLM's
CPU kernels only, never the GPU path; nothing in ``cwgrpo/`` imports it.
"""

from __future__ import annotations


def keep_cpu_linear_weights() -> None:
    """Replace the pre-packing dispatch by ``F.linear`` (call before the engine is built, in its process)."""
    import torch.nn.functional as F
    from vllm.model_executor.layers import utils

    def plain_linear(layer, remove_weight: bool) -> None:
        layer.cpu_linear = F.linear

    utils.dispatch_cpu_unquantized_gemm = plain_linear
