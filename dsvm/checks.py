"""Checks of numbers and rows shared by every layer (one error message per rule)."""

from __future__ import annotations

import numbers

import numpy as np
import scipy.sparse as sp

__all__ = ["all_finite", "first_non_finite_row", "check_finite_block", "check_positive", "check_positive_int",
           "check_n_rows", "resolve_seed"]


def all_finite(a: np.ndarray) -> bool:
    """True when a float array holds no NaN and no infinity.

    A sum is the fast test (one read, no temporary): it is finite whenever
    every entry is and no partial sum overflows; only a sum that is not
    finite costs the exact element-wise test.
    """
    a = np.asarray(a)
    if a.dtype.kind not in "fc" or a.size == 0:
        return True
    with np.errstate(over="ignore", invalid="ignore"):
        if np.isfinite(np.sum(a)):
            return True
    return bool(np.isfinite(a).all())


def first_non_finite_row(a: np.ndarray) -> int:
    """Position of the first row of a 2-d (or 1-d) array holding NaN or infinity, -1 if none."""
    bad = ~np.isfinite(np.asarray(a))
    rows = np.flatnonzero(bad.reshape(bad.shape[0], -1).any(axis=1)) if bad.ndim else np.zeros(0, np.int64)
    return int(rows[0]) if rows.size else -1


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
    """A positive integer (``bool`` is not one)."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < 1:
        raise ValueError(f"{name} must be a positive integer, got {value!r}")
    return int(value)


def check_n_rows(n_X: int, y, what: str = "y") -> None:
    """``y`` (or ``what``) has one entry per row of X."""
    n_y = y.shape[0]
    if n_y != n_X:
        raise ValueError(f"X has {n_X} rows but {what} has {n_y}; they must have one entry per row of X")


def resolve_seed(random_state) -> int:
    """An integer seed from ``random_state`` (int, RandomState or None)."""
    if isinstance(random_state, (int, np.integer)):
        return int(random_state)
    # imported here: Dask workers import this module, and scikit-learn (with the pandas it loads) would
    # add over 100 MiB to every worker's memory
    from sklearn.utils import check_random_state

    return int(check_random_state(random_state).randint(0, 2**31 - 1))
