"""Pseudo-random numbers of global row indices: the same for a row however the rows are blocked.

Two hashes, each the rule of what depends on it:

* :func:`row_uniform` (Knuth's multiplicative hash) draws the active
  landmarks' candidate rows, the subsample of the Newton warm start and the
  weights of a checkpoint's data fingerprint;
* :func:`row_hash` (splitmix64) assigns Platt calibration's folds.

Changing either changes the models (and checkpoints) built on it.
"""

from __future__ import annotations

import numpy as np

__all__ = ["row_uniform", "row_hash"]

_GOLDEN = np.uint64(0x9E3779B9)
_KNUTH = np.uint64(2654435761)


def row_uniform(rows: np.ndarray, seed: int = 0) -> np.ndarray:
    """Values in [0, 1) of global row indices ``rows``: ``((i + s·0x9E3779B9)·2654435761 mod 2³²) / 2³²``
    with ``s = seed mod 2³¹``."""
    h = (np.asarray(rows).astype(np.uint64) + np.uint64(seed % 2**31) * _GOLDEN) * _KNUTH
    return (h % np.uint64(2**32)).astype(np.float64) / 2.0**32


def _splitmix64(x: np.ndarray) -> np.ndarray:
    x = x.astype(np.uint64, copy=True)
    with np.errstate(over="ignore"):
        x += np.uint64(0x9E3779B97F4A7C15)
        x = (x ^ (x >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        x = (x ^ (x >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return x ^ (x >> np.uint64(31))


def row_hash(n: int, seed: int, offset: int = 0) -> np.ndarray:
    """A 64-bit pseudo-random hash of the global row indices ``offset .. offset+n-1``."""
    key = _splitmix64(np.array([seed & 0xFFFFFFFFFFFFFFFF], dtype=np.uint64))[0]
    idx = np.arange(offset, offset + n, dtype=np.uint64)
    return _splitmix64(idx ^ key)
