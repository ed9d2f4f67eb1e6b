"""What the grading pools' forkserver imports once before it forks a worker: the grader and math-verify.

The pools are ``cwgrpo.grading.scoring``'s. A server without the memory to import them exits without a
traceback; the pool then reports the lack of memory in one line (``scoring.grade_many``)."""

from __future__ import annotations

import os

try:
    import math_verify  # noqa: F401

    import cwgrpo.grading.scoring  # noqa: F401
except MemoryError:
    os._exit(1)
