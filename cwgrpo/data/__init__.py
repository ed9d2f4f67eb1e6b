"""Data stage: datasets to normalised problem records, the synthetic task and the prompt sets."""
