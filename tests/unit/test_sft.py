"""cwgrpo.models.sft: the warm-up's prompt and worked solution, its padded batches and its epoch order.
(The warm-up run itself, and its dev accuracy, is tests/e2e/test_sft.py.)"""

from __future__ import annotations

import pytest
import torch

from cwgrpo.models.sft import _encode, _epoch_batches, _pack, render_prompt
from cwgrpo.models.tiny import build_tokenizer


def test_prompt_and_completion_are_the_documented_text():
    tokenizer = build_tokenizer()
    assert render_prompt(tokenizer, "43+25") == "<|bos|><|user|>43+25<|end|><|assistant|>"
    [(prompt, completion)] = _encode(tokenizer, [{"id": "a", "problem": "43+25", "answer": "68"}], "tiny")
    assert tokenizer.decode(prompt) == "<|bos|><|user|>43+25<|end|><|assistant|>"
    assert tokenizer.decode(completion) == "<think>\n43+25=68\n</think>\n\\boxed{68}<|end|>"
    assert completion[-1] == tokenizer.eos_token_id


def test_a_record_whose_answer_disagrees_with_its_solution_is_refused():
    with pytest.raises(ValueError, match="record a: answer '69' disagrees"):
        _encode(build_tokenizer(), [{"id": "a", "problem": "43+25", "answer": "69"}], "tiny")


def test_pack_pads_right_and_labels_only_the_completion():
    ids, mask, labels = _pack([([1, 2], [3]), ([4], [5, 6, 7])], pad_id=0)
    assert ids.tolist() == [[1, 2, 3, 0], [4, 5, 6, 7]]
    assert mask.tolist() == [[1, 1, 1, 0], [1, 1, 1, 1]]
    assert labels.tolist() == [[-100, -100, 3, -100], [-100, 5, 6, 7]]


def test_an_epoch_is_full_batches_of_distinct_rows_sorted_within_each_run():
    lengths = torch.tensor([5, 1, 4, 2, 8, 3, 7, 6, 9, 0, 11])
    batches = _epoch_batches(lengths, batch_size=2, grouping=2, gen=torch.Generator().manual_seed(0))
    rows = torch.cat(batches).tolist()
    assert len(batches) == 5 and all(len(b) == 2 for b in batches)  # 11 rows: the last one is dropped
    assert len(set(rows)) == 10
    assert all(lengths[b[0]] <= lengths[b[1]] for b in batches)  # runs are sorted by length
    again = _epoch_batches(lengths, batch_size=2, grouping=2, gen=torch.Generator().manual_seed(0))
    assert [b.tolist() for b in again] == [b.tolist() for b in batches]
