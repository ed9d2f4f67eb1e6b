"""Model stage: a model source to a local folder, the offline tiny models and their warm-up."""
