"""SIGTERM takes the same way out as an exception, so that cleanup runs.

By default SIGTERM ends a Python process at once: no ``finally`` block, no
context manager exit, so a fit killed by a batch system's time limit would
leave its scratch feature store and temporary folders behind.  Inside
:func:`sigterm_cleanup` SIGTERM raises :class:`Terminated` in the main thread
instead: everything on the way out is cleaned as for Ctrl-C, and the process
then exits with status 143 (128 + SIGTERM), as a shell reports a SIGTERM kill.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["Terminated", "sigterm_cleanup"]


class Terminated(SystemExit):
    """SIGTERM arrived (a ``SystemExit``: ``except Exception`` does not swallow it)."""


def _raise_terminated(signum, frame):
    # a second SIGTERM must not interrupt the cleanup the first one started
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    raise Terminated(128 + signum)


@contextmanager
def sigterm_cleanup() -> Iterator[None]:
    """Within the block, SIGTERM raises :class:`Terminated` in the main thread.

    Installed only in the main thread (Python delivers signals there) and
    only where SIGTERM has its default action: a handler someone else
    installed (or one of an enclosing block) is left alone.  The previous
    handler is restored on exit.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.getsignal(signal.SIGTERM)
    if previous is not signal.SIG_DFL:
        yield
        return
    signal.signal(signal.SIGTERM, _raise_terminated)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)
