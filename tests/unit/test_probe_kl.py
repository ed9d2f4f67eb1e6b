"""The probe-set KL between consecutive policies (``cw_probe_prompts``): its maths by hand, and a real
2-step ``cwgrpo train`` of the tiny model that logs it for each step and method."""

from __future__ import annotations

import json
import math

import pytest
import torch

from cwgrpo.trainer.probe_kl import KEYS, completion_mask, mean_token_kl
from tests.conftest import TWO_STEP_TRL


def _logps(*rows: list[float]) -> torch.Tensor:
    return torch.tensor(rows, dtype=torch.float64).log()


def test_kl_of_two_distributions_by_hand():
    # KL((1/2, 1/2) || (1/4, 3/4)) = 1/2 ln 2 + 1/2 ln(2/3) = 1/2 ln(4/3)
    prev, new = _logps([0.5, 0.5]), _logps([0.25, 0.75])
    got = mean_token_kl(prev, new, torch.tensor([1]))
    assert got.item() == pytest.approx(0.5 * math.log(4 / 3), rel=1e-12)


def test_mean_is_over_valid_positions_only():
    """Two valid positions (KL 1/2 ln(4/3) and 0) and a masked one with a huge KL: the mean is of the two."""
    prev = _logps([0.5, 0.5], [0.2, 0.8], [0.999, 0.001])[None]
    new = _logps([0.25, 0.75], [0.2, 0.8], [0.001, 0.999])[None]
    got = mean_token_kl(prev, new, torch.tensor([[1, 1, 0]]))
    assert got.item() == pytest.approx(0.25 * math.log(4 / 3), rel=1e-12)
    everything = mean_token_kl(prev, new, torch.tensor([[1, 1, 1]]))
    assert everything.item() > 2.0  # the masked position would have dominated


def test_identical_distributions_give_zero_and_zero_probability_adds_nothing():
    logps = torch.log_softmax(torch.randn(3, 5, 7, generator=torch.Generator().manual_seed(0)), dim=-1)
    assert mean_token_kl(logps, logps.clone(), torch.ones(3, 5)).item() == 0.0
    # p_prev(v) = 0 for the last token: 0 * (log 0 - log q) counts as 0, not NaN
    prev = torch.tensor([[0.5, 0.5, 0.0]], dtype=torch.float64).log()
    new = _logps([0.25, 0.25, 0.5])
    assert mean_token_kl(prev, new, torch.tensor([1])).item() == pytest.approx(math.log(2), rel=1e-12)
    assert mean_token_kl(prev, new, torch.tensor([0])).item() == 0.0  # no valid position


def test_kl_is_not_symmetric_and_is_nonnegative():
    gen = torch.Generator().manual_seed(1)
    a = torch.log_softmax(torch.randn(4, 6, 11, generator=gen), dim=-1)
    b = torch.log_softmax(torch.randn(4, 6, 11, generator=gen), dim=-1)
    mask = torch.ones(4, 6)
    ab, ba = mean_token_kl(a, b, mask).item(), mean_token_kl(b, a, mask).item()
    assert ab > 0 and ba > 0 and ab != pytest.approx(ba)


def test_shapes_must_agree():
    with pytest.raises(ValueError, match="mask must be their shape"):
        mean_token_kl(torch.zeros(2, 3, 4), torch.zeros(2, 3, 4), torch.ones(2, 4))


def test_completion_mask_keeps_the_first_eos_and_drops_what_follows():
    ids = torch.tensor([[5, 6, 2, 7, 2], [5, 2, 0, 0, 0], [5, 6, 7, 8, 9]])  # EOS 2, pad 0
    assert completion_mask(ids, [2], 0).tolist() == [[1, 1, 1, 0, 0], [1, 1, 0, 0, 0], [1, 1, 1, 1, 1]]
    # several EOS ids, the pad token being one of them (as when pad = eos)
    assert completion_mask(torch.tensor([[5, 3, 2, 2]]), [2, 3], 2).tolist() == [[1, 1, 0, 0]]


REWARD = '''
def spread(completions, **kwargs):
    """A reward with spread inside each group, so advantages (and the update) are not zero."""
    return [float(sum(map(ord, c[0]["content"])) % 7) for c in completions]
'''


def _train_lines(tmp_path, model_dir, monkeypatch, method: str, probes: int) -> list[dict]:
    """The step lines of metrics.jsonl of a real 2-step ``cwgrpo train`` of the tiny model (lr 1e-2)."""
    from cwgrpo.io import read_jsonl
    from cwgrpo.train.options import build_train_config
    from cwgrpo.train.run import train

    (tmp_path / "probe_rewards.py").write_text(REWARD)
    monkeypatch.syspath_prepend(str(tmp_path))
    data = tmp_path / "train.jsonl"
    records = [{"id": f"p-{i}", "problem": f"{i}+{i}", "answer": str(2 * i), "source": "t"} for i in range(6)]
    data.write_text("".join(json.dumps(r) + "\n" for r in records))
    run = tmp_path / f"run-{method}-{probes}"
    options = {
        **TWO_STEP_TRL,
        "save_strategy": "no",
        "num_generations": 4,
        "per_device_train_batch_size": 8,
        "max_completion_length": 8,
        "learning_rate": 1e-2,
        "cw_method": method,
        "cw_probe_prompts": probes,
        "reward_funcs": ["probe_rewards:spread"],
    }
    assert train(model_dir, data, run, build_train_config(options, run)) == 0
    return [r for r in read_jsonl(run / "metrics.jsonl") if "loss" in r]


@pytest.mark.parametrize("method", ["grpo", "cw_grpo", "clip_cov"])
def test_train_logs_the_probe_kl_at_every_step(tmp_path, tiny_model_dir, monkeypatch, method):
    lines = _train_lines(tmp_path, tiny_model_dir, monkeypatch, method, probes=4)
    assert [r["step"] for r in lines] == [1, 2]
    for r in lines:
        assert r["grad_norm"] > 0  # the step updated the policy
        for key in KEYS:
            assert math.isfinite(r[key]) and r[key] > 0, (key, r)
    first, second = lines
    # after step 1 the previous policy is the start; after step 2 it is not
    assert first["probe/kl_from_start"] == first["probe/kl_consecutive"]
    assert second["probe/kl_from_start"] != pytest.approx(second["probe/kl_consecutive"])


def test_the_probe_leaves_the_run_unchanged(tmp_path, tiny_model_dir, monkeypatch):
    """Greedy generation and no-grad scoring in eval mode draw no random number and touch no gradient: every
    other logged value is the same with the probe as without it; without it no probe key is logged."""
    off = _train_lines(tmp_path, tiny_model_dir, monkeypatch, "cw_grpo", probes=0)
    on = _train_lines(tmp_path, tiny_model_dir, monkeypatch, "cw_grpo", probes=4)
    assert not any(k.startswith("probe/") for r in off for k in r)
    assert [{k: v for k, v in r.items() if k not in KEYS} for r in on] == off


def test_a_negative_probe_count_is_refused(tmp_path):
    from cwgrpo.configs import ConfigError
    from cwgrpo.train.options import build_train_config

    with pytest.raises(ConfigError, match=r"cw_probe_prompts=-1: must be an integer >= 0"):
        build_train_config({**TWO_STEP_TRL, "cw_probe_prompts": -1}, tmp_path / "run")


def test_more_probe_prompts_than_training_prompts_are_cut_with_a_warning(caplog):
    from cwgrpo.trainer.probe_kl import probe_count

    with caplog.at_level("WARNING", logger="cwgrpo.trainer.probe_kl"):
        assert probe_count(100_000, 6, 8, 266) == 6
    assert "cw_probe_prompts=100000 is more than the 6 training prompts: the probe uses all 6" in caplog.text
    caplog.clear()
    assert probe_count(4, 6, 8, 266) == 4
    assert not caplog.text


def test_a_probe_too_large_to_keep_is_refused_before_generating():
    from cwgrpo.trainer.probe_kl import probe_count

    assert probe_count(32, 40_000, 64, 152_064)  # the docstring's 2.5 GB
    with pytest.raises(
        ValueError, match=r"cw_probe_prompts=100000: 40000 probes x 64 .* use fewer probe prompts"
    ):
        probe_count(100_000, 40_000, 64, 152_064)
