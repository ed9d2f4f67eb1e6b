"""The ``cwgrpo train`` job around the trainer: options, the run, its rows, checkpoints and recipes."""
