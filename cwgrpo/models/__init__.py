"""Model stage: a model source to a local folder, the offline tiny models and their warm-up.

In that order: ``hub`` (``cwgrpo fetch-model``), ``tiny`` (``cwgrpo build-tiny``), ``sft``
(``cwgrpo sft``)."""
