"""Write rows from a :class:`~dsvm.io._sources.RowSource` into the dataset layout.

One task per row chunk reads its rows from the source, checks them, and
writes its own zarr chunks of ``X`` and ``y`` (never a chunk another task
writes), so the tasks run in parallel on threads or on a Dask cluster.  The
driver only creates the arrays and, at the end, writes the attributes (with
the label set the tasks report).

Dense or sparse storage (``dense=None``)
    Rows that come dense (numpy, ``.npy``, CSV, dense Dask arrays) are stored
    dense.  Rows that come sparse (LIBSVM text, scipy.sparse, sparse Dask
    arrays) are stored dense when their density ``nnz / (n_samples *
    n_features)`` is at least ``dsvm.io.dense-density`` (Dask config, default
    0.25: there dense float32 storage is at most twice the CSR storage of 8
    bytes per entry and dense kernels are much faster), else as CSR.

Chunk size (``chunk_rows=None``)
    ``chunk_bytes`` (default ``dsvm.io.chunk-bytes``, 64 MiB) divided by the
    bytes of one stored row (``n_features * itemsize`` dense, average entries
    per row times value + index size sparse), rounded down to a multiple of
    1024 rows when above 4096, and at most ``n_samples``.
"""

from __future__ import annotations

import logging
import math
import uuid
from pathlib import Path
from typing import Any

import dask
import dask.array as da
import numpy as np
import scipy.sparse as sp
import zarr

from .. import config
from ..blocks import is_dask_array
from ..exceptions import disk_full_names
from ._dataset import open_dataset
from ._dataset_target import atomic_target
from ._labels import block_labels, check_numeric_labels, is_numeric_labels, storable_labels, with_class_names
from ._layout import (
    INT_LABEL_FILL,
    base_attrs,
    chunk_bounds,
    chunk_checksum,
    create_layout,
    format_version_for,
    n_chunks_for,
    seal_of,
    to_json_scalar,
    write_attrs,
)
from ._progress import ProgressBar, compute_tasks
from ._replace import local_target
from ._sources import ArraySource, Part, RowSource, StagedSource, label_dtype, save_part

logger = logging.getLogger(__name__)

__all__ = ["write_dataset", "write_source", "choose_dense", "choose_chunk_rows", "stage_dask_arrays", "stored_bytes_bound"]

COUNT_BLOCK_ROWS = 1024  # granularity of the non-zero count of dense rows stored sparse


def check_dtype(dtype) -> np.dtype:
    dtype = np.dtype(dtype)
    if dtype not in (np.dtype(np.float32), np.dtype(np.float64)):
        raise ValueError(f"dtype must be float32 or float64, got {dtype}")
    return dtype


def choose_dense(sparse_source: bool, nnz: int | None, n_rows: int, n_features: int, dense: bool | None) -> bool:
    """Storage rule, see the module docstring."""
    if dense is not None:
        return bool(dense)
    if not sparse_source:
        return True
    cells = n_rows * n_features
    if cells == 0:
        return True
    return nnz / cells >= float(config.get("io.dense-density"))


def choose_chunk_rows(
    n_rows: int,
    n_features: int,
    nnz: int,
    dense: bool,
    dtype: np.dtype,
    chunk_rows: int | None = None,
    chunk_bytes: int | None = None,
) -> int:
    """Rows per chunk, see the module docstring."""
    if chunk_rows is not None:
        if int(chunk_rows) != chunk_rows or chunk_rows < 1:
            raise ValueError(f"chunk_rows must be a positive integer, got {chunk_rows!r}")
        return int(min(int(chunk_rows), max(n_rows, 1)))
    if chunk_bytes is None:
        chunk_bytes = int(config.get("io.chunk-bytes"))
    if chunk_bytes <= 0:
        raise ValueError(f"chunk_bytes must be positive, got {chunk_bytes!r}")
    itemsize = np.dtype(dtype).itemsize
    if dense:
        row_bytes = n_features * itemsize
    else:
        row_bytes = (nnz / max(n_rows, 1)) * (itemsize + 4) + 8
    rows = int(chunk_bytes // max(row_bytes, 1))
    if rows > 4096:
        rows -= rows % 1024
    return int(min(max(rows, 1), max(n_rows, 1)))


def stored_bytes_bound(source: RowSource, dtype) -> float:
    """Bytes of ``source``'s rows stored uncompressed (the dataset takes at most about this)."""
    itemsize = np.dtype(dtype).itemsize
    labels = 8.0 * source.n_rows
    if source.sparse and source.nnz is not None:
        return source.nnz * (itemsize + 4.0) + 8.0 * source.n_rows + labels
    return float(source.n_rows) * source.n_features * itemsize + labels


# tasks -----------------------------------------------------------------------
def _count_nnz(source: RowSource, start: int, stop: int, block: int) -> np.ndarray:
    """Non-zeros of ``source`` rows ``[start, stop)`` per ``block`` rows."""
    out = []
    for a in range(start, stop, block):
        X, _ = source.read(a, min(a + block, stop))
        out.append(X.nnz if sp.issparse(X) else np.count_nonzero(X))
    return np.asarray(out, dtype=np.int64)


def _count_tasks(src, bounds: np.ndarray, local: bool) -> np.ndarray:
    """Non-zeros between consecutive ``bounds``, one task per interval."""
    tasks = [_task(_count_nnz)(src, int(a), int(b), int(b - a)) for a, b in zip(bounds[:-1], bounds[1:])]
    return np.concatenate(compute_tasks(tasks, local=local)).astype(np.int64)


def _bad_row(mask_rows: np.ndarray, start: int) -> int:
    return start + int(np.flatnonzero(mask_rows)[0])


def _write_chunk(source: RowSource, root: str, i: int, start: int, stop: int, layout: dict, nnz_i: int):
    """Write row chunk ``i`` (``nnz_i`` entries if sparse).

    Returns ``(labels, counts, X checksum, y checksum)``: the distinct labels
    of its rows with their counts, and the checksums of what it wrote (see
    :func:`dsvm.io._layout.chunk_checksum`).
    """

    X, y = source.read(start, stop)
    m = stop - start
    if X.shape[0] != m or np.shape(y) != (m,):
        raise ValueError(f"rows {start}-{stop - 1}: got {X.shape[0]} rows of X and {np.shape(y)} labels")
    y = np.asarray(y)
    y_dtype = np.dtype(layout["y_dtype"])
    if y_dtype.kind == "f":
        y = y.astype(np.float64)
        bad = ~np.isfinite(y)
    else:
        if y.dtype.kind == "f":
            raise TypeError(f"rows {start}-{stop - 1}: float labels where integer labels were expected")
        if y.dtype.kind == "u":  # int64 is what is stored: an unsigned label beyond it would wrap to a negative one
            check_numeric_labels(y, f"rows {start}-{stop - 1}")
        y = y.astype(np.int64)
        bad = y == INT_LABEL_FILL
    if bad.any():
        raise ValueError(f"label of row {_bad_row(bad, start)} is not a valid number ({y[bad][0]!r})")
    dtype = np.dtype(layout["dtype"])
    with np.errstate(over="ignore", invalid="ignore"):
        if layout["dense"]:
            Xd = X.toarray() if sp.issparse(X) else np.asarray(X)
            Xd = np.ascontiguousarray(Xd, dtype=dtype)
            finite = np.isfinite(Xd)
            if not finite.all():
                raise ValueError(
                    f"row {_bad_row(~finite.all(axis=1), start)} of X has a value that is NaN, infinite "
                    f"or too large for {dtype.name}"
                )
            zarr.open_array(root, path="X", mode="r+")[start:stop] = Xd
            x_sum = chunk_checksum(i, Xd)
        else:
            Xc = sp.csr_matrix(X) if sp.issparse(X) else sp.csr_matrix(np.asarray(X))
            data = Xc.data.astype(dtype, copy=False)
            if not np.isfinite(data).all():
                pos = int(np.flatnonzero(~np.isfinite(data))[0])
                row = int(np.searchsorted(Xc.indptr, pos, side="right") - 1)
                raise ValueError(
                    f"row {start + row} of X has a value that is NaN, infinite or too large for {dtype.name}"
                )
            nnz = int(Xc.nnz)
            if nnz != nnz_i:
                raise RuntimeError(f"chunk {i}: {nnz} entries, {nnz_i} expected")
            width = layout["width"]
            indptr = np.full((1, layout["chunk_rows"] + 1), nnz, dtype=np.int64)
            indptr[0, : m + 1] = Xc.indptr
            vals = np.zeros((1, width), dtype=dtype)
            vals[0, :nnz] = data
            cols = np.zeros((1, width), dtype=layout["index_dtype"])
            cols[0, :nnz] = Xc.indices
            zarr.open_array(root, path="X/indptr", mode="r+")[i : i + 1] = indptr
            zarr.open_array(root, path="X/indices", mode="r+")[i : i + 1] = cols
            zarr.open_array(root, path="X/data", mode="r+")[i : i + 1] = vals
            x_sum = chunk_checksum(i, indptr[0, : m + 1], cols[0, :nnz], vals[0, :nnz])
    zarr.open_array(root, path="y", mode="r+")[start:stop] = y
    labels, counts = np.unique(y, return_counts=True)
    return labels, counts, x_sum, chunk_checksum(i, y)


def _task(fn):
    return dask.delayed(fn, pure=False)


def write_source(
    source: RowSource,
    root: str,
    *,
    dense: bool | None = None,
    chunk_rows: int | None = None,
    chunk_bytes: int | None = None,
    dtype="float32",
    attrs: dict | None = None,
    progress: bool = False,
    label: str = "write",
) -> dict[str, Any]:
    """Write all rows of ``source`` as a new dataset group at ``root``; returns its attributes."""

    dtype = check_dtype(dtype)
    n, p = source.n_rows, source.n_features
    if n == 0:
        raise ValueError("there are no rows to write (the input is empty)")
    local = source.local
    src = dask.delayed(source, name=f"dsvm-source-{uuid.uuid4().hex}")
    store_dense, rows, bounds, chunk_nnz = _chunk_plan(source, src, dtype, dense, chunk_rows, chunk_bytes)
    n_chunks = n_chunks_for(n, rows)
    index_dtype = np.dtype(np.int32 if p < 2**31 else np.int64)
    create_layout(
        root,
        n_samples=n,
        n_features=p,
        chunk_rows=rows,
        sparse=not store_dense,
        dtype=dtype,
        y_dtype=source.y_dtype,
        chunk_nnz=chunk_nnz,
        index_dtype=index_dtype,
    )
    layout = {
        "dense": store_dense,
        "dtype": dtype.str,
        "y_dtype": source.y_dtype.str,
        "chunk_rows": rows,
        "index_dtype": index_dtype.str,
        "width": None if chunk_nnz is None else max(1, int(chunk_nnz.max())),
    }
    results = _write_chunks(src, root, bounds, layout, chunk_nnz, local, progress, label)
    final = _dataset_attrs(source, layout, n_chunks, chunk_nnz, results, attrs)
    write_attrs(root, final)
    logger.info(
        "wrote %d rows x %d features (%s, %d chunks of %d rows) to %s",
        n, p, "dense" if store_dense else "CSR", n_chunks, rows, root,
    )
    return final


def _chunk_plan(
    source: RowSource, src, dtype: np.dtype, dense: bool | None, chunk_rows: int | None, chunk_bytes: int | None,
) -> tuple[bool, int, np.ndarray, np.ndarray | None]:
    """How ``source`` is stored: ``(dense, rows per chunk, chunk bounds, non-zeros per chunk or None)``.

    The non-zeros per chunk (None for dense storage) size the CSR arrays.  ``src`` is ``source`` as a
    Dask object, for the tasks that count the non-zeros of dense rows stored sparse.
    """
    n, p = source.n_rows, source.n_features
    store_dense = choose_dense(source.sparse, source.nnz, n, p, dense)
    nnz = source.nnz
    rows = None
    chunk_nnz = block_counts = None
    if not store_dense and nnz is None:
        # dense rows stored sparse: count the non-zeros first (per chunk, or per
        # COUNT_BLOCK_ROWS rows when the chunk size still depends on the count)
        step = min(int(chunk_rows), n) if chunk_rows is not None else COUNT_BLOCK_ROWS
        block_counts = _count_tasks(src, chunk_bounds(n, step), source.local)
        nnz = int(block_counts.sum())
        if chunk_rows is not None:
            rows, chunk_nnz = step, block_counts
    if rows is None:
        rows = choose_chunk_rows(n, p, nnz if nnz is not None else n * p, store_dense, dtype, chunk_rows, chunk_bytes)
    bounds = chunk_bounds(n, rows)
    if not store_dense and chunk_nnz is None:
        if block_counts is not None and rows % COUNT_BLOCK_ROWS == 0:
            chunk_nnz = np.add.reduceat(block_counts, np.arange(0, len(block_counts), rows // COUNT_BLOCK_ROWS))
        else:
            chunk_nnz = source.chunk_nnz(bounds)
            if chunk_nnz is None:
                chunk_nnz = _count_tasks(src, bounds, source.local)
    if chunk_nnz is not None:
        chunk_nnz = np.asarray(chunk_nnz, dtype=np.int64)
    return store_dense, rows, bounds, chunk_nnz


def _write_chunks(src, root: str, bounds: np.ndarray, layout: dict, chunk_nnz: np.ndarray | None, local: bool,
                  progress: bool, label: str) -> list:
    """Run one :func:`_write_chunk` task per row chunk, with a progress bar; returns their results in chunk order."""
    tasks = [
        _task(_write_chunk)(
            src, root, i, int(bounds[i]), int(bounds[i + 1]), layout, -1 if chunk_nnz is None else int(chunk_nnz[i])
        )
        for i in range(len(bounds) - 1)
    ]
    bar = ProgressBar(int(bounds[-1]), label=label, unit="rows", enabled=progress)
    try:
        return compute_tasks(tasks, weights=np.diff(bounds).tolist(), bar=bar, local=local)
    finally:
        bar.close()


def _label_counts(results: list) -> tuple[list, list[int]]:
    """The distinct labels the chunk tasks report, sorted, and the rows of each (summed over the chunks)."""
    counts: dict[Any, int] = {}
    for labels, c, _, _ in results:
        for lab, k in zip(labels.tolist(), c.tolist()):
            counts[lab] = counts.get(lab, 0) + int(k)
    classes = sorted(counts)
    if len(classes) > 1000:
        logger.warning("%d distinct labels: is this a regression target?", len(classes))
    return classes, [counts[c] for c in classes]


def _dataset_attrs(source: RowSource, layout: dict, n_chunks: int, chunk_nnz: np.ndarray | None, results: list,
                   attrs: dict | None) -> dict[str, Any]:
    """The written dataset's attributes: shape, storage, labels, ``attrs``, the chunk checksums, the seal.

    ``results`` are the chunk tasks' (labels, counts, X checksum, y checksum), in chunk order.
    """
    n, p = source.n_rows, source.n_features
    store_dense = layout["dense"]
    classes, class_counts = _label_counts(results)
    final = base_attrs(
        n_samples=n,
        n_features=p,
        nnz=int(n * p if store_dense else chunk_nnz.sum()),
        sparse=not store_dense,
        chunk_rows=layout["chunk_rows"],
        n_chunks=n_chunks,
        dtype=np.dtype(layout["dtype"]).name,
        y_dtype=source.y_dtype.name,
        classes=[to_json_scalar(c) for c in classes],
        class_counts=class_counts,
    )
    if not store_dense:
        final["index_dtype"] = np.dtype(layout["index_dtype"]).name
    final.update(attrs or {})
    final["format_version"] = format_version_for(final)
    final["checksums"] = {"X": [r[2] for r in results], "y": [r[3] for r in results]}
    final["seal"] = seal_of(final)
    return final


# Dask inputs -------------------------------------------------------------------
def _stage_block(X, y, prefix: str, dtype: str) -> tuple[Part, dict]:
    """One Dask block saved as a staging part, and what its labels are (:func:`dsvm.io._labels.block_labels`)."""
    dtype = np.dtype(dtype)
    y = np.asarray(y)
    if np.shape(y) != (X.shape[0],):
        raise ValueError(f"a block of X has {X.shape[0]} rows but its block of y has shape {np.shape(y)}")
    with np.errstate(over="ignore", invalid="ignore"):
        if sp.issparse(X):
            X = sp.csr_matrix(X)
            X.sort_indices()
            X = sp.csr_matrix((X.data.astype(dtype, copy=False), X.indices, X.indptr), shape=X.shape)
        else:
            X = np.asarray(X)
            if X.dtype.kind not in "biuf":
                raise TypeError(f"X must be numeric, got dtype {X.dtype}")
            X = X.astype(dtype, copy=False)
    y = storable_labels(y)
    return save_part(prefix, X, y), block_labels(y)


def stage_dask_arrays(X, y, staging: Path, dtype, progress: bool = False) -> tuple[RowSource, dict[str, Any]]:
    """Compute the blocks of Dask ``X`` (and ``y``) into staging parts, in parallel.

    Returns the rows as a source to write and the attributes of their labels
    (``class_names`` for labels that are not numbers, see :mod:`dsvm.io._labels`).
    """

    if X.ndim != 2 or math.isnan(X.shape[1]):
        raise ValueError(f"X must be 2-dimensional with a known number of columns, got shape {X.shape}")
    if X.numblocks[1] != 1:
        X = X.rechunk({1: -1})
    if isinstance(y, da.Array):
        if y.ndim != 1:
            raise ValueError(f"y must be 1-dimensional, got shape {y.shape}")
        if y.chunks[0] != X.chunks[0]:
            if any(math.isnan(c) for c in X.chunks[0] + y.chunks[0]):
                raise ValueError("X and y have unknown chunk sizes that may differ; call compute_chunk_sizes()")
            y = y.rechunk((X.chunks[0],))
    else:
        y = np.asarray(y)
        if any(math.isnan(c) for c in X.chunks[0]):
            raise ValueError("X has unknown chunk sizes; call X.compute_chunk_sizes() or pass y as a Dask array")
        y = da.from_array(y, chunks=(X.chunks[0],))
    y_dtype = label_dtype(np.empty(0, dtype=y.dtype))
    staging.mkdir(parents=True, exist_ok=True)
    xb = X.to_delayed().ravel()
    yb = y.to_delayed().ravel()
    tasks = [
        _task(_stage_block)(xb[k], yb[k], str(staging / f"part-{k:06d}"), np.dtype(dtype).str)
        for k in range(len(xb))
    ]
    results = compute_tasks(tasks, bar=ProgressBar(len(tasks), "stage", unit="blocks", enabled=progress))
    staged = StagedSource([r[0] for r in results], n_features=int(X.shape[1]), y_dtype=y_dtype)
    return with_class_names(staged, [r[1] for r in results], "y")


def write_dataset(
    target: str | Path,
    X,
    y,
    *,
    dense: bool | None = None,
    chunk_rows: int | None = None,
    chunk_bytes: int | None = None,
    dtype="float32",
    overwrite: bool = False,
    progress: bool = False,
    source: str | None = None,
    attrs: dict | None = None,
):
    """Write arrays as a dataset at ``target`` (atomically) and open it.

    Parameters
    ----------
    target : str or pathlib.Path
        Directory of the new zarr group.
    X : numpy.ndarray, scipy.sparse matrix or dask.array.Array
        ``(n_samples, n_features)`` numeric data; Dask blocks may be numpy or
        scipy.sparse.
    y : array-like or dask.array.Array
        ``(n_samples,)`` labels: numbers, or class names (strings).  Labels
        that are all numbers are stored as numbers; as soon as one is not,
        every label is a class name, its text (``1``, ``1.0`` and ``+1`` are
        one class ``"1"``), and the dataset gives them back as strings.
    dense : bool, optional
        Storage layout.  ``None``: dense rows stay dense; sparse rows are
        stored dense when their density is at least ``dsvm.io.dense-density``
        (Dask config, default 0.25), else as CSR.
    chunk_rows, chunk_bytes : int, optional
        Rows per chunk, or the target bytes per chunk (default 64 MiB).
    dtype : {"float32", "float64"}
        dtype of the stored values.
    overwrite : bool
        Replace an existing ``target``; otherwise ``FileExistsError``.
    progress : bool
        Show a progress bar on stderr.
    source : str, optional
        Recorded as the ``source`` attribute (default ``"<array>"``).
    attrs : dict, optional
        Extra JSON-able attributes.

    Returns
    -------
    Dataset

    Examples
    --------
    >>> import os, tempfile
    >>> import numpy as np
    >>> import scipy.sparse as sp
    >>> from dsvm import write_dataset
    >>> folder = tempfile.mkdtemp()
    >>> X = sp.random(100, 50, density=0.02, format="csr", random_state=0)
    >>> y = np.array(["spam", "ham"] * 50)
    >>> ds = write_dataset(os.path.join(folder, "mail.zarr"), X, y)
    >>> ds.sparse, ds.classes.tolist()
    (True, ['ham', 'spam'])
    >>> ds.y[:2].compute().tolist()
    ['spam', 'ham']
    """

    check_dtype(dtype)
    target = local_target(target)
    extra = {"source": source or "<array>", "source_format": "array"}
    extra.update(attrs or {})
    with atomic_target(target, overwrite) as work, disk_full_names(target, work, "the dataset") as space:
        if is_dask_array(X) or is_dask_array(y):
            Xd = X if is_dask_array(X) else da.from_array(X, chunks=(max(1, X.shape[0]), X.shape[1]))
            rows_source, label_attrs = stage_dask_arrays(Xd, y, work / "staging", dtype, progress)
        else:
            rows_source, label_attrs = ArraySource(X, y), {}
            if is_numeric_labels(y):
                check_numeric_labels(y, "y")
            else:
                rows_source, label_attrs = with_class_names(rows_source, [block_labels(y)], "y")
        extra.update(label_attrs)
        space.bytes = stored_bytes_bound(rows_source, dtype)
        write_source(
            rows_source,
            str(work / "store"),
            dense=dense,
            chunk_rows=chunk_rows,
            chunk_bytes=chunk_bytes,
            dtype=dtype,
            attrs=extra,
            progress=progress,
        )
    return open_dataset(target)
