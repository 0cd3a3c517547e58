"""Waiting on a distributed cluster without ever waiting silently: :func:`gather`.

Every wait of dsvm on ``distributed`` futures goes through :func:`gather`.
It waits in short slices and, between them, looks at the cluster
(:class:`ClusterWatch`):

* no worker left for ``dsvm.no-worker-timeout`` s: :class:`NoWorkersError`;
* the workers it waits on paused by Dask for lack of memory for
  ``dsvm.paused-timeout`` s (or paused in 90 % of the checks over three times
  that, when they flap): :class:`WorkersPausedError`, naming the memory they
  hold, their limit and what a task needs;
* a worker that tasks are pinned to has left: :class:`PinnedWorkerLost`, for
  the caller to run them again unpinned;
* workers killed again and again on one task (``KilledWorker``):
  :class:`WorkerMemoryError`.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass

import dask.config
from distributed import KilledWorker, wait

from .. import config
from ..exceptions import NoWorkersError, WorkerMemoryError, WorkersPausedError, format_bytes
from ..progress import PassProgress

__all__ = ["gather", "TaskFootprint", "ClusterWatch", "PinnedWorkerLost", "scheduler_workers", "pause_fraction"]

#: seconds between two looks at the cluster while waiting
POLL_SECONDS = 2.0
#: the flapping rule: paused in this share of the checks over three times ``dsvm.paused-timeout``
FLAPPING_SHARE = 0.9


@dataclass(frozen=True)
class TaskFootprint:
    """Roughly what one task over some blocks holds in memory, for the errors about workers' memory.

    ``detail`` says where the bytes go (e.g. a stored chunk read whole).
    """

    bytes: float
    detail: str


class PinnedWorkerLost(RuntimeError):
    """A worker that tasks were pinned to left the cluster; they must be submitted again unpinned."""


def scheduler_workers(client) -> dict[str, dict] | None:
    """The scheduler's view of every worker, or None when the scheduler does not answer.

    Asked of the scheduler directly: ``Client.scheduler_info`` returns a cache
    that the client's periodic refresh (which fetches no workers) can overwrite
    between the fetch and the return, so it sometimes names no worker at all.
    """
    try:
        if client.asynchronous:  # pragma: no cover - dsvm's clients are synchronous
            return dict(client.scheduler_info()["workers"])
        try:
            identity = client.sync(client.scheduler.identity, n_workers=-1)
        except TypeError:  # older distributed without n_workers=
            identity = client.sync(client.scheduler.identity)
        return dict(identity["workers"])
    except Exception:  # the scheduler itself is gone: let gather raise its error
        return None


def pause_fraction() -> float:
    """The share of its memory limit at which Dask pauses a worker (``distributed.worker.memory.pause``);
    1.0 when pausing is off."""
    value = dask.config.get("distributed.worker.memory.pause", 0.8)
    return float(value) if value else 1.0


class ClusterWatch:
    """Looks at the cluster between the slices of a wait; raises when waiting longer cannot help.

    Parameters
    ----------
    client : distributed.Client
    footprint : TaskFootprint, optional
        What a task needs, for the error messages.
    pinned : set of str, optional
        Addresses of workers tasks are pinned to: the wait depends on each of
        them (one of them paused stops the wait), and one leaving raises
        :class:`PinnedWorkerLost`.  Without it the wait stops only when every
        worker is paused.
    """

    def __init__(self, client, footprint: TaskFootprint | None = None, pinned: set[str] | None = None):
        self.client = client
        self.footprint = footprint
        self.pinned = set(pinned) if pinned else None
        self.no_worker_limit = float(config.get("no-worker-timeout"))
        self.paused_limit = float(config.get("paused-timeout"))
        self.alone_since: float | None = None
        self.paused_since: float | None = None
        self.history: deque[tuple[float, bool]] = deque()  # (time, blocked by paused workers) of each look
        self.started = time.monotonic()

    def look(self) -> None:
        """Look once: raise :class:`NoWorkersError`, :class:`WorkersPausedError` or :class:`PinnedWorkerLost`."""
        workers = scheduler_workers(self.client)
        if workers is None:
            return
        now = time.monotonic()
        if self.pinned is not None and not self.pinned <= set(workers):
            raise PinnedWorkerLost(f"worker(s) {sorted(self.pinned - set(workers))} left the cluster")
        if not workers:
            self.alone_since = self.alone_since or now
            self.paused_since = None
            if now - self.alone_since > self.no_worker_limit:
                # the caller names the operation that stopped (see dsvm.app.cli)
                raise NoWorkersError(
                    f"no Dask workers left for {self.no_worker_limit:.0f} s; start workers for the scheduler and rerun"
                )
            return
        self.alone_since = None
        needed = workers if self.pinned is None else {a: workers[a] for a in self.pinned}
        paused = [a for a, w in needed.items() if w.get("status") == "paused"]
        blocked = bool(paused) and (self.pinned is not None or len(paused) == len(workers))
        self.paused_since = (self.paused_since or now) if blocked else None
        self.history.append((now, blocked))
        window = 3.0 * self.paused_limit
        while self.history and self.history[0][0] < now - window:
            self.history.popleft()
        if blocked and now - self.paused_since > self.paused_limit:
            raise self._paused_error(workers, paused, f"for {self.paused_limit:.0f} s")
        if now - self.started >= window and len(self.history) >= 3:
            share = sum(b for _, b in self.history) / len(self.history)
            if blocked and share >= FLAPPING_SHARE:
                raise self._paused_error(workers, paused, f"in {share:.0%} of the last {window:.0f} s")

    def _paused_error(self, workers: dict, paused: list[str], how_long: str) -> WorkersPausedError:
        info = workers[paused[0]]
        held = float((info.get("metrics") or {}).get("memory") or 0.0)
        limit = float(info.get("memory_limit") or 0.0)
        whom = (f"every Dask worker ({len(workers)})" if len(paused) == len(workers)
                else f"{len(paused)} Dask worker(s) holding blocks this pass runs on")
        limit_text = f"of its {format_bytes(limit)} limit" if limit else "(no memory limit)"
        need = (f"; a task of this computation needs about {format_bytes(self.footprint.bytes)} "
                f"({self.footprint.detail})" if self.footprint is not None else "")
        return WorkersPausedError(
            f"{whom} has been paused by Dask for lack of memory {how_long}: worker {paused[0]} holds "
            f"{format_bytes(held)} {limit_text} (Dask pauses a worker at {pause_fraction():.0%} of it){need}. "
            "Give the workers more memory (--memory-limit or the cluster spec) or fewer threads, "
            "or raise dsvm.paused-timeout if they free memory slowly"
        )


def _worker_memory_error(client, exc, footprint: TaskFootprint | None) -> WorkerMemoryError:
    """The one-line error for ``distributed.KilledWorker``: what the workers had, what a task needed."""
    worker = exc.last_worker
    limit, threads = getattr(worker, "memory_limit", None), getattr(worker, "nthreads", None)
    if not limit:
        workers = scheduler_workers(client)
        if workers:
            limit = min(w.get("memory_limit") or 0 for w in workers.values()) or None
            threads = max(w.get("nthreads", 1) for w in workers.values())
    had = (f"each worker has {format_bytes(limit)} of memory" if limit else "the workers have no memory limit")
    if threads:
        had += f" shared by {threads} thread(s) running tasks at once"
    needed = (f"; a task of this computation needs about {format_bytes(footprint.bytes)} ({footprint.detail})"
              if footprint is not None else "")
    key = exc.task[0] if isinstance(exc.task, tuple) else exc.task
    return WorkerMemoryError(
        f"Dask workers died {exc.allowed_failures + 1} times running the same task ({key}), so the computation "
        f"was given up: most likely the task needs more memory than a worker has. {had[0].upper()}{had[1:]}"
        f"{needed}. Give the workers more memory (--memory-limit or the cluster spec) or fewer threads, or ingest "
        "the data with smaller chunks (--chunk-rows): a task reads one stored chunk whole"
    )


def _wait_watching(futures: list, watch: ClusterWatch, on_done: Callable | None,
                   progress: PassProgress | None) -> None:
    """Wait for every future, looking at the cluster every :data:`POLL_SECONDS` (``watch`` raises)."""
    pending = set(futures)
    next_look = time.monotonic() + POLL_SECONDS
    while pending:
        slice_s = max(0.05, next_look - time.monotonic())
        try:
            if on_done is None:
                wait(list(pending), timeout=slice_s)
                pending = set()
            else:
                done, not_done = wait(list(pending), timeout=slice_s, return_when="FIRST_COMPLETED")
                for f in done:
                    on_done(f)
                pending = set(not_done)
        except TimeoutError:
            pass
        if progress is not None:
            progress.tick()
        if pending and time.monotonic() >= next_look:
            watch.look()
            next_look = time.monotonic() + POLL_SECONDS


def gather(
    client,
    futures: Iterable,
    *,
    results: bool = True,
    footprint: TaskFootprint | None = None,
    pinned: set[str] | None = None,
    on_done: Callable | None = None,
    progress: PassProgress | None = None,
):
    """Wait for ``futures`` and return their results (in order), never silently for ever.

    Lost workers are otherwise handled by Dask: their blocks are recomputed
    (re-read from zarr) on the remaining workers.

    Parameters
    ----------
    client : distributed.Client
    futures : iterable of distributed.Future
    results : bool
        ``False`` only waits (for persisted data) and returns None.
    footprint : TaskFootprint, optional
        What a task needs, named by the memory errors.
    pinned : set of str, optional
        Workers the tasks are pinned to (see :class:`ClusterWatch`).
    on_done : callable, optional
        Called with each future as it finishes (a progress bar).
    progress : PassProgress, optional
        Redrawn while it waits (a pass's bar: its rate, and a line after a long silence in a log).

    Raises
    ------
    NoWorkersError, WorkersPausedError, WorkerMemoryError, PinnedWorkerLost
        See the module docstring.
    """
    futures = list(futures)
    _wait_watching(futures, ClusterWatch(client, footprint, pinned), on_done, progress)
    if not results:
        return None
    try:
        return client.gather(futures)
    except KilledWorker as exc:
        raise _worker_memory_error(client, exc, footprint) from None
