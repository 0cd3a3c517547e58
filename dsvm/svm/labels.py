"""Input checks shared by the estimators (no Dask imports: dask inputs are
inspected through their array attributes and :mod:`dsvm.blockwise`)."""

from __future__ import annotations

import numbers

import numpy as np
import scipy.sparse as sp

from .blockwise import RowBlocks, aligned_vector, is_dask_array, row_index_blocks


def check_dask_X(X, what: str = "X") -> None:
    """Validate a dask array without computing it."""
    if X.ndim != 2:
        raise ValueError(f"{what} must be 2-dimensional (rows x features), got a {X.ndim}-d dask array")
    if any(np.isnan(c) for c in X.chunks[0]) or np.isnan(X.shape[0]):
        raise ValueError(
            f"{what} has unknown chunk sizes along the rows; call {what}.compute_chunk_sizes() first"
        )
    if len(X.chunks[1]) != 1:
        raise ValueError(
            f"{what} has {len(X.chunks[1])} chunks along the feature axis; dsvm needs whole rows in "
            f"each block: use {what}.rechunk({{1: -1}})"
        )
    meta = getattr(X, "_meta", None)
    kind = np.dtype(X.dtype).kind
    if kind not in "biuf":
        raise ValueError(f"{what} must hold numbers, got a dask array of dtype {X.dtype}")
    if X.shape[0] == 0:
        raise ValueError(f"{what} has 0 rows")
    if X.shape[1] == 0:
        raise ValueError(f"{what} has 0 features")
    del meta


def check_finite_block(X_block, offset: int = 0, what: str = "X") -> None:
    """Raise if a block holds NaN or infinity, naming the first offending row."""
    data = X_block.data if sp.issparse(X_block) else np.asarray(X_block)
    if data.dtype.kind == "f" and not np.isfinite(data).all():
        if sp.issparse(X_block):
            bad = ~np.isfinite(X_block.data)
            row = int(np.searchsorted(X_block.indptr, np.flatnonzero(bad)[0], side="right") - 1)
        else:
            row = int(np.flatnonzero(~np.isfinite(data).all(axis=1))[0])
        raise ValueError(f"{what} contains NaN or infinity at row {offset + row}")


def check_positive(name: str, value, allow_zero: bool = False) -> float:
    """A positive (or non-negative) finite real number."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not np.isfinite(value):
        raise ValueError(f"{name} must be a finite number, got {value!r}")
    if value < 0 or (value == 0 and not allow_zero):
        raise ValueError(f"{name} must be {'non-negative' if allow_zero else 'positive'}, got {value!r}")
    return float(value)


def check_positive_int(name: str, value) -> int:
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < 1:
        raise ValueError(f"{name} must be a positive integer, got {value!r}")
    return int(value)


def resolve_seed(random_state) -> int:
    """An integer seed from ``random_state`` (int, RandomState or None)."""
    if isinstance(random_state, (int, np.integer)):
        return int(random_state)
    from sklearn.utils import check_random_state

    return int(check_random_state(random_state).randint(0, 2**31 - 1))


def _unique_block(y_block):
    return np.unique(np.asarray(y_block))


def _unique_combine(parts):
    return np.unique(np.concatenate([np.asarray(p) for p in parts]))


def _encode_block(y_block, classes):
    codes = np.searchsorted(classes, y_block)
    codes = np.clip(codes, 0, len(classes) - 1)
    bad = classes[codes] != np.asarray(y_block)
    if bad.any():
        labels = np.unique(np.asarray(y_block)[bad])[:5].tolist()
        raise ValueError(f"y holds labels {labels} that are not among the classes {classes.tolist()}")
    return codes.astype(np.int32)


def encode_labels(y, like: RowBlocks, classes: np.ndarray | None = None) -> tuple[np.ndarray, RowBlocks]:
    """``classes`` (sorted unique labels) and integer codes aligned with ``like``.

    ``classes`` may be given when already known (a dataset records its label
    set at ingest), saving a pass; encoding still fails on any other label.
    """
    if is_dask_array(y):
        if y.ndim == 2 and y.shape[1] == 1:
            y = y[:, 0]
        if y.ndim != 1:
            raise ValueError(f"y must be 1-dimensional, got shape {y.shape}")
        y_rb = aligned_vector(y, like)
        if classes is not None:
            classes = np.unique(np.asarray(classes)).astype(y.dtype, copy=False)
        else:
            classes = y_rb.map_reduce(_unique_block, combine=_unique_combine)
    else:
        y_arr = np.asarray(y)
        classes = np.unique(y_arr)
        y_rb = aligned_vector(y_arr, like)
    codes = y_rb.map_blocks(_encode_block, None, np.int32, shared=(classes,))
    return classes, codes


def check_n_rows(n_X: int, y, what: str = "y") -> None:
    n_y = y.shape[0]
    if n_y != n_X:
        raise ValueError(f"X has {n_X} rows but {what} has {n_y}; they must have one entry per row of X")


def _weight_stats_block(sw_block, codes_block, rows_block, n_groups):
    """Per-group weight sums of one block, plus the first non-finite and the first negative row."""
    w = np.asarray(sw_block, dtype=np.float64)
    rows = np.asarray(rows_block)
    nonfinite, negative = ~np.isfinite(w), w < 0
    first = [float(rows[m][0]) if m.any() else np.inf for m in (nonfinite, negative)]
    clean = np.where(nonfinite | negative, 0.0, w)
    if codes_block is None:
        mass = np.array([clean.sum()])
    else:
        mass = np.bincount(np.asarray(codes_block), weights=clean, minlength=n_groups)
    return mass, np.array(first)


def _weight_stats_combine(parts):
    parts = list(parts)
    return sum(p[0] for p in parts), np.min([p[1] for p in parts], axis=0)


def check_sample_weight_blocks(sw: RowBlocks, codes: RowBlocks | None = None, n_groups: int = 1) -> np.ndarray:
    """Reject NaN, infinite or negative sample weights (naming the first such row); return weight sums.

    One pass over the weights (numpy or Dask blocks alike).  The sums are per
    class code when ``codes`` is given, else a single total; a caller raises
    when a sum it needs is zero.
    """
    mass, first = sw.map_reduce(_weight_stats_block, aligned=(codes, row_index_blocks(sw)), shared=(n_groups,),
                                combine=_weight_stats_combine)
    if np.isfinite(first[0]):
        raise ValueError(f"sample_weight contains NaN or infinity at row {int(first[0])}")
    if np.isfinite(first[1]):
        raise ValueError(f"sample_weight must be non-negative; row {int(first[1])} has a negative weight")
    return np.asarray(mass, dtype=np.float64)
