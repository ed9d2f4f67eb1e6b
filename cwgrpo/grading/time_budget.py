"""The one time budget for grading one answer (CPU time) and for one call of a reward (wall-clock time).

Used by ``cwgrpo.grading.scoring`` and ``cwgrpo.grading.reward_guard``. Main thread only (signals reach a
process's main thread).

Two clocks. A grade must not depend on how busy the machine is, so grading counts the main thread's own
CPU time (``clock="cpu"``): an answer that takes 0.3 s of CPU takes 0.3 s on an idle machine and under any
load, though its wall time grows with the load. A user's reward may wait on I/O (a server, a file), which
costs no CPU, so its budget counts wall-clock time (``clock="wall"``); running out stops the run with an
error rather than changing a verdict.

Two timers, because each misses a case. A process has one ``signal.alarm``/``setitimer`` timer, and
libraries use it for their own timeouts: math-verify 0.9's ``parse``/``verify`` arm ``signal.alarm`` and,
when they return, switch it off (``alarm(0)``), so a budget kept there alone stopped working once a reward
had called them. So a watchdog thread also keeps the deadlines and, when one passes, sends ``SIGNAL`` (a
real-time signal nobody else arms, its handler installed once and never removed) to the main thread. The
thread needs the GIL, which C code that checks for signals but never releases the GIL denies it (Python's
big-integer power); a process timer armed for the earliest deadline while a budget of its clock is active
reaches that code (``ITIMER_REAL``/SIGALRM for wall-clock budgets, ``ITIMER_PROF``/SIGPROF for CPU budgets:
the process's CPU time is at least its main thread's, so it never fires late). The watchdog waits at most
the time a budget has left: one thread's CPU time never runs faster than the wall clock. Both signals run one handler, which raises ``OutOfTime`` for a budget
past its deadline and does nothing otherwise; both interrupt a blocking call (``time.sleep``, a read).

Why raise again: one raise is not enough. ``OutOfTime`` is a ``BaseException`` so ``except Exception`` does
not catch it, but code that catches ``BaseException`` (parsers do), or a signal landing in a ``__del__``
(where Python prints and drops the exception), swallows it; so it is raised again every ``REFIRE_S`` until
the block ends, and the block counts as expired (``TimeBudget.expired``) even if it then returned.

Budgets nest: an outer budget that runs out while an inner one is active unwinds through the inner one
(``OutOfTime.budget`` names the budget that ran out; each budget suppresses only its own).

Not covered: one C call that holds the GIL and never checks for signals (``sum(range(10**11))``, a huge
big-integer power) cannot be interrupted by any in-process timer; ``cwgrpo.grading.reward_guard`` stops the
process instead, and only running such code in another process could bound it.
"""

from __future__ import annotations

import math
import os
import signal
import threading
import time
from types import TracebackType

MAX_SECONDS = 1e7  # about 116 days: the process timers take no more (setitimer overflows)
REFIRE_S = 0.2  # after the budget, the timeout is raised again this often until the block ends
# A real-time signal of our own (Linux); elsewhere SIGUSR2. Never SIGALRM: math-verify re-arms and clears it.
SIGNAL = signal.SIGRTMIN + 2 if hasattr(signal, "SIGRTMIN") else signal.SIGUSR2


class OutOfTime(BaseException):
    """Raised in the block of a budget that ran out; a BaseException so ``except Exception`` cannot eat it."""

    def __init__(self, budget: TimeBudget) -> None:
        what = "of CPU time" if budget.clock == "cpu" else "of wall-clock time"
        super().__init__(f"out of time: the block ran past its budget of {budget.seconds:g} s {what}")
        self.budget = budget


CLOCKS = ("cpu", "wall")


def main_thread_cpu_time() -> float:
    """Seconds of CPU the process's main thread has used, read from any thread (the process's CPU time
    where a thread's own clock cannot be read)."""
    try:
        return time.clock_gettime(time.pthread_getcpuclockid(threading.main_thread().ident))
    except (AttributeError, OSError):
        return time.process_time()


class TimeBudget:
    """``with TimeBudget(seconds, clock) as budget:`` raises ``OutOfTime`` in the block once ``seconds``
    have passed on ``clock`` (``"cpu"``: the main thread's CPU time; ``"wall"``: wall-clock time), and again
    every ``REFIRE_S`` until it ends; the budget's own ``OutOfTime`` does not leave the block. Afterwards
    ``budget.expired`` says whether it ran out."""

    def __init__(self, seconds: float, clock: str) -> None:
        if isinstance(seconds, bool) or not isinstance(seconds, (int, float)) or not seconds > 0:
            raise ValueError(f"a time budget must be a number of seconds > 0, got {seconds!r}")
        if not math.isfinite(seconds) or seconds > MAX_SECONDS:
            raise ValueError(f"a time budget must be finite and at most {MAX_SECONDS:g} s, got {seconds!r}")
        if clock not in CLOCKS:
            raise ValueError(f"a time budget's clock is one of {list(CLOCKS)}, got {clock!r}")
        self.seconds = float(seconds)
        self.clock = clock
        self.now = main_thread_cpu_time if clock == "cpu" else time.monotonic
        self.deadline = math.inf
        self.expired = False
        self.active = False

    def __enter__(self) -> TimeBudget:
        if threading.current_thread() is not threading.main_thread():
            raise RuntimeError("a time budget works in a process's main thread only (it needs a signal)")
        _watchdog.add(self)
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> bool:
        self.active = False  # from here the handler never raises for this budget
        while True:
            try:
                _watchdog.remove(self)
                break
            except OutOfTime:  # an outer budget's refire landed in the clean-up: clean up, it comes again
                continue
        return isinstance(exc, OutOfTime) and exc.budget is self


# Per clock, the process timer that backs the watchdog and its signal.
_TIMERS = {"wall": (signal.ITIMER_REAL, signal.SIGALRM), "cpu": (signal.ITIMER_PROF, signal.SIGPROF)}


class _Watchdog:
    """The active budgets (outermost first) and the thread that signals the main thread once one is due."""

    def __init__(self) -> None:
        self.budgets: list[TimeBudget] = []
        self.cond = threading.Condition(threading.Lock())
        self.thread: threading.Thread | None = None
        self.installed = False
        self.changing = False  # the main thread is editing ``budgets``: the handler waits for the refire
        self.previous: dict[int, object] = {}  # a timer's signal -> its handler before our budgets

    def add(self, budget: TimeBudget) -> None:
        if not self.installed:
            signal.signal(SIGNAL, self.on_signal)  # kept for the process's life: a late signal is harmless
            self.installed = True
        if self.thread is None or not self.thread.is_alive():
            thread = threading.Thread(target=self.watch, name="cwgrpo-time-budget", daemon=True)
            try:
                thread.start()
            except RuntimeError as err:  # "can't start new thread": no memory for its stack
                raise MemoryError("no memory to start the time budget's watchdog thread") from err
            self.thread = thread
        self.changing = True
        try:
            with self.cond:
                budget.deadline = budget.now() + budget.seconds
                budget.active = True
                self.budgets.append(budget)
                try:
                    self.arm_timers()
                except BaseException:  # no budget may stay behind its failed start
                    self.budgets.remove(budget)
                    self.arm_timers()
                    raise
                self.cond.notify()
        finally:
            self.changing = False

    def remove(self, budget: TimeBudget) -> None:
        self.changing = True
        try:
            with self.cond:
                if budget in self.budgets:
                    self.budgets.remove(budget)
                self.cond.notify()
                self.arm_timers()
        finally:
            self.changing = False

    def arm_timers(self) -> None:
        """Per clock, the process's timer for the earliest deadline, its signal to ``on_signal`` while
        budgets of that clock are active (the previous handler back after the last): it interrupts C code
        that checks for signals but never lets the watchdog thread run (Python's big-integer power)."""
        for clock, (timer, signum) in _TIMERS.items():
            budgets = [b for b in self.budgets if b.clock == clock]
            if not budgets:
                if signum in self.previous:
                    signal.setitimer(timer, 0)  # first: no signal comes after the handler goes
                    signal.signal(signum, self.previous.pop(signum) or signal.SIG_DFL)
                continue
            if signum not in self.previous:
                self.previous[signum] = signal.signal(signum, self.on_signal)
            due = min(b.deadline - b.now() for b in budgets)
            signal.setitimer(timer, max(due, 0.001), REFIRE_S)

    def on_signal(self, signum: int, frame: object) -> None:
        """In the main thread: raise for the outermost active budget that is past its deadline."""
        if self.changing:
            return
        for budget in list(self.budgets):
            if budget.active and budget.now() >= budget.deadline:
                budget.expired = True
                raise OutOfTime(budget)

    def watch(self) -> None:
        main = threading.main_thread().ident
        with self.cond:
            while True:
                if not self.budgets:
                    self.cond.wait()
                    continue
                wait = min(b.deadline - b.now() for b in self.budgets)
                if wait > 0:
                    self.cond.wait(wait)
                    continue
                assert main is not None
                signal.pthread_kill(main, SIGNAL)
                self.cond.wait(REFIRE_S)

    def after_fork_in_child(self) -> None:
        """A forked child has no watchdog thread and none of its parent's blocks."""
        self.budgets = []
        self.cond = threading.Condition(threading.Lock())
        self.thread = None
        self.changing = False
        self.previous = {}


_watchdog = _Watchdog()
os.register_at_fork(after_in_child=_watchdog.after_fork_in_child)
