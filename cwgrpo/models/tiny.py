"""Offline tiny tokenizer and Qwen2-shaped causal LMs for the tiny preset (``cwgrpo build-tiny``).

The tokenizer is byte-level (one token per byte, plus the chat format's special tokens): transformers
rebuilds a qwen2 folder's tokenizer as a byte-level ``Qwen2Tokenizer``, which would drop a ``WordLevel``
vocabulary's spaces and newlines.
"""

from __future__ import annotations

import argparse
import dataclasses
import hashlib
import logging
import os
from dataclasses import field
from pathlib import Path
from typing import Any

from cwgrpo.configs import add_config_arguments, config_from_args, config_hash, describe_options

logger = logging.getLogger(__name__)


PAD, BOS, EOS, UNK = "<|pad|>", "<|bos|>", "<|end|>", "<|unk|>"
SPECIAL_TOKENS: tuple[str, ...] = (PAD, BOS, EOS, UNK, "<|system|>", "<|user|>", "<|assistant|>")
ADDED_TOKENS: tuple[str, ...] = ("<think>", "</think>", "\\boxed{")

CHAT_TEMPLATE = (
    "{{- bos_token -}}"
    "{%- for message in messages -%}"
    "{%- if message['role'] not in ['system', 'user', 'assistant'] -%}"
    "{{- raise_exception('unknown chat role: ' + message['role']) -}}"
    "{%- endif -%}"
    "{{- '<|' + message['role'] + '|>' + message['content'] + '<|end|>' -}}"
    "{%- endfor -%}"
    "{%- if add_generation_prompt -%}{{- '<|assistant|>' -}}{%- endif -%}"
)

# name -> Qwen2Config overrides (~1.1M and ~2.4M parameters); sized to the tiny preset's CPU time
# (docs/tiny-calibration.md).
SIZES: dict[str, dict[str, int]] = {
    "small": {
        "hidden_size": 128,
        "intermediate_size": 512,
        "num_hidden_layers": 4,
        "num_attention_heads": 4,
        "num_key_value_heads": 4,
    },
    "large": {
        "hidden_size": 192,
        "intermediate_size": 768,
        "num_hidden_layers": 4,
        "num_attention_heads": 6,
        "num_key_value_heads": 6,
    },
}
MAX_POSITIONS = 256  # longest tiny sequence: level-5 prompt (21 tokens) + worked solution (54)


def build_tokenizer(add_bos: bool = False) -> Any:
    """The tiny tokenizer (left padding, chat template; ``add_bos``: a BOS, as R1-Distill's adds)."""
    from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers, processors
    from transformers import PreTrainedTokenizerFast
    from transformers.convert_slow_tokenizer import bytes_to_unicode  # pre_tokenizers.ByteLevel's map

    byte_chars = bytes_to_unicode()
    vocab = {tok: i for i, tok in enumerate([*SPECIAL_TOKENS, *(byte_chars[b] for b in range(256))])}
    backend = Tokenizer(models.BPE(vocab=vocab, merges=[], fuse_unk=False))
    backend.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)
    backend.decoder = decoders.ByteLevel()
    backend.add_special_tokens([AddedToken(t, special=True, normalized=False) for t in SPECIAL_TOKENS])
    backend.add_tokens([AddedToken(t, special=False, normalized=False) for t in ADDED_TOKENS])
    if add_bos:
        bos = [(BOS, vocab[BOS])]
        backend.post_processor = processors.TemplateProcessing(
            single=f"{BOS} $A", pair=f"{BOS} $A {BOS} $B", special_tokens=bos
        )
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=backend,
        bos_token=BOS,
        eos_token=EOS,
        pad_token=PAD,
        unk_token=UNK,
        padding_side="left",
        clean_up_tokenization_spaces=False,
        model_max_length=MAX_POSITIONS,
    )
    tokenizer.chat_template = CHAT_TEMPLATE
    return tokenizer


def load_tokenizer(path: str | os.PathLike) -> Any:
    """Load a saved tiny tokenizer (``AutoTokenizer`` gives an equivalent ``Qwen2Tokenizer``)."""
    from transformers import PreTrainedTokenizerFast

    return PreTrainedTokenizerFast.from_pretrained(str(path))


def build_model(size: str, vocab_size: int, seed: int) -> Any:
    """A freshly initialised ``Qwen2ForCausalLM`` of a named size; same seed -> same weights."""
    if size not in SIZES:
        raise ValueError(f"unknown tiny model size {size!r}; known: {sorted(SIZES)}")
    import torch
    from transformers import Qwen2Config, Qwen2ForCausalLM

    config = Qwen2Config(
        vocab_size=vocab_size,
        max_position_embeddings=MAX_POSITIONS,
        tie_word_embeddings=True,
        pad_token_id=SPECIAL_TOKENS.index(PAD),
        bos_token_id=SPECIAL_TOKENS.index(BOS),
        eos_token_id=SPECIAL_TOKENS.index(EOS),
        **SIZES[size],
    )
    with torch.random.fork_rng(devices=[]):  # leave the caller's global RNG untouched
        torch.manual_seed(seed)
        return Qwen2ForCausalLM(config)  # its generation_config takes pad/bos/eos from the config


def weights_sha256(model: Any) -> str:
    """SHA-256 over the state dict (names, dtypes, shapes, bytes) in sorted name order."""
    import torch

    digest = hashlib.sha256()
    for name, tensor in sorted(model.state_dict().items()):
        t = tensor.detach().cpu().contiguous()
        digest.update(f"{name}|{t.dtype}|{tuple(t.shape)}|".encode())
        digest.update(t.view(-1).view(dtype=torch.uint8).numpy().tobytes())
    return digest.hexdigest()


def save_pretrained_atomic(out_dir: str | os.PathLike, model: Any, tokenizer: Any) -> None:
    """Save model and tokenizer as one whole folder at ``out_dir`` (``cwgrpo.io.owned_dir``)."""
    from cwgrpo.io import owned_dir

    with owned_dir(out_dir) as tmp:
        model.save_pretrained(tmp)
        tokenizer.save_pretrained(tmp)


def save_tiny(out_dir: str | os.PathLike, size: str, seed: int) -> dict[str, Any]:
    """Build the tokenizer and a ``size`` model from ``seed`` and save both into ``out_dir``."""
    tokenizer = build_tokenizer()
    model = build_model(size, vocab_size=len(tokenizer), seed=seed)
    save_pretrained_atomic(out_dir, model, tokenizer)
    info = {
        "path": str(out_dir),
        "size": size,
        "params": model.num_parameters(),  # tied embeddings counted once
        "vocab_size": len(tokenizer),
        "weights_sha256": weights_sha256(model),
    }
    logger.info("tiny %s model (%d parameters, seed %d) saved to %s", size, info["params"], seed, out_dir)
    return info


@dataclasses.dataclass
class TinyConfig:
    """Options of ``cwgrpo build-tiny``."""

    seed: int = field(default=0, metadata={"help": "seed of the weight initialisation"})


OUTPUTS = ("out_dir", "marker")  # every other path argument is read (cwgrpo.cli)


def configure_parser(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--size", required=True, help=f"model size, one of {sorted(SIZES)}")
    parser.add_argument(
        "--out-dir", required=True, type=Path, help="folder to write the model and tokenizer to"
    )
    parser.add_argument("--marker", required=True, type=Path, help="marker JSON, written after the model")
    add_config_arguments(parser)
    parser.epilog = describe_options(TinyConfig)


def run(args: argparse.Namespace) -> int:
    from cwgrpo.io import check_replaceable_dir, write_json
    from cwgrpo.provenance import provenance

    cfg = config_from_args(TinyConfig, args)
    check_replaceable_dir(args.out_dir)
    info = save_tiny(args.out_dir, args.size, cfg.seed)
    config = dataclasses.asdict(cfg)
    write_json(
        args.marker, {**info, "config": config, "provenance": provenance(config_hash=config_hash(config))}
    )
    return 0
