"""Pool workers that die with the process that started their pool, even after a ``kill -9``.

Pool workers die with the process that started their pool, even when it is killed (``kill -9``) and
has no chance to stop them. (Commands started with ``subprocess``: ``cwgrpo.launch.workers.die_with_parent``.)

``pool_options()`` gives every worker of a ``ProcessPoolExecutor`` (``cwgrpo.grading.scoring``'s grading pools) an
initializer that watches the starting process (a pidfd on Linux, else a poll of its pid) and exits when it
is gone. A pool's workers otherwise wait for work for ever: they hold both ends of their task queue, and
the forkserver and multiprocessing's resource tracker then live on because the workers hold their pipes.
Once the workers exit, the forkserver and the resource tracker see end-of-file and exit too. The tie is
to the process, not to a thread (``PR_SET_PDEATHSIG`` follows the thread that forked, and a pool may be
started from a thread that ends before it).
"""

from __future__ import annotations

import os
import select
import threading
import time
from typing import Any

POLL_S = 1.0  # without pidfds: how often a worker checks that the starting process is alive


def _wait_for_exit(pid: int) -> None:
    """Return once process ``pid`` has ended."""
    try:
        fd = os.pidfd_open(pid)
    except ProcessLookupError:
        return
    except (AttributeError, OSError):  # no pidfds (not Linux, or a kernel before 5.3): poll
        while True:
            try:
                os.kill(pid, 0)
            except ProcessLookupError:
                return
            except PermissionError:
                pass
            time.sleep(POLL_S)
    try:
        select.select([fd], [], [])  # readable once the process has ended
    finally:
        os.close(fd)


def _exit_when_gone(pid: int) -> None:
    _wait_for_exit(pid)
    os._exit(1)  # no clean-up: whoever would read this worker's results is gone


def watch_parent(pid: int) -> None:
    """Pool initializer: exit this worker once process ``pid`` (the pool's owner) has ended. A worker
    without the memory to start the watching thread exits at once (its pool reports a broken pool)."""
    try:
        threading.Thread(target=_exit_when_gone, args=(pid,), name="cwgrpo-watch-owner", daemon=True).start()
    except RuntimeError:  # "can't start new thread": no memory for its stack
        os._exit(1)


def pool_options() -> dict[str, Any]:
    """``ProcessPoolExecutor`` keyword arguments that tie its workers' lives to this process."""
    return {"initializer": watch_parent, "initargs": (os.getpid(),)}
