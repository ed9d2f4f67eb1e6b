"""One wall-clock budget for a block of code, by ``signal.setitimer`` (so: a process's main thread only).

The grader (``cwgrpo.scoring``) runs the whole grading of one answer under one budget: math-verify's own
timeouts use ``signal.alarm`` with whole seconds per call, so one answer could take several of them.
"""

from __future__ import annotations

import contextlib
import signal
from collections.abc import Iterator

REFIRE_S = 0.2  # after the budget, the timeout is raised again this often until the block ends


class OutOfTime(BaseException):
    """Raised by the budget timer; a BaseException so math-verify's ``except Exception`` cannot eat it."""


@contextlib.contextmanager
def time_budget(seconds: float) -> Iterator[None]:
    """Raise ``OutOfTime`` in the block after ``seconds``, and again every ``REFIRE_S`` until the block
    ends (main thread only).

    One raise is not enough: parsing code that catches ``BaseException`` (or a signal landing in a
    ``__del__``, where Python prints and drops the exception) swallows it, and the work then runs to its
    end: 3000 nested parentheses took 40-60 s instead of 0.5 s in some runs of the test suite. The
    handler raises only while the budget is armed, and the cleanup retries if a last one lands in it, so
    no alarm outlives the block.
    """
    armed = [True]

    def _fire(signum, frame):
        if armed[0]:
            raise OutOfTime()

    previous = signal.signal(signal.SIGALRM, _fire)
    signal.setitimer(signal.ITIMER_REAL, seconds, REFIRE_S)
    try:
        yield
    finally:
        while True:
            try:
                armed[0] = False
                signal.setitimer(signal.ITIMER_REAL, 0)
                signal.signal(signal.SIGALRM, previous)
                break
            except OutOfTime:  # fired between the block's end and the disarming: clean up again
                continue
