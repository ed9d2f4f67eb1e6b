"""The ``cwgrpo train`` job around the trainer: options, the run, its rows, checkpoints and recipes.

In that order: ``options``, ``run``, ``rows``, ``checkpoints`` (with the run folder's guards: ``runguard``,
``identity``), ``recipe``. Processes and GPUs: ``cwgrpo.launch``."""
