"""Progress on stderr — a bar redrawn in place on a terminal, plain lines at a bounded rate elsewhere
— and running a list of Dask tasks with it.

:func:`compute_tasks` runs ``dask.delayed`` tasks on whatever Dask would use
(the current ``distributed.Client`` if there is one, the threaded scheduler
otherwise, or always local threads with ``local=True``) and advances the bar
by each task's weight as it finishes.  On a cluster it waits through
:func:`dsvm.blocks.gather`: no worker left, or workers paused for lack of
memory, end the wait with a clear error instead of a silent hang.
"""

from __future__ import annotations

import logging
import sys
import threading
import time
from collections.abc import Sequence
from typing import Any, TextIO

import dask
from dask.callbacks import Callback

from ..blocks import active_client, gather

__all__ = ["ProgressBar", "compute_tasks", "LINE_STEP", "LINE_SECONDS"]

logger = logging.getLogger("dsvm.progress")

# Away from a terminal (a log file, a pipe, a batch job's output file) one line per this share of the
# work, or after this many seconds without one, whichever comes first.
LINE_STEP = 0.10
LINE_SECONDS = 30.0


def _is_terminal(stream) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError, OSError):  # no isatty, or a closed stream
        return False


def _human(n: float, unit: str) -> str:
    if unit != "B":
        return f"{n:,.0f}"
    for suffix in ("B", "kB", "MB", "GB", "TB"):
        if abs(n) < 1000 or suffix == "TB":
            return f"{n:.1f} {suffix}" if suffix != "B" else f"{n:.0f} B"
        n /= 1000
    return f"{n:.1f} TB"  # pragma: no cover


class ProgressBar:
    """``label [#####.....]  45%  12.3 MB/27.0 MB  35.2 MB/s`` redrawn in place on a terminal.

    When ``stream`` is not a terminal, carriage returns would pile up in the
    file: the progress is written as plain lines instead
    (``label: 45%  12.3 MB/27.0 MB  35.2 MB/s``), one per :data:`LINE_STEP`
    of the work or after :data:`LINE_SECONDS` without one, and one at the
    end.  They go to the ``dsvm.progress`` logger when logging shows its INFO
    records (the ``dsvm`` command), else to ``stream``.

    Parameters
    ----------
    total : float
        Amount of work (bytes or rows).
    label : str
        Text in front of the bar.
    unit : str
        ``"B"`` for bytes (shown in kB/MB/GB with a rate), anything else is a count.
    enabled : bool
        With ``False`` every method is a no-op.
    stream : file, optional
        Defaults to ``sys.stderr``.
    """

    width = 30

    def __init__(self, total: float, label: str = "", unit: str = "B", enabled: bool = True,
                 stream: TextIO | None = None):
        self.total = max(float(total), 0.0)
        self.label = label
        self.unit = unit
        self.enabled = enabled
        self.stream = stream if stream is not None else sys.stderr
        self.done = 0.0
        self.interactive = _is_terminal(self.stream)
        self._start = time.perf_counter()
        self._last = 0.0
        self._steps_shown = 0  # whole LINE_STEPs of the work reported by plain lines
        self._shown = -1.0  # the fraction of the last plain line
        self._lock = threading.Lock()
        if enabled and self.interactive:
            self._draw(force=True)

    def update(self, amount: float) -> None:
        if not self.enabled:
            return
        with self._lock:
            self.done += amount
            self._draw()

    def _fraction(self) -> float:
        return min(self.done / self.total, 1.0) if self.total else 1.0

    def _status(self, now: float) -> str:
        """``45%  12.3 MB/27.0 MB  35.2 MB/s`` (the rate for bytes only)."""
        elapsed = max(now - self._start, 1e-9)
        rate = f"  {_human(self.done / elapsed, self.unit)}/s" if self.unit == "B" else ""
        return f"{self._fraction():4.0%}  {_human(self.done, self.unit)}/{_human(self.total, self.unit)}{rate}"

    def _draw(self, force: bool = False) -> None:
        now = time.perf_counter()
        if not self.interactive:
            self._line(now, force)
            return
        if not force and now - self._last < 0.1:
            return
        self._last = now
        filled = int(round(self._fraction() * self.width))
        bar = "#" * filled + "." * (self.width - filled)
        self.stream.write(f"\r{self.label} [{bar}] {self._status(now)}   ")
        self.stream.flush()

    def _line(self, now: float, force: bool) -> None:
        """A plain line when the work crossed the next step, after a long silence, or when ``force``d."""
        frac = self._fraction()
        steps = int(frac / LINE_STEP + 1e-9)
        quiet_for = now - max(self._last, self._start)
        if frac == self._shown or not (force or steps > self._steps_shown or quiet_for >= LINE_SECONDS):
            return
        self._last, self._shown, self._steps_shown = now, frac, steps
        text = f"{self.label}: {self._status(now).strip()}"
        if logger.isEnabledFor(logging.INFO) and logger.hasHandlers():
            logger.info("%s", text)
        else:
            self.stream.write(text + "\n")
            self.stream.flush()

    def close(self) -> None:
        if not self.enabled:
            return
        with self._lock:
            if self.interactive:
                self._draw(force=True)
                self.stream.write("\n")
                self.stream.flush()
            else:
                self._line(time.perf_counter(), force=True)
            self.enabled = False

    def __enter__(self) -> "ProgressBar":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def compute_tasks(
    tasks: Sequence[Any],
    *,
    weights: Sequence[float] | None = None,
    bar: ProgressBar | None = None,
    local: bool = False,
) -> list[Any]:
    """Compute ``dask.delayed`` tasks, in order; advance ``bar`` by ``weights``.

    ``local=True`` runs them on threads of this process even if a cluster is
    active (for tasks that use in-memory data).
    """

    tasks = list(tasks)
    if not tasks:
        return []
    weights = list(weights) if weights is not None else [1.0] * len(tasks)
    client = None if local else active_client()
    if client is not None:
        futures = client.compute(tasks)
        on_done = None
        if bar is not None and bar.enabled:
            index = {f.key: i for i, f in enumerate(futures)}

            def on_done(fut):
                bar.update(weights[index[fut.key]])
        return gather(client, futures, on_done=on_done)
    scheduler = "threads" if local else None
    if bar is None or not bar.enabled:
        return list(dask.compute(*tasks, scheduler=scheduler))

    by_key = {t.key: w for t, w in zip(tasks, weights)}

    def _posttask(key, result, dsk, state, worker_id):
        w = by_key.get(key)
        if w:
            bar.update(w)

    with Callback(posttask=_posttask):
        return list(dask.compute(*tasks, scheduler=scheduler))
