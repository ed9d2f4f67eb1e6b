"""The rows a training run's rewards are called with (``cwgrpo.train.rows``): the user's own columns by the
user's names beside the package's ``answer``; names TRL's call uses keep TRL's meaning."""

from __future__ import annotations

from cwgrpo.train.rows import training_rows

OWN = {"id": "m-0", "problem": "1+1", "answer": "2", "source": "file:x",
       "columns": {"q": "1+1", "ans": "2", "prompt": "1+1", "completions": "x", "level": "3"}}  # fmt: skip


def test_a_users_columns_reach_the_rewards_under_their_own_names():
    [row] = training_rows([OWN], "tiny", "Be brief.")
    assert row == {
        "prompt": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "1+1"}],
        "answer": "2",
        "ans": "2",
        "level": "3",
        "q": "1+1",
    }  # `prompt` and `completions` are TRL's own keywords: not passed as columns


def test_registry_records_make_the_rows_they_always_made():
    record = {"id": "a-0", "problem": "1+1", "answer": "2", "source": "synthetic:a"}
    assert training_rows([record], "tiny", None) == [
        {"prompt": [{"role": "user", "content": "1+1"}], "answer": "2"}
    ]
