"""Kernel functions evaluated block-wise against a small set of landmark rows.

Every function here takes one block of rows (a dense ``numpy`` array or a
``scipy.sparse`` CSR matrix) and the landmarks (dense, ``k x p``) and returns a
dense ``n_block x k`` array.  Nothing here knows about Dask.  The kernel's
parameters are checked and ``gamma="scale"`` / ``"auto"`` resolved here too
(:func:`check_kernel_params`, :func:`resolve_gamma`, :func:`gamma_for`), for
every estimator alike.

The RBF kernel uses ``||x||² + ||l||² − 2 x·l`` so that the bulk of the work is
one GEMM.  To keep that expansion accurate in float32, rows and landmarks are
first shifted by the landmarks' mean (distances do not change, the norms that
cancel become small); for sparse rows the shift is folded into the products so
the block is never densified.  Dense rows go through one augmented GEMM whose
product is the exponent itself (:func:`kernel_rows`, :func:`kernel_slab`)::

    [x − s, −γ‖x − s‖², 1] · [2γ(l − s), 1, −γ‖l − s‖²]ᵀ = −γ‖x − l‖²

so a block of kernel values costs that GEMM and two element-wise passes
(``min(·, 0)``, ``exp``) made in place, slab by slab when the caller wants the
slab to stay in the CPU cache (:meth:`dsvm.approx.FeatureMap.transform_block`).
"""

from __future__ import annotations

import numbers
import warnings
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
import scipy.sparse as sp

from ..blocks import RowBlocks
from ..checks import all_finite, check_positive
from ..exceptions import MixedScalesWarning, NonFiniteError
from ..options import GAMMA_STRINGS, KERNELS
from ._scaling import column_stats, constant_columns, merge_column_stats

__all__ = ["KERNELS", "KernelSpec", "make_kernel_spec", "check_kernel_params", "resolve_gamma", "gamma_for",
           "MIXED_SCALE_SPREAD", "COLUMN_STATS_MAX_FEATURES", "mixed_scales",
           "row_sq_norms", "PreparedLandmarks", "prepare_landmarks", "sq_distances", "kernel_block", "kernel_matrix",
           "kernel_rows", "kernel_slab", "DENSIFY_MAX_FEATURES", "DENSIFY_SLAB_ROWS"]


@dataclass(frozen=True)
class KernelSpec:
    """A kernel and its parameters (``gamma`` already resolved to a number).

    The kernels are those of scikit-learn's ``SVC``::

        rbf:     exp(-gamma ||x - x'||²)
        poly:    (coef0 + gamma <x, x'>) ** degree
        sigmoid: tanh(gamma <x, x'> + coef0)
        linear:  <x, x'>

    Parameters
    ----------
    name : {"rbf", "poly", "sigmoid", "linear"}, default="rbf"
    gamma : float, default=1.0
    degree : int, default=3
        Used by ``poly`` only.
    coef0 : float, default=0.0
        Used by ``poly`` and ``sigmoid``.

    Examples
    --------
    >>> import numpy as np
    >>> from dsvm import KernelSpec, kernel_matrix
    >>> spec = KernelSpec("rbf", gamma=0.5)
    >>> X = np.array([[0.0, 0.0], [1.0, 0.0]])
    >>> kernel_matrix(X, X, spec).round(4)  # exp(-0.5 * 1) off the diagonal
    array([[1.    , 0.6065],
           [0.6065, 1.    ]])
    """

    name: str = "rbf"
    gamma: float = 1.0
    degree: int = 3
    coef0: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> KernelSpec:
        return make_kernel_spec(d["name"], d["gamma"], d["degree"], d["coef0"])


def make_kernel_spec(name: str, gamma: float, degree: int = 3, coef0: float = 0.0) -> KernelSpec:
    """Validate kernel parameters and return a :class:`KernelSpec`.

    Raises
    ------
    ValueError
        If the kernel is unknown or a parameter is out of range.
    """
    if name not in KERNELS:
        raise ValueError(f"kernel={name!r} is not supported; choose one of {KERNELS}")
    if isinstance(gamma, bool) or not isinstance(gamma, numbers.Real) or not np.isfinite(gamma) or gamma <= 0:
        raise ValueError(f"gamma must be a positive finite number, got {gamma!r}")
    if isinstance(degree, bool) or not isinstance(degree, numbers.Integral) or degree < 1:
        raise ValueError(f"degree must be a positive integer, got {degree!r}")
    if isinstance(coef0, bool) or not isinstance(coef0, numbers.Real) or not np.isfinite(coef0):
        raise ValueError(f"coef0 must be a finite number, got {coef0!r}")
    return KernelSpec(name=name, gamma=float(gamma), degree=int(degree), coef0=float(coef0))


def check_kernel_params(kernel: str, gamma) -> None:
    """``kernel`` one of :data:`KERNELS`; ``gamma`` ``"scale"``, ``"auto"`` or a positive number (ValueError)."""
    if kernel not in KERNELS:
        raise ValueError(f"kernel={kernel!r} is not supported; choose one of {KERNELS}")
    if isinstance(gamma, str):
        if gamma not in GAMMA_STRINGS:
            raise ValueError(f"gamma must be 'scale', 'auto' or a positive number, got {gamma!r}")
        return
    check_positive("gamma", gamma)


def resolve_gamma(gamma, n_features: int, variance: Callable[[], float]) -> float:
    """``gamma`` as a number, as :class:`sklearn.svm.SVC` does.

    ``"scale"`` is ``1 / (n_features · Var X)`` (1.0 if the variance is 0),
    ``"auto"`` is ``1 / n_features``; a number is returned unchanged.
    ``variance()`` computes ``Var X`` over all entries (called for ``"scale"`` only).
    """
    if isinstance(gamma, str):
        if gamma == "auto":
            return 1.0 / n_features
        if gamma == "scale":
            var = variance()
            if np.isnan(var):  # a NaN or infinity in X, or squares that overflowed on both sides of a difference
                raise NonFiniteError("gamma='scale': the variance of X is nan in float64: X contains NaN or infinity, "
                                     "or values too large to square; remove or impute them, or scale X")
            if not np.isfinite(var):
                raise NonFiniteError(
                    f"gamma='scale': the variance of X is {var} in float64 (its values are too large to square); "
                    "scale X (scale='standard' or 'maxabs') or give gamma as a number"
                )
            return 1.0 / (n_features * var) if var > 0 else 1.0
        raise ValueError(f"gamma must be 'scale', 'auto' or a positive number, got {gamma!r}")
    return check_positive("gamma", gamma)


# Per-column statistics of the gamma="scale" pass are kept up to this many columns: beyond, their
# arrays (several floats per column and block) outweigh the sparse blocks they describe.
COLUMN_STATS_MAX_FEATURES = 100_000
# The columns' scales are "mixed" when both their standard deviations and their ranges (max - min) span
# more than this factor among non-constant columns.  Both: a rare binary column has a tiny standard
# deviation but the range of any other binary column (a9a, w8a, mushrooms: ranges all 1, standard
# deviations up to 90x apart), and one outlier widens a range, not a standard deviation.
MIXED_SCALE_SPREAD = 100.0


@np.errstate(over="ignore", invalid="ignore")  # a variance that overflows is refused by resolve_gamma
def _moments_block(X_block):
    if sp.issparse(X_block):
        data = X_block.data.astype(np.float64)
        return np.array([data.sum(), (data * data).sum(), float(np.prod(X_block.shape))])
    Xd = np.asarray(X_block, dtype=np.float64)
    return np.array([Xd.sum(), (Xd * Xd).sum(), float(Xd.size)])


def _total_variance(stats: dict) -> float:
    """The variance of all entries from per-column counts, means and centred sums of squares."""
    n, mean, m2 = stats["n"], stats["mean"], stats["m2"]
    if n == 0 or mean.size == 0:
        return 0.0
    with np.errstate(over="ignore", invalid="ignore"):
        between = float(np.sum((mean - mean.mean()) ** 2))
        return (float(np.sum(m2)) + n * between) / (n * mean.size)


def mixed_scales(stats: dict) -> str | None:
    """What is mixed about the columns' scales (for a warning), or None when they are comparable.

    ``stats`` are per-column statistics (:func:`~dsvm.approx._scaling.column_stats`).  Mixed: among the
    non-constant columns, both the standard deviations and the ranges span more than
    :data:`MIXED_SCALE_SPREAD`.
    """
    n = stats["n"]
    if n < 2:
        return None
    var = stats["m2"] / n
    keep = ~constant_columns(n, stats["mean"], var)
    if np.count_nonzero(keep) < 2:
        return None
    cols = np.flatnonzero(keep)
    std, span = np.sqrt(var[keep]), (stats["max"] - stats["min"])[keep]
    lo, hi = int(np.argmin(std)), int(np.argmax(std))
    spread = std[hi] / std[lo]
    if not (spread > MIXED_SCALE_SPREAD and span.max() > MIXED_SCALE_SPREAD * span.min()):
        return None
    return (f"the columns of X have standard deviations from {std[lo]:.3g} (column {cols[lo]}) to {std[hi]:.3g} "
            f"(column {cols[hi]}), {np.log10(spread):.1f} orders of magnitude apart, and one gamma serves them all: "
            "the kernel sees little but the widest columns. Pass scale='standard' (dsvm train --scale standard; "
            "'maxabs' keeps sparse data sparse) to put every column on one scale")


def gamma_for(gamma, X: RowBlocks, n_features: int, warn_scales: bool = False, stacklevel: int = 2) -> float:
    """:func:`resolve_gamma` with ``Var X`` computed block-wise in one pass (the zeros of sparse rows included).

    With ``warn_scales`` (a fit without ``scale=``) and ``gamma="scale"``, the same pass keeps per-column
    statistics (up to :data:`COLUMN_STATS_MAX_FEATURES` columns) and a :class:`~dsvm.exceptions.MixedScalesWarning`
    names the spread when the columns' scales are mixed (:func:`mixed_scales`).  Other gammas make no pass,
    so they are not checked.
    """

    def variance() -> float:
        if not warn_scales or X.n_cols > COLUMN_STATS_MAX_FEATURES:
            s, ss, count = X.map_reduce(_moments_block)
            with np.errstate(over="ignore", invalid="ignore"):
                return ss / count - (s / count) ** 2
        stats = X.map_reduce(column_stats, combine=merge_column_stats)
        message = mixed_scales(stats)
        if message is not None:
            warnings.warn(message, MixedScalesWarning, stacklevel=stacklevel + 2)
        return _total_variance(stats)

    return resolve_gamma(gamma, n_features, variance)


def row_sq_norms(X) -> np.ndarray:
    """Squared Euclidean norm of each row, in float64 (dense or sparse rows)."""
    if sp.issparse(X):
        return _sparse_row_sq_norms(_as_csr(X))
    Xd = np.asarray(X)
    return np.einsum("ij,ij->i", Xd, Xd, dtype=np.float64)


def _sparse_row_sq_norms(X: sp.csr_matrix) -> np.ndarray:
    data = X.data.astype(np.float64, copy=False)
    rows = np.repeat(np.arange(X.shape[0]), np.diff(X.indptr))
    return np.bincount(rows, weights=data * data, minlength=X.shape[0])


def _as_csr(X) -> sp.csr_matrix:
    if sp.issparse(X):
        return X.tocsr() if X.format != "csr" else X
    raise TypeError("expected a sparse matrix")


@dataclass
class PreparedLandmarks:
    """Landmarks cast and shifted once, ready to be evaluated against many row blocks.

    ``shift`` is subtracted from rows and landmarks for the RBF kernel (``None``
    for the other kernels, whose value depends on the origin).
    """

    spec: KernelSpec
    landmarks: np.ndarray  # (k, p) in ``dtype``, already shifted
    landmark_sq_norms: np.ndarray  # (k,) float64, of the shifted landmarks
    shift: np.ndarray | None  # (p,) float64
    shift_dot_landmarks: np.ndarray | None  # (k,) float64: shift · (l - shift)
    dtype: np.dtype
    landmarks64: np.ndarray | None = None  # float64 copy for sparse rows (products are not BLAS there)
    # RBF: (p + 2, k) in ``dtype``, [2γ(l − s); 1; −γ‖l − s‖²] (the landmark side of the augmented GEMM)
    augmented: np.ndarray | None = None

    @property
    def n_features(self) -> int:
        return self.landmarks.shape[1]


def prepare_landmarks(landmarks: np.ndarray, spec: KernelSpec, dtype=np.float32) -> PreparedLandmarks:
    """Precompute everything about the landmarks that every block needs."""
    L = np.asarray(landmarks, dtype=np.float64)
    if not all_finite(L):
        bad = int(np.flatnonzero(~np.isfinite(L).all(axis=1))[0])
        raise NonFiniteError(f"landmark {bad} contains NaN or infinity (landmarks are rows of the training data); "
                             "remove or impute non-finite values")
    dtype = np.dtype(dtype)
    if spec.name == "rbf":
        shift = L.mean(axis=0)
        Lc = L - shift
        sq = np.einsum("ij,ij->i", Lc, Lc)
        augmented = np.empty((L.shape[1] + 2, L.shape[0]))
        with np.errstate(over="ignore", invalid="ignore"):  # refused just below when it overflows
            augmented[:-2] = 2.0 * spec.gamma * Lc.T
            augmented[-2] = 1.0
            augmented[-1] = -spec.gamma * sq
        _check_exponent_scale(augmented, spec, dtype)
        return PreparedLandmarks(
            spec=spec,
            landmarks=np.ascontiguousarray(Lc, dtype=dtype),
            landmark_sq_norms=sq,
            shift=shift,
            shift_dot_landmarks=Lc @ shift,
            dtype=dtype,
            landmarks64=np.ascontiguousarray(Lc),
            augmented=np.ascontiguousarray(augmented, dtype=dtype),
        )
    return PreparedLandmarks(
        spec=spec,
        landmarks=np.ascontiguousarray(L, dtype=dtype),
        landmark_sq_norms=np.einsum("ij,ij->i", L, L),
        shift=None,
        shift_dot_landmarks=None,
        dtype=dtype,
        landmarks64=np.ascontiguousarray(L),
    )


def _check_exponent_scale(augmented: np.ndarray, spec: KernelSpec, dtype: np.dtype) -> None:
    """Refuse an RBF whose exponent ``γ‖x − l‖²`` cannot be formed in ``dtype`` (NonFiniteError)."""
    with np.errstate(over="ignore"):
        if all_finite(augmented) and all_finite(augmented.astype(dtype)):
            return
    biggest = float(np.nanmax(np.abs(augmented[:-2]))) if augmented.shape[0] > 2 else float("inf")
    raise NonFiniteError(
        f"the RBF kernel's exponent overflows {dtype.name}: gamma={spec.gamma:g} times the landmarks' distances "
        f"from their mean gives {biggest:.3g}; use a smaller gamma, scale the features (scale='standard'), or "
        "dtype='float64'"
    )


def _cross(X, prep: PreparedLandmarks) -> np.ndarray:
    """``X @ landmarks.T`` (X unshifted): float64 for sparse X, ``prep.dtype`` for dense X."""
    if sp.issparse(X):
        # scipy's sparse x dense product is a plain loop, as fast in float64 as
        # in float32, and float64 keeps x·(l − shift) accurate for rows far
        # from the origin (sparse rows cannot be shifted without densifying).
        Xs = _as_csr(X)
        if Xs.dtype != np.float64:
            Xs = Xs.astype(np.float64)
        return np.asarray(Xs @ prep.landmarks64.T)
    Xd = np.asarray(X)
    if Xd.dtype != prep.dtype:
        Xd = Xd.astype(prep.dtype)
    return Xd @ prep.landmarks.T


def sq_distances(X, prep: PreparedLandmarks) -> np.ndarray:
    """Squared distances between rows of ``X`` and the landmarks, clipped at 0."""
    if prep.shift is None:
        xsq = row_sq_norms(X)
        out = _cross(X, prep).astype(prep.dtype, copy=False)
        out *= -2.0
        out += xsq[:, None].astype(prep.dtype)
        out += prep.landmark_sq_norms.astype(prep.dtype)[None, :]
        np.maximum(out, 0, out=out)
        return out
    if sp.issparse(X):
        Xs = _as_csr(X)
        # ||x - s||² = ||x||² - 2 x·s + ||s||²; (x - s)·(l - s) = x·(l - s) - s·(l - s)
        xs = np.asarray(Xs @ prep.shift).ravel()
        xsq = _sparse_row_sq_norms(Xs) - 2.0 * xs + float(prep.shift @ prep.shift)
        cross = _cross(Xs, prep)
        cross -= prep.shift_dot_landmarks[None, :]
        cross = cross.astype(prep.dtype)
    else:
        Xd = np.asarray(X)
        Xc = Xd.astype(prep.dtype, copy=True)
        Xc -= prep.shift.astype(prep.dtype)
        xsq = np.einsum("ij,ij->i", Xc, Xc, dtype=np.float64)
        cross = Xc @ prep.landmarks.T
    out = cross
    out *= -2.0
    out += xsq[:, None].astype(prep.dtype)
    out += prep.landmark_sq_norms.astype(prep.dtype)[None, :]
    np.maximum(out, 0, out=out)
    return out


# Sparse rows with at most this many features are densified slab by slab
# (DENSIFY_SLAB_ROWS rows at a time) and go through the dense GEMM path:
# multithreaded BLAS beats scipy's single-threaded sparse product there, and the
# shift of the RBF kernel applies.  Wider sparse data (text, one-hot of large
# vocabularies) keeps the CSR path, which never densifies.
DENSIFY_MAX_FEATURES = 1024
DENSIFY_SLAB_ROWS = 8192
# dense kernel blocks are made in slabs of about this many bytes (the GEMM's output stays in cache for the
# clip and the exp that follow)
KERNEL_SLAB_BYTES = 4 * 2**20


def kernel_rows(X, prep: PreparedLandmarks) -> np.ndarray:
    """Dense rows made ready for :func:`kernel_slab`, in ``prep.dtype`` (C order).

    RBF: the augmented rows ``[x − s, −γ‖x − s‖², 1]`` (the shift ``s`` taken in
    float64, the norms accumulated in float64); other kernels: the rows as they are.
    """
    Xd = np.asarray(X)
    if prep.augmented is None:
        return np.ascontiguousarray(Xd, dtype=prep.dtype)
    n, p = Xd.shape
    rows = np.empty((n, p + 2), dtype=prep.dtype)
    centred = rows[:, :p]
    np.subtract(Xd, prep.shift, out=centred, casting="same_kind")
    rows[:, p] = -prep.spec.gamma * np.einsum("ij,ij->i", centred, centred, dtype=np.float64)
    rows[:, p + 1] = 1.0
    return rows


def kernel_slab(rows: np.ndarray, prep: PreparedLandmarks, out: np.ndarray) -> np.ndarray:
    """``K(rows, landmarks)`` into ``out`` (``len(rows) x k``, ``prep.dtype``): one GEMM, then element-wise in place.

    ``rows`` come from :func:`kernel_rows`.  Rounding can leave the RBF exponent
    slightly positive for a row next to a landmark.  In float64 it is clipped at
    0, so a kernel value never exceeds 1; in float32 it is not: the clip costs as
    much as the exp, and what it removes (``1 + O(γ ε ‖x − s‖²)``) is within the
    rounding the float32 distance carries anyway.
    """
    if prep.augmented is not None:
        np.matmul(rows, prep.augmented, out=out)
        if out.dtype == np.float64:
            np.minimum(out, 0.0, out=out)
        np.exp(out, out=out)
        return out
    np.matmul(rows, prep.landmarks.T, out=out)
    return _finish_inner_product_kernel(out, prep.spec)


def _finish_inner_product_kernel(K: np.ndarray, spec: KernelSpec) -> np.ndarray:
    """poly, sigmoid and linear from the inner products ``K = X Lᵀ``, in place."""
    if spec.name == "linear":
        return K
    if spec.gamma != 1.0:
        K *= spec.gamma
    if spec.coef0 != 0.0:
        K += spec.coef0
    if spec.name == "poly":
        if spec.degree != 1:
            np.power(K, spec.degree, out=K)
        return K
    np.tanh(K, out=K)  # sigmoid
    return K


def kernel_block(X, prep: PreparedLandmarks) -> np.ndarray:
    """Kernel matrix ``K(X, landmarks)`` of one row block, dense, in ``prep.dtype``."""
    if sp.issparse(X) and X.shape[1] <= DENSIFY_MAX_FEATURES and X.shape[0] > 0:
        Xs = _as_csr(X)
        out = np.empty((Xs.shape[0], prep.landmarks.shape[0]), dtype=prep.dtype)
        for s in range(0, Xs.shape[0], DENSIFY_SLAB_ROWS):
            dense = Xs[s : s + DENSIFY_SLAB_ROWS].toarray()
            kernel_slab(kernel_rows(dense, prep), prep, out[s : s + DENSIFY_SLAB_ROWS])
        return out
    if not sp.issparse(X):
        out = np.empty((X.shape[0], prep.landmarks.shape[0]), dtype=prep.dtype)
        rows = kernel_rows(X, prep)
        # slab by slab: the element-wise passes then read the GEMM's output from the CPU cache
        step = max(64, KERNEL_SLAB_BYTES // max(1, out.shape[1] * out.itemsize))
        for s in range(0, rows.shape[0], step):
            kernel_slab(rows[s : s + step], prep, out[s : s + step])
        return out
    if prep.spec.name == "rbf":
        K = sq_distances(X, prep)
        K *= -prep.spec.gamma
        np.exp(K, out=K)
        return K
    return _finish_inner_product_kernel(_cross(X, prep).astype(prep.dtype, copy=False), prep.spec)


def kernel_diagonal(X, spec: KernelSpec) -> np.ndarray:
    """``K(x, x)`` of every row of ``X`` (dense or sparse), float64."""
    if spec.name == "rbf":
        return np.ones(X.shape[0])
    sq = row_sq_norms(X)
    if spec.name == "linear":
        return sq
    inner = spec.gamma * sq + spec.coef0
    return inner**spec.degree if spec.name == "poly" else np.tanh(inner)


def kernel_matrix(X, Y, spec: KernelSpec) -> np.ndarray:
    """Exact kernel matrix ``K(X, Y)`` in float64.

    Parameters
    ----------
    X : ndarray or scipy.sparse matrix of shape (n, p)
    Y : array-like of shape (m, p)
        Dense (converted to a float64 array).
    spec : KernelSpec

    Returns
    -------
    ndarray of shape (n, m), float64

    Examples
    --------
    >>> import numpy as np
    >>> from dsvm import KernelSpec, kernel_matrix
    >>> X = np.array([[1.0, 2.0], [0.0, 1.0]])
    >>> kernel_matrix(X, X, KernelSpec("linear"))
    array([[5., 2.],
           [2., 1.]])
    >>> kernel_matrix(X, X, KernelSpec("poly", gamma=1.0, degree=2, coef0=1.0))
    array([[36.,  9.],
           [ 9.,  4.]])
    """
    prep = prepare_landmarks(np.asarray(Y, dtype=np.float64), spec, dtype=np.float64)
    return kernel_block(X, prep)
