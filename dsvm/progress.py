"""Progress of long work: a bar redrawn in place on a terminal, a line per 10 % in a log.

:class:`ProgressBar` draws one bar.  A fit names its stages with
:func:`stage` ("features", "newton solve", ...); every pass over row blocks
in that stage (the blocks layer's reductions, spills and persists, on
threads or on a cluster) counts its finished blocks into a bar labelled with
the stage.  A pass that ends within :data:`PASS_DELAY` seconds shows nothing,
so only the long ones (the feature stage, the passes over data larger than
memory) speak.  Progress is off until it is turned on: the ``dsvm`` command
does (:func:`set_progress`, unless ``--quiet``, ``--no-progress`` or a log
level above INFO), a Python user calls ``dsvm.show_progress()``.
"""

from __future__ import annotations

import contextvars
import logging
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TextIO

__all__ = ["ProgressBar", "LINE_STEP", "LINE_SECONDS", "PASS_DELAY", "show_progress", "set_progress",
           "progress_shown", "stage", "pass_progress", "PassProgress"]

logger = logging.getLogger("dsvm.progress")

# Away from a terminal (a log file, a pipe, a batch job's output file) one line per this share of the
# work, or after this many seconds without one, whichever comes first.
LINE_STEP = 0.10
LINE_SECONDS = 30.0
# A pass over row blocks shows its bar only once it has run this long (short passes stay quiet).
PASS_DELAY = 3.0

_SHOWN = False
_UNDO: list = []  # how to take back what show_progress did to the dsvm logger, last first
_STAGE: contextvars.ContextVar[str | None] = contextvars.ContextVar("dsvm_progress_stage", default=None)


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
    """``label [#####.....]  45%  12.3 MB/27.0 MB  35.2 MB/s`` (or ``45%  9/20 blocks``) redrawn in place on a terminal.

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
    delay : float
        Seconds during which nothing is shown; work that ends sooner shows nothing at all.
    """

    width = 30

    def __init__(self, total: float, label: str = "", unit: str = "B", enabled: bool = True,
                 stream: TextIO | None = None, delay: float = 0.0):
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
        self._delay = float(delay)
        self._started = False  # drawn anything yet
        if enabled and self.interactive and not self._delay:
            self._draw(force=True)

    def update(self, amount: float) -> None:
        if not self.enabled:
            return
        with self._lock:
            self.done += amount
            self._draw()

    def tick(self) -> None:
        """Redraw without new work: the rate and, in a log, the line after :data:`LINE_SECONDS` of silence."""
        self.update(0.0)

    def _fraction(self) -> float:
        return min(self.done / self.total, 1.0) if self.total else 1.0

    def _status(self, now: float) -> str:
        """``45%  12.3 MB/27.0 MB  35.2 MB/s`` (the rate for bytes only)."""
        elapsed = max(now - self._start, 1e-9)
        rate = f"  {_human(self.done / elapsed, self.unit)}/s" if self.unit == "B" else ""
        count = f"{_human(self.done, self.unit)}/{_human(self.total, self.unit)}"
        return f"{self._fraction():4.0%}  {count}" + (rate if self.unit == "B" else f" {self.unit}")

    def _draw(self, force: bool = False) -> None:
        now = time.perf_counter()
        if now - self._start < self._delay:
            return
        self._started = True
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
            if self._delay and not self._started and time.perf_counter() - self._start < self._delay:
                self.enabled = False  # over before the delay: nothing was shown, nothing to close
                return
            if self.interactive:
                self._draw(force=True)
                self.stream.write("\n")
                self.stream.flush()
            else:
                self._line(time.perf_counter(), force=True)
            self.enabled = False

    def __enter__(self) -> ProgressBar:
        return self

    def __exit__(self, *exc) -> None:
        self.close()




def show_progress(enabled: bool = True, level: int = logging.INFO) -> None:
    """Show the progress of fits, ingests and predictions, and dsvm's log lines, on stderr.

    One call for a Python user: it turns on the progress of every long pass
    over the data (a bar on a terminal, a line per 10 % elsewhere) and, if
    no handler would show the ``dsvm`` logger's records yet, gives it one on
    stderr at ``level`` (one line per Newton iteration, the stages of a fit).
    ``show_progress(False)`` turns the bars off and undoes what the call did
    to the ``dsvm`` logger (its handler, its level).

    Parameters
    ----------
    enabled : bool, default=True
        Turn progress on, or off again.
    level : int, default=logging.INFO
        Level of the ``dsvm`` logger while progress is shown (lowered to it, never raised).

    Examples
    --------
    >>> import logging
    >>> from dsvm import show_progress
    >>> show_progress()  # fits, ingests and predictions now report on stderr
    >>> logging.getLogger("dsvm").isEnabledFor(logging.INFO)
    True
    >>> show_progress(False)  # and the dsvm logger is as it was
    """
    global _SHOWN
    _SHOWN = bool(enabled)
    root = logging.getLogger("dsvm")
    if not enabled:
        while _UNDO:
            _UNDO.pop()(root)
        return
    if not root.hasHandlers() and not _UNDO:  # a handler the user (or the dsvm command) configured is used as is
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s", "%H:%M:%S"))
        root.addHandler(handler)
        _UNDO.append(lambda logger: logger.removeHandler(handler))
    if root.getEffectiveLevel() > level:
        previous = root.level
        root.setLevel(level)
        _UNDO.append(lambda logger: logger.setLevel(previous))


def set_progress(enabled: bool) -> bool:
    """Turn the bars on or off without touching any logger (the ``dsvm`` command configures its own
    logging); returns the previous setting."""
    global _SHOWN
    previous, _SHOWN = _SHOWN, bool(enabled)
    return previous


def progress_shown() -> bool:
    """Whether :func:`show_progress` turned progress on."""
    return _SHOWN


@contextmanager
def stage(label: str) -> Iterator[None]:
    """Name the work inside the ``with`` block (``"features"``, ``"newton solve"``) for its passes' bars.

    The stage's duration is logged (INFO) when it runs longer than :data:`PASS_DELAY`.
    """
    token = _STAGE.set(label)
    start = time.perf_counter()
    try:
        yield
    finally:
        _STAGE.reset(token)
        seconds = time.perf_counter() - start
        if seconds >= PASS_DELAY:
            logger.info("%s: done in %.1f s", label, seconds)


class PassProgress:
    """Finished blocks of one pass, counted from any thread into a delayed :class:`ProgressBar`."""

    def __init__(self, total: int, label: str):
        self.bar = ProgressBar(total, label=label, unit="blocks", delay=PASS_DELAY)

    def advance(self, blocks: float = 1.0) -> None:
        self.bar.update(blocks)

    def set_total(self, total: float) -> None:
        """Count in other units (the threaded scheduler's tasks, known only when it starts)."""
        self.bar.total = max(float(total), 0.0)
        self.bar.unit = "tasks"

    def tick(self) -> None:
        self.bar.tick()

    def close(self) -> None:
        self.bar.close()


@contextmanager
def pass_progress(total: int) -> Iterator[PassProgress | None]:
    """A :class:`PassProgress` for a pass over ``total`` blocks inside a :func:`stage`, or None when progress
    is off or no stage is named (then the pass shows nothing)."""
    label = _STAGE.get()
    if not _SHOWN or label is None or total < 1:
        yield None
        return
    progress = PassProgress(total, label)
    try:
        yield progress
    finally:
        progress.close()
