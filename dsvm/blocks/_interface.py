"""The row-blocked array every pass over rows goes through: :class:`RowBlocks`.

A :class:`RowBlocks` is a sequence of row blocks (dense ``numpy`` arrays,
``scipy.sparse`` CSR matrices or 1-d vectors), held in this process or
spread over a Dask cluster, or in raw files on a scratch disk (the
implementations of :mod:`dsvm.blocks`).
The rest of the package sees these operations:

* :meth:`RowBlocks.map_reduce` — apply a pure numpy function to every block
  (with aligned blocks of other arrays and a few shared arguments) and sum the
  results (numbers, arrays, or dicts / tuples of them) with a tree reduction;
  one round trip, only the sum comes back;
* :meth:`RowBlocks.map_blocks` — a new row-aligned array, lazily on Dask;
* :meth:`RowBlocks.fold` — a sequential scan over the blocks (stochastic solvers);
* :meth:`RowBlocks.take` — gather a few rows (landmarks) in one pass;
* :meth:`RowBlocks.select_blocks`, :meth:`RowBlocks.compress` — sub-problems of
  in-process blocks (cross-validation folds, row subsamples) without a pass.

Dask row blocks too large for memory are written once to raw files by
:func:`dsvm.blocks.spill_blocks` and read back from there every pass.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

__all__ = ["TREE_FANIN", "tree_add", "tree_sum", "RowBlocks"]

TREE_FANIN = 8


def tree_add(a: Any, b: Any) -> Any:
    """Add two results of the same structure (dict / tuple / list / array / number / None)."""
    return _add_into_made(a, b, {})  # nothing made yet: every sum of arrays is a new array


def tree_sum(parts: Sequence[Any]) -> Any:
    """Sum a sequence of results of identical structure (as :func:`tree_add`).

    An array this sum made (the first ``a + b`` of its place in the structure) takes the later terms in
    place: a pass whose blocks each return a ``(k+1)²`` matrix would otherwise make, page-fault and free a
    new one per block.  The parts themselves are never changed.
    """
    made: dict[int, np.ndarray] = {}  # id -> the array itself, kept alive so that its id stays its own
    out = None
    for p in parts:
        out = _add_into_made(out, p, made)
    return out


def _add_into_made(a: Any, b: Any, made: dict[int, np.ndarray]) -> Any:
    """``tree_add(a, b)``, adding in place into the arrays of ``a`` that are in ``made``; new arrays join it."""
    if a is None:
        return b
    if b is None:
        return a
    if isinstance(a, dict):
        return {key: _add_into_made(a[key], b[key], made) for key in a}
    if isinstance(a, (tuple, list)):
        return type(a)(_add_into_made(x, y, made) for x, y in zip(a, b))
    if id(a) in made and isinstance(b, np.ndarray) and b.shape == a.shape and np.result_type(a, b) == a.dtype:
        np.add(a, b, out=a)
        return a
    out = a + b
    if isinstance(out, np.ndarray) and out.ndim:
        made[id(out)] = out
    return out


class RowBlocks:
    """Abstract row-blocked array.  See the module docstring."""

    chunks: tuple[int, ...]

    @property
    def n_rows(self) -> int:
        return int(sum(self.chunks))

    @property
    def n_blocks(self) -> int:
        return len(self.chunks)

    @property
    def offsets(self) -> np.ndarray:
        return np.concatenate([[0], np.cumsum(self.chunks)]).astype(np.int64)

    # Interface ---------------------------------------------------------
    def map_reduce(
        self,
        fn: Callable,
        aligned: Sequence[RowBlocks | None] = (),
        shared: Sequence[Any] = (),
        combine: Callable[[Sequence[Any]], Any] = tree_sum,
    ) -> Any:
        """``combine([fn(block_i, *aligned_i, *shared) for every block i])``, one round trip.

        ``combine`` must be associative (it is applied in a tree); the default
        adds the results.  ``None`` in ``aligned`` passes ``None`` to ``fn``.
        """
        raise NotImplementedError

    def map_blocks(
        self,
        fn: Callable,
        n_cols: int | None,
        dtype,
        aligned: Sequence[RowBlocks | None] = (),
        shared: Sequence[Any] = (),
        with_offset: bool = False,
    ) -> RowBlocks:
        """A row-aligned array with blocks ``fn(block_i, *aligned_i, *shared)``.

        ``n_cols=None`` means 1-d output.  With ``with_offset`` the function
        also gets ``offset=`` (the index of the block's first row), so errors
        can name the row.
        """
        raise NotImplementedError

    def take(self, indices: np.ndarray):
        """The rows at ``indices`` (any order, repeats allowed) in this process, in that order."""
        raise NotImplementedError

    def fold(self, fn: Callable, state: Any, aligned: Sequence[RowBlocks | None] = (), shared: Sequence[Any] = (),
             order: Sequence[int] | None = None) -> Any:
        """``state = fn(block_i, *aligned_i, state, *shared)`` for the blocks in ``order``.

        A sequential scan (stochastic solvers): on Dask a chain of tasks, one
        per block, run where the blocks live; only the final state comes back.
        """
        raise NotImplementedError

    def persist(self, wait: bool | None = True) -> RowBlocks:
        """Keep the blocks in (cluster) memory; in-process blocks are already there.

        ``wait=False`` returns at once on a cluster: operations on the result
        (a :meth:`map_reduce`) then run on each block as soon as it is there,
        though not pinned to the worker holding it.  ``wait=None`` does so
        where the cluster has one worker (nothing to pin) and waits where it
        has several.
        """
        return self

    def iter_blocks(self, batch: int = 4):
        """Yield the blocks in row order, computing ``batch`` of them at a time."""
        raise NotImplementedError

    def compute(self):
        """The whole array in this process (numpy or CSR)."""
        raise NotImplementedError

    @property
    def n_cols(self) -> int | None:
        """Columns of a 2-d array; None for a vector."""
        raise NotImplementedError

    def select_blocks(self, indices: Sequence[int], split: int = 1) -> RowBlocks:
        """The listed blocks (views, no copy), each cut into ``split`` row slices to give more threads work.

        In-process blocks only (``NotImplementedError`` for Dask blocks).
        """
        raise NotImplementedError

    def compress(self, mask: RowBlocks) -> RowBlocks:
        """The rows where the aligned boolean ``mask`` is true, block by block (copies).

        In-process blocks only (``NotImplementedError`` for Dask blocks).
        """
        raise NotImplementedError

    @property
    def is_distributed(self) -> bool:
        """True for blocks that live on a Dask scheduler (their passes are tasks, not threads here)."""
        return False
