"""The Nyström mapping: from landmarks to the linear feature map F = K(X, L) · M.

Two maps span the same feature space (``F Fᵀ = K(X, L) K(L, L)⁻¹ K(L, X)``):

* eigen map: ``K(L, L) = V Λ Vᵀ``; eigenvalues below ``eig_rtol · λ_max`` are
  dropped (so near-duplicate landmarks or an indefinite kernel cannot blow up
  the features) and ``M = V_r Λ_r^{-1/2}`` (``k x r``);
* Cholesky map, for landmarks chosen by pivoted Cholesky (independent by
  construction) and for sigmoid landmarks above :data:`EIGEN_MAP_MAX_ORDER`
  whose kernel matrix has no eigenvalue the eigen map would cut:
  ``K(L, L) = Rᵀ R`` and ``M = R⁻¹``, upper triangular
  (``r = k``).  Its factorisation costs ``k³/3`` flops instead of the
  eigendecomposition's ~``9 k³``, and
  the projection is a triangular product (TRMM, ``n k²`` flops instead of
  ``2 n k²``);
* pivoted Cholesky map, for any landmarks above :data:`EIGEN_MAP_MAX_ORDER`
  of a positive semidefinite kernel (not sigmoid): the Cholesky map of the
  ``r`` landmarks that pivoted Cholesky keeps (LAPACK ``dpstrf``, stopped when
  no pivot is above the eigen map's cut-off; all of them, in pivot order, where
  none is that close to the span of the others), the others dropped from the
  map (``FeatureMap.kept``).  A factorisation of ``k² r`` flops and a
  triangular projection, where the eigen map would cost the
  eigendecomposition and a ``k x r`` projection.  Its pivots are at least the
  smallest eigenvalue, so it can keep directions the eigen map would cut.

Following scikit-learn's ``Nystroem`` the stored attribute is
``normalization = Mᵀ`` of shape ``(r, k)`` and the features are
``K(X, components) @ normalization.T`` for both maps.

A linear model on the features predicts ``F coefᵀ = K(X, L) (M coefᵀ)``:
:meth:`FeatureMap.expansion` folds its coefficients into one vector per
problem over the landmarks, ``α = M coefᵀ`` (float64, ``k x n_problems``, as
FALKON keeps its coefficients), and :class:`KernelExpansion` computes
``K(X, L) α`` slab by slab with the same fused kernel slabs: prediction costs
the kernel block and a product with ``n_problems`` columns, not the
``2 n k r`` flops of the projection.

Pure numpy: the block function :meth:`FeatureMap.transform_block` is what the
Dask layer maps over row blocks.  It runs slab by slab (:func:`slab_rows`
rows at a time): the kernel slab, computed by one GEMM and two in-place
element-wise passes (:func:`~dsvm.approx._kernels.kernel_slab`), stays in the
CPU cache until the projection GEMM (or TRMM) reads it and writes the slab's
features; the ``n x k`` kernel block is never held.  Everything is in the
features' dtype (float32 by default).  Rows of sparse blocks with at most
:data:`~dsvm.approx._kernels.DENSIFY_MAX_FEATURES` columns are densified slab
by slab; wider sparse blocks keep the CSR kernel and one projection.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

import numpy as np
import scipy.linalg
import scipy.linalg.blas
import scipy.linalg.lapack
import scipy.sparse as sp

from ..checks import all_finite, first_non_finite_row
from ..exceptions import NonFiniteError
from . import _kernels as kernels
from ._kernels import KernelSpec, PreparedLandmarks, kernel_block, kernel_matrix, kernel_rows, kernel_slab
from ._normalization import (
    _is_lower_triangular,
    _no_eigenvalue_cut,
    cholesky_normalization,
    default_eig_rtol,
    nystroem_normalization,
    pivoted_cholesky_normalization,
)

logger = logging.getLogger(__name__)

# A kernel slab of about this many bytes: the projection GEMM needs about a thousand rows or more to
# run near the machine's GEMM rate, which 8 MiB gives up to k = 2000 in float32 (1024 rows), while
# MAX_SLAB_ROWS bounds the slab at small k (measurements in the documentation's performance page)
SLAB_BYTES = 8 * 2**20
MAX_SLAB_ROWS = 8192


def slab_rows(k: int, itemsize: int) -> int:
    """Rows of one kernel slab of the fused transform: about :data:`SLAB_BYTES`, between 64 and
    :data:`MAX_SLAB_ROWS`."""
    return int(min(MAX_SLAB_ROWS, max(64, SLAB_BYTES // max(1, k * itemsize))))


@dataclass
class FeatureMap:
    """Everything needed to turn raw rows into Nyström features, as plain arrays.

    Features of rows ``X`` are ``K(X, components) @ normalization.T``, so that
    ``F(X) F(Y)ᵀ`` approximates ``K(X, Y)``, exactly when ``Y`` are the
    landmarks and none of their eigenvalues was cut.  Built by
    :func:`fit_feature_map`.

    Attributes
    ----------
    spec : KernelSpec
        The kernel.
    components : ndarray of shape (k, p), float64
        The landmarks.
    normalization : ndarray of shape (r, k), float64
        The map ``M`` (lower triangular, ``r = k``, for the Cholesky map).
    eigenvalues : ndarray of shape (r,)
        The kept eigenvalues of ``K(L, L)``, decreasing (eigen map), or
        ``diag(R)²`` (Cholesky map): the residual variance each landmark adds.
    dtype : numpy dtype
        The features' dtype.
    kept : ndarray of shape (k,) or None
        Where the map dropped dependent landmarks (the pivoted Cholesky map):
        the positions of ``components`` among the landmarks it was built
        from; None when it keeps them all, in their order.

    Examples
    --------
    >>> import numpy as np
    >>> from dsvm import KernelSpec, fit_feature_map, kernel_matrix
    >>> spec = KernelSpec("rbf", gamma=0.5)
    >>> landmarks = np.random.RandomState(0).normal(size=(20, 3))
    >>> feature_map = fit_feature_map(landmarks, spec, dtype=np.float64)
    >>> X = np.random.RandomState(1).normal(size=(5, 3))
    >>> F_X, F_L = feature_map.transform_block(X), feature_map.transform_block(landmarks)
    >>> F_X.shape
    (5, 20)
    >>> np.allclose(F_X @ F_L.T, kernel_matrix(X, landmarks, spec))
    True
    """

    spec: KernelSpec
    components: np.ndarray
    normalization: np.ndarray
    eigenvalues: np.ndarray
    dtype: np.dtype = np.dtype(np.float32)
    kept: np.ndarray | None = field(default=None, repr=False, compare=False)
    _ready_arrays: tuple | None = field(default=None, init=False, repr=False, compare=False)
    _expansion: tuple | None = field(default=None, init=False, repr=False, compare=False)

    @property
    def n_components(self) -> int:
        return self.components.shape[0]

    @property
    def n_output(self) -> int:
        return self.normalization.shape[0]

    @property
    def n_features_in(self) -> int:
        return self.components.shape[1]

    @property
    def feature_bound(self) -> float | None:
        """A bound on every feature's magnitude, where the kernel gives one: 1 for RBF (``‖f(x)‖² ≤ k(x, x) = 1``,
        the Nyström approximation of ``k(x, x)`` from below), else None."""
        return 1.0 if self.spec.name == "rbf" else None

    @property
    def triangular(self) -> bool:
        """Whether this is a Cholesky map (``normalization`` lower triangular, ``r = k``): its first ``r0``
        features are those of its first ``r0`` landmarks alone."""
        return _is_lower_triangular(self.normalization)

    def leading(self, r0: int) -> FeatureMap:
        """The map of this map's first ``r0`` features, a Nyström map of its own: for a triangular map that of
        the first ``r0`` landmarks (the others drop out of it), for the eigen map the leading
        eigen-directions of all of them."""
        if not 0 < r0 <= self.n_output:
            raise ValueError(f"leading features: r0 must be in 1..{self.n_output}, got {r0}")
        k0 = r0 if self.triangular else self.n_components
        return FeatureMap(spec=self.spec, components=self.components[:k0], normalization=self.normalization[:r0, :k0],
                          eigenvalues=self.eigenvalues[:r0], dtype=self.dtype)

    def _ready(self) -> tuple[PreparedLandmarks, np.ndarray, object]:
        """``(prepared landmarks, M in the features' dtype, TRMM routine or None)``."""
        ready = self._ready_arrays
        if ready is None:
            # Built into a local first and published with one assignment: several
            # threads of a worker may call this at once.
            prep = kernels.prepare_landmarks(self.components, self.spec, self.dtype)
            if self.triangular:
                # M = normalizationᵀ is upper triangular: Fortran order for TRMM (no copy per call)
                M = np.asfortranarray(self.normalization.T, dtype=self.dtype)
                ready = (prep, M, scipy.linalg.blas.get_blas_funcs("trmm", (M,)))
            else:
                ready = (prep, np.ascontiguousarray(self.normalization.T, dtype=self.dtype), None)
            self._ready_arrays = ready
        return ready

    def kernel_block(self, X_block) -> np.ndarray:
        """The kernel values ``K(X_block, components)`` in the features' dtype (what the features project)."""
        return kernel_block(X_block, self._ready()[0])

    def transform_block(self, X_block, out: np.ndarray | None = None) -> np.ndarray:
        """Features of one row block (dense or CSR), shape ``(n_block, r)``.

        ``out``, if given, receives them (C-contiguous, ``(n_block, r)``, the
        map's dtype) and is returned: a feature store hands its write buffer.
        """
        prep, M, trmm = self._ready()
        shape = (X_block.shape[0], self.n_output)
        if out is None:
            out = np.empty(shape, dtype=self.dtype)
        elif out.shape != shape or out.dtype != self.dtype or not out.flags.c_contiguous:
            raise ValueError(f"out must be a C-contiguous {self.dtype} array of shape {shape}, "
                             f"got {out.dtype} {out.shape}")
        return _kernel_times(X_block, prep, M, trmm, out)

    def landmark_kernel(self) -> KernelExpansion:
        """The kernel against the landmarks alone: an expansion with no coefficients, whose
        :meth:`KernelExpansion.kernel_block` gives ``K(X_block, components)`` in the features' dtype.  It
        pickles as the landmarks only (what the passes of ``feature_store="implicit"`` ship to workers)."""
        return KernelExpansion(spec=self.spec, components=self.components,
                               alpha=np.zeros((self.n_components, 0)), dtype=self.dtype)

    def expansion(self, coef: np.ndarray) -> KernelExpansion:
        """The linear model ``coef`` on this map's features, folded into the landmarks.

        Parameters
        ----------
        coef : ndarray of shape (n_problems, r)
            One row of feature coefficients per problem.

        Returns
        -------
        KernelExpansion
            ``K(X, components) α`` with ``α = normalizationᵀ coefᵀ`` (float64), which is ``F(X) coefᵀ``
            in exact arithmetic.  Kept for the next call with equal coefficients (the map's
            ``normalization`` does not change once fitted).
        """
        coef = np.asarray(coef, dtype=np.float64)
        kept = self._expansion
        if kept is not None and kept[0].shape == coef.shape and np.array_equal(kept[0], coef):
            return kept[1]
        if coef.ndim != 2 or coef.shape[1] != self.n_output:
            raise ValueError(f"coef must have shape (n_problems, {self.n_output}), got {coef.shape}")
        expansion = KernelExpansion(spec=self.spec, components=self.components,
                                    alpha=self.normalization.T @ coef.T, dtype=self.dtype)
        self._expansion = (coef.copy(), expansion)  # one assignment: several threads may call this at once
        return expansion

    def __getstate__(self):
        # Ship only the defining arrays; workers rebuild the cast copies lazily.
        state = dict(self.__dict__)
        state["_ready_arrays"] = None
        state["_expansion"] = None
        return state


@dataclass
class KernelExpansion:
    """A linear model on Nyström features folded into the landmarks: ``K(X, components) @ alpha``.

    With ``F = K(X, L) M`` the decision values ``F coefᵀ`` are ``K(X, L) α``,
    ``α = M coefᵀ``: one vector over the landmarks per problem, as FALKON keeps
    its coefficients.  Built by :meth:`FeatureMap.expansion`; it pickles as the
    landmarks and ``α`` only (what a Dask prediction ships to its workers).

    Attributes
    ----------
    spec : KernelSpec
    components : ndarray (k, p), float64 — the landmarks
    alpha : ndarray (k, n_problems), float64
    dtype : numpy dtype of the kernel values and of their product with ``alpha``
        (the feature map's: float32 by default)

    Examples
    --------
    >>> import numpy as np
    >>> from dsvm import KernelSpec, fit_feature_map
    >>> landmarks = np.random.RandomState(0).normal(size=(20, 3))
    >>> feature_map = fit_feature_map(landmarks, KernelSpec("rbf", gamma=0.5), dtype=np.float64)
    >>> coef = np.random.RandomState(1).normal(size=(2, feature_map.n_output))
    >>> X = np.random.RandomState(2).normal(size=(5, 3))
    >>> values = feature_map.expansion(coef).product_block(X)
    >>> values.shape, bool(np.allclose(values, feature_map.transform_block(X) @ coef.T))
    ((5, 2), True)
    """

    spec: KernelSpec
    components: np.ndarray
    alpha: np.ndarray
    dtype: np.dtype = np.dtype(np.float32)
    kept: np.ndarray | None = field(default=None, repr=False, compare=False)
    _ready_arrays: tuple | None = field(default=None, repr=False, compare=False)

    def _ready(self) -> tuple[PreparedLandmarks, np.ndarray]:
        """``(prepared landmarks, alpha in the kernel values' dtype)``, built once (one assignment: thread-safe)."""
        ready = self._ready_arrays
        if ready is None:
            with np.errstate(over="ignore"):  # an alpha beyond the dtype's range is named with the row it spoils
                alpha = np.ascontiguousarray(self.alpha, dtype=self.dtype)
            ready = (kernels.prepare_landmarks(self.components, self.spec, self.dtype), alpha)
            self._ready_arrays = ready
        return ready

    def kernel_block(self, X_block) -> np.ndarray:
        """The kernel values ``K(X_block, components)`` in ``dtype``."""
        return kernel_block(X_block, self._ready()[0])

    def product_block(self, X_block) -> np.ndarray:
        """``K(X_block, components) @ alpha`` of one row block (dense or CSR), shape ``(n_block, n_problems)``,
        in ``dtype``: kernel slabs as :meth:`FeatureMap.transform_block` computes them, each multiplied by
        ``alpha`` while in the CPU cache."""
        prep, alpha = self._ready()
        out = np.empty((X_block.shape[0], alpha.shape[1]), dtype=self.dtype)
        return _kernel_times(X_block, prep, alpha, None, out)

    def __getstate__(self):
        state = dict(self.__dict__)
        state["_ready_arrays"] = None
        return state


def _kernel_times(X_block, prep: PreparedLandmarks, M: np.ndarray, trmm, out: np.ndarray) -> np.ndarray:
    """``out = K(X_block, landmarks) M`` for a dense or CSR block, slab by slab; returns ``out``."""
    n = X_block.shape[0]
    if n == 0:
        return out
    if sp.issparse(X_block) and X_block.shape[1] > kernels.DENSIFY_MAX_FEATURES:
        _project(kernel_block(X_block, prep), M, trmm, out)  # the CSR kernel: never densified
        return out
    slab = np.empty((slab_rows(M.shape[0], out.itemsize), M.shape[0]), dtype=out.dtype)
    if not sp.issparse(X_block):
        _fused_transform(X_block, prep, M, trmm, slab, out)
        return out
    Xs = X_block.tocsr()
    step = kernels.DENSIFY_SLAB_ROWS
    for s in range(0, n, step):
        _fused_transform(Xs[s : s + step].toarray(), prep, M, trmm, slab, out[s : s + step])
    return out


#: below this many kernel rows, and above as many features, the triangular product runs as GEMMs on column
#: panels (:func:`_panel_product`): OpenBLAS's TRMM is slow on a short, wide operand such as a large-k slab
TRMM_MIN_ROWS = 1024
#: columns of one panel of :func:`_panel_product`
PANEL_COLUMNS = 256


def _project(K: np.ndarray, M: np.ndarray, trmm, out: np.ndarray) -> None:
    """``out = K M``: a GEMM, or for upper-triangular ``M`` half the flops, by a TRMM in place on ``K`` or,
    for a short wide ``K``, by GEMMs on panels of ``M``'s columns."""
    if trmm is None:
        np.matmul(K, M, out=out)
        return
    if K.shape[0] < TRMM_MIN_ROWS and M.shape[0] > TRMM_MIN_ROWS:
        _panel_product(np.asarray(K, dtype=M.dtype), M, out)
        return
    # Fᵀ = Mᵀ Kᵀ on the kernel rows (Kᵀ is Fortran-ordered: no copy), then the rows into out
    K = np.ascontiguousarray(K, dtype=M.dtype)
    out[...] = trmm(1.0, M, K.T, side=0, lower=0, trans_a=1, overwrite_b=1).T


def _panel_product(K: np.ndarray, M: np.ndarray, out: np.ndarray) -> None:
    """``out = K M`` for upper-triangular ``M``, each column panel from the leading columns of ``K`` alone."""
    r = M.shape[0]
    for a in range(0, r, PANEL_COLUMNS):
        b = min(a + PANEL_COLUMNS, r)
        np.matmul(K[:, :b], M[:b, a:b], out=out[:, a:b])


def _fused_transform(X: np.ndarray, prep: PreparedLandmarks, M: np.ndarray, trmm, slab: np.ndarray,
                     out: np.ndarray) -> None:
    """Features of dense rows ``X`` into ``out``, one cache-sized kernel slab (``slab``'s rows) at a time."""
    rows = kernel_rows(X, prep)
    step = slab.shape[0]
    for a in range(0, rows.shape[0], step):
        b = min(a + step, rows.shape[0])
        _project(kernel_slab(rows[a:b], prep, slab[: b - a]), M, trmm, out[a:b])


FEATURE_MAPS = ("eigen", "cholesky")

#: above this many landmarks a Cholesky map replaces the eigen map: the eigendecomposition of ``K(L, L)``
#: (~9 k³ flops, much of it memory-bound) costs many times a Cholesky factor and its inverse (``2 k³/3``).
#: The pivoted one for positive semidefinite kernels; for sigmoid the plain one, where ``K(L, L)`` has no
#: eigenvalue the eigen map would cut (:func:`_no_eigenvalue_cut`), else the eigen map
EIGEN_MAP_MAX_ORDER = 2048


def fit_feature_map(
    landmarks: np.ndarray, spec: KernelSpec, dtype=np.float32, eig_rtol: float | None = None, method: str = "eigen"
) -> FeatureMap:
    """Build the Nyström :class:`FeatureMap` for the given landmarks.

    Parameters
    ----------
    landmarks : ndarray of shape (k, p)
    spec : KernelSpec
    dtype : numpy dtype, default=numpy.float32
        dtype of the features the map produces.
    eig_rtol : float or None, default=None
        Eigenvalues of ``K(L, L)`` at most ``eig_rtol`` times the largest are
        cut (fewer features than landmarks); ``None`` picks ``1e-6`` for
        float32 and ``1e-10`` for float64 features.
    method : {"eigen", "cholesky"}, default="eigen"
        ``"cholesky"`` is for landmarks chosen by pivoted Cholesky (in pivot
        order); should ``K(L, L)`` still not factor, the eigen map is used.
        Above :data:`EIGEN_MAP_MAX_ORDER` landmarks the eigendecomposition
        costs many times a Cholesky factor: for a positive semidefinite
        kernel (not sigmoid) and ``"eigen"`` the map is then the pivoted
        Cholesky map of the landmarks that add to the span of the others by
        more than the cut-off (all of them where none is that close: the
        space of all the landmarks, in a fraction of the eigendecomposition's
        time; ``components`` holds the kept landmarks in pivot order, their
        positions in ``kept``); for ``"cholesky"`` the Cholesky map where its
        pivots stay above the cut-off, else the pivoted one; for the sigmoid
        kernel the Cholesky map where ``K(L, L)`` has no eigenvalue the eigen
        map would cut, else the eigen map.

    Returns
    -------
    FeatureMap

    Examples
    --------
    >>> import numpy as np
    >>> from dsvm import KernelSpec, fit_feature_map
    >>> landmarks = np.random.RandomState(0).normal(size=(20, 3))
    >>> feature_map = fit_feature_map(landmarks, KernelSpec("rbf", gamma=0.5))
    >>> feature_map.n_output, feature_map.dtype
    (20, dtype('float32'))
    """
    if method not in FEATURE_MAPS:
        raise ValueError(f"method={method!r} is not a Nyström map; choose one of {FEATURE_MAPS}")
    L = np.asarray(landmarks, dtype=np.float64)
    rtol = default_eig_rtol(dtype) if eig_rtol is None else float(eig_rtol)
    with np.errstate(over="ignore", invalid="ignore"):
        K_LL = kernel_matrix(L, L, spec)
    if not all_finite(K_LL):
        row = first_non_finite_row(K_LL)
        raise NonFiniteError(
            f"the landmarks' kernel matrix K(L, L) holds NaN or infinity (first in landmark {row}, whose largest "
            f"|value| is {_largest(L[row]):.3g}): {_kernel_words(spec)} overflows float64 there; "
            f"{_remedies(spec, np.float64)}"
        )
    if method == "cholesky" or len(L) > EIGEN_MAP_MAX_ORDER:
        fmap = _cholesky_map(L, K_LL, spec, np.dtype(dtype), rtol, method)
        if fmap is not None:
            return fmap
    normalization, lam = nystroem_normalization(K_LL, rtol)
    return _checked_map(FeatureMap(spec=spec, components=L, normalization=normalization, eigenvalues=lam,
                                   dtype=np.dtype(dtype)))


def _cholesky_map(L: np.ndarray, K_LL: np.ndarray, spec: KernelSpec, dtype: np.dtype, rtol: float,
                  method: str) -> FeatureMap | None:
    """Above :data:`EIGEN_MAP_MAX_ORDER` landmarks of a positive semidefinite kernel and for ``"eigen"``, the
    pivoted Cholesky map; else the Cholesky map of all the landmarks where it stands in for the asked map;
    else, above the bound for such a kernel, the pivoted map; else None (the eigen map)."""
    pivoted = len(L) > EIGEN_MAP_MAX_ORDER and _positive_semidefinite(spec)
    if pivoted and method != "cholesky":
        # the plain factor would be computed, checked and, on dependent landmarks, thrown away: at these
        # orders that costs as much as the pivoted factor, which keeps every landmark where none is dependent
        return _pivoted_map(L, K_LL, spec, dtype, rtol)
    try:
        normalization, lam = cholesky_normalization(K_LL, rtol)
        if method != "cholesky" and not _no_eigenvalue_cut(K_LL, normalization, rtol):
            raise np.linalg.LinAlgError("the eigen map would cut eigenvalues of K(L, L)")
        return _checked_map(FeatureMap(spec=spec, components=L, normalization=normalization, eigenvalues=lam,
                                       dtype=dtype))
    except (np.linalg.LinAlgError, NonFiniteError) as e:
        logger.info("Nystroem: no Cholesky map for the %s landmarks (%s); using the %s map",
                    "pivoted" if method == "cholesky" else f"{len(L)}", e, "pivoted Cholesky" if pivoted else "eigen")
        return _pivoted_map(L, K_LL, spec, dtype, rtol) if pivoted else None


def _pivoted_map(L: np.ndarray, K_LL: np.ndarray, spec: KernelSpec, dtype: np.dtype, rtol: float) -> FeatureMap | None:
    """The pivoted Cholesky map of the landmarks that add to the span of the others by more than the cut-off
    (module docstring), or None (the eigen map) where LAPACK refuses ``K(L, L)``."""
    try:
        normalization, lam, kept = pivoted_cholesky_normalization(K_LL, rtol)
        in_order = len(kept) == len(L) and bool(np.all(kept == np.arange(len(L))))
        return _checked_map(FeatureMap(spec=spec, components=L[kept], normalization=normalization, eigenvalues=lam,
                                       dtype=dtype, kept=None if in_order else kept))
    except (np.linalg.LinAlgError, NonFiniteError, ValueError) as e:
        logger.info("Nystroem: no pivoted Cholesky map for the %d landmarks (%s); using the eigen map", len(L), e)
        return None


def _positive_semidefinite(spec: KernelSpec) -> bool:
    """Whether the kernel is positive semidefinite on any rows, as pivoted Cholesky needs (on an indefinite
    ``K(L, L)`` it stops at the first step whose residual diagonal is negative, keeping a handful of
    landmarks): rbf, linear, and poly with ``coef0 ≥ 0`` (a sum of powers of inner products); not sigmoid."""
    return spec.name in ("rbf", "linear") or (spec.name == "poly" and spec.coef0 >= 0 and spec.gamma > 0)


def _checked_map(fmap: FeatureMap) -> FeatureMap:
    """``fmap``, once its normalization is known finite in float64 and in the features' dtype (NonFiniteError)."""
    with np.errstate(over="ignore"):
        ok = all_finite(fmap.normalization) and all_finite(fmap.normalization.astype(fmap.dtype))
    if not ok:
        raise NonFiniteError(
            f"the Nyström map (K(L, L)^(-1/2), {fmap.n_output} x {fmap.n_components}) is not finite in "
            f"{np.dtype(fmap.dtype).name}: the smallest kept eigenvalue of K(L, L) is {fmap.eigenvalues.min():.3g}; "
            "raise eig_rtol or use dtype='float64'"
        )
    return fmap


def _largest(values) -> float:
    values = np.abs(np.asarray(values, dtype=np.float64))
    return float(values.max()) if values.size else 0.0


def _kernel_words(spec: KernelSpec) -> str:
    """The kernel and its parameters, for a message."""
    if spec.name == "rbf":
        return f"the rbf kernel (gamma={spec.gamma:g})"
    if spec.name == "linear":
        return "the linear kernel"
    extra = f", degree={spec.degree}" if spec.name == "poly" else ""
    return f"the {spec.name} kernel (gamma={spec.gamma:g}, coef0={spec.coef0:g}{extra})"


def _remedies(spec: KernelSpec, dtype) -> str:
    """What a user can change when kernel values or features overflow ``dtype``."""
    knobs = "gamma" if spec.name == "rbf" else "gamma, coef0 or degree" if spec.name == "poly" else "gamma or coef0"
    wider = "" if np.dtype(dtype) == np.float64 else ", or use dtype='float64'"
    if spec.name == "linear":
        return f"scale the features (scale='standard' or 'maxabs'){wider}"
    return f"scale the features (scale='standard' or 'maxabs'), lower {knobs}{wider}"


def check_features(F: np.ndarray, X_block, fmap, offset: int = 0) -> None:
    """Refuse a block of features that holds NaN or infinity, naming the first such row and where it arose.

    ``F`` are the features of the input rows ``X_block`` (finite: checked before), the first of which is
    row ``offset``.  For a :class:`FeatureMap` the message says whether the kernel values of that row
    already overflow the features' dtype or the Nyström map made them so (only a failing block pays for
    that diagnosis).

    Raises
    ------
    NonFiniteError
    """
    if all_finite(F):
        return
    row, rows = _first_bad_row(F, X_block, offset)
    dtype = np.dtype(getattr(fmap, "dtype", F.dtype))
    size = _row_largest(rows)
    if not isinstance(fmap, FeatureMap):
        raise NonFiniteError(f"the features of row {row} hold NaN or infinity in {dtype.name} (the row's largest "
                             f"|value| is {size:.3g}); scale the features or use dtype='float64'")
    with np.errstate(over="ignore", invalid="ignore"):
        K = fmap.kernel_block(rows)
    where = (f"{_kernel_words(fmap.spec)} overflows {dtype.name} on it" if not all_finite(K)
             else f"the Nyström map turns its finite kernel values into NaN or infinity in {dtype.name}")
    raise NonFiniteError(_row_message("features", row, size, fmap, where))


def _first_bad_row(values: np.ndarray, X_block, offset: int):
    """``(input row number, that input row)`` of the first row of ``values`` holding NaN or infinity."""
    first = first_non_finite_row(values)
    return offset + first, X_block[first : first + 1]


def _row_largest(rows) -> float:
    """The largest |value| of input rows, dense or sparse."""
    return _largest(rows.data if sp.issparse(rows) else rows)


def _row_message(what: str, row: int, size: float, kernel, where: str) -> str:
    """``what`` of input row ``row`` (largest |value| ``size``) hold NaN or infinity, ``where`` it arose, and the
    remedies, for a :class:`FeatureMap` or :class:`KernelExpansion` ``kernel``."""
    return (f"the {what} of row {row} hold NaN or infinity (the largest |value| of the row is {size:.3g}, of the "
            f"landmarks {_largest(kernel.components):.3g}): {where}; {_remedies(kernel.spec, kernel.dtype)}")


def check_expansion(values: np.ndarray, X_block, expansion: KernelExpansion, offset: int = 0) -> None:
    """Refuse decision values ``K(X, L) α`` that hold NaN or infinity, naming the first such row and where it arose.

    ``values`` are :meth:`KernelExpansion.product_block` of the input rows ``X_block`` (finite: checked before),
    the first of which is row ``offset``.  A non-finite kernel value makes its row's product non-finite, so
    checking the product checks both; the message says whether the kernel values of that row overflow the
    expansion's dtype or their product with ``α`` does (only a failing block pays for that diagnosis).

    Raises
    ------
    NonFiniteError
    """
    if all_finite(values):
        return
    row, rows = _first_bad_row(values, X_block, offset)
    dtype = np.dtype(expansion.dtype)
    with np.errstate(over="ignore", invalid="ignore"):
        K = expansion.kernel_block(rows)
    if not all_finite(K):
        size = _row_largest(rows)
        where = f"{_kernel_words(expansion.spec)} overflows {dtype.name} on it"
        raise NonFiniteError(_row_message("kernel values", row, size, expansion, where))
    raise NonFiniteError(
        f"the decision values of row {row} hold NaN or infinity: its kernel values times the model's coefficients "
        f"on the landmarks (M coefᵀ, largest |value| {_largest(expansion.alpha):.3g}) overflow {dtype.name}; "
        "predict with a model of dtype='float64' or scale the features"
    )
