"""Unit tests of the offline tiny tokenizer and models (cwgrpo.models.tiny)."""

from __future__ import annotations

import json

import pytest

from cwgrpo import cli
from cwgrpo.models import tiny

TEXTS = [
    "47+35",
    "a b  c   d",
    " leading and trailing spaces ",
    "line one\nline two\n\n\tindented",
    "<think>\n12+35=47\n47-8=39\n</think>\n\\boxed{39}",
    "héllo wörld — ünïcode ∑",
    "<|user|>x y<|end|>",
]


@pytest.fixture(scope="module")
def saved(tmp_path_factory) -> tuple:
    out = tmp_path_factory.mktemp("tiny") / "small"
    info = tiny.save_tiny(out, "small", seed=0)
    return out, info


def test_tokenizer_roundtrip_after_autotokenizer_reload(saved):
    from transformers import AutoTokenizer

    path, _ = saved
    assert (path / "config.json").is_file()  # the silent-failure case: a model config beside the tokenizer
    tok = AutoTokenizer.from_pretrained(path)
    for text in TEXTS:
        ids = tok(text, add_special_tokens=True)["input_ids"]
        assert tok.decode(ids) == text


def test_tokenizer_loaders_agree(saved):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    path, _ = saved
    auto, ours, fresh = AutoTokenizer.from_pretrained(path), tiny.load_tokenizer(path), tiny.build_tokenizer()
    for text in TEXTS:
        assert auto(text)["input_ids"] == ours(text)["input_ids"] == fresh(text)["input_ids"]
    model = AutoModelForCausalLM.from_pretrained(path)
    assert len(auto) == len(ours) == len(fresh) == model.config.vocab_size
    for tok in (auto, ours):
        assert (tok.bos_token, tok.eos_token, tok.pad_token) == ("<|bos|>", "<|end|>", "<|pad|>")
        assert tok.padding_side == "left"
        assert tok.eos_token_id == model.generation_config.eos_token_id == model.config.eos_token_id


def test_tokenizer_one_token_per_character():
    tok = tiny.build_tokenizer()
    assert len(tok("ab c\n9+")["input_ids"]) == 7
    assert tok.convert_ids_to_tokens(tok("<think>\\boxed{")["input_ids"]) == ["<think>", "\\boxed{"]
    assert tok("x")["input_ids"][0] != tok.bos_token_id  # no automatic BOS: the chat template adds it


def test_tokenizer_special_tokens_skipped_but_answer_tokens_kept():
    tok = tiny.build_tokenizer()
    text = "<|assistant|><think>\n1+2=3\n</think>\n\\boxed{3}<|end|>"
    decoded = tok.decode(tok(text)["input_ids"], skip_special_tokens=True)
    assert decoded == "<think>\n1+2=3\n</think>\n\\boxed{3}"


def test_chat_template_starts_with_bos_and_ends_with_assistant_prompt(saved):
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(saved[0])
    messages = [{"role": "system", "content": "be brief"}, {"role": "user", "content": "47+35"}]
    text = tok.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
    assert text == "<|bos|><|system|>be brief<|end|><|user|>47+35<|end|><|assistant|>"
    ids = tok(text)["input_ids"]
    assert ids[0] == tok.bos_token_id and ids.count(tok.bos_token_id) == 1
    assert ids[-1] == tok.convert_tokens_to_ids("<|assistant|>")
    no_prompt = tok.apply_chat_template(messages[1:], tokenize=False, add_generation_prompt=False)
    assert no_prompt == "<|bos|><|user|>47+35<|end|>"


def test_build_model_deterministic():
    a = tiny.weights_sha256(tiny.build_model("small", 266, seed=0))
    b = tiny.weights_sha256(tiny.build_model("small", 266, seed=0))
    c = tiny.weights_sha256(tiny.build_model("small", 266, seed=1))
    assert a == b != c


def test_saved_weights_hash_matches_marker(saved):
    from transformers import AutoModelForCausalLM

    path, info = saved
    assert info["weights_sha256"] == tiny.weights_sha256(AutoModelForCausalLM.from_pretrained(path))
    assert info["weights_sha256"] == tiny.weights_sha256(tiny.build_model("small", info["vocab_size"], 0))


@pytest.mark.parametrize(("size", "low", "high"), [("small", 0.8e6, 1.5e6), ("large", 2e6, 3e6)])
def test_build_model_param_counts(size, low, high):
    model = tiny.build_model(size, 266, seed=0)
    assert low <= model.num_parameters() <= high
    assert model.config.tie_word_embeddings


def test_large_is_at_least_twice_small():
    small, large = (tiny.build_model(s, 266, seed=0).num_parameters() for s in ("small", "large"))
    assert large >= 2 * small


def test_build_model_unknown_size_lists_sizes():
    with pytest.raises(ValueError, match=r"unknown tiny model size 'huge'.*large.*small"):
        tiny.build_model("huge", 266, seed=0)


def test_cli_build_tiny_writes_marker(tmp_path, capsys):
    out, marker = tmp_path / "init", tmp_path / "init.json"
    rc = cli.main(["build-tiny", "--size", "small", "--out-dir", str(out), "--marker", str(marker)])
    assert rc == 0
    data = json.loads(marker.read_text())
    assert {"path", "size", "params", "weights_sha256", "provenance", "config"} <= set(data)
    assert data["path"] == str(out) and data["size"] == "small" and data["config"] == {"seed": 0}
    assert (out / "model.safetensors").is_file() and (out / "tokenizer.json").is_file()

    rc = cli.main(["build-tiny", "--size", "huge", "--out-dir", str(out), "--marker", str(marker)])
    assert rc == 2
    assert "known: ['large', 'small']" in capsys.readouterr().err
