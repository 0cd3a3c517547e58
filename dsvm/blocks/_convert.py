"""Input as :class:`~dsvm.blocks.RowBlocks`: numpy, scipy.sparse or Dask arrays, and arrays aligned with them."""

from __future__ import annotations

import warnings
from typing import Any

import dask
import dask.array as da
import numpy as np
from dask.base import is_dask_collection as _is_dask_collection

from ._dask_blocks import DaskBlocks, check_row_chunks
from ._in_memory import InMemoryBlocks
from ._interface import RowBlocks

__all__ = ["is_dask_array", "is_dask_collection", "is_dask_frame", "dask_frame_input", "check_dask_X", "as_row_blocks",
           "from_blocks", "aligned_vector", "row_index_blocks", "lazy_result"]


def is_dask_array(x: Any) -> bool:
    """True for a ``dask.array.Array``."""
    return isinstance(x, da.Array)


def is_dask_collection(x: Any) -> bool:
    """True for any Dask collection (array, delayed, dataframe, ...)."""
    return _is_dask_collection(x)


def is_dask_frame(x: Any) -> bool:
    """True for a Dask DataFrame or Series (without importing ``dask.dataframe``)."""
    return type(x).__module__.startswith("dask") and hasattr(x, "npartitions") and hasattr(x, "to_dask_array")


def _float_frame(X):
    """A Dask DataFrame whose columns are all numbers, as one float dtype (mixed columns would give objects)."""
    kinds = []
    for name, dtype in X.dtypes.items():
        try:
            kinds.append(np.dtype(dtype).kind)
        except TypeError:  # a pandas extension dtype: nullable integers, strings, categories
            kinds.append("?")
        if kinds[-1] not in "biuf":
            raise ValueError(f"X: column {name!r} of the DataFrame holds {dtype} values; dsvm's features are numbers "
                             "(bool, integer, float) without missing values: encode it first or drop it")
    if all(k == "f" for k in kinds) and len({np.dtype(d) for d in X.dtypes}) == 1:
        return X
    return X.astype(np.float64)


def dask_frame_input(X, y=None) -> tuple[Any, Any, list[str] | None]:
    """A Dask DataFrame as a row-chunked Dask array, a Dask Series ``y`` likewise, and the column names.

    The partition lengths (of X and y together) are computed in one pass on
    the cluster; only those numbers come back, the rows stay where they are.
    Column names are returned only when they are all strings (as
    scikit-learn's ``feature_names_in_``).
    """
    names = [str(c) for c in X.columns] if all(isinstance(c, str) for c in X.columns) else None
    X = _float_frame(X)
    y_frame = is_dask_frame(y)
    lengths = dask.compute(X.map_partitions(len), *( [y.map_partitions(len)] if y_frame else []))
    X_arr = X.to_dask_array(lengths=tuple(int(n) for n in lengths[0]))
    if y_frame:
        with warnings.catch_warnings():  # string labels become an object array, which is what dsvm reads
            warnings.filterwarnings("ignore", message=".*pandas extension dtypes", category=UserWarning)
            y = y.to_dask_array(lengths=tuple(int(n) for n in lengths[1]))
    return X_arr, y, names


def check_dask_X(X, what: str = "X") -> None:
    """Validate a dask array of features without computing it."""
    if X.ndim != 2:
        raise ValueError(f"{what} must be 2-dimensional (rows x features), got a {X.ndim}-d dask array")
    check_row_chunks(X, what)
    kind = np.dtype(X.dtype).kind
    if kind not in "biuf":
        raise ValueError(f"{what} must hold numbers, got a dask array of dtype {X.dtype}")
    if X.shape[0] == 0:
        raise ValueError(f"{what} has 0 rows")
    if X.shape[1] == 0:
        raise ValueError(f"{what} has 0 features")


def as_row_blocks(X, block_rows: int, min_blocks: int | None = None) -> RowBlocks:
    """Wrap numpy / scipy.sparse / dask input as :class:`RowBlocks`.

    In-memory input is split into blocks of at most ``block_rows`` rows and,
    unless ``min_blocks=1`` (an explicit block size), into enough blocks to
    keep every core busy.
    """
    if isinstance(X, RowBlocks):
        return X
    if is_dask_array(X):
        return DaskBlocks(X)
    return InMemoryBlocks.from_array(X, block_rows, min_blocks=min_blocks)


def from_blocks(blocks) -> RowBlocks:
    """In-process row blocks from a list of arrays (no copy)."""
    return InMemoryBlocks(blocks)


def aligned_vector(v, like: RowBlocks) -> RowBlocks:
    """A 1-d vector split into blocks aligned with ``like``'s rows."""
    if isinstance(like, DaskBlocks):
        if is_dask_array(v):
            return DaskBlocks(v.rechunk((like.array.chunks[0],)))
        return DaskBlocks(da.from_array(np.asarray(v), chunks=(like.array.chunks[0],)))
    v = np.asarray(v)
    off = like.offsets
    return InMemoryBlocks([v[off[i] : off[i + 1]] for i in range(like.n_blocks)])


def row_index_blocks(like: RowBlocks) -> RowBlocks:
    """The global row index of every row, blocked like ``like`` (lazy for Dask)."""
    if isinstance(like, DaskBlocks):
        return DaskBlocks(da.arange(like.n_rows, chunks=(like.array.chunks[0],), dtype=np.int64))
    off = like.offsets
    return InMemoryBlocks([np.arange(off[i], off[i + 1], dtype=np.int64) for i in range(like.n_blocks)])


def lazy_result(rb: RowBlocks):
    """The array behind ``rb``: a dask array for Dask blocks, numpy otherwise."""
    if isinstance(rb, DaskBlocks):
        return rb.array
    return rb.compute()
