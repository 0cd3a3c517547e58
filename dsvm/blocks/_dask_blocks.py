"""Row blocks of a Dask array (:class:`DaskBlocks`) and the computations that run them.

Shared arguments enter the Dask graph once per call (one key), not once per
task.  The scheduler is whatever Dask would use: a ``distributed.Client`` if
one is active (:func:`active_client`), the threaded scheduler otherwise.
:func:`compute` fails clearly where Dask would hang or give a bare
``KilledWorker``: no worker left, workers paused or killed for memory (see
:mod:`dsvm.blocks._waiting`).
"""

from __future__ import annotations

import logging
import uuid
from typing import Any

import dask
import dask.array as da
import numpy as np
import scipy.sparse as sp
from dask.base import is_dask_collection
from dask.callbacks import Callback
from dask.core import flatten
from distributed import default_client, futures_of

from ..blas import single_threaded_blas
from ..progress import PassProgress, pass_progress
from ._interface import TREE_FANIN, RowBlocks, tree_sum
from ._waiting import PinnedWorkerLost, TaskFootprint, gather

logger = logging.getLogger(__name__)

__all__ = ["DaskBlocks", "TaskFootprint", "compute", "reduce_parts", "active_client", "check_row_chunks", "shared_key",
           "LARGE_GRAPH"]


def active_client():
    """The ``distributed.Client`` Dask would use now, or ``None``."""
    try:
        return default_client()
    except ValueError:
        return None


def check_row_chunks(array, what: str = "X") -> None:
    """A Dask array dsvm can block by rows: known row chunk sizes, one block along the columns."""
    if any(np.isnan(c) for c in array.chunks[0]) or np.isnan(array.shape[0]):
        raise ValueError(f"{what} has unknown chunk sizes along the rows; call {what}.compute_chunk_sizes() first")
    if array.ndim == 2 and len(array.chunks[1]) != 1:
        raise ValueError(
            f"{what} has {len(array.chunks[1])} chunks along the feature axis; dsvm needs whole rows in "
            f"each block: use {what}.rechunk({{1: -1}})"
        )


def shared_key(obj: Any):
    """Wrap one shared argument as a single graph key.

    The object travels inside the graph (once, whatever the number of tasks)
    rather than being scattered to one worker: a scattered object dies with
    its worker, and the blocks computed from it could then not be recomputed
    after a worker loss.  Feature maps of large k make such graphs tens of MB,
    hence :data:`LARGE_GRAPH` below.
    """
    if is_dask_collection(obj):
        return obj
    return dask.delayed(obj, name=f"dsvm-shared-{uuid.uuid4().hex}", traverse=False)


# distributed warns about graphs above 10 MB; ours carry the feature map on purpose.
LARGE_GRAPH = {"distributed.admin.large-graph-warning-threshold": "1GB"}


def _take_block_rows(block, local_idx):
    return block[local_idx]


class _OffsetCall:
    """Calls ``fn(..., offset=first_row)`` from inside ``dask.array.map_blocks``."""

    def __init__(self, fn):
        self.fn = fn
        self.__name__ = getattr(fn, "__name__", "map")

    def __call__(self, *args, block_info=None):
        offset = int(block_info[0]["array-location"][0][0]) if block_info else 0
        return self.fn(*args, offset=offset)


def _holders(client, futures) -> list[str] | None:
    """The worker holding each future's data (the first one if several), or None if any is held nowhere."""
    try:
        who = client.who_has(futures)
    except Exception:  # the scheduler does not answer: let the pass find out
        return None
    holders = [next(iter(who.get(f.key) or ()), None) for f in futures]
    return None if any(h is None for h in holders) else holders


def _submit_tree(client, combine, parts, last, workers=None):
    """Combine ``parts`` in a tree of fan-in :data:`TREE_FANIN` (on ``workers`` only, if given); the root future.

    ``last[i]`` is the index of the last block part ``i`` depends on: the
    priorities (higher runs first) keep the blocks in order and let each
    combination run as soon as its inputs exist, so at most a few partial
    results (a k x k matrix each) wait in worker memory at any time.
    """
    pin = {} if workers is None else {"workers": workers, "allow_other_workers": False}
    while len(parts) > 1:
        groups = [(parts[i : i + TREE_FANIN], last[min(i + TREE_FANIN, len(parts)) - 1])
                  for i in range(0, len(parts), TREE_FANIN)]
        parts = [client.submit(combine, g, pure=False, priority=-j + 0.5, **pin) for g, j in groups]
        last = [j for _, j in groups]
    return parts[0]


def _counted(progress: PassProgress | None, futures: list) -> None:
    """Advance ``progress`` by one block as each of ``futures`` finishes (in distributed's callback thread)."""
    if progress is not None:
        for f in futures:
            f.add_done_callback(lambda _f: progress.advance())


def _submit_reduction(client, fn, blocks, extra, shared, combine, holders, progress=None):
    """Submit ``fn`` on every block and the reduction of the results; the future of the final result.

    With ``holders`` (one worker address per block) each block's task runs on
    its holder, and the parts are combined per worker before one partial
    result per worker travels.  The order of the sums then follows where the
    blocks are, so results may differ in the last bits between clusters.
    """
    groups: dict[str | None, list[int]] = {}
    parts = []
    for i, b in enumerate(blocks):
        worker = None if holders is None else holders[i]
        pin = {} if worker is None else {"workers": [worker], "allow_other_workers": False}
        parts.append(client.submit(fn, b, *[e[i] for e in extra], *shared, pure=False, priority=-i, **pin))
        groups.setdefault(worker, []).append(i)
    _counted(progress, parts)
    if len(parts) == 1:
        return client.submit(combine, parts, pure=False)
    partial, last = [], []
    for worker, idx in groups.items():
        partial.append(_submit_tree(client, combine, [parts[i] for i in idx], idx,
                                    None if worker is None else [worker]))
        last.append(idx[-1])
    if len(partial) == 1:  # one worker holds every block (more than one): already combined
        return partial[0]
    order = np.argsort(last, kind="stable")
    return _submit_tree(client, combine, [partial[i] for i in order], [last[i] for i in order])


#: below this many blocks per thread, :meth:`DaskBlocks.split_blocks` rounds their number up to a multiple
#: of the threads (the last round's idle threads cost up to a block per pass)
BALANCE_ROUNDS = 16


def _balance_parts(chunks, parts: list[int], threads: int, min_rows: int) -> None:
    """Add parts (in place) to the chunks of the longest parts until ``sum(parts)`` is a multiple of
    ``threads``, where the blocks number fewer than ``BALANCE_ROUNDS`` per thread.  Every part stays at
    least ``min_rows`` long: where that stops it first, the parts added so far are kept (shorter blocks,
    closer to a multiple)."""
    total = sum(parts)
    if threads <= 1 or total % threads == 0 or total >= BALANCE_ROUNDS * threads:
        return
    for _ in range(threads - total % threads):
        longest = max(range(len(parts)), key=lambda i: chunks[i] / parts[i])
        if chunks[longest] // (parts[longest] + 1) < min_rows:
            return  # too short to split further: keep what is there
        parts[longest] += 1


class DaskBlocks(RowBlocks):
    """Row blocks of a Dask array (one block along the columns).

    ``footprint`` (a :class:`TaskFootprint`, optional) travels to the arrays
    derived from this one; it only makes the error clearer when a worker
    runs out of memory.
    """

    def __init__(self, array, footprint: TaskFootprint | None = None):
        check_row_chunks(array, "X" if array.ndim == 2 else "y")
        if 0 in array.chunks[0] and array.shape[0] > 0:
            # empty blocks (a boolean selection leaves them) share their offset with the next block
            array = array.rechunk({0: tuple(c for c in array.chunks[0] if c)})
        self.array = array
        self.footprint = footprint
        self.chunks = tuple(int(c) for c in array.chunks[0])
        self._delayed = None
        self._futures = None

    @property
    def is_distributed(self) -> bool:
        return True

    @property
    def n_cols(self) -> int | None:
        return int(self.array.shape[1]) if self.array.ndim == 2 else None

    def select_blocks(self, indices, split: int = 1) -> DaskBlocks:
        raise NotImplementedError("select_blocks() is for in-process row blocks")

    def compress(self, mask) -> DaskBlocks:
        raise NotImplementedError("compress() is for in-process row blocks")

    def delayed_blocks(self):
        if self._delayed is None:
            self._delayed = list(self.array.to_delayed().ravel())
        return self._delayed

    def block_futures(self, client):
        """The ``distributed`` futures of the blocks when the array is persisted there, else None."""
        if self._futures is None:
            futures = {f.key: f for f in futures_of(self.array)}
            keys = list(flatten(self.array.__dask_keys__()))
            self._futures = [futures.get(k) for k in keys] if futures else []
        if not self._futures or any(f is None for f in self._futures):
            return None
        if self._futures[0].client is not client:
            return None
        return self._futures

    def _map_reduce_futures(self, client, fn, aligned, shared, combine):
        """``map_reduce`` straight on persisted futures: no graph to build or optimise.

        Each block's task is pinned to the worker that holds the block, and
        the parts are combined on that worker first: only one partial result
        per worker travels (to the worker that combines them, then to this
        process), never a block.  If a worker that tasks are pinned to leaves,
        the pass runs again unpinned (Dask recomputes the lost blocks).
        """
        blocks = self.block_futures(client)
        if blocks is None:
            return None
        extra = []
        for a in aligned:
            if a is None:
                extra.append([None] * len(blocks))
                continue
            fut = a.block_futures(client) if isinstance(a, DaskBlocks) else None
            if fut is None:
                return None
            extra.append(fut)
        holders = _holders(client, blocks)
        if holders is not None:
            try:
                with pass_progress(len(blocks)) as progress:
                    final = _submit_reduction(client, fn, blocks, extra, shared, combine, holders, progress)
                    return gather(client, [final], footprint=self.footprint, pinned=set(holders),
                                  progress=progress)[0]
            except PinnedWorkerLost as exc:
                logger.warning("%s during a pass; running the pass again without pinning its tasks", exc)
        with pass_progress(len(blocks)) as progress:
            final = _submit_reduction(client, fn, blocks, extra, shared, combine, None, progress)
            return gather(client, [final], footprint=self.footprint, progress=progress)[0]

    def map_reduce(self, fn, aligned=(), shared=(), combine=tree_sum):
        client = active_client()
        if client is not None:
            result = self._map_reduce_futures(client, fn, aligned, shared, combine)
            if result is not None:
                return result
        blocks = self.delayed_blocks()
        extra = [a.delayed_blocks() if a is not None else [None] * len(blocks) for a in aligned]
        shared_keys = [shared_key(s) for s in shared]
        call = dask.delayed(fn, pure=True)
        parts = [call(b, *[e[i] for e in extra], *shared_keys) for i, b in enumerate(blocks)]
        return reduce_parts(parts, combine, self.footprint)

    def map_blocks(self, fn, n_cols, dtype, aligned=(), shared=(), with_offset=False):
        args = [a.array if a is not None else None for a in aligned] + [shared_key(s) for s in shared]
        if n_cols is None:
            chunks = (self.array.chunks[0],)
            meta = np.empty((0,), dtype=dtype)
            drop_axis = [1] if self.array.ndim == 2 else None
        else:
            chunks = (self.array.chunks[0], (int(n_cols),))
            meta = np.empty((0, 0), dtype=dtype)
            drop_axis = None
        out = da.map_blocks(
            _OffsetCall(fn) if with_offset else fn, self.array, *args, dtype=dtype, chunks=chunks, meta=meta, drop_axis=drop_axis,
            name=f"dsvm-{getattr(fn, '__name__', 'map')}-{uuid.uuid4().hex[:12]}",
        )
        return DaskBlocks(out, self.footprint)

    def take(self, indices):
        indices = np.asarray(indices, dtype=np.int64)
        order = np.argsort(indices, kind="stable")
        sorted_idx = indices[order]
        offsets = self.offsets
        block_of = np.searchsorted(offsets, sorted_idx, side="right") - 1
        blocks = self.delayed_blocks()
        pieces = []
        for b in np.unique(block_of):
            local = sorted_idx[block_of == b] - offsets[b]
            pieces.append(dask.delayed(_take_block_rows, pure=True)(blocks[b], local))
        parts = compute(*pieces, footprint=self.footprint)
        if parts and sp.issparse(parts[0]):
            rows = sp.vstack(parts, format="csr")
        else:
            rows = np.concatenate(parts, axis=0)
        inverse = np.empty_like(order)
        inverse[order] = np.arange(order.size)
        return rows[inverse]

    def fold(self, fn, state, aligned=(), shared=(), order=None):
        blocks = self.delayed_blocks()
        extra = [a.delayed_blocks() if a is not None else [None] * len(blocks) for a in aligned]
        shared_keys = [shared_key(s) for s in shared]
        step = dask.delayed(fn, pure=True)
        current = shared_key(state)
        for i in (range(len(blocks)) if order is None else order):
            current = step(blocks[i], *[e[i] for e in extra], current, *shared_keys)
        (result,) = compute(current, footprint=self.footprint)
        return result

    def iter_blocks(self, batch: int = 4):
        blocks = self.delayed_blocks()
        for i in range(0, len(blocks), batch):
            yield from compute(*blocks[i : i + batch], footprint=self.footprint)

    def split_blocks(self, min_blocks: int, max_rows: int | None = None, min_rows: int = 2048) -> DaskBlocks:
        """Split blocks (never merge them): at least about ``min_blocks`` blocks, none
        longer than ``max_rows``.

        A dataset stored in one large chunk would otherwise keep all but one
        thread of the cluster idle, or need more memory per task than a worker
        has.  Splitting for parallelism keeps blocks at least ``min_rows`` long.
        Where the blocks are few (under ``BALANCE_ROUNDS`` per thread) their
        number is made a multiple of ``min_blocks`` when that needs splitting
        only: 15 blocks on 2 threads would leave one thread idle for the last
        block of every pass.
        """
        chunks = self.chunks
        per_block = -(-min_blocks // len(chunks)) if len(chunks) < min_blocks else 1
        parts = []
        for c in chunks:
            n = max(1, min(per_block, c // min_rows))
            if max_rows:
                n = max(n, -(-c // max(1, int(max_rows))))
            parts.append(n)
        _balance_parts(chunks, parts, max(1, int(min_blocks)), min_rows)
        new = []
        for c, n in zip(chunks, parts):
            base, extra = divmod(c, n)
            new.extend([base + 1] * extra + [base] * (n - extra))
        if len(new) == len(chunks):
            return self
        return DaskBlocks(self.array.rechunk({0: tuple(new)}), self.footprint)

    def persist(self, wait: bool | None = True):
        """Keep the blocks in (cluster) memory; waits until they are there unless ``wait=False``, or
        ``wait=None`` on a cluster of one worker (see :meth:`RowBlocks.persist`)."""
        client = active_client()
        if client is None:
            with single_threaded_blas(), pass_progress(self.n_blocks) as progress, _TaskCounter(progress):
                return DaskBlocks(self.array.persist(), self.footprint)
        with dask.config.set(LARGE_GRAPH):
            array = self.array.persist()
        if wait is None:
            # several workers: wait, so that what runs next is pinned to the holders of the blocks
            # (_map_reduce_futures), and one partial result per worker travels
            wait = len(client.nthreads()) > 1
        if wait:
            futures = futures_of(array)
            with pass_progress(len(futures)) as progress:
                gather(client, futures, results=False, footprint=self.footprint, progress=progress,
                       on_done=None if progress is None else lambda _f: progress.advance())
        return DaskBlocks(array, self.footprint)

    def compute(self):
        (result,) = compute(self.array, footprint=self.footprint)
        return result


def compute(*collections, footprint: TaskFootprint | None = None, progress: PassProgress | None = None):
    """``dask.compute`` that, on a distributed cluster, fails clearly when no worker is left or
    workers keep dying on a task (``footprint``: what a task needs, for that message).

    ``progress`` is kept alive while it waits; on the threaded scheduler it counts finished tasks.
    """
    client = active_client()
    if client is None:
        with single_threaded_blas(), _TaskCounter(progress):  # the scheduler's threads share this process's BLAS
            return dask.compute(*collections)
    with dask.config.set(LARGE_GRAPH):
        futures = client.compute(list(collections))
    return tuple(gather(client, futures, footprint=footprint, progress=progress))


def reduce_parts(parts: list, combine, footprint: TaskFootprint | None = None):
    """Combine the delayed ``parts`` (one per block) in a tree of fan-in :data:`TREE_FANIN` and compute it.

    The pass's progress counts the parts as they finish: on a cluster each part is
    also asked for as an output (released again as soon as it is counted).
    """
    add = dask.delayed(combine, pure=True)
    tree = [add(parts)] if len(parts) == 1 else parts
    while len(tree) > 1:
        tree = [add(tree[i : i + TREE_FANIN]) for i in range(0, len(tree), TREE_FANIN)]
    client = active_client()
    with pass_progress(len(parts)) as progress:
        if client is None or progress is None:
            (result,) = compute(tree[0], footprint=footprint, progress=progress)
            return result
        with dask.config.set(LARGE_GRAPH):
            root, *counted = client.compute([tree[0], *parts])
        for f in counted:
            f.add_done_callback(lambda f: (progress.advance(), f.release()))
        return gather(client, [root], footprint=footprint, progress=progress)[0]


class _TaskCounter(Callback):
    """Counts the threaded scheduler's finished tasks into a pass's progress (none: does nothing)."""

    def __init__(self, progress: PassProgress | None):
        super().__init__()
        self.progress = progress

    def __enter__(self):
        return super().__enter__() if self.progress is not None else self

    def __exit__(self, *args):
        if self.progress is not None:
            super().__exit__(*args)

    def _start_state(self, dsk, state):
        self.progress.set_total(sum(len(state[k]) for k in ("ready", "waiting", "running", "finished")))

    def _posttask(self, key, result, dsk, state, worker_id):
        self.progress.advance()
