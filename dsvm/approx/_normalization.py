"""The map ``M`` of the Nyström features ``F = K(X, L) · M`` from the landmarks' kernel matrix ``K(L, L)``.

* eigen map: ``K(L, L) = V Λ Vᵀ``; eigenvalues below ``eig_rtol · λ_max`` are
  dropped and ``M = V_r Λ_r^{-1/2}`` (``k x r``);
* Cholesky map: ``K(L, L) = Rᵀ R`` and ``M = R⁻¹`` (``r = k``), stored as the
  lower triangular ``normalization = R⁻ᵀ``;
* pivoted Cholesky map, where the landmarks are dependent: the Cholesky map of
  the ``r`` landmarks that pivoted Cholesky keeps, the others dropped
  (:func:`pivoted_cholesky_normalization`).

Where the eigen map drops nothing the two span the same features, up to a
rotation (:func:`_no_eigenvalue_cut` estimates whether it would).
:func:`landmark_weights` carries a function of the landmarks into either
map's features.  Which map a fit gets is :func:`dsvm.approx.fit_feature_map`'s
choice.
"""

from __future__ import annotations

import logging

import numpy as np
import scipy.linalg
import scipy.linalg.lapack

from ..blas import blas_for_order

logger = logging.getLogger(__name__)

__all__ = ["DEFAULT_EIG_RTOL", "default_eig_rtol", "nystroem_normalization", "cholesky_normalization",
           "pivoted_cholesky_normalization", "landmark_weights"]


DEFAULT_EIG_RTOL = {np.dtype(np.float32): 1e-6, np.dtype(np.float64): 1e-10}


def default_eig_rtol(dtype) -> float:
    """Relative eigenvalue cut-off used when ``eig_rtol=None``.

    Eigen-directions with ``λ < rtol · λ_max`` carry only rounding noise of the
    kernel evaluation, amplified by ``λ^{-1/2}``; float32 features warrant a
    larger cut-off than float64 ones.
    """
    return DEFAULT_EIG_RTOL.get(np.dtype(dtype), 1e-10)


def nystroem_normalization(K_LL: np.ndarray, eig_rtol: float) -> tuple[np.ndarray, np.ndarray]:
    """Return ``(normalization, eigenvalues)`` for a landmark kernel matrix.

    Parameters
    ----------
    K_LL : ndarray of shape (k, k)
        Kernel matrix of the landmarks (symmetrised here).
    eig_rtol : float
        Eigenvalues ``<= eig_rtol * max(eigenvalue)`` are dropped.

    Returns
    -------
    normalization : ndarray of shape (r, k)
        ``Λ_r^{-1/2} V_rᵀ``, eigen-directions in decreasing eigenvalue order.
    eigenvalues : ndarray of shape (r,)
        The kept eigenvalues, decreasing.
    """
    K = 0.5 * (K_LL + K_LL.T)
    with blas_for_order(K.shape[0]):
        lam, V = np.linalg.eigh(K)
    lam, V = lam[::-1], V[:, ::-1]
    lam_max = lam[0] if lam.size else 0.0
    if not np.isfinite(lam_max) or lam_max <= 0:
        raise ValueError(
            "the landmark kernel matrix has no positive eigenvalue; the kernel parameters "
            "(gamma, coef0, degree) make every landmark look alike or the kernel is not usable"
        )
    keep = lam > eig_rtol * lam_max
    r = int(keep.sum())
    if r < lam.size:
        logger.info(
            "Nystroem: kept %d of %d eigen-directions (dropped eigenvalues <= %.3g * %.4g)",
            r, lam.size, eig_rtol, lam_max,
        )
    lam_r, V_r = lam[:r], V[:, :r]
    # Deterministic sign: the largest-magnitude entry of each eigenvector is positive.
    signs = np.sign(V_r[np.argmax(np.abs(V_r), axis=0), np.arange(r)])
    signs[signs == 0] = 1.0
    V_r = V_r * signs
    return (V_r / np.sqrt(lam_r)).T.copy(), lam_r


def cholesky_normalization(K_LL: np.ndarray, rtol: float) -> tuple[np.ndarray, np.ndarray]:
    """``(normalization, pivots)`` of the Cholesky map: ``normalization = R⁻ᵀ`` (lower
    triangular, ``k x k``) with ``K_LL = Rᵀ R``, and ``pivots = diag(R)²`` (positive).

    Raises
    ------
    numpy.linalg.LinAlgError
        If ``K_LL`` is not numerically positive definite, or a landmark adds less
        than ``rtol`` times the largest diagonal to the span of those before it
        (``R⁻¹`` would amplify the kernel's rounding as the eigen map's cut-off prevents).
    """
    K = 0.5 * (K_LL + K_LL.T)
    with blas_for_order(K.shape[0]):
        R = scipy.linalg.cholesky(K, lower=False, check_finite=False)
        pivots = np.diagonal(R) ** 2
        if pivots.size and not pivots.min() > rtol * np.diagonal(K).max():
            raise np.linalg.LinAlgError("a landmark is numerically dependent on the ones before it")
        R_inv, info = scipy.linalg.lapack.dtrtri(R, lower=0)  # k³/3 flops, a third of a solve against I
    if info != 0:
        raise np.linalg.LinAlgError(f"the Cholesky factor of K(L, L) is singular (LAPACK dtrtri info={info})")
    return np.ascontiguousarray(R_inv.T), pivots


def pivoted_cholesky_normalization(K_LL: np.ndarray, rtol: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(normalization, pivots, kept)``: the Cholesky map of the landmarks that pivoted Cholesky keeps.

    LAPACK's ``dpstrf`` takes, one after the other, the landmark that adds most to the span of those
    already taken (its pivot: the squared distance, in feature space, to that span) and stops when the
    largest pivot left is at most ``rtol · λ_max``, the eigen map's cut-off, so that ``R⁻¹`` amplifies the
    kernel's rounding no more than the eigen map's ``Λ^{-1/2}`` does.  About ``k² r`` flops against the
    eigendecomposition's ~``9 k³``; the features span the kept landmarks, where the eigen map spans the
    leading eigen-directions of all of them.

    Returns
    -------
    normalization : ndarray of shape (r, r)
        ``R⁻ᵀ`` (lower triangular) with ``K(L_kept, L_kept) = Rᵀ R``.
    pivots : ndarray of shape (r,)
        ``diag(R)²``, in pivot order (non-increasing up to rounding).
    kept : ndarray of shape (r,)
        The kept landmarks' positions in ``K_LL``, in pivot order.

    Raises
    ------
    ValueError
        If ``K_LL`` has no positive eigenvalue.
    numpy.linalg.LinAlgError
        If LAPACK refuses the matrix.
    """
    K = K_LL + K_LL.T
    K *= 0.5
    k = K.shape[0]
    with blas_for_order(k):
        lam_max = _largest_eigenvalue(K, lambda A, v: A @ v)  # float64: large kernel values overflow float32
        if not np.isfinite(lam_max) or lam_max <= 0:
            raise ValueError("the landmark kernel matrix has no positive eigenvalue; the kernel parameters "
                             "(gamma, coef0, degree) make every landmark look alike or the kernel is not usable")
        # K is symmetric, so K.T (Fortran-ordered, as LAPACK wants) is the same matrix: factored in place, no copy
        factor, piv, rank, info = scipy.linalg.lapack.dpstrf(K.T, lower=0, tol=rtol * lam_max, overwrite_a=1)
        if info < 0 or rank < 1:
            raise np.linalg.LinAlgError(f"pivoted Cholesky of K(L, L) failed (LAPACK dpstrf info={info})")
        pivots = np.diagonal(factor)[:rank] ** 2
        # dtrtri reads and writes the upper triangle only; the lower one is zeroed below, on the inverse
        R_inv, info = scipy.linalg.lapack.dtrtri(factor[:rank, :rank], lower=0, overwrite_c=1)
    if info != 0:
        raise np.linalg.LinAlgError(f"the pivoted Cholesky factor of K(L, L) is singular (LAPACK dtrtri info={info})")
    kept = np.asarray(piv[:rank], dtype=np.intp) - 1
    if rank < k:
        logger.info("Nystroem: pivoted Cholesky kept %d of %d landmarks (dropped pivots <= %.3g * %.4g)",
                    rank, k, rtol, lam_max)
    return _zero_above_diagonal(np.ascontiguousarray(R_inv.T)), pivots, kept


def _zero_above_diagonal(A: np.ndarray, step: int = 512) -> np.ndarray:
    """``A`` (square, C-ordered) with its strictly upper triangle set to zero in place, by bands of rows."""
    n = A.shape[0]
    for a in range(0, n, step):
        band = A[a : a + step]
        band[:, a + step :] = 0.0
        block = band[:, a : a + step]
        block[np.triu_indices(block.shape[0], 1, block.shape[1])] = 0.0
    return A


def _is_lower_triangular(normalization: np.ndarray, step: int = 512) -> bool:
    """Whether the map is square and lower triangular, checked by bands of rows (no ``k²`` temporary)."""
    r, k = normalization.shape
    if r != k:
        return False
    for a in range(0, r, step):
        band = normalization[a : a + step]
        if band[:, a + step :].any() or np.triu(band[:, a : a + step], 1).any():
            return False
    return True


def landmark_weights(alpha: np.ndarray, normalization: np.ndarray, eigenvalues: np.ndarray) -> np.ndarray:
    """Feature weights ``w`` (last axis) with ``M w = α``: a function ``Σ_i α_i K(·, l_i)`` of a map's first
    landmarks (``α`` may cover fewer than the map has: zero on the others) in that map's features.

    ``w = R α`` for the Cholesky map (``M = R⁻¹``, ``normalization = R⁻ᵀ``); ``w = Λ^{1/2} Vᵀ α`` for the
    eigen map (``M⁺ α``: the function kept up to the eigenvalue cut-off).
    """
    alpha = np.asarray(alpha, dtype=np.float64)
    N = np.asarray(normalization, dtype=np.float64)
    if _is_lower_triangular(N):
        padded = np.zeros(alpha.shape[:-1] + (N.shape[1],))
        padded[..., : alpha.shape[-1]] = alpha
        flat = padded.reshape(-1, N.shape[1])
        w = scipy.linalg.solve_triangular(N.T, flat.T, lower=False, check_finite=False).T
        return w.reshape(padded.shape)
    return (alpha @ N[:, : alpha.shape[-1]].T) * eigenvalues


#: power iterations of the condition estimate of :func:`_no_eigenvalue_cut`
CONDITION_ITERATIONS = 20


def _no_eigenvalue_cut(K_LL: np.ndarray, normalization: np.ndarray, rtol: float) -> bool:
    """Whether no eigenvalue of ``K(L, L)`` is below ``rtol`` times the largest, as the eigen map would cut:
    then the Cholesky map spans the same features (its pivots alone do not say so).

    ``λ_max`` and ``1 / λ_min = ‖R⁻¹‖²`` are estimated by power iterations on ``K`` and on
    ``R⁻¹ R⁻ᵀ = Nᵀ N`` (``O(k²)`` each, float32): an estimate from below, not a proof.
    """
    with blas_for_order(K_LL.shape[0]):
        lam_max = _largest_eigenvalue(np.asarray(K_LL, dtype=np.float32), lambda A, v: A @ v)
        inv_min = _largest_eigenvalue(np.asarray(normalization, dtype=np.float32), lambda N, v: N.T @ (N @ v))
    return np.isfinite(lam_max * inv_min) and lam_max * inv_min * rtol <= 1.0


def _largest_eigenvalue(A: np.ndarray, product) -> float:
    """The largest eigenvalue of the symmetric positive semidefinite operator ``product(A, ·)`` by
    :data:`CONDITION_ITERATIONS` power iterations from a seeded start."""
    v = np.random.default_rng(0).standard_normal(A.shape[1]).astype(A.dtype)
    v /= np.linalg.norm(v)
    estimate = 0.0
    for _ in range(CONDITION_ITERATIONS):
        v = product(A, v)
        estimate = float(np.linalg.norm(v))
        if not np.isfinite(estimate) or estimate == 0.0:
            return estimate
        v /= estimate
    return estimate
