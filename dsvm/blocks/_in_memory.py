"""Row blocks held in this process (:class:`InMemoryBlocks`); block functions run in a thread pool."""

from __future__ import annotations

import functools
import os
import threading
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np
import scipy.sparse as sp

from ..blas import single_threaded_blas
from ..progress import pass_progress
from ._interface import TREE_FANIN, RowBlocks, tree_sum

__all__ = ["InMemoryBlocks"]

_POOL = None
_POOL_LOCK = threading.Lock()


def _thread_pool():
    global _POOL
    with _POOL_LOCK:
        if _POOL is None:
            _POOL = ThreadPoolExecutor(max_workers=os.cpu_count() or 1, thread_name_prefix="dsvm-block")
        return _POOL


def _block_results(calls: list[Callable[[], Any]]) -> Iterator[Any]:
    """The block calls' results in block order, run in parallel threads (BLAS single-threaded); the pass's
    progress counts them (:func:`~dsvm.blocks.pass_progress`).  A result is let go once it is handed out."""
    with single_threaded_blas(), pass_progress(len(calls)) as progress:
        advance = progress.advance if progress is not None else lambda: None
        if len(calls) == 1 or (os.cpu_count() or 1) == 1 or threading.current_thread().name.startswith("dsvm-block"):
            for call in calls:
                result = call()
                advance()
                yield result
            return
        futures = [_thread_pool().submit(call) for call in calls]
        for f in futures:
            f.add_done_callback(lambda _f: advance())
        for i in range(len(futures)):
            result, futures[i] = futures[i].result(), None
            yield result


def _run_blocks(calls: list[Callable[[], Any]]) -> list[Any]:
    """The block calls' results, in order (:func:`_block_results`)."""
    return list(_block_results(calls))


def _reduce_blocks(calls: list[Callable[[], Any]], combine: Callable) -> Any:
    """``combine`` of the block calls' results, folded in block order as they come in (:func:`_block_results`).

    Every :data:`TREE_FANIN` results are combined with what came before (``combine`` is associative), so
    only those not yet folded are held: a pass whose blocks each return a large sum (a Gram matrix of
    ``(k+1)²`` floats) holds a few of them, not one per block, and a concatenating combine copies each
    result a few times, not once per block.  A single result still goes through ``combine``.
    """
    if not calls:
        return combine([])
    acc, held = None, []
    for result in _block_results(calls):
        held.append(result)
        if len(held) == TREE_FANIN:
            acc, held = combine(held if acc is None else [acc, *held]), []
    return combine(held if acc is None else [acc, *held]) if held else acc


class InMemoryBlocks(RowBlocks):
    """Row blocks held in this process; block functions run in a small thread pool."""

    def __init__(self, blocks: Sequence[Any]):
        self.blocks = list(blocks)
        self.chunks = tuple(int(b.shape[0]) for b in self.blocks)

    @classmethod
    def from_array(cls, X, block_rows: int, min_blocks: int | None = None, min_rows: int = 4096) -> InMemoryBlocks:
        """Split ``X`` into blocks of at most ``block_rows`` rows, and into at least
        ``min_blocks`` (default: two per core) when that leaves ``min_rows`` per block."""
        n = X.shape[0]
        if min_blocks is None:
            min_blocks = 2 * (os.cpu_count() or 1)
        block_rows = max(1, min(int(block_rows), max(min_rows, -(-n // max(1, min_blocks)))))
        if sp.issparse(X):
            X = X.tocsr()
        starts = range(0, max(n, 1), block_rows)
        return cls([X[s : s + block_rows] for s in starts] if n else [X])

    def map_reduce(self, fn, aligned=(), shared=(), combine=tree_sum):
        calls = []
        for i, block in enumerate(self.blocks):
            extra = [a.blocks[i] if a is not None else None for a in aligned]
            calls.append(functools.partial(fn, block, *extra, *shared))
        return _reduce_blocks(calls, combine)

    def map_blocks(self, fn, n_cols, dtype, aligned=(), shared=(), with_offset=False):
        calls = []
        offsets = self.offsets
        for i, block in enumerate(self.blocks):
            extra = [a.blocks[i] if a is not None else None for a in aligned]
            kw = {"offset": int(offsets[i])} if with_offset else {}
            calls.append(functools.partial(fn, block, *extra, *shared, **kw))
        return InMemoryBlocks(_run_blocks(calls))

    def take(self, indices):
        indices = np.asarray(indices, dtype=np.int64)
        X = self.compute()
        return X[indices]

    @property
    def n_cols(self) -> int | None:
        first = self.blocks[0]
        return int(first.shape[1]) if first.ndim == 2 else None

    def select_blocks(self, indices, split: int = 1) -> InMemoryBlocks:
        split = max(1, int(split))
        views = []
        for i in indices:
            b = self.blocks[i]
            if split == 1 or b.shape[0] == 0:
                views.append(b)
                continue
            step = -(-b.shape[0] // split)
            views += [b[a : a + step] for a in range(0, b.shape[0], step)]
        return InMemoryBlocks(views)

    def compress(self, mask: RowBlocks) -> InMemoryBlocks:
        return InMemoryBlocks([b[np.asarray(m, dtype=bool)] for b, m in zip(self.blocks, mask.blocks)])

    def iter_blocks(self, batch: int = 4):
        yield from self.blocks

    def fold(self, fn, state, aligned=(), shared=(), order=None):
        with single_threaded_blas():
            for i in (range(self.n_blocks) if order is None else order):
                extra = [a.blocks[i] if a is not None else None for a in aligned]
                state = fn(self.blocks[i], *extra, state, *shared)
        return state

    def compute(self):
        if len(self.blocks) == 1:
            return self.blocks[0]
        if sp.issparse(self.blocks[0]):
            return sp.vstack(self.blocks, format="csr")
        return np.concatenate(self.blocks, axis=0)
