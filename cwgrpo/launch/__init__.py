"""Processes and GPUs of a training job: accelerate + DeepSpeed, Slurm nodes, leases, the vLLM server.

In that order: ``launcher``, ``multinode``, ``devices``, ``vllm_server``; and ``workers``, so that the
training processes die with their job."""
