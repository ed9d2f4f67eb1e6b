"""cwgrpo.seeding: one call makes every random source of a command repeat, and passes the seed on to the
string hashes of the interpreters started after it."""

from __future__ import annotations

import os
import random
import subprocess
import sys

import numpy as np
import torch

from cwgrpo.seeding import seed_everything


def _draws() -> tuple:
    return random.random(), float(np.random.rand()), torch.rand(3).tolist()


def test_the_same_seed_repeats_python_numpy_and_torch_and_another_differs(monkeypatch):
    monkeypatch.setenv("PYTHONHASHSEED", "0")  # restored after the test
    seed_everything(3)
    first = _draws()
    seed_everything(3)
    assert _draws() == first
    seed_everything(4)
    assert _draws() != first


def test_child_interpreters_hash_strings_by_the_seed(monkeypatch):
    monkeypatch.setenv("PYTHONHASHSEED", "0")
    code = "print(hash('cwgrpo'))"
    hashes = []
    for seed in (5, 5, 6):
        seed_everything(seed)
        assert os.environ["PYTHONHASHSEED"] == str(seed)
        hashes.append(subprocess.run([sys.executable, "-c", code], capture_output=True, text=True).stdout)
    assert hashes[0] == hashes[1] != hashes[2]
