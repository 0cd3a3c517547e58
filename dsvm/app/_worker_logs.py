"""What the worker processes of a cluster dsvm starts print: one line per warning, no task failures.

A worker process gets its logging from ``dask.config`` when it imports
distributed, before dsvm can say anything, and Python's warnings there keep
their two-line form (the file and the source line of the code that warned).
So every failed task was printed twice: distributed's ``Compute Failed`` block
with the task's traceback on the worker, then dsvm's one error line when the
exception reached the client.  :class:`WorkerLogs`, a worker plugin (it also
reaches workers that join or restart later), makes the worker processes

* drop distributed's ``Compute Failed`` records (the client reports the error;
  shown at the DEBUG log level, where a user asks for everything), and
* show a warning as one line of the ``dsvm.worker`` logger, its category and
  text, as the command shows its own warnings.

Workers inside the client's own process (``processes=False``) are left alone:
they share the command's logging and ``warnings.showwarning``.
"""

from __future__ import annotations

import logging
import os
import sys
import warnings

from distributed.diagnostics.plugin import WorkerPlugin

__all__ = ["WorkerLogs", "WORKER_LOGGER", "not_a_task_failure"]

#: the logger a worker's warnings are shown on
WORKER_LOGGER = "dsvm.worker"
LOG_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"


def not_a_task_failure(record: logging.LogRecord) -> bool:
    """False for distributed's report of a failed task (``Compute Failed``), which the client reports too."""
    return not str(record.msg).startswith("Compute Failed")


class WorkerLogs(WorkerPlugin):
    """The logging of the worker processes of a cluster dsvm starts (module docstring).

    Parameters
    ----------
    level
        The command's log level: warnings are shown from ``max(level, WARNING)``
        up, task failures only at ``DEBUG``.
    client_pid
        The process of the client: a worker there is left as it is.
    """

    name = "dsvm-worker-logs"
    idempotent = False

    def __init__(self, level: int, client_pid: int):
        self.level = level
        self.client_pid = client_pid

    def setup(self, worker) -> None:
        if os.getpid() == self.client_pid:
            return
        if self.level > logging.DEBUG:
            logging.getLogger("distributed.worker").addFilter(not_a_task_failure)
        log = logging.getLogger(WORKER_LOGGER)
        if not log.handlers:
            handler = logging.StreamHandler(sys.stderr)
            handler.setFormatter(logging.Formatter(LOG_FORMAT, datefmt="%H:%M:%S"))
            log.addHandler(handler)
        log.setLevel(max(self.level, logging.WARNING))
        log.propagate = False
        warnings.showwarning = _warning_line


def _warning_line(message, category, filename, lineno, file=None, line=None) -> None:
    """A worker's ``warnings.showwarning``: the warning as one log line, its category and its text."""
    logging.getLogger(WORKER_LOGGER).warning("%s: %s", category.__name__, " ".join(str(message).split()))
