"""Processes and GPUs of a training job: accelerate + DeepSpeed, Slurm nodes, leases, the vLLM server.

Processes and GPUs of a job: accelerate + DeepSpeed launch (``launcher``), one ``srun`` step per node
(``multinode``), workers that die with their job (``workers``), GPU and port leases (``devices``) and the
``trl vllm-serve`` process of a training job (``vllm_server``)."""
