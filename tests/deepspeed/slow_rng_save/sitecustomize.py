"""Test-only (on PYTHONPATH in tests/deepspeed and tests/e2e): the training process of rank
``CWGRPO_TEST_SLOW_RNG_RANK`` (a single process is rank 0) saves its RNG state ``CWGRPO_TEST_SLOW_RNG_S``
seconds late, then through transformers' own ``Trainer._save_rng_state``. It widens the window between
DeepSpeed's save (which ends with a barrier) and that process's last file, in which the other process may
finish the checkpoint; and a single process's time between two checkpoints, in which a test stops it."""

import os

SLOW_RANK = os.environ.get("CWGRPO_TEST_SLOW_RNG_RANK")
if SLOW_RANK is not None and os.environ.get("RANK", "0") == SLOW_RANK:
    import time

    from transformers import Trainer

    _save_rng_state = Trainer._save_rng_state

    def _late(self, output_dir):
        time.sleep(float(os.environ.get("CWGRPO_TEST_SLOW_RNG_S", "4")))
        return _save_rng_state(self, output_dir)

    Trainer._save_rng_state = _late
