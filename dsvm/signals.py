"""SIGTERM takes the same way out as an exception, so that cleanup runs; the command then ends within seconds.

By default SIGTERM ends a Python process at once: no ``finally`` block, no
context manager exit, so a fit killed by a batch system's time limit would
leave its scratch feature store and temporary folders behind.  Inside
:func:`sigterm_cleanup` SIGTERM raises :class:`Terminated` in the main thread
instead: everything on the way out is cleaned as for Ctrl-C, and the process
then exits with status 143 (128 + SIGTERM), as a shell reports a SIGTERM kill.

The way out may itself stall: the interpreter's exit waits for every
non-daemon thread, and distributed's scheduler materialises a submitted graph
in one (a dataset of 10^11 rows: minutes of CPU after the cleanup was done).
A batch system that sent SIGTERM waits a while and then kills the job anyway.
So the command (``deadline=True``) also gives the cleanup
:data:`SIGTERM_GRACE_SECONDS` from the signal on: past them, a daemon thread stops this process's child processes (the
local cluster's workers) and ends the process with status 143; ``dsvm clean``
removes what the cleanup did not reach.  A library caller, which may catch
:class:`Terminated` and go on, gets no deadline.
"""

from __future__ import annotations

import logging
import multiprocessing
import os
import signal
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager, suppress

__all__ = ["Terminated", "sigterm_cleanup", "SIGTERM_GRACE_SECONDS"]

logger = logging.getLogger(__name__)

#: seconds the command's cleanup gets after SIGTERM (a batch system's own grace is commonly 30 s)
SIGTERM_GRACE_SECONDS = 10.0


class Terminated(SystemExit):
    """SIGTERM arrived (a ``SystemExit``: ``except Exception`` does not swallow it)."""


def _terminating(deadline: bool):
    """The SIGTERM handler: raise :class:`Terminated`, with the process's deadline armed when ``deadline``."""
    def handler(signum, frame):
        # a second SIGTERM must not interrupt the cleanup the first one started
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        if deadline:
            threading.Thread(target=_exit_after, args=(SIGTERM_GRACE_SECONDS, 128 + signum),
                             name="dsvm-sigterm-deadline", daemon=True).start()
        raise Terminated(128 + signum)

    return handler


def _exit_after(seconds: float, status: int) -> None:
    """End the process with ``status`` in ``seconds``, unless it ended before (this thread is a daemon)."""
    threading.Event().wait(seconds)
    logger.warning("SIGTERM: the cleanup did not finish within %g s; stopping now (dsvm clean removes what is "
                   "left)", seconds)
    for child in multiprocessing.active_children():
        with suppress(Exception):  # gone already
            child.kill()
    for stream in (sys.stdout, sys.stderr):
        with suppress(Exception):  # closed, or its reader gone
            stream.flush()
    os._exit(status)


@contextmanager
def sigterm_cleanup(deadline: bool = False) -> Iterator[None]:
    """Within the block, SIGTERM raises :class:`Terminated` in the main thread.

    Installed only in the main thread (Python delivers signals there) and
    only where SIGTERM has its default action: a handler someone else
    installed (or one of an enclosing block) is left alone.  The previous
    handler is restored on exit.

    Parameters
    ----------
    deadline
        For a command whose process ends with it: the process exits with
        status 143 :data:`SIGTERM_GRACE_SECONDS` after the signal even if its
        way out has stalled (module docstring).
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.getsignal(signal.SIGTERM)
    if previous is not signal.SIG_DFL:
        yield
        return
    signal.signal(signal.SIGTERM, _terminating(deadline))
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)
