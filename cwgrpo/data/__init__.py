"""Data stage: datasets to normalised problem records, the synthetic task and the prompt sets.

In that order: ``registry``, ``rows`` (raw rows as stored), ``synthetic``, ``prompts``, and
``prepare_data`` (the ``cwgrpo prepare-data`` command)."""
