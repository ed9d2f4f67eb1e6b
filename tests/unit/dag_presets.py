"""A shipped preset as the workflow reads it, for the tests of cwgrpo_workflow.dag (which take config dicts)."""

from __future__ import annotations

from pathlib import Path

import yaml
from snakemake.utils import update_config, validate

REPO = Path(__file__).resolve().parents[2]
SCHEMA = REPO / "workflow" / "schemas" / "config.schema.yaml"


def preset(*names: str) -> dict:
    """The files merged key by key (as `--configfile A B` merges them), validated, the schema's defaults set."""
    config: dict = {}
    for name in names:
        update_config(config, yaml.safe_load((REPO / "config" / name).read_text()))
    validate(config, str(SCHEMA), set_default=True)
    return config
