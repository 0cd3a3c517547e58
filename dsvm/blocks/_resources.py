"""What the cluster (or this machine) offers: threads, memory per task, and blocks cut to fit them.

The memory a Dask worker needs for a computation over row blocks of ``k``
kernel columns (:func:`task_sized_blocks`) is, from measurements of fits:

* what it holds already: its process with dsvm loaded (about 180 MiB), read
  from the worker itself (:func:`worker_memory`);
* a fixed part: a stored chunk read whole, twice (decompressed and
  compressed), its share of data persisted for the computation, and
  ``dsvm.worker-heap-bytes`` of heap (about 64 MiB);
* per thread, :data:`BLOCK_COPIES` ``x rows x k x itemsize`` (the kernel
  block, its features and the copy a scratch-store write makes) plus, for a
  fit, :data:`GRAM_BYTES` ``x (k+1)²`` (the Gram matrices a pass builds).

Dask pauses a worker at ``distributed.worker.memory.pause`` (80 %) of its
limit; a paused worker runs nothing.  A worker that cannot hold the fixed
part and the smallest blocks below that line is refused before any work
(:class:`~dsvm.exceptions.WorkerMemoryError` naming both figures); otherwise
the blocks are cut to fit, below ``distributed.worker.memory.spill`` (70 %)
where the smallest blocks fit there (above it Dask writes the worker's
results to disk).
"""

from __future__ import annotations

import ctypes
import gc
import importlib
import logging
import math
import os
import sys
import time
from dataclasses import dataclass

import dask.config
import numpy as np
import psutil
from dask.array.utils import meta_from_array

from .. import config
from ..exceptions import WorkerMemoryError, format_bytes
from ._convert import as_row_blocks
from ._dask_blocks import active_client
from ._interface import RowBlocks
from ._waiting import TaskFootprint, pause_fraction, scheduler_workers

logger = logging.getLogger(__name__)

__all__ = ["available_threads", "cluster_memory", "probe_workers", "task_memory_budget", "available_memory", "task_sized_blocks",
           "describe_scheduler", "WorkerMemory", "worker_memory", "task_bytes", "fit_block_rows", "check_worker_memory",
           "BLOCK_COPIES",
           "GRAM_BYTES", "MIN_BLOCK_ROWS"]

#: block-sized arrays a task holds at its peak: the kernel block, the feature block, the scratch-store write's copy
BLOCK_COPIES = 3
#: bytes per (k+1)² element of the matrices a full-Gram pass holds (one float32 and two float64 copies)
GRAM_BYTES = 20
#: the smallest row blocks dsvm cuts
MIN_BLOCK_ROWS = 256
#: the dataset's stored chunk is held twice while it is read (decompressed and compressed)
CHUNK_COPIES = 2


def _workers(client) -> list[dict]:
    return list((scheduler_workers(client) or {}).values())


@dataclass(frozen=True)
class WorkerMemory:
    """The memory of one Dask worker, in bytes.

    Attributes
    ----------
    address : str
    limit : float
        Its memory limit (the machine's memory when it has none).
    threads : int
    pause_fraction : float
        Dask pauses the worker when its process holds this share of ``limit``.
    held : float
        What its process holds now (resident set), with dsvm's modules loaded.
    spill_fraction : float
        Dask starts writing the worker's results to its disk when its process holds this share of
        ``limit`` (``pause_fraction`` when spilling is off).
    """

    address: str
    limit: float
    threads: int
    pause_fraction: float
    held: float
    spill_fraction: float | None = None

    @property
    def pause_bytes(self) -> float:
        """Where Dask pauses the worker."""
        return self.pause_fraction * self.limit

    @property
    def usable(self) -> float:
        """What tasks and data may add before Dask pauses the worker (never negative)."""
        return max(0.0, self.pause_bytes - self.held)

    @property
    def unspilled(self) -> float:
        """What tasks and data may add before Dask starts spilling the worker's results to disk."""
        fraction = min(self.spill_fraction or self.pause_fraction, self.pause_fraction)
        return max(0.0, fraction * self.limit - self.held)


def _release_free_heap() -> None:
    """Hand the heap's free pages back to the system (glibc's ``malloc_trim``): memory freed by earlier
    tasks (an ingest, say) but kept by the allocator would otherwise count as held, and refuse a fit the
    worker can run."""
    try:
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):  # not glibc: nothing to release this way
        pass
    arrow = sys.modules.get("pyarrow")  # where an ingest of DataFrames or Parquet loaded it
    release = getattr(getattr(arrow, "default_memory_pool", lambda: None)(), "release_unused", None)
    if release is not None:  # pyarrow's pool keeps freed memory; older pyarrow cannot release it
        release()


def _probe_worker(modules: tuple[str, ...]) -> dict:
    """Runs on a worker: load ``modules`` (what the tasks will load anyway), then report memory facts."""
    for name in modules:
        importlib.import_module(name)
    gc.collect()
    _release_free_heap()
    pause = dask.config.get("distributed.worker.memory.pause", 0.8)
    terminate = dask.config.get("distributed.worker.memory.terminate", 0.95)
    spill = dask.config.get("distributed.worker.memory.spill", 0.7)
    return {"rss": psutil.Process().memory_info().rss, "pause": float(pause or terminate or 1.0),
            "spill": float(spill) if spill else None,
            "total": psutil.virtual_memory().total}


def worker_memory(client, modules: tuple[str, ...] = ()) -> list[WorkerMemory]:
    """What every worker of ``client``'s cluster has and holds, after loading ``modules`` there.

    Asks the workers themselves (their memory, Dask's pause setting); a
    worker that does not answer is described from the scheduler's view (the
    memory it reported last, this process's pause setting).
    """
    info = scheduler_workers(client) or {}
    try:
        probes = client.run(_probe_worker, tuple(modules), on_error="return")
    except Exception:  # the workers do not answer: the scheduler's view
        probes = {}
    out = []
    for address, w in info.items():
        probe = probes.get(address)
        if isinstance(probe, dict):
            held, pause, total = float(probe["rss"]), probe["pause"], float(probe["total"])
            spill = probe.get("spill")
        else:
            held = float((w.get("metrics") or {}).get("memory") or 0.0)
            pause, total = pause_fraction(), float(psutil.virtual_memory().total)
            spill = dask.config.get("distributed.worker.memory.spill", 0.7) or None
        limit = float(w.get("memory_limit") or 0.0) or total
        out.append(WorkerMemory(address, limit, int(w.get("nthreads") or 1), pause, held, spill))
    return out


def available_threads() -> int:
    """Threads Dask will run tasks on: the cluster's total, or this machine's cores."""
    client = active_client()
    if client is not None:
        try:
            return max(1, sum(client.nthreads().values()))
        except Exception:  # pragma: no cover - a client that cannot answer
            return os.cpu_count() or 1
    return os.cpu_count() or 1


def probe_workers(modules: tuple[str, ...] = ()) -> list[WorkerMemory]:
    """:func:`worker_memory` of the active cluster (after loading ``modules`` there); ``[]`` without one.

    One probe is a round trip to every worker: a fit takes one and hands it to
    :func:`cluster_memory` and :func:`task_sized_blocks` alike.
    """
    client = active_client()
    return worker_memory(client, modules) if client is not None else []


def cluster_memory(workers: list[WorkerMemory] | None = None) -> tuple[float, int]:
    """(memory Dask may still use, threads) on the active cluster or this machine.

    On a cluster: what the workers may add before Dask pauses them (their
    limits at the pause fraction, less what they hold now), summed.
    ``workers``: a probe taken just before (:func:`probe_workers`), else one is taken now.
    """
    if workers is None:
        workers = probe_workers()
    if workers:
        return float(sum(w.usable for w in workers)), int(sum(w.threads for w in workers))
    return float(psutil.virtual_memory().available), os.cpu_count() or 1


def task_memory_budget(share: int) -> float:
    """Bytes one task may use: the smallest worker's memory / (its threads x ``share``)."""
    client = active_client()
    if client is not None:
        per_thread = [
            (w.get("memory_limit") or psutil.virtual_memory().total) / max(1, w.get("nthreads", 1))
            for w in _workers(client)
        ]
        if per_thread:
            return min(per_thread) / share
    return psutil.virtual_memory().available / max(1, os.cpu_count() or 1) / share


def available_memory() -> float:
    """Bytes this process may still allocate (the machine's available memory)."""
    return float(psutil.virtual_memory().available)


def task_bytes(rows: int, k: int, itemsize: int, fit: bool = True) -> float:
    """What one task over a block of ``rows`` rows and ``k`` kernel columns holds at its peak (bytes).

    :data:`BLOCK_COPIES` block-sized arrays, and for a fit the Gram matrices of a pass.
    """
    return float(BLOCK_COPIES * rows * k * itemsize + (GRAM_BYTES * (k + 1) ** 2 if fit else 0))


def fit_block_rows(workers: list[WorkerMemory], k: int, itemsize: int, fixed: float, fit: bool = True,
                   max_rows: int | None = None, what: str = "") -> int:
    """The rows per block every worker can run on all its threads at once, at most ``max_rows``.

    ``fixed`` is what a worker holds for the computation besides its tasks
    (``what`` says of what, for the error).  In a fit, a share
    ``dsvm.memory-fraction`` of each worker's room stays free for persisted
    feature blocks when there is room for more than the smallest blocks.

    Raises
    ------
    WorkerMemoryError
        A worker cannot hold ``fixed`` and blocks of :data:`MIN_BLOCK_ROWS`
        rows on every thread below the line where Dask pauses it.
    """
    per_row = BLOCK_COPIES * k * itemsize
    base = task_bytes(0, k, itemsize, fit)
    keep = 1.0 - float(config.get("memory-fraction")) if fit else 1.0
    share = float(config.get("task-memory-share"))
    rows = max_rows or 2**62
    for w in workers:
        need = fixed + w.threads * task_bytes(MIN_BLOCK_ROWS, k, itemsize, fit)
        if need > w.usable:
            raise _too_small(w, fixed, task_bytes(MIN_BLOCK_ROWS, k, itemsize, fit), what,
                             f"blocks of {MIN_BLOCK_ROWS} rows, k={k}")
        # below the line where Dask starts spilling results to disk when the smallest blocks fit there (a
        # worker over it writes what it holds to disk, slowing every pass), else below the pause line
        room = w.unspilled if need <= w.unspilled else w.usable
        fits = ((room - fixed) / w.threads - base) // per_row
        # room for persisted feature blocks if there is enough, else at least the blocks of the share rule
        # of machines without a cluster (as long as they fit)
        roomy = ((room * keep - fixed) / w.threads - base) // per_row
        plain = w.limit / w.threads / share // (8 * k)
        rows = min(rows, int(min(fits, max(roomy, plain))))
    return max(MIN_BLOCK_ROWS, rows)


def _too_small(w: WorkerMemory, fixed: float, per_thread: float, fixed_what: str, thread_what: str
               ) -> WorkerMemoryError:
    need = fixed + w.threads * per_thread
    # a margin over the bare figure: RSS and the allocator's heap vary a little from run to run
    enough = math.ceil(1.15 * (w.held + need) / w.pause_fraction / 2**20 / 10) * 10
    left = max(0.0, w.pause_bytes - w.held)
    return WorkerMemoryError(
        f"the Dask workers have too little memory for this computation: worker {w.address} has a "
        f"{format_bytes(w.limit)} memory limit, Dask pauses it at {w.pause_fraction:.0%} "
        f"({format_bytes(w.pause_bytes)}) and it already holds {format_bytes(w.held)} with dsvm loaded, leaving "
        f"{format_bytes(left)}; the computation needs {format_bytes(need)} there: {format_bytes(fixed)} fixed "
        f"({fixed_what}) and {format_bytes(per_thread)} for each of its {w.threads} thread(s) ({thread_what}). "
        f"Give each worker at least {enough} MiB (--memory-limit or the cluster spec) or fewer threads"
    )


SETTLE_SECONDS = (0.5, 1.0, 2.0)


def _settled(client, modules: tuple[str, ...], rule, workers: list[WorkerMemory] | None = None):
    """``rule(workers)`` on the workers' memory; where it refuses, measured again after short waits first.

    A worker that just finished other work (an ingest, a prediction) releases what it held for it a
    moment later: a single measurement could refuse a computation it can run.
    """
    workers = worker_memory(client, modules) if workers is None else workers
    for wait in SETTLE_SECONDS:
        try:
            return rule(workers)
        except WorkerMemoryError:
            time.sleep(wait)
            workers = worker_memory(client, modules)
    return rule(workers)


def check_worker_memory(per_thread: float, thread_what: str, modules: tuple[str, ...] = ()) -> None:
    """Refuse, before the work, a computation whose tasks (``per_thread`` bytes each, one per thread at once:
    ``thread_what`` says of what) do not fit below the line where Dask pauses a worker.

    No-op without a distributed cluster.

    Raises
    ------
    WorkerMemoryError
        Naming the memory a worker needs and the memory it has.
    """
    client = active_client()
    if client is None:
        return
    heap = float(config.get("worker-heap-bytes"))

    def check(workers: list[WorkerMemory]) -> None:
        for w in workers:
            if heap + w.threads * per_thread > w.usable:
                raise _too_small(w, heap, per_thread, "heap", thread_what)

    _settled(client, modules, check)


def task_sized_blocks(X, k: int, chunk_bytes: float | None = None, *, itemsize: int = 8, fit: bool = True,
                      persisted_bytes: float = 0.0, worker_modules: tuple[str, ...] = (),
                      workers: list[WorkerMemory] | None = None) -> RowBlocks:
    """A dask array's row blocks, split small enough for the workers' memory and into enough blocks to keep
    every thread busy.

    Fit and prediction alike: a dataset stored in one large chunk would otherwise
    need the kernel block of the whole chunk in one task.

    Parameters
    ----------
    X : dask.array.Array
    k : int
        Kernel columns (landmarks) a task computes per row.
    chunk_bytes : float, optional
        Bytes of one stored chunk, which a task reads whole (computed from
        ``X``'s chunks for dense input when not given).
    itemsize : int
        Bytes per feature value (4 for float32 fits).
    fit : bool
        Whether the blocks serve a fit (passes build Gram matrices and
        feature blocks may be persisted) or only a prediction.
    persisted_bytes : float
        Bytes of data the computation will keep in the cluster's memory
        (``X`` itself when it is persisted), spread over the workers.
    worker_modules : tuple of str
        The modules the tasks import on the workers: loaded there before
        their memory is measured.
    workers : list of WorkerMemory, optional
        A probe of the workers taken just before with ``worker_modules``
        (:func:`probe_workers`); else one is taken here.

    Returns
    -------
    RowBlocks
        With a :class:`TaskFootprint` naming what a task needs, for the errors
        about the workers' memory.

    Raises
    ------
    WorkerMemoryError
        On a distributed cluster whose workers cannot run even the smallest
        blocks below the line where Dask pauses them (see the module docstring).
    """
    k = max(1, int(k))
    if chunk_bytes is None and isinstance(meta_from_array(X), np.ndarray):
        chunk_bytes = float(max(X.chunks[0], default=0)) * X.shape[1] * X.dtype.itemsize
    chunk_bytes = float(chunk_bytes or 0.0)
    cap = max(MIN_BLOCK_ROWS, int(config.get("block-bytes") // (8 * k)))
    client = active_client()
    workers = probe_workers(worker_modules) if workers is None else workers
    if workers:
        heap = float(config.get("worker-heap-bytes"))
        fixed = CHUNK_COPIES * chunk_bytes + persisted_bytes / len(workers) + heap
        what = ", ".join(part for part in (
            f"a stored chunk of {format_bytes(chunk_bytes)} read whole, twice" if chunk_bytes else "",
            f"{format_bytes(persisted_bytes / len(workers))} of persisted data" if persisted_bytes else "",
            f"{format_bytes(heap)} of heap") if part)
        max_rows = _settled(client, worker_modules,
                            lambda now: fit_block_rows(now, k, itemsize, fixed, fit, cap, what), workers)
    else:
        budget = task_memory_budget(config.get("task-memory-share"))
        max_rows = min(cap, max(MIN_BLOCK_ROWS, int(budget // (8 * k))))
    blocks = as_row_blocks(X, 0).split_blocks(available_threads(), max_rows=max_rows)
    rows = max(blocks.chunks, default=0)
    detail = f"blocks of {rows} rows x {k} kernel columns"
    if chunk_bytes:
        detail = f"a stored chunk of {format_bytes(chunk_bytes)} read whole, " + detail
    blocks.footprint = TaskFootprint(CHUNK_COPIES * chunk_bytes + task_bytes(rows, k, itemsize, fit), detail)
    if workers:
        w = min(workers, key=lambda w: w.usable / w.threads)
        logger.info("row blocks of up to %d rows: a task needs about %s; worker %s may add %s before Dask pauses it "
                    "(%s fixed, %d thread(s))", rows, format_bytes(blocks.footprint.bytes), w.address,
                    format_bytes(w.usable), format_bytes(fixed), w.threads)
    return blocks


def describe_scheduler() -> str:
    """``"threads"`` or ``"distributed: N workers, T threads"``: where Dask runs tasks now."""
    client = active_client()
    if client is None:
        return "threads"
    nthreads = client.nthreads()
    return f"distributed: {len(nthreads)} workers, {sum(nthreads.values())} threads"
