"""Row blocks in raw files on a scratch disk (:class:`FileBlocks`), written once by :func:`spill_blocks`.

The feature store of a fit whose features do not fit in memory.  One file
per block (:mod:`dsvm.blocks._raw_files`): written with ``O_DIRECT`` from the
buffer the block was computed into, read with ``O_DIRECT`` into a buffer the
reading thread reuses, and the block function of the pass applied right
there, in the same task: a pass costs little more than reading the files.

* :func:`spill_blocks` computes every block of a Dask array's rows through a
  block function (the feature map) into the thread's buffer, writes it in a
  helper thread, and meanwhile runs a :class:`BlockReduction` on the block
  while it is in memory (the solver's first evaluations), so the write is
  hidden behind that work and no pass has to read the block back for it.
* :meth:`FileBlocks.map_reduce` is one task per block: read, apply, reduce
  in a tree; only the sum comes back.  The other operations go through the
  same blocks read as a Dask array.

Blocks of values bounded by a known ``bound`` (the RBF kernel's features lie in
``[-1, 1]``) may be stored as 16-bit fixed point (``stored="int16"``): half
the bytes to read every pass, for one multiply to decode
(:data:`FIXED_POINT_STEP` ``x bound`` apart, that is 1.5e-5 for the RBF kernel).
The block the reduction of :func:`spill_blocks` sees is already the decoded
one, so every pass sees the same values.

The files must be on a filesystem every worker sees (as any scratch store).
While a task works on a stored block, :func:`current_block_key` names it, so
that per-process caches of results per block (the margins of a solve) can key on it.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import dask
import dask.array as da
import numpy as np

from ._dask_blocks import DaskBlocks, TaskFootprint, reduce_parts, shared_key
from ._interface import RowBlocks, tree_sum
from ._raw_files import aligned_empty, read_raw, thread_buffer, write_raw

__all__ = ["BlockFile", "BlockReduction", "FileBlocks", "spill_blocks", "current_block_key", "STORED_DTYPES",
           "FIXED_POINT_STEP"]

_CURRENT = threading.local()
#: how blocks may be stored: as computed, or 16-bit fixed point of values within ``[-bound, bound]``
STORED_DTYPES = (None, "int16")
_INT16_MAX = 32767
#: the spacing of 16-bit fixed point, relative to the bound
FIXED_POINT_STEP = 1.0 / _INT16_MAX


@dataclass(frozen=True)
class BlockFile:
    """Where one block lives and what it holds: ``rows x cols`` values of ``dtype`` (row-major), in the
    file as they are, or as ``stored="int16"`` fixed point with ``bound`` mapped to 32767."""

    folder: str
    index: int
    rows: int
    cols: int
    dtype: str
    direct: bool = True
    stored: str | None = None
    bound: float = 1.0

    @property
    def path(self) -> str:
        return f"{self.folder}/block-{self.index}.raw"

    @property
    def nbytes(self) -> int:
        """Bytes of the block's values."""
        return self.rows * self.cols * np.dtype(self.dtype).itemsize

    @property
    def file_bytes(self) -> int:
        """Bytes of the block in its file (before the padding)."""
        return self.rows * self.cols * np.dtype(self.stored or self.dtype).itemsize

    def view(self, raw: np.ndarray, dtype=None) -> np.ndarray:
        """The block as an array of ``dtype`` (default: its values') over the bytes ``raw``."""
        dtype = np.dtype(dtype or self.dtype)
        return raw[: self.rows * self.cols * dtype.itemsize].view(dtype).reshape(self.rows, self.cols)

    def encode(self, values: np.ndarray, raw: np.ndarray) -> None:
        """The fixed point of ``values`` into ``raw``; ``values`` becomes what decoding gives back."""
        np.multiply(values, _INT16_MAX / self.bound, out=values)
        np.rint(values, out=values)
        np.clip(values, -_INT16_MAX, _INT16_MAX, out=values)
        fixed = self.view(raw, self.stored)
        fixed[...] = values
        self.decode(raw, values)

    def decode(self, raw: np.ndarray, values: np.ndarray) -> None:
        """The values of the fixed point in ``raw`` into ``values``."""
        step = np.dtype(self.dtype).type(self.bound / _INT16_MAX)  # a scalar of the values' type: no float64 pass
        np.multiply(self.view(raw, self.stored), step, out=values)


@dataclass(frozen=True)
class BlockReduction:
    """``combine([fn(block_i, *aligned_i, *shared) ...])``: a reduction run on blocks as they are made.

    ``fn`` must not change the block (it is being written meanwhile).
    """

    fn: Callable
    aligned: Sequence[RowBlocks | None] = ()
    shared: Sequence[Any] = ()
    combine: Callable[[Sequence[Any]], Any] = field(default=tree_sum)


def current_block_key() -> tuple[str, int] | None:
    """``(folder, index)`` of the stored block this thread's task is working on, or None."""
    return getattr(_CURRENT, "key", None)


def _read_and_apply(file: BlockFile, fn, *args):
    """One block of a pass: read the file into this thread's buffer (decoded into a second one), apply ``fn``."""
    if file.stored is None:
        raw = thread_buffer(file.nbytes)
        read_raw(file.path, raw, file.direct)
        block = file.view(raw)
    else:
        raw = thread_buffer(file.file_bytes, "stored")
        read_raw(file.path, raw, file.direct)
        block = file.view(thread_buffer(file.nbytes))
        file.decode(raw, block)
    block.flags.writeable = False
    _CURRENT.key = (file.folder, file.index)
    try:
        return fn(block, *args)
    finally:
        _CURRENT.key = None


def _read_block(file: BlockFile) -> np.ndarray:
    """A block read into memory of its own (it outlives the task)."""
    raw = aligned_empty(file.file_bytes)
    read_raw(file.path, raw, file.direct)
    if file.stored is None:
        return file.view(raw)
    values = np.empty((file.rows, file.cols), dtype=file.dtype)
    file.decode(raw, values)
    return values


def _spill_task(block, file: BlockFile, offset, fn, shared, reduction_fn, reduction_aligned, reduction_shared):
    """``fn`` of one block into this thread's buffer, written by a helper thread while ``reduction_fn`` reads it."""
    values = thread_buffer(file.nbytes)
    out = file.view(values)
    kw = {} if offset is None else {"offset": offset}
    made = fn(block, *shared, out=out, **kw)
    if made is not out:
        np.copyto(out, made)
    if file.stored is None:
        raw = values
    else:
        raw = thread_buffer(file.file_bytes, "stored")
        file.encode(out, raw)
    raw[file.file_bytes :] = 0  # the padding: a file's content is determined by its block
    failed: list[BaseException] = []

    def write():
        try:
            write_raw(file.path, raw, file.direct)
        except BaseException as exc:  # raised below, in the task
            failed.append(exc)

    writer = threading.Thread(target=write, name="dsvm-block-writer")
    writer.start()
    try:
        if reduction_fn is None:
            result = None
        else:
            out.flags.writeable = False
            _CURRENT.key = (file.folder, file.index)
            try:
                result = reduction_fn(out, *reduction_aligned, *reduction_shared)
            finally:
                _CURRENT.key = None
    finally:
        writer.join()  # the buffer is this thread's: its next task may reuse it
    if failed:
        raise failed[0]
    return result


def _delayed_blocks(rb: RowBlocks | None, n: int):
    if rb is None:
        return [None] * n
    if isinstance(rb, FileBlocks):
        rb = rb.as_dask()
    if not isinstance(rb, DaskBlocks):
        raise TypeError("blocks aligned with Dask row blocks must be Dask (or file) row blocks")
    return rb.delayed_blocks()


class FileBlocks(RowBlocks):
    """Row blocks in raw files (see the module docstring); made by :func:`spill_blocks`."""

    def __init__(self, files: Sequence[BlockFile], footprint: TaskFootprint | None = None):
        self.files = list(files)
        self.chunks = tuple(f.rows for f in self.files)
        self.footprint = footprint
        self._dask: DaskBlocks | None = None

    @property
    def is_distributed(self) -> bool:
        return True

    @property
    def n_cols(self) -> int | None:
        return self.files[0].cols

    @property
    def nbytes(self) -> int:
        """Bytes of the blocks (the files hold them padded to pages)."""
        return sum(f.nbytes for f in self.files)

    def as_dask(self) -> DaskBlocks:
        """The blocks as Dask row blocks that read the files (each block into memory of its own)."""
        if self._dask is None:
            read = dask.delayed(_read_block, pure=True)
            parts = [da.from_delayed(read(f), shape=(f.rows, f.cols), dtype=f.dtype) for f in self.files]
            self._dask = DaskBlocks(da.concatenate(parts, axis=0), self.footprint)
        return self._dask

    def map_reduce(self, fn, aligned=(), shared=(), combine=tree_sum):
        extra = [_delayed_blocks(a, self.n_blocks) for a in aligned]
        shared_keys = [shared_key(s) for s in shared]
        call = dask.delayed(_read_and_apply, pure=True)
        parts = [call(f, fn, *[e[i] for e in extra], *shared_keys) for i, f in enumerate(self.files)]
        return reduce_parts(parts, combine, self.footprint)

    def map_blocks(self, fn, n_cols, dtype, aligned=(), shared=(), with_offset=False):
        return self.as_dask().map_blocks(fn, n_cols, dtype, aligned, shared, with_offset)

    def take(self, indices):
        return self.as_dask().take(indices)

    def fold(self, fn, state, aligned=(), shared=(), order=None):
        return self.as_dask().fold(fn, state, aligned, shared, order)

    def iter_blocks(self, batch: int = 4):
        return self.as_dask().iter_blocks(batch)

    def compute(self):
        return self.as_dask().compute()

    def persist(self, wait: bool | None = True) -> RowBlocks:
        return self.as_dask().persist(wait)


def spill_blocks(X: RowBlocks, fn: Callable, n_cols: int, dtype, folder: str, *, shared: Sequence[Any] = (),
                 with_offset: bool = False, reduction: BlockReduction | None = None, direct: bool = True,
                 stored: str | None = None, bound: float = 1.0) -> tuple[FileBlocks, Any]:
    """Blocks ``fn(X_i, *shared, out=buffer)`` written once to raw files in ``folder``; ``reduction`` on them meanwhile.

    ``fn`` fills ``out`` (``rows x n_cols``, ``dtype``) and returns it (or
    returns an array that is copied there).  With ``with_offset`` it also gets
    ``offset=`` (the index of the block's first row).  ``reduction``, if given, is
    applied to every new block while it is being written; its combined result
    is returned with the blocks (None without).  ``direct=False`` writes and
    reads through the page cache.  ``stored="int16"`` keeps the blocks as 16-bit
    fixed point of values within ``[-bound, bound]`` (larger ones are clipped).
    ``X`` must be Dask (or file) row blocks:
    in-process blocks are in memory already.  ``folder`` must exist and be
    visible to every worker.
    """
    if isinstance(X, FileBlocks):
        X = X.as_dask()
    if not isinstance(X, DaskBlocks):
        raise NotImplementedError("spill_blocks() is for Dask row blocks; in-process blocks are in memory already")
    if stored not in STORED_DTYPES:
        raise ValueError(f"stored={stored!r}: blocks are stored as computed (None) or as 'int16'")
    if stored is not None and np.dtype(dtype).kind != "f":
        raise ValueError(f"only floating-point blocks can be stored as {stored}, not {np.dtype(dtype)}")
    dtype = np.dtype(dtype).str
    files = [BlockFile(str(folder), i, int(c), int(n_cols), dtype, bool(direct), stored, float(bound))
             for i, c in enumerate(X.chunks)]
    blocks = X.delayed_blocks()
    offsets = X.offsets
    reduction_extra = [_delayed_blocks(a, len(blocks)) for a in (reduction.aligned if reduction is not None else ())]
    task = dask.delayed(_spill_task, pure=False)
    shared_keys = [shared_key(s) for s in shared]
    reduction_fn = None if reduction is None else shared_key(reduction.fn)
    reduction_shared = [] if reduction is None else [shared_key(s) for s in reduction.shared]
    parts = [task(b, f, int(offsets[i]) if with_offset else None, fn, shared_keys, reduction_fn,
                  [e[i] for e in reduction_extra], reduction_shared)
             for i, (b, f) in enumerate(zip(blocks, files))]
    result = reduce_parts(parts, reduction.combine if reduction is not None else _nothing, X.footprint)
    return FileBlocks(files, X.footprint), result


def _nothing(parts):
    return None
