"""The ``cwgrpo train`` job around the trainer: options, the run, its rows, checkpoints and recipes.

The ``cwgrpo train`` job around the trainer: its options (``options``), the run itself (``run``), the
dataset rows it trains on (``rows``), checkpoints and the run folder's guards (``checkpoints``,
``runguard``, ``identity``) and TRL recipes (``recipe``). Processes and GPUs: ``cwgrpo.launch``."""
