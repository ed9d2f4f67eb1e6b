"""Model stage: a model source to a local folder, the offline tiny models and their warm-up.

Model stage: a model source to a local folder (``hub``, ``cwgrpo fetch-model``), the offline tiny
tokenizer and models (``tiny``, ``cwgrpo build-tiny``) and their supervised warm-up (``sft``)."""
