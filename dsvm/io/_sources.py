"""Row sources: random access to the rows being written into a dataset.

The writer (:mod:`dsvm.io._writer`) only needs ``read(start, stop)`` → ``(X
block, y block)`` and, for a sparse layout, the number of stored entries per
row chunk.  Three kinds of source provide it:

* :class:`ArraySource` — numpy / scipy.sparse arrays in this process;
* :class:`NpySource` — a ``.npy`` file, memory-mapped in whichever process reads;
* :class:`StagedSource` — *staging parts*: the pieces a text parser or a Dask
  array produced, saved as plain ``.npy`` files (CSR or dense) in the
  temporary directory of an ingest, so a text file is parsed once and the
  output chunks can still be cut at any row.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import scipy.sparse as sp

from ..exceptions import InputFileError
from ..user_files import check_user_path
from ._label_text import label_texts

__all__ = ["RowSource", "ArraySource", "NpySource", "StagedSource", "Part", "save_part", "label_dtype"]


def label_dtype(y: np.ndarray) -> np.dtype:
    """Storage dtype of numeric labels: int64 for integer / bool labels, float64 for floats.

    Labels that are not numbers are stored as codes of class names
    (:mod:`dsvm.io._labels`); a source holding them reports int64, the codes' dtype.
    """
    kind = np.asarray(y).dtype.kind
    if kind in "biu":
        return np.dtype(np.int64)
    if kind == "f":
        return np.dtype(np.float64)
    if kind in "UO":
        return np.dtype(np.int64)
    raise TypeError(f"labels of dtype {np.asarray(y).dtype} are neither numbers nor class names (strings)")


class RowSource:
    """Random access to rows; see the module docstring."""

    n_rows: int
    n_features: int
    sparse: bool  # natural form of the rows
    nnz: int | None  # stored entries if known without a pass (CSR sources)
    local: bool  # True if the rows live in this process's memory
    y_dtype: np.dtype

    def read(self, start: int, stop: int) -> tuple[Any, np.ndarray]:
        raise NotImplementedError

    def chunk_nnz(self, bounds: np.ndarray) -> np.ndarray | None:
        """Stored entries between consecutive row ``bounds``, if known cheaply."""
        return None


class ArraySource(RowSource):
    """numpy or scipy.sparse ``X`` and numpy ``y`` held in memory."""

    local = True

    def __init__(self, X, y):
        if sp.issparse(X):
            X = sp.csr_matrix(X)
            X.sort_indices()
            self.sparse = True
            self.nnz = int(X.nnz)
        else:
            X = np.asarray(X)
            if X.ndim != 2:
                raise ValueError(f"X must be 2-dimensional, got shape {X.shape}")
            if X.dtype.kind not in "biuf":
                raise TypeError(f"X must be numeric, got dtype {X.dtype}")
            self.sparse = False
            self.nnz = None
        y = np.asarray(y)
        if y.ndim != 1 or y.shape[0] != X.shape[0]:
            raise ValueError(f"y must be 1-dimensional with {X.shape[0]} entries (one per row of X), got shape {y.shape}")
        self.y_dtype = label_dtype(y)
        self.X, self.y = X, y
        self.n_rows, self.n_features = int(X.shape[0]), int(X.shape[1])

    def read(self, start, stop):
        return self.X[start:stop], self.y[start:stop]

    def chunk_nnz(self, bounds):
        return np.diff(self.X.indptr[bounds]).astype(np.int64) if self.sparse else None


def _load_npy(path: str, what: str = "data file") -> np.ndarray:
    """A memory map of an ``.npy`` file; :class:`InputFileError` for anything that is not a plain array
    in a regular file (opening a FIFO would wait for a writer)."""
    check_user_path(path, what, InputFileError)
    try:
        return np.load(path, mmap_mode="r", allow_pickle=False)
    except FileNotFoundError:
        raise
    except (ValueError, OSError, EOFError) as exc:  # pickled objects, truncated, not an .npy file
        raise InputFileError(f"{path}: not a readable .npy array of numbers ({exc})") from None


class NpySource(RowSource):
    """A 2-D ``.npy`` file read through a memory map (by path, so workers can read it)."""

    sparse = False
    nnz = None
    local = False

    def __init__(self, x_path: str, y):
        self.x_path = str(x_path)
        X = _load_npy(self.x_path)
        if X.ndim != 2:
            raise InputFileError(f"{x_path}: X must be 2-dimensional, got shape {X.shape}")
        if X.dtype.kind not in "biuf":
            kind = "complex numbers" if X.dtype.kind == "c" else f"dtype {X.dtype}"
            raise InputFileError(f"{x_path}: X holds {kind}; dsvm needs real numbers (bool, integer or float)")
        self.n_rows, self.n_features = int(X.shape[0]), int(X.shape[1])
        self.y_path = None
        where = "y"
        if isinstance(y, (str, Path)):
            self.y_path = where = str(y)
            y_arr = _load_npy(self.y_path, "label file")
            self.y = None
        else:
            y_arr = self.y = np.asarray(y)
        if y_arr.ndim != 1 or y_arr.shape[0] != self.n_rows:
            raise InputFileError(
                f"{where}: labels must be 1-dimensional with {self.n_rows} entries (one per row of X), "
                f"got shape {y_arr.shape}"
            )
        if y_arr.dtype.kind not in "biufU" and not (self.y is not None and y_arr.dtype.kind == "O"):
            raise InputFileError(f"{where}: labels of dtype {y_arr.dtype} are neither numbers nor strings")
        self.y_dtype = label_dtype(y_arr)

    def read(self, start, stop):
        X = np.load(self.x_path, mmap_mode="r")
        y = np.load(self.y_path, mmap_mode="r") if self.y_path else self.y
        return np.array(X[start:stop]), np.array(y[start:stop])


@dataclass(frozen=True)
class Part:
    """One staging part: ``prefix + '.X.npy'`` (dense) or ``'.data/.indices/.indptr.npy'`` (CSR), and ``'.y.npy'``."""

    prefix: str
    n_rows: int
    nnz: int
    sparse: bool


def save_part(prefix: str, X, y: np.ndarray) -> Part:
    """Save a block as a staging part (``X`` dense or CSR, already in its final dtype)."""
    if sp.issparse(X):
        X = sp.csr_matrix(X)
        np.save(prefix + ".data.npy", X.data, allow_pickle=False)
        np.save(prefix + ".indices.npy", X.indices, allow_pickle=False)
        np.save(prefix + ".indptr.npy", X.indptr.astype(np.int64), allow_pickle=False)
        nnz, sparse = int(X.nnz), True
    else:
        X = np.asarray(X)
        np.save(prefix + ".X.npy", X, allow_pickle=False)
        nnz, sparse = int(X.size), False
    np.save(prefix + ".y.npy", np.asarray(y), allow_pickle=False)
    return Part(prefix=prefix, n_rows=int(X.shape[0]), nnz=nnz, sparse=sparse)


def save_csr_part(prefix: str, data, indices, indptr, y) -> Part:
    """Save raw CSR arrays (indices as written in the source) as a staging part."""
    np.save(prefix + ".data.npy", data, allow_pickle=False)
    np.save(prefix + ".indices.npy", indices, allow_pickle=False)
    np.save(prefix + ".indptr.npy", indptr, allow_pickle=False)
    np.save(prefix + ".y.npy", y, allow_pickle=False)
    return Part(prefix=prefix, n_rows=int(len(indptr) - 1), nnz=int(len(data)), sparse=True)


class StagedSource(RowSource):
    """Rows spread over staging parts, in order.

    ``index_shift`` is subtracted from stored column indices (1 for one-based
    LIBSVM files).
    """

    local = False

    def __init__(self, parts: list[Part], n_features: int, y_dtype, index_shift: int = 0):
        self.parts = [p for p in parts if p.n_rows > 0]
        self.n_features = int(n_features)
        self.index_shift = int(index_shift)
        self.y_dtype = np.dtype(y_dtype)
        self.offsets = np.concatenate([[0], np.cumsum([p.n_rows for p in self.parts])]).astype(np.int64)
        self.nnz_offsets = np.concatenate([[0], np.cumsum([p.nnz for p in self.parts])]).astype(np.int64)
        self.n_rows = int(self.offsets[-1])
        self.sparse = bool(self.parts) and all(p.sparse for p in self.parts)
        self.nnz = int(self.nnz_offsets[-1]) if self.sparse else None

    def _piece(self, k: int, a: int, b: int):
        part = self.parts[k]
        y = np.load(part.prefix + ".y.npy", mmap_mode="r")[a:b]
        if part.sparse:
            indptr = np.load(part.prefix + ".indptr.npy", mmap_mode="r")[a : b + 1]
            lo, hi = int(indptr[0]), int(indptr[-1])
            data = np.load(part.prefix + ".data.npy", mmap_mode="r")[lo:hi]
            indices = np.load(part.prefix + ".indices.npy", mmap_mode="r")[lo:hi]
            return (np.array(data), np.array(indices), np.array(indptr) - lo), np.array(y)
        X = np.load(part.prefix + ".X.npy", mmap_mode="r")[a:b]
        return np.array(X), np.array(y)

    def read(self, start, stop):
        k0 = max(0, bisect.bisect_right(self.offsets.tolist(), start) - 1)
        pieces, labels = [], []
        k = k0
        while k < len(self.parts) and self.offsets[k] < stop:
            a = max(start - int(self.offsets[k]), 0)
            b = min(stop, int(self.offsets[k + 1])) - int(self.offsets[k])
            X, y = self._piece(k, a, b)
            pieces.append(X)
            labels.append(y)
            k += 1
        if len({lab.dtype.kind == "U" for lab in labels}) > 1:  # class names: numbers among them as their texts
            labels = [label_texts(lab) for lab in labels]
        y = np.concatenate(labels) if labels else np.zeros(0, self.y_dtype)
        if self.sparse:
            return self._csr(pieces, stop - start), y
        dense = [p if isinstance(p, np.ndarray) else self._csr([p], len(p[2]) - 1).toarray() for p in pieces]
        return (np.concatenate(dense) if dense else np.zeros((0, self.n_features))), y

    def _csr(self, pieces, n_rows) -> sp.csr_matrix:
        if not pieces:
            return sp.csr_matrix((n_rows, self.n_features))
        data = np.concatenate([p[0] for p in pieces])
        indices = np.concatenate([p[1] for p in pieces]).astype(np.int64, copy=False)
        if self.index_shift:
            indices = indices - self.index_shift
        ptrs = [pieces[0][2]]
        total = int(pieces[0][2][-1])
        for p in pieces[1:]:
            ptrs.append(p[2][1:] + total)
            total += int(p[2][-1])
        indptr = np.concatenate(ptrs)
        return sp.csr_matrix((data, indices, indptr), shape=(n_rows, self.n_features))

    def chunk_nnz(self, bounds):
        if not self.sparse:
            return None
        offsets = self.offsets
        out = np.empty(len(bounds), dtype=np.int64)
        cache: dict[int, np.ndarray] = {}
        for j, r in enumerate(np.asarray(bounds, dtype=np.int64)):
            if r >= self.n_rows:
                out[j] = self.nnz
                continue
            k = int(np.searchsorted(offsets, r, side="right") - 1)
            if k not in cache:
                cache = {k: np.load(self.parts[k].prefix + ".indptr.npy", mmap_mode="r")}
            out[j] = self.nnz_offsets[k] + int(cache[k][r - offsets[k]])
        return np.diff(out)
