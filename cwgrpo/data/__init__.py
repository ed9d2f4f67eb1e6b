"""Data stage: datasets to normalised problem records, the synthetic task and the prompt sets.

Data stage: the dataset registry and normalised problem records (``registry``), raw rows as stored
(``rows``), the synthetic arithmetic task (``synthetic``), prompt sets (``prompts``), and the
``cwgrpo prepare-data`` command (``prepare``)."""
