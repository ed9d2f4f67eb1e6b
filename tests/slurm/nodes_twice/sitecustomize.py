"""Test-only (tests/slurm/test_slurm_zero3.py), on PYTHONPATH: a one-node Slurm cluster as two nodes.

With ``CWGRPO_TEST_NODES_TWICE=1``, ``cwgrpo.launch.multinode.allocation_nodes`` returns the allocation's node
list (read from ``scontrol``, as always) twice: a cluster of one node cannot give two. In each training
process (``RANK`` set), ``CWGRPO_TEST_RECORD_DIR/rankR.json`` records the Slurm step, node and the
devices and DeepSpeed op cache it runs with.
"""

import json
import os

if os.environ.get("CWGRPO_TEST_NODES_TWICE") == "1":
    if "RANK" in os.environ:
        record = {
            "rank": os.environ["RANK"],
            "group_rank": os.environ.get("GROUP_RANK"),
            "world_size": os.environ.get("WORLD_SIZE"),
            "master": f"{os.environ.get('MASTER_ADDR')}:{os.environ.get('MASTER_PORT')}",
            "slurm_step": os.environ.get("SLURM_STEP_ID"),
            "slurm_job": os.environ.get("SLURM_JOB_ID"),
            "gpus": os.environ.get("CUDA_VISIBLE_DEVICES"),
            "op_cache": os.environ.get("TORCH_EXTENSIONS_DIR"),
            "pid": os.getpid(),
        }
        folder = os.environ["CWGRPO_TEST_RECORD_DIR"]
        with open(os.path.join(folder, f"rank{os.environ['RANK']}.json"), "w") as f:
            json.dump(record, f)
    elif not os.environ.get("CWGRPO_LAUNCHED"):
        import cwgrpo.launch.multinode as _multinode

        _real = _multinode.allocation_nodes
        _multinode.allocation_nodes = lambda env: _real(env) * 2
