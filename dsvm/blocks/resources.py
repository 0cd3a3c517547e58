"""What the cluster (or this machine) offers: threads, memory per task, and blocks cut to fit them."""

from __future__ import annotations

import os

import numpy as np
import psutil
from dask.array.utils import meta_from_array

from .. import config
from ..exceptions import format_bytes
from .convert import as_row_blocks
from .dask_blocks import TaskFootprint, active_client
from .interface import RowBlocks

__all__ = ["available_threads", "cluster_memory", "task_memory_budget", "available_memory", "task_sized_blocks",
           "describe_scheduler"]


def _workers(client) -> list[dict]:
    try:
        return list(client.scheduler_info(n_workers=-1)["workers"].values())
    except TypeError:  # older distributed without n_workers=
        return list(client.scheduler_info()["workers"].values())


def available_threads() -> int:
    """Threads Dask will run tasks on: the cluster's total, or this machine's cores."""
    client = active_client()
    if client is not None:
        try:
            return max(1, sum(client.nthreads().values()))
        except Exception:  # pragma: no cover - a client that cannot answer
            return os.cpu_count() or 1
    return os.cpu_count() or 1


def cluster_memory() -> tuple[float, int]:
    """(total memory Dask may use, threads) on the active cluster or this machine."""
    client = active_client()
    if client is not None:
        workers = _workers(client)
        limits = [w.get("memory_limit") or psutil.virtual_memory().total for w in workers]
        threads = sum(w.get("nthreads", 1) for w in workers)
        if limits:
            return float(sum(limits)), int(threads)
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


def task_sized_blocks(X, k: int, chunk_bytes: float | None = None) -> RowBlocks:
    """A dask array's row blocks, split small enough for one task's share of a worker's memory
    (a block of kernel values is rows x k float64) and into enough blocks to keep every thread busy.

    Fit and prediction alike: a dataset stored in one large chunk would otherwise
    need the kernel block of the whole chunk in one task.  A task still reads
    its stored chunk whole (``chunk_bytes``, when known): both go into what the
    error of a worker killed for memory reports.
    """
    budget = min(config.get("block-bytes"), task_memory_budget(config.get("task-memory-share")))
    max_rows = max(256, int(budget // (8 * max(1, k))))
    blocks = as_row_blocks(X, 0).split_blocks(available_threads(), max_rows=max_rows)
    if chunk_bytes is None and isinstance(meta_from_array(X), np.ndarray):
        chunk_bytes = float(max(X.chunks[0], default=0)) * X.shape[1] * X.dtype.itemsize
    kernel_bytes = float(max(blocks.chunks, default=0)) * k * 8
    detail = f"kernel blocks of {format_bytes(kernel_bytes)}"
    if chunk_bytes:
        detail = f"a stored chunk of {format_bytes(chunk_bytes)} read whole, " + detail
    blocks.footprint = TaskFootprint(2.0 * (chunk_bytes or 0.0) + 3.0 * kernel_bytes, detail)
    return blocks


def describe_scheduler() -> str:
    """``"threads"`` or ``"distributed: N workers, T threads"``: where Dask runs tasks now."""
    client = active_client()
    if client is None:
        return "threads"
    nthreads = client.nthreads()
    return f"distributed: {len(nthreads)} workers, {sum(nthreads.values())} threads"
