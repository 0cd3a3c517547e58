"""Landmark selection for the Nyström map.

``uniform``
    ``k`` distinct rows drawn without replacement (seeded), pulled in one pass.
    Rows whose *values* repeat an earlier draw are skipped (binary data such as
    a9a repeats rows; a repeated landmark only wastes a component).
``kmeans``
    k-means++ seeding on a uniform sample, then a few Lloyd iterations over
    the whole (row-blocked) data: the "improved Nyström" landmarks of Zhang,
    Tsang & Kwok (2008).  The landmarks are cluster centres, not data rows, so
    ``component_indices_`` is ``None``.
"""

from __future__ import annotations

import logging
import warnings
from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp
from sklearn.utils import check_random_state
from sklearn.utils.random import sample_without_replacement

from ..blocks import RowBlocks
from .kernels import KernelSpec, prepare_landmarks, sq_distances

logger = logging.getLogger(__name__)

LANDMARK_METHODS = ("uniform", "kmeans")


@dataclass
class Landmarks:
    components: np.ndarray  # (k, p) float64, dense
    indices: np.ndarray | None  # rows of X they came from (uniform), else None
    method: str
    n_passes: int


def dense_rows(rows) -> np.ndarray:
    if sp.issparse(rows):
        return rows.toarray().astype(np.float64)
    return np.asarray(rows, dtype=np.float64)


def first_unique(rows: np.ndarray) -> np.ndarray:
    """Positions of the first occurrence of each distinct row, in original order."""
    if rows.shape[0] == 0:
        return np.zeros(0, dtype=np.int64)
    _, first = np.unique(rows, axis=0, return_index=True)
    return np.sort(first)


def clip_n_components(k: int, n: int, stacklevel: int = 3) -> int:
    """``k``, or ``n`` with a ``UserWarning`` when ``k`` is larger than the number of rows ``n``."""
    if k > n:
        warnings.warn(f"n_components={k} is larger than the number of rows ({n}); using n_components={n}",
                      UserWarning, stacklevel=stacklevel)
        return n
    return k


PERMUTE_MAX_ROWS = 1 << 22  # up to here the index stream is one permutation (8 bytes a row)
STREAM_BATCH = 4096  # fixed draw size: the stream must not depend on how much of it is asked


class _IndexStream:
    """Distinct row indices in a seeded, uniformly random order.

    The first ``m`` indices are the same however many are asked for later, so
    ``uniform_landmarks(X, k)`` is a prefix of ``uniform_landmarks(X, k')``
    for ``k < k'`` and the same seed: nested landmark sets, which the CV
    search uses to share kernel columns between k and to warm-start its refit.
    Small data: one permutation; large data: batches of draws with
    replacement, repeats dropped (O(m) memory, not O(n)).
    """

    def __init__(self, n: int, rng: np.random.RandomState):
        self.n, self.rng = n, rng
        self.perm = rng.permutation(n) if n <= PERMUTE_MAX_ROWS else None
        self.drawn: list[int] = []
        self.seen: set[int] = set()

    def first(self, m: int) -> np.ndarray:
        m = min(m, self.n)
        if self.perm is not None:
            return self.perm[:m]
        while len(self.drawn) < m:
            for j in self.rng.randint(0, self.n, size=STREAM_BATCH).tolist():
                if j not in self.seen:
                    self.seen.add(j)
                    self.drawn.append(j)
        return np.asarray(self.drawn[:m], dtype=np.int64)


def uniform_landmarks(X: RowBlocks, k: int, random_state=None) -> Landmarks:
    """``k`` rows with distinct values, sampled uniformly without replacement.

    Nested: with the same integer seed the landmarks for ``k`` are the first
    ``k`` of those for any larger ``k`` (see :class:`_IndexStream`).
    """
    n = X.n_rows
    stream = _IndexStream(n, check_random_state(random_state))
    m = min(n, k + max(16, k // 4))
    seen_idx = np.zeros(0, dtype=np.int64)
    seen_rows = np.zeros((0, 0))
    passes, fetched = 0, 0
    while True:
        order = stream.first(m)[fetched:]
        rows = dense_rows(X.take(order))
        passes += 1
        fetched += order.size
        all_rows = rows if seen_rows.size == 0 else np.vstack([seen_rows, rows])
        all_idx = np.concatenate([seen_idx, order])
        keep = first_unique(all_rows)
        seen_rows, seen_idx = all_rows[keep], all_idx[keep]
        if seen_idx.size >= k or fetched >= n or passes >= 4:
            break
        # Not enough distinct rows yet: fetch more of the stream.
        m = min(n, fetched + 2 * (k - seen_idx.size) + 16)
    if seen_idx.size < k:
        warnings.warn(
            f"only {seen_idx.size} distinct rows were found for {k} landmarks; using {seen_idx.size}",
            UserWarning,
            stacklevel=3,
        )
    return Landmarks(components=seen_rows[:k], indices=seen_idx[:k], method="uniform", n_passes=passes)


def _lloyd_block(X_block, params):
    centers_prep = params["prep"]
    k = params["k"]
    D = sq_distances(X_block, centers_prep)
    assign = np.argmin(D, axis=1)
    inertia = float(D[np.arange(D.shape[0]), assign].sum())
    onehot = sp.csr_matrix(
        (np.ones(assign.size), (assign, np.arange(assign.size))), shape=(k, assign.size)
    )
    sums = onehot @ X_block
    sums = sums.toarray() if sp.issparse(sums) else np.asarray(sums, dtype=np.float64)
    return {"sums": sums.astype(np.float64), "counts": np.bincount(assign, minlength=k).astype(np.float64), "inertia": inertia}


def kmeans_landmarks(
    X: RowBlocks, k: int, random_state=None, n_iter: int = 3, sample_size: int | None = None
) -> Landmarks:
    """k-means++ seeds on a sample, refined by ``n_iter`` Lloyd passes over all rows."""
    from sklearn.cluster import kmeans_plusplus

    rng = check_random_state(random_state)
    n = X.n_rows
    m = min(n, sample_size or max(20 * k, 10_000))
    sample_idx = np.sort(sample_without_replacement(n, m, random_state=rng))
    sample = dense_rows(X.take(sample_idx))
    passes = 1
    distinct = sample[first_unique(sample)]
    k_eff = min(k, distinct.shape[0])
    centers, _ = kmeans_plusplus(distinct, k_eff, random_state=rng)
    centers = np.asarray(centers, dtype=np.float64)
    for i in range(n_iter):
        prep = prepare_landmarks(centers, KernelSpec("rbf"), dtype=np.float64)
        out = X.map_reduce(_lloyd_block, shared=({"prep": prep, "k": k_eff},))
        passes += 1
        nonempty = out["counts"] > 0
        new = centers.copy()
        new[nonempty] = out["sums"][nonempty] / out["counts"][nonempty, None]
        shift = float(np.sqrt(((new - centers) ** 2).sum(axis=1)).max())
        centers = new
        logger.info("kmeans landmarks: Lloyd pass %d inertia=%.6e max centre shift=%.3e", i + 1, out["inertia"], shift)
        if shift == 0.0:
            break
    centers = centers[first_unique(centers)]
    if centers.shape[0] < k:
        warnings.warn(
            f"k-means found only {centers.shape[0]} distinct centres for {k} landmarks", UserWarning, stacklevel=3
        )
    return Landmarks(components=centers, indices=None, method="kmeans", n_passes=passes)


def select_landmarks(
    X: RowBlocks, k: int, method: str = "uniform", random_state=None, kmeans_iter: int = 3
) -> Landmarks:
    """Choose ``k`` landmarks from the row-blocked data ``X``."""
    if method == "uniform":
        return uniform_landmarks(X, k, random_state)
    if method == "kmeans":
        return kmeans_landmarks(X, k, random_state, n_iter=kmeans_iter)
    raise ValueError(f"landmarks={method!r} is not supported; choose one of {LANDMARK_METHODS}")
