"""Open a dataset written by :mod:`dsvm.io` as row-chunked Dask arrays.

:func:`open_dataset` validates the group (attributes, arrays, shapes) and
builds ``X`` and ``y`` lazily: one task per row chunk, each reading its chunk
from the store when it runs, in whichever process runs it (the store must be
on a filesystem the workers share).  Nothing but metadata and the per-chunk
entry counts of a sparse ``X`` is read when opening.  Every chunk is checked
when it is read; a corrupted or missing chunk raises
:class:`~dsvm.io._layout.InvalidDatasetError` naming the chunk and its rows.

The readers keep the chunk checksums found when the dataset was opened and
compare every chunk they read with them, so a chunk that moved, or a dataset
replaced while a fit still reads it, is an error, never a silent mix of two
datasets.

``Dataset.X`` *is* the ``dask.array`` view of a dataset, dense or sparse
(blocks are ``scipy.sparse.csr_matrix`` for a sparse one).  Dask's own
``da.from_zarr(path, component="X")`` reads only a dense dataset (there ``X``
is one zarr array, without the checks above); a sparse dataset's ``X`` is a
group of CSR parts, which ``da.from_zarr`` refuses with a zarr node-type
error: use ``open_dataset(path).X``.
"""

from __future__ import annotations

import logging
import os
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import dask
import dask.array as da
import numpy as np
import scipy.sparse as sp
import zarr

from ..user_files import check_user_path, path_problem
from ._dataset_target import MAX_ZARR_JSON
from ._layout import (
    INT_LABEL_FILL,
    SPARSE_LAYOUT,
    InvalidDatasetError,
    check_attrs,
    check_seal,
    chunk_bounds,
    chunk_checksum,
)

logger = logging.getLogger(__name__)

__all__ = ["Dataset", "open_dataset"]


@dataclass(frozen=True, eq=False)
class Dataset:
    """A dataset on disk, opened as lazy row-chunked Dask arrays.

    Attributes
    ----------
    path : str
        Location of the zarr group.
    X : dask.array.Array
        ``(n_samples, n_features)``, row chunks of known sizes and one chunk
        along columns; chunks are float numpy arrays, or ``scipy.sparse.csr_matrix``
        when ``sparse``.
    y : dask.array.Array
        ``(n_samples,)`` labels with the same row chunks as ``X``: numbers, or
        the class names (a ``str`` array) of a dataset with string labels.
    n_samples, n_features : int
    classes : numpy.ndarray
        Sorted distinct labels found when the dataset was written.
    feature_names : numpy.ndarray or None
        The column names of ``X`` (CSV header, Parquet or DataFrame columns), if known.
    sparse : bool
        Whether ``X`` is stored (and read) as CSR.
    attrs : dict
        All attributes of the group (see the user guide's out-of-core page
        for the layout on disk).

    Examples
    --------
    >>> import os, tempfile
    >>> import numpy as np
    >>> from dsvm import open_dataset, write_dataset
    >>> path = os.path.join(tempfile.mkdtemp(), "small.zarr")
    >>> _ = write_dataset(path, np.eye(4), np.array([0, 1, 0, 1]))
    >>> ds = open_dataset(path)
    >>> ds.n_samples, ds.n_features, ds.sparse, ds.classes
    (4, 4, False, array([0, 1]))
    >>> ds.X.sum(axis=0).compute()
    array([1., 1., 1., 1.], dtype=float32)
    """

    path: str
    X: Any
    y: Any
    n_samples: int
    n_features: int
    classes: np.ndarray
    sparse: bool
    attrs: dict = field(repr=False)

    @property
    def chunk_rows(self) -> int:
        return int(self.attrs["chunk_rows"])

    @property
    def n_chunks(self) -> int:
        return int(self.attrs["n_chunks"])

    @property
    def nnz(self) -> int:
        return int(self.attrs["nnz"])

    @property
    def dtype(self) -> np.dtype:
        return np.dtype(self.attrs["dtype"])

    @property
    def feature_names(self) -> np.ndarray | None:
        names = self.attrs.get("feature_names")
        return None if names is None else np.asarray(names, dtype=object)

    @property
    def class_counts(self) -> np.ndarray:
        return np.asarray(self.attrs.get("class_counts", []), dtype=np.int64)

    def load(self) -> tuple[Any, np.ndarray]:
        """``(X, y)`` in memory: a numpy array or CSR matrix, and the labels."""

        X, y = dask.compute(self.X, self.y)
        if self.sparse:
            X = sp.csr_matrix(X)
        return X, np.asarray(y)


class ChunkReader:
    """Array-like over one array of a dataset, for ``dask.array.from_array``.

    Holds only the path and the layout; zarr arrays are opened lazily in the
    process that reads (and not pickled), so the object travels to workers.
    """

    def __init__(self, path: str, name: str, attrs: dict, chunk_nnz: np.ndarray | None = None):
        self.path = path
        self.name = name
        self.n_samples = int(attrs["n_samples"])
        self.n_features = int(attrs["n_features"])
        self.chunk_rows = int(attrs["chunk_rows"])
        self.sparse = bool(attrs["sparse"])
        self.chunk_nnz = chunk_nnz
        # what the chunks held when the dataset was opened (None for version-1 datasets)
        self.checksums = (attrs.get("checksums") or {}).get("X" if name.startswith("X") else name)
        # string labels: y stores codes into these names, decoded when read
        names = attrs.get("class_names") if name == "y" else None
        self.class_names = None if names is None else np.asarray(names, dtype=str)
        if name == "y":
            self.shape: tuple[int, ...] = (self.n_samples,)
            self.dtype = np.dtype(attrs["y_dtype"]) if self.class_names is None else self.class_names.dtype
        else:
            self.shape = (self.n_samples, self.n_features)
            self.dtype = np.dtype(attrs["dtype"])
        self.ndim = len(self.shape)
        self._arrays: dict[str, Any] = {}
        self._lock = threading.Lock()

    def __getstate__(self):
        state = self.__dict__.copy()
        state["_arrays"] = {}
        del state["_lock"]
        return state

    def __setstate__(self, state):
        self.__dict__.update(state)
        self._lock = threading.Lock()

    def _array(self, key: str, chunk: tuple[int, ...] | None = None):
        """The zarr array ``key``; with ``chunk``, after checking that the file of that chunk, if there, is a
        regular file (zarr reads a chunk file whole: a FIFO would block the worker, a device never end)."""
        arr = self._arrays.get(key)
        if arr is None:
            with self._lock:
                arr = self._arrays.get(key)
                if arr is None:
                    arr = zarr.open_array(self.path, path=key, mode="r")
                    self._arrays[key] = arr
        if chunk is not None and "://" not in self.path:
            file = Path(self.path, key, arr.metadata.encode_chunk_key(chunk))
            if path_problem(file) not in (None, "no such file or folder"):  # a missing chunk is checked when read
                check_user_path(file, "chunk file of a dataset", InvalidDatasetError)
        return arr

    # reading ---------------------------------------------------------------
    def __getitem__(self, key):
        if not isinstance(key, tuple):
            key = (key,)
        rows = key[0] if key else slice(None)
        rest = key[1:]
        if not isinstance(rows, slice):
            raise TypeError("ChunkReader supports slices only")
        start, stop, step = rows.indices(self.n_samples)
        if step != 1:
            out = self[start:stop]
            return out[::step] if not rest else out[(slice(None, None, step),) + rest]
        parts = []
        first = start // self.chunk_rows
        last = max(first, (stop - 1) // self.chunk_rows) if stop > start else first - 1
        for i in range(first, last + 1):
            c0 = i * self.chunk_rows
            block = self.read_chunk(i)
            parts.append(block[max(start - c0, 0) : min(stop - c0, block.shape[0])])
        if not parts:
            out = self._empty()
        elif len(parts) == 1:
            out = parts[0]
        elif self.name == "X" and self.sparse:
            out = sp.vstack(parts, format="csr")
        else:
            out = np.concatenate(parts)
        if rest and rest != (slice(None),):
            out = out[(slice(None),) + rest]
            if sp.issparse(out):
                out = sp.csr_matrix(out)
        return out

    def _empty(self):
        if self.name == "y":
            return np.zeros(0, dtype=self.dtype)
        if self.sparse:
            return sp.csr_matrix((0, self.n_features), dtype=self.dtype)
        return np.zeros((0, self.n_features), dtype=self.dtype)

    def _where(self, i: int) -> str:
        r0 = i * self.chunk_rows
        r1 = min(r0 + self.chunk_rows, self.n_samples)
        return f"{self.path}: chunk {i} of {self.name} (rows {r0}-{r1 - 1})"

    def read_chunk(self, i: int):
        """Row chunk ``i``, checked; raises :class:`InvalidDatasetError` if it is damaged."""
        r0 = i * self.chunk_rows
        m = min(self.chunk_rows, self.n_samples - r0)
        try:
            if self.name == "y":
                out = self._read_y(r0, m)
                parts = (out,)
            elif self.sparse:
                out, parts = self._read_csr(i, m)
            else:
                out = self._read_dense(r0, m)
                parts = (out,)
            if self.checksums is not None and chunk_checksum(i, *parts) != self.checksums[i]:
                raise InvalidDatasetError(
                    f"{self._where(i)} does not hold what was written there: its checksum differs from the one "
                    "recorded when the dataset was written (or when it was opened for this run). Chunk files were "
                    "moved, swapped or edited, or the dataset was replaced while in use; do not change a dataset "
                    "while it is read, and write a damaged one again with dsvm.io.ingest()"
                )
            if self.class_names is not None:
                if out.size and (out.min() < 0 or out.max() >= len(self.class_names)):
                    raise self._bad(i, f"label codes outside 0-{len(self.class_names) - 1}")
                out = self.class_names[out]
        except InvalidDatasetError:
            raise
        except Exception as exc:  # decoding / checksum / IO errors from zarr
            raise InvalidDatasetError(
                f"{self._where(i)} cannot be read ({type(exc).__name__}: {exc}); the store is "
                "damaged, write it again with dsvm.io.ingest()"
            ) from exc
        return out

    def _bad(self, i: int, what: str) -> InvalidDatasetError:
        return InvalidDatasetError(
            f"{self._where(i)} is corrupted: {what}; write the dataset again with dsvm.io.ingest()"
        )

    def _read_y(self, r0: int, m: int) -> np.ndarray:
        y = np.asarray(self._array("y", (r0 // self.chunk_rows,))[r0 : r0 + m])
        bad = np.isnan(y) if y.dtype.kind == "f" else (y == INT_LABEL_FILL)
        if y.shape != (m,) or bad.any():
            raise self._bad(r0 // self.chunk_rows, "missing labels (chunk file lost?)")
        return y

    def _read_dense(self, r0: int, m: int) -> np.ndarray:
        X = np.asarray(self._array("X", (r0 // self.chunk_rows, 0))[r0 : r0 + m])
        if X.shape != (m, self.n_features) or np.isnan(X).any():
            raise self._bad(r0 // self.chunk_rows, "missing values (chunk file lost?)")
        return X

    def _read_csr(self, i: int, m: int) -> tuple[sp.csr_matrix, tuple[np.ndarray, ...]]:
        """The CSR chunk, and its arrays as stored (what the checksum covers)."""
        nnz = int(self.chunk_nnz[i])
        indptr = np.asarray(self._array("X/indptr", (i, 0))[i, : m + 1])
        data = np.asarray(self._array("X/data", (i, 0))[i, :nnz])
        indices = np.asarray(self._array("X/indices", (i, 0))[i, :nnz])
        if indptr[0] != 0 or indptr[-1] != nnz or (np.diff(indptr) < 0).any():
            raise self._bad(i, "invalid row pointers (chunk file lost?)")
        if nnz and (indices.min() < 0 or indices.max() >= self.n_features):
            raise self._bad(i, "column indices out of range (chunk file lost?)")
        if np.isnan(data).any():
            raise self._bad(i, "missing values (chunk file lost?)")
        return sp.csr_matrix((data, indices, indptr), shape=(m, self.n_features)), (indptr, indices, data)


def _check_metadata(path: str, *parts: str) -> None:
    """A local node's ``zarr.json``, if there, must be a regular file of at most :data:`MAX_ZARR_JSON` bytes:
    zarr reads it whole, and a FIFO would block that read for ever (:mod:`dsvm.user_files`)."""
    if "://" in path:
        return
    meta = Path(path, *[part for part in parts if part], "zarr.json")
    try:
        size = os.stat(meta).st_size
    except OSError:  # missing, or the node is not a folder: zarr names what is wrong
        return
    check_user_path(meta, "dataset's metadata file", InvalidDatasetError)
    if size > MAX_ZARR_JSON:
        raise InvalidDatasetError(f"{meta}: {size} bytes; a dataset's metadata file holds at most {MAX_ZARR_JSON}")


def _open_group(path: str):
    p = Path(path)
    if "://" not in path and not p.exists():
        raise FileNotFoundError(f"no dataset at {path} (the path does not exist)")
    _check_metadata(path)
    try:
        return zarr.open_group(path, mode="r")
    except Exception as exc:
        raise InvalidDatasetError(
            f"{path} is not a dsvm dataset (not a zarr v3 group: {exc}); create one with dsvm.io.ingest()"
        ) from exc


def _member(group, path: str, name: str, kind: str):
    _check_metadata(path, group.path, name)
    try:
        member = group[name]
    except KeyError:
        raise InvalidDatasetError(f"{path}: {kind} {name!r} is missing from the dataset") from None

    want = zarr.Group if kind == "group" else zarr.Array
    if not isinstance(member, want):
        raise InvalidDatasetError(f"{path}: {name!r} is not a zarr {kind}")
    return member


def _check_array(path, arr, name, shape, chunks, dtype=None):
    if tuple(arr.shape) != tuple(shape):
        raise InvalidDatasetError(
            f"{path}: array {name!r} has shape {tuple(arr.shape)}, expected {tuple(shape)} from the attributes"
        )
    if chunks is not None and tuple(arr.chunks) != tuple(chunks):
        raise InvalidDatasetError(f"{path}: array {name!r} has chunks {tuple(arr.chunks)}, expected {tuple(chunks)}")
    if dtype is not None and np.dtype(arr.dtype) != np.dtype(dtype):
        raise InvalidDatasetError(f"{path}: array {name!r} has dtype {arr.dtype}, expected {dtype}")


def _check_sparse_x(group, path: str, attrs: dict) -> np.ndarray:
    """Check a sparse dataset's ``X`` group against its attributes; its non-zeros per chunk."""
    n_chunks, rows = attrs["n_chunks"], attrs["chunk_rows"]
    xg = _member(group, path, "X", "group")
    if xg.attrs.get("layout") != SPARSE_LAYOUT:
        raise InvalidDatasetError(f"{path}: group 'X' has layout {xg.attrs.get('layout')!r}, expected {SPARSE_LAYOUT!r}")
    counts = _member(xg, path, "chunk_nnz", "array")
    _check_array(path, counts, "X/chunk_nnz", (n_chunks,), None)
    chunk_nnz = np.asarray(counts[:], dtype=np.int64)
    if (chunk_nnz < 0).any() or int(chunk_nnz.sum()) != attrs["nnz"]:
        raise InvalidDatasetError(
            f"{path}: X/chunk_nnz does not add up to nnz={attrs['nnz']} (the store is damaged)"
        )
    width = max(1, int(chunk_nnz.max()) if n_chunks else 1)
    indptr = _member(xg, path, "indptr", "array")
    _check_array(path, indptr, "X/indptr", (n_chunks, rows + 1), (1, rows + 1), np.int64)
    for name in ("indices", "data"):
        arr = _member(xg, path, name, "array")
        _check_array(path, arr, f"X/{name}", (n_chunks, width), (1, width))
    if np.dtype(xg["data"].dtype) != np.dtype(attrs["dtype"]):
        raise InvalidDatasetError(f"{path}: X/data has dtype {xg['data'].dtype}, expected {attrs['dtype']}")
    return chunk_nnz


def open_dataset(path: str | Path) -> Dataset:
    """Open a dataset written by :func:`dsvm.io.ingest` (or :func:`write_dataset`).

    Parameters
    ----------
    path : str or pathlib.Path
        The zarr group of the dataset.

    Returns
    -------
    Dataset
        With lazy ``X`` / ``y`` Dask arrays; building them reads no data.

    Raises
    ------
    FileNotFoundError
        If nothing exists at ``path``.
    InvalidDatasetError
        If ``path`` is not a dsvm dataset, an array is missing, or shapes
        disagree with the attributes.  Damaged chunks raise it when read.

    Examples
    --------
    >>> import os, tempfile
    >>> from dsvm import InvalidDatasetError, make_classification_zarr, open_dataset
    >>> folder = tempfile.mkdtemp()
    >>> _ = make_classification_zarr(os.path.join(folder, "synthetic.zarr"), n_samples=1000, n_features=5)
    >>> ds = open_dataset(os.path.join(folder, "synthetic.zarr"))
    >>> ds.X.shape, ds.X.dtype
    ((1000, 5), dtype('float32'))
    >>> try:
    ...     open_dataset(folder)
    ... except InvalidDatasetError:
    ...     print("not a dataset")
    not a dataset
    """

    # workers open the store by this path, in their own working directory
    path = str(path) if "://" in str(path) else os.path.abspath(path)
    group = _open_group(path)
    attrs = dict(group.attrs)
    check_attrs(path, attrs)
    n, p, rows = attrs["n_samples"], attrs["n_features"], attrs["chunk_rows"]
    n_chunks = attrs["n_chunks"]

    y_arr = _member(group, path, "y", "array")
    _check_array(path, y_arr, "y", (n,), (rows,), attrs["y_dtype"])
    chunk_nnz = _check_sparse_x(group, path, attrs) if attrs["sparse"] else None
    if not attrs["sparse"]:
        x_arr = _member(group, path, "X", "array")
        _check_array(path, x_arr, "X", (n, p), (rows, max(p, 1)), attrs["dtype"])

    check_seal(path, attrs)
    bounds = chunk_bounds(n, rows)
    row_chunks = tuple(int(c) for c in np.diff(bounds))
    uid = attrs.get("uuid") or path
    dtype = np.dtype(attrs["dtype"])
    x_reader = ChunkReader(path, "X", attrs, chunk_nnz)
    meta = sp.csr_matrix((0, 0), dtype=dtype) if attrs["sparse"] else np.empty((0, 0), dtype=dtype)
    X = da.from_array(
        x_reader, chunks=(row_chunks, (p,)), name=f"dsvm-X-{uid}", meta=meta, asarray=False, fancy=False
    )
    y_reader = ChunkReader(path, "y", attrs)
    y = da.from_array(
        y_reader,
        chunks=(row_chunks,),
        name=f"dsvm-y-{uid}",
        meta=np.empty((0,), dtype=y_reader.dtype),
        asarray=False,
        fancy=False,
    )
    classes = (np.asarray(attrs["classes"], dtype=y_reader.dtype) if y_reader.class_names is None
               else y_reader.class_names)
    logger.debug("opened %s: %d x %d, %d chunks, sparse=%s", path, n, p, n_chunks, attrs["sparse"])
    return Dataset(
        path=path, X=X, y=y, n_samples=n, n_features=p, classes=classes, sparse=bool(attrs["sparse"]), attrs=attrs
    )
