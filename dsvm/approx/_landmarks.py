"""Landmark selection for the Nyström map.

``uniform``
    ``k`` distinct rows drawn without replacement (seeded), pulled in one pass.
    Rows whose *values* repeat an earlier draw are skipped (binary data such as
    a9a repeats rows; a repeated landmark only wastes a component).
``kmeans``
    k-means++ seeds drawn in batches on a uniform sample of rows, then
    ``kmeans_iter`` (default 1) Lloyd passes over the whole (row-blocked)
    data: the "improved Nyström" landmarks of Zhang, Tsang & Kwok (2008).
    The landmarks are cluster centres, not data rows, so
    ``component_indices_`` is ``None``.
``pivoted``
    Greedy pivoted Cholesky of the kernel matrix of a uniform pool of rows:
    after a few uniform ones, each landmark is the pool row that the
    landmarks before it approximate worst (largest residual
    ``K(x, x) − ‖f(x)‖²``).  Needs the kernel; the landmarks come in an
    order in which ``K(L, L)`` has a well-conditioned Cholesky factor, which
    makes the Nyström map triangular (see
    :func:`dsvm.approx._nystroem.fit_feature_map`).
"""

from __future__ import annotations

import logging
import warnings
from dataclasses import dataclass

import numpy as np
import scipy.linalg
import scipy.sparse as sp

from ..blocks import RowBlocks, available_memory, probe_workers
from ..checks import all_finite
from ..exceptions import DenseLandmarksError, NonFiniteError, format_bytes
from ._kernels import (
    DENSIFY_MAX_FEATURES,
    DENSIFY_SLAB_ROWS,
    KernelSpec,
    kernel_block,
    kernel_diagonal,
    prepare_landmarks,
    sq_distances,
)

logger = logging.getLogger(__name__)

LANDMARK_METHODS = ("uniform", "kmeans", "pivoted")


@dataclass
class Landmarks:
    components: np.ndarray  # (k, p) float64, dense
    indices: np.ndarray | None  # rows of X they came from (uniform), else None
    method: str
    n_passes: int
    # "cholesky": chosen so that K(L, L) has a well-conditioned Cholesky factor in
    # this order (pivoted); "eigen": anything else, mapped by eigendecomposition
    feature_map: str = "eigen"



# Dense copies of the landmark rows a fit holds at once: the rows fetched (float64), their de-duplicated
# copy, and the prepared landmarks (shifted, cast to the features' dtype, and the RBF's augmented
# transpose), in this process and again in every worker that computes features.
LANDMARK_COPIES = 4
# below this, dense landmarks are not worth a round trip to the workers to check
LANDMARK_CHECK_BYTES = 64 * 2**20


def check_dense_landmarks(rows: int, n_features: int, k: int) -> None:
    """Refuse, before anything is allocated, dense landmark rows that would not fit in memory.

    Landmarks are dense rows of all ``n_features`` columns, also for sparse
    input (whose ``n_features`` is its largest feature index): ``rows`` such
    rows of float64, held :data:`LANDMARK_COPIES` times, must fit in half of
    what this process and every Dask worker may still allocate.

    Raises
    ------
    DenseLandmarksError
        Naming ``n_features``, ``k``, the bytes needed and what to change.
    """
    need = LANDMARK_COPIES * float(rows) * float(n_features) * 8.0
    if need < LANDMARK_CHECK_BYTES:
        return
    room = [("this process", available_memory())]
    if need < 2.0 * room[0][1]:  # the workers are asked only when this process has the room
        room += [(f"Dask worker {w.address}", w.usable) for w in probe_workers()]
    where, have = min(room, key=lambda r: r[1])
    if need <= 0.5 * have:
        return
    raise DenseLandmarksError(
        f"k={k} landmarks are dense rows of all n_features={n_features} columns ({rows} rows x {n_features} "
        f"x 8 bytes, held {LANDMARK_COPIES} times: {format_bytes(need)}), more than half of what {where} may "
        f"still allocate ({format_bytes(have)}); use fewer landmarks (n_components, -k) or fewer columns "
        "(a sparse file's largest feature index sets n_features: renumber or hash the features)"
    )


def landmark_rows(method: str, n: int, k: int) -> int:
    """How many rows ``method`` holds dense while choosing ``k`` landmarks among ``n`` rows."""
    if method == "kmeans":
        return min(n, max(KMEANS_SAMPLE_FACTOR * k, KMEANS_SAMPLE_MIN))
    if method == "pivoted":
        return min(n, max(PIVOT_POOL_FACTOR * k, PIVOT_POOL_MIN), max(2 * k, PIVOT_POOL_BYTES // (4 * max(k, 1))))
    return min(n, k + max(16, k // 4))


def _random_state(random_state) -> np.random.RandomState:
    """scikit-learn's ``check_random_state``, imported on first use: Dask workers import this package, and
    scikit-learn (with the pandas it loads) would add over 100 MiB to every worker's memory."""
    from sklearn.utils import check_random_state

    return check_random_state(random_state)


def dense_rows(rows) -> np.ndarray:
    if sp.issparse(rows):
        return rows.toarray().astype(np.float64)
    return np.asarray(rows, dtype=np.float64)


def first_unique(rows: np.ndarray) -> np.ndarray:
    """Positions of the first occurrence of each distinct row, in original order."""
    if rows.shape[0] == 0:
        return np.zeros(0, dtype=np.int64)
    if rows.shape[1] == 0:
        return np.zeros(1, dtype=np.int64)  # all rows are the same empty row
    # Each row as one opaque item compared by its bytes: one sort of fixed-size keys instead of
    # np.unique(axis=0)'s lexicographic sort over columns.  Adding 0.0 turns -0.0 into 0.0, which
    # would otherwise differ by bytes while equal in value.
    flat = np.ascontiguousarray(np.asarray(rows, dtype=np.float64) + 0.0)
    items = flat.view(np.dtype((np.void, flat.dtype.itemsize * flat.shape[1]))).ravel()
    _, first = np.unique(items, return_index=True)
    return np.sort(first)


def clip_n_components(k: int, n: int, stacklevel: int = 3) -> int:
    """``k``, or ``n`` with a ``UserWarning`` when ``k`` is larger than the number of rows ``n``."""
    if k > n:
        warnings.warn(f"n_components={k} is larger than the number of rows ({n}); using n_components={n}",
                      UserWarning, stacklevel=stacklevel)
        return n
    return k


def warn_if_few_distinct(found: int, k: int, stacklevel: int = 2) -> None:
    """A ``UserWarning`` when only ``found < k`` distinct rows were found for ``k`` landmarks."""
    if found < k:
        warnings.warn(f"only {found} distinct rows were found for {k} landmarks; using {found}", UserWarning,
                      stacklevel=stacklevel)


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
    stream = _IndexStream(n, _random_state(random_state))
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
    warn_if_few_distinct(seen_idx.size, k, stacklevel=4)
    return Landmarks(components=seen_rows[:k], indices=seen_idx[:k], method="uniform", n_passes=passes)


# Sample rows per centre: k-means++ seeds need several candidate rows per centre to beat uniform
# landmarks, and Lloyd iterations on the sample before the full pass are not run (they did not
# improve accuracy and cost up to half the k-means time; see the documentation's performance page).
KMEANS_SAMPLE_FACTOR = 10
KMEANS_SAMPLE_MIN = 10_000  # ... and at least this many (all rows of smaller data)
KMEANS_SEED_ROUNDS = 32  # k-means++ seeding draws the centres in this many batches


def nearest_centres(rows, prep) -> tuple[np.ndarray, np.ndarray]:
    """``(index of the nearest centre, its squared distance)`` for every row, slab by slab.

    Narrow sparse rows are densified a slab at a time and go through the GEMM,
    as in :func:`~dsvm.approx._kernels.kernel_block` (scipy's sparse product is single-threaded).
    """
    n = rows.shape[0]
    assign = np.zeros(n, dtype=np.int64)
    d2 = np.zeros(n)
    densify = sp.issparse(rows) and rows.shape[1] <= DENSIFY_MAX_FEATURES
    for s in range(0, n, DENSIFY_SLAB_ROWS):
        slab = rows[s : s + DENSIFY_SLAB_ROWS]
        D = sq_distances(slab.toarray() if densify else slab, prep)
        a = np.argmin(D, axis=1)
        assign[s : s + DENSIFY_SLAB_ROWS] = a
        d2[s : s + DENSIFY_SLAB_ROWS] = D[np.arange(a.size), a]
    return assign, d2


@np.errstate(over="ignore", invalid="ignore")
def _lloyd_block(X_block, params):
    """Per-centre sums and counts of the rows nearest to each centre, and their squared distances.

    A row beyond float32 has an infinite distance, without numpy's RuntimeWarning from the worker: centres
    beyond float32 are refused in the kernel's words when prepared as landmarks (``prepare_landmarks``), and the
    row itself by the feature map's finiteness check.
    """
    k = params["k"]
    assign, d2 = nearest_centres(X_block, params["prep"])
    onehot = sp.csr_matrix((np.ones(assign.size), (assign, np.arange(assign.size))), shape=(k, assign.size))
    sums = onehot @ X_block
    sums = sums.toarray() if sp.issparse(sums) else np.asarray(sums, dtype=np.float64)
    return {"sums": sums.astype(np.float64), "counts": np.bincount(assign, minlength=k).astype(np.float64),
            "inertia": float(d2.sum())}


def _centre_prep(centres: np.ndarray):
    # the RBF preparation shifts rows and centres by the centres' mean: float32 distances stay accurate
    return prepare_landmarks(centres, KernelSpec("rbf"), dtype=np.float32)


def _lloyd_update(centres: np.ndarray, out: dict) -> tuple[np.ndarray, float]:
    """New centres (an empty cluster keeps its centre) and the largest centre shift."""
    nonempty = out["counts"] > 0
    new = centres.copy()
    new[nonempty] = out["sums"][nonempty] / out["counts"][nonempty, None]
    return new, float(np.sqrt(((new - centres) ** 2).sum(axis=1)).max())


def kmeanspp_seeds(S: np.ndarray, k: int, rng: np.random.RandomState, rounds: int = KMEANS_SEED_ROUNDS) -> np.ndarray:
    """k-means++ seeding of the rows ``S`` in ``rounds`` batches: positions of up to ``k`` rows.

    Each batch draws its centres at once with probability proportional to the
    squared distance to the nearest centre so far (D² sampling), then updates
    those distances with one product against the batch: ``m k p`` flops in
    all, a GEMM, where the one-at-a-time k-means++ reads the sample once per
    centre (memory-bound: ``k`` passes over the sample).
    """
    m = S.shape[0]
    batch = max(1, -(-k // rounds))
    chosen = [int(rng.randint(m))]
    _, d2 = nearest_centres(S, _centre_prep(S[chosen]))
    while len(chosen) < min(k, m):
        positive = int(np.count_nonzero(d2 > 0))
        if positive == 0:
            break  # every row coincides with a centre
        new = rng.choice(m, size=min(batch, k - len(chosen), positive), replace=False, p=d2 / d2.sum())
        chosen.extend(int(i) for i in new)
        _, d_new = nearest_centres(S, _centre_prep(S[new]))
        np.minimum(d2, d_new, out=d2)
    return np.asarray(chosen, dtype=np.int64)


def kmeans_landmarks(
    X: RowBlocks, k: int, random_state=None, n_iter: int = 1, sample_size: int | None = None
) -> Landmarks:
    """k-means centres in ``1 + n_iter`` passes: batched k-means++ seeds on a uniform sample of
    ``KMEANS_SAMPLE_FACTOR · k`` rows (one pass to fetch it), then ``n_iter`` Lloyd passes over all rows."""
    rng = _random_state(random_state)
    n = X.n_rows
    m = min(n, sample_size) if sample_size else landmark_rows("kmeans", n, k)
    from sklearn.utils.random import sample_without_replacement

    sample_idx = np.sort(sample_without_replacement(n, m, random_state=rng))
    sample = dense_rows(X.take(sample_idx))
    passes = 1
    distinct = sample[first_unique(sample)]
    centres = distinct[kmeanspp_seeds(distinct, k, rng)]
    k_eff = centres.shape[0]
    for i in range(n_iter):
        out = X.map_reduce(_lloyd_block, shared=({"prep": _centre_prep(centres), "k": k_eff},))
        passes += 1
        centres, shift = _lloyd_update(centres, out)
        logger.info("kmeans landmarks: Lloyd pass %d inertia=%.6e max centre shift=%.3e", i + 1, out["inertia"], shift)
        if shift == 0.0:
            break
    centres = centres[first_unique(centres)]
    if centres.shape[0] < k:
        warnings.warn(
            f"k-means found only {centres.shape[0]} distinct centres for {k} landmarks", UserWarning, stacklevel=3
        )
    return Landmarks(components=centres, indices=None, method="kmeans", n_passes=passes)


PIVOT_POOL_FACTOR = 10  # pool rows per landmark
PIVOT_POOL_MIN = 10_000  # ... and at least this many (all rows of smaller data)
PIVOT_POOL_BYTES = 512 * 2**20  # cap on the pool's float32 factor (pool rows x k)
PIVOT_BLOCK = 128  # landmarks chosen per block: one kernel-column product and one GEMM update
PIVOT_CANDIDATES = 160  # rows with the largest residuals considered per block
# Residuals below this share of the largest diagonal count as zero: the factor is kept in
# float32, whose rounding puts about this much noise into 1 − ‖g‖² at k in the thousands.
PIVOT_FLOOR = 1e-4
# The first landmarks are the first rows of the (uniform) pool, the rest greedy: pure greedy
# pivoting spends its first landmarks on the rows farthest from all others, which a uniform share
# balances (measurements in the documentation's performance page).
PIVOT_UNIFORM_SHARE = 0.1


def _pivot_block(S: np.ndarray, n_pick: int, floor: float) -> tuple[list[int], np.ndarray]:
    """Greedy pivoted Cholesky of a small residual kernel matrix ``S`` (candidates x candidates).

    Returns up to ``n_pick`` positions in pivot order (each the largest residual
    diagonal left, above ``floor``) and the lower-triangular ``L`` with
    ``L Lᵀ = S[picks][:, picks]``.
    """
    c = S.shape[0]
    resid = np.diagonal(S).copy()
    cols = np.zeros((c, n_pick))
    picks: list[int] = []
    for t in range(n_pick):
        masked = resid.copy()
        masked[picks] = -np.inf
        i = int(np.argmax(masked))
        if not masked[i] > floor:
            break
        col = (S[:, i] - cols[:, :t] @ cols[i, :t]) / np.sqrt(resid[i])
        cols[:, t] = col
        resid -= col * col
        picks.append(i)
    return picks, np.tril(cols[picks, : len(picks)])


def pivoted_cholesky_pivots(pool, spec: KernelSpec, k: int, rtol: float, block: int = PIVOT_BLOCK,
                            candidates: int = PIVOT_CANDIDATES, first: np.ndarray | None = None) -> np.ndarray:
    """Up to ``k`` rows of ``pool`` chosen by greedy pivoted Cholesky of ``K(pool, pool)``.

    Block-wise: a block of ``b`` pivots (1, 1, 2, 4, … up to ``block``) takes
    the ``c = b · candidates / block`` rows with the largest residual diagonal,
    computes their kernel columns once (``m x c``), removes the part the
    chosen landmarks explain (one GEMM with the factor ``G``, ``m x j``) and
    picks up to ``b`` of them by pivoted Cholesky among the candidates; ``G``
    and the residual diagonal are then updated for all pool rows.  With
    ``block = candidates = 1`` this is the textbook greedy pivoted Cholesky.
    ``K(pool, pool)`` is never formed: about ``m k² c / b`` flops and
    ``4 m k`` bytes in all.  Stops early when no residual is above
    ``max(rtol, PIVOT_FLOOR)`` times the largest diagonal.

    ``first``: pool positions to take (in this order, dependent ones skipped)
    before the greedy blocks start.
    """
    m = pool.shape[0]
    if sp.issparse(pool) and pool.shape[1] <= DENSIFY_MAX_FEATURES:
        pool = pool.toarray()  # densified once, not once per block of kernel columns
    d = kernel_diagonal(pool, spec)
    d_max = float(d.max()) if m else 0.0
    if not d_max > 0:
        return np.zeros(0, dtype=np.int64)
    floor = max(rtol, PIVOT_FLOOR) * d_max
    # Everything is kept transposed (a row per landmark or candidate, m columns), so that
    # the products, the rows picked and the rows stored are contiguous.
    pool_prep = prepare_landmarks(dense_rows(pool), spec, np.float32)
    Gt = np.empty((min(k, m), m), dtype=np.float32)  # the factor: K(pool, pool) ≈ Gtᵀ Gt
    taken = np.zeros(m, dtype=bool)
    pivots: list[int] = []
    while len(pivots) < min(k, m):
        j = len(pivots)
        resid = np.where(taken, -np.inf, d)
        if j == 0 and first is not None and len(first):
            b = min(len(first), k)
            cand = np.asarray(first[:b], dtype=np.int64)
        else:
            # Blocks grow from one pivot to ``block``: the first pivots see residuals that say
            # little yet (the RBF diagonal is constant), later ones choose among informed ones.
            b = min(block, max(1, j), k - j)
            n_cand = min(-(-b * candidates // block), m - j)
            cand = np.argsort(-resid, kind="stable")[:n_cand]  # ties: the lowest position first
        cand = cand[resid[cand] > floor]
        if cand.size == 0:
            break
        with np.errstate(over="ignore", invalid="ignore"):
            Ct = kernel_block(pool[cand], pool_prep)  # candidates x m
        if not all_finite(Ct):
            raise NonFiniteError(
                f"pivoted landmarks: the {spec.name} kernel's values on the pool of candidate rows overflow float32; "
                "scale the features (scale='standard' or 'maxabs') or lower the kernel's parameters"
            )
        if j:
            Ct -= Gt[:j, cand].T @ Gt[:j]
        S = Ct[:, cand].astype(np.float64)
        picks, L = _pivot_block(0.5 * (S + S.T), b, floor)
        if not picks:
            break
        L_inv = scipy.linalg.solve_triangular(L, np.eye(len(picks)), lower=True, check_finite=False)
        G_new = L_inv.astype(np.float32) @ Ct[picks]
        Gt[j : j + len(picks)] = G_new
        d -= np.einsum("ij,ij->j", G_new, G_new, dtype=np.float64)
        taken[cand[picks]] = True
        pivots.extend(int(i) for i in cand[picks])
    return np.asarray(pivots, dtype=np.int64)


def pivoted_landmarks(X: RowBlocks, k: int, spec: KernelSpec, random_state=None, rtol: float = 1e-6) -> Landmarks:
    """Landmarks by greedy pivoted Cholesky on a uniform pool of rows (one pass to fetch the pool).

    The pool holds ``PIVOT_POOL_FACTOR · k`` rows (at least
    ``PIVOT_POOL_MIN``, all rows of smaller data, and a factor of at most
    ``PIVOT_POOL_BYTES``).  The first ``PIVOT_UNIFORM_SHARE · k`` landmarks
    are pool rows drawn uniformly; each further one is the pool row worst
    approximated by the landmarks before it (:func:`pivoted_cholesky_pivots`),
    so that no landmark repeats what the others already span: on dense,
    low-dimensional data fewer landmarks reach the accuracy of uniform ones.
    Greedy pivoting favours rows far from all others: at small k and on
    binary data with many isolated rows uniform or ``"active"`` landmarks do
    better (measurements in the documentation's performance page).  The
    landmarks come in pivot order, in which ``K(L, L)`` has a
    well-conditioned Cholesky factor.
    """
    n = X.n_rows
    m = landmark_rows("pivoted", n, k)
    drawn = _IndexStream(n, _random_state(random_state)).first(m)
    idx = np.sort(drawn)
    pool = X.take(idx)
    n_first = int(round(PIVOT_UNIFORM_SHARE * k))
    first = np.searchsorted(idx, drawn[:n_first])  # pool positions of the first rows drawn
    piv = pivoted_cholesky_pivots(pool, spec, k, rtol, first=first)
    if piv.size < k:
        warnings.warn(
            f"only {piv.size} of {m} sampled rows are not already spanned by the landmarks before them "
            f"(kernel residual above {max(rtol, PIVOT_FLOOR):.0e}); using {piv.size} landmarks instead of {k}",
            UserWarning,
            stacklevel=3,
        )
    logger.info("pivoted landmarks: %d from a pool of %d rows", piv.size, m)
    return Landmarks(components=dense_rows(pool[piv]), indices=idx[piv], method="pivoted", n_passes=1,
                     feature_map="cholesky")


def select_landmarks(
    X: RowBlocks, k: int, method: str = "uniform", random_state=None, kmeans_iter: int = 1,
    spec: KernelSpec | None = None, rtol: float = 1e-6,
) -> Landmarks:
    """Choose ``k`` landmarks from the row-blocked data ``X``.

    ``spec`` (the kernel) is needed by ``"pivoted"`` only; ``rtol`` is its
    relative residual cut-off (see :func:`pivoted_landmarks`).  Rows too wide to
    be held dense are refused first (:func:`check_dense_landmarks`).
    """
    if method in LANDMARK_METHODS:
        check_dense_landmarks(landmark_rows(method, X.n_rows, k), X.n_cols, k)
    if method == "uniform":
        return uniform_landmarks(X, k, random_state)
    if method == "kmeans":
        return kmeans_landmarks(X, k, random_state, n_iter=kmeans_iter)
    if method == "pivoted":
        if spec is None:
            raise ValueError("landmarks='pivoted' depends on the kernel: pass its KernelSpec as spec=")
        return pivoted_landmarks(X, k, spec, random_state, rtol)
    raise ValueError(f"landmarks={method!r} is not supported; choose one of {LANDMARK_METHODS}")
