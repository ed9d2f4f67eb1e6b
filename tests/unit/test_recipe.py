"""TRL/open-r1 recipes: parsed by TRL's TrlParser, open-r1 keys mapped to ours, unknown keys named."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from cwgrpo.configs import ConfigError
from cwgrpo.train.recipe import is_recipe, parse_recipe

REPO = Path(__file__).resolve().parents[2]
CPU = {"use_cpu": True, "bf16": False}  # GRPOConfig defaults to bf16, which a CPU-only machine refuses


def _recipe(tmp_path, **keys) -> Path:
    path = tmp_path / "recipe.yaml"
    path.write_text(
        yaml.safe_dump(
            {"model_name_or_path": "m", "dataset_name": "d.jsonl", "output_dir": "o", **CPU, **keys}
        )
    )
    return path


def test_open_r1_keys_map_to_ours(tmp_path):
    path = _recipe(
        tmp_path,
        torch_dtype="bfloat16",
        attn_implementation="sdpa",
        system_prompt="Think first.",
        model_revision="main",
        learning_rate=3.0e-6,
        reward_funcs=["accuracy", "format"],
        cw_method="grpo",
    )
    paths, options = parse_recipe(path)
    assert paths == {"model_dir": Path("m"), "train_data": Path("d.jsonl"), "run_dir": Path("o")}
    assert options == {
        **CPU,
        "model_init_kwargs": {"dtype": "bfloat16", "attn_implementation": "sdpa"},
        "system_prompt": "Think first.",
        "learning_rate": 3.0e-6,
        "reward_funcs": ["accuracy", "format"],
        "cw_method": "grpo",
    }


def test_unknown_recipe_keys_are_named(tmp_path):
    with pytest.raises(ConfigError, match=r"not used.*lerning_rate"):
        parse_recipe(_recipe(tmp_path, lerning_rate=1.0e-6))


def test_model_revision_other_than_main_is_refused(tmp_path):
    with pytest.raises(ConfigError, match="model_revision='abc'"):
        parse_recipe(_recipe(tmp_path, model_revision="abc"))


def test_shipped_recipe_parses_and_is_a_recipe():
    path = REPO / "config/recipes/tiny_open_r1.yaml"
    assert is_recipe(yaml.safe_load(path.read_text()))
    paths, options = parse_recipe(path)
    assert set(paths) == {"model_dir", "train_data", "run_dir"}
    assert options["model_init_kwargs"] == {"dtype": "float32", "attn_implementation": "eager"}
    assert not is_recipe({"learning_rate": 1.0})  # a plain options file is not a recipe


def test_shipped_recipe_has_room_for_a_worked_solution_and_several_groups():
    """With 16 completion tokens every completion was clipped: reward 0 and grad norm 0 at every step. The
    budget is the tiny preset's (a worked level-5 solution is 54 tokens with EOS), and each step has
    several groups, so that one of them is likely to have a reward spread (tests/e2e/test_recipe.py
    checks that the rewards and the gradient are nonzero)."""
    recipe = yaml.safe_load((REPO / "config/recipes/tiny_open_r1.yaml").read_text())
    tiny = yaml.safe_load((REPO / "config/config.yaml").read_text())["train"]
    assert recipe["max_completion_length"] >= tiny["max_completion_length"]
    assert recipe["per_device_train_batch_size"] // recipe["num_generations"] >= 4
