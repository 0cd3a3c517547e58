"""Kernelized Pegasos on the exact kernel: :class:`PegasosSVC`.

Pegasos (Shalev-Shwartz, Singer, Srebro & Cotter, "Pegasos: primal estimated
sub-gradient solver for SVM", Math. Program. 2011) minimises

    λ/2 ‖w‖² + 1/n Σ_i max(0, 1 − y_i ⟨w, φ(x_i)⟩)

by stochastic subgradient steps of size ``η_t = 1/(λ t)``.  Its kernelized form
(Fig. 3 of the paper) never forms ``w``: it keeps a count ``α_j`` of how often
example ``j`` was drawn while violating the margin, and at step ``t``

    draw i_t uniformly;  if  y_i · 1/(λ t) · Σ_j α_j y_j K(x_j, x_i) < 1:  α_i += 1

so that after ``T`` steps ``f(x) = 1/(λ T) Σ_j α_j y_j K(x_j, x)``.  (Fig. 3
scales the test at step ``t`` by ``1/(λ t)``; the iterate of the linear algorithm
would use ``1/(λ (t−1))``.  We follow the figure.)

Vectorisation: the sums ``s_m = Σ_j α_j y_j K(x_j, x_m)`` are kept for all
training rows and updated when ``α_i`` grows, by adding ``y_i K(x_i, ·)`` — one
kernel row — so a step costs ``O(1)`` without a violation and ``O(n)`` numpy
work (plus one kernel row, unless cached) with one.

Bias: Fig. 3 has none.  Here ``fit_intercept=True`` augments the kernel with a
constant, ``K̃(x, x') = K(x, x') + c²`` with ``c = intercept_scaling`` — exactly
LIBLINEAR's ``intercept_scaling`` (a constant feature ``c`` appended to every
row).  Pegasos then runs unchanged on ``K̃``, so its convergence guarantee
(strong convexity of the objective) still holds; the price is that the bias is
regularised, by ``λ/2 · b²/c²`` (a larger ``c`` regularises it less).  The
fitted bias is ``b = c² · 1/(λ T) Σ_j α_j y_j``.  An unregularised bias
updated by subgradient steps ``b += η_t y_i`` would lose the strong convexity
the ``1/(λ t)`` step relies on and wander early on, when ``η_t = 1/(λ t)`` is
large.

Relation to ``C`` of :class:`sklearn.svm.SVC` (hinge loss summed, not averaged):
``λ = 1 / (C · n)``.
"""

from __future__ import annotations

import logging
import time

import numpy as np
import scipy.sparse as sp
from sklearn.base import BaseEstimator, ClassifierMixin
from sklearn.utils import check_random_state
from sklearn.utils.multiclass import check_classification_targets
from sklearn.utils.validation import check_is_fitted, validate_data

from ..approx import (
    KernelSpec,
    check_kernel_params,
    dense_rows,
    kernel_matrix,
    make_kernel_spec,
    resolve_gamma,
)
from ..checks import check_positive, check_positive_int
from ..problems import labels_from_decision

logger = logging.getLogger(__name__)

__all__ = ["PegasosSVC"]


def _variance(X) -> float:
    """Var of all entries of X (the zeros of a sparse matrix included), as :class:`sklearn.svm.SVC` computes it."""
    if sp.issparse(X):
        return float(X.multiply(X).mean() - X.mean() ** 2)
    return float(np.var(X))


class _KernelRows:
    """Rows of the augmented training kernel ``K(X, X) + c²``.

    The whole matrix is computed once (one GEMM) when it fits in
    ``cache_bytes``; otherwise rows are computed on demand and kept while the
    budget allows (a row is needed again whenever its example violates the
    margin again).
    """

    def __init__(self, X, spec: KernelSpec, c2: float, cache_bytes: float):
        self.X = X
        self.spec = spec
        self.c2 = c2
        n = X.shape[0]
        self.full = None
        self.cache: dict[int, np.ndarray] = {}
        self.max_cached = int(cache_bytes // (8 * n))
        self.computed = 0
        if n * n * 8 <= cache_bytes:
            self.full = kernel_matrix(X, dense_rows(X), spec)
            self.full += c2
            self.computed = n

    def row(self, i: int) -> np.ndarray:
        """Row ``i`` (a view when the whole matrix is cached)."""
        if self.full is not None:
            return self.full[i]
        return self.rows(np.array([i]))[0]

    def rows(self, idx: np.ndarray) -> np.ndarray:
        """Rows ``idx`` (duplicates allowed), shape ``(len(idx), n)``."""
        if self.full is not None:
            return self.full[idx]
        wanted = [int(i) for i in idx]
        missing = sorted(set(wanted) - self.cache.keys())
        fresh: dict[int, np.ndarray] = {}
        if missing:
            block = np.ascontiguousarray(kernel_matrix(self.X, dense_rows(self.X[missing]), self.spec).T)
            block += self.c2
            self.computed += len(missing)
            for i, row in zip(missing, block):
                fresh[i] = row
                if len(self.cache) < self.max_cached:
                    self.cache[i] = row
        return np.stack([self.cache[i] if i in self.cache else fresh[i] for i in wanted])


class PegasosSVC(ClassifierMixin, BaseEstimator):
    """Kernel SVM classifier trained by kernelized Pegasos on the exact kernel.

    Minimises ``λ/2 ‖w‖² + 1/n Σ_i max(0, 1 − y_i f(x_i))`` in the kernel's
    feature space by ``max_iter`` stochastic subgradient steps (Fig. 3 of the
    Pegasos paper: a count per example of the steps that drew it while it
    violated the margin, and ``f(x) = 1/(λ T) Σ_j α_j y_j K(x_j, x)``).  Each step touches one kernel row at most, so this is a simple,
    exact-kernel baseline for small and medium ``n``; it keeps all support
    vectors, and the kernel matrix is cached when it fits in ``cache_size``.

    Multiclass problems are solved one-vs-rest, all classes in the same pass
    (one shared sequence of draws, one kernel row per step for all of them).

    Parameters
    ----------
    kernel : {"rbf", "poly", "sigmoid", "linear"}, default="rbf"
    gamma : float or {"scale", "auto"}, default="scale"
        Kernel coefficient; ``"scale"`` is ``1 / (n_features · X.var())``,
        ``"auto"`` is ``1 / n_features`` (as in :class:`sklearn.svm.SVC`).
    degree : int, default=3
        Degree of the polynomial kernel.
    coef0 : float, default=0.0
        Constant of the poly and sigmoid kernels.
    lam : float, default=1e-3
        Regularisation ``λ > 0``; ``λ = 1 / (C · n)`` matches ``SVC(C=C)``.
    max_iter : int, default=10000
        Number of Pegasos steps ``T`` (all are taken: there is no stopping
        test).  The suboptimality shrinks like ``1/(λ T)``, so ``T`` should be
        several times ``1/λ``.
    batch_size : int, default=1
        Examples drawn per step (mini-batch Pegasos: a step adds one count for
        each violating example of the batch and ``f`` is scaled by
        ``1/(λ T batch_size)``).
    fit_intercept : bool, default=True
        Fit a bias by augmenting the kernel with ``intercept_scaling²`` (a
        regularised bias, so that Pegasos's ``1/(λ t)`` steps keep their
        convergence guarantee).
    intercept_scaling : float, default=1.0
        Value ``c`` of the constant feature; the bias is penalised by
        ``λ/2 · b²/c²``.
    cache_size : float, default=200
        Megabytes for kernel rows; the whole training kernel matrix is computed
        up front when it fits.
    random_state : int, RandomState instance or None, default=None
        Seeds the draws: step ``t`` uses the examples
        ``check_random_state(random_state).randint(n, size=(max_iter, batch_size))[t-1]``
        (uniform, with replacement).

    Attributes
    ----------
    classes_ : ndarray of shape (n_classes,)
    alpha_ : ndarray of int64, shape (n_samples,) or (n_classes, n_samples)
        Pegasos counts: how often each training example was drawn while
        violating the margin (one row per one-vs-rest problem if multiclass).
    support_ : ndarray of shape (n_SV,)
        Training indices with a positive count (in any of the problems).
    support_vectors_ : ndarray of shape (n_SV, ``n_features_in_``)
    dual_coef_ : ndarray of shape (1 or n_classes, n_SV)
        ``α_j y_j / (λ T batch_size)``, so that
        ``decision_function(X) = K(X, support_vectors_) @ dual_coef_.T + intercept_``.
    intercept_ : ndarray of shape (1 or n_classes,)
    n_iter_ : int
        Steps taken (``max_iter``).
    n_features_in_ : int
    kernel_spec_ : KernelSpec
        The kernel with ``gamma`` resolved.
    fit_stats_ : dict
        Seconds, number of margin violations, kernel rows computed.

    Examples
    --------
    >>> from sklearn.datasets import load_iris
    >>> from dsvm import PegasosSVC
    >>> X, y = load_iris(return_X_y=True)
    >>> clf = PegasosSVC(lam=1e-2, max_iter=2000, random_state=0).fit(X[y < 2], y[y < 2])
    >>> clf.score(X[y < 2], y[y < 2])
    1.0
    """

    def __init__(
        self,
        *,
        kernel="rbf",
        gamma="scale",
        degree=3,
        coef0=0.0,
        lam=1e-3,
        max_iter=10_000,
        batch_size=1,
        fit_intercept=True,
        intercept_scaling=1.0,
        cache_size=200,
        random_state=None,
    ):
        self.kernel = kernel
        self.gamma = gamma
        self.degree = degree
        self.coef0 = coef0
        self.lam = lam
        self.max_iter = max_iter
        self.batch_size = batch_size
        self.fit_intercept = fit_intercept
        self.intercept_scaling = intercept_scaling
        self.cache_size = cache_size
        self.random_state = random_state

    def _check_params(self) -> None:
        check_kernel_params(self.kernel, self.gamma)
        check_positive("lam", self.lam)
        check_positive_int("max_iter", self.max_iter)
        check_positive_int("batch_size", self.batch_size)
        check_positive("intercept_scaling", self.intercept_scaling)
        check_positive("cache_size", self.cache_size)
        if not isinstance(self.fit_intercept, (bool, np.bool_)):
            raise ValueError(f"fit_intercept must be True or False, got {self.fit_intercept!r}")

    def fit(self, X, y):
        """Run ``max_iter`` Pegasos steps.

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_features)
        y : array-like of shape (n_samples,)
            Any labels; two classes give one binary problem (``classes_[1]`` is
            the positive class), more give one-vs-rest.

        Returns
        -------
        self : PegasosSVC
        """
        self._check_params()
        X, y = validate_data(self, X, y, accept_sparse="csr", dtype=np.float64)
        check_classification_targets(y)
        classes, codes = np.unique(y, return_inverse=True)
        if len(classes) < 2:
            raise ValueError(
                f"PegasosSVC needs samples of at least 2 classes in the data, but the data contains only one "
                f"class: {classes[0]!r}"
            )
        self.classes_ = classes
        if len(classes) == 2:
            Y = np.where(codes == 1, 1.0, -1.0)[None, :]
        else:
            Y = np.where(codes[None, :] == np.arange(len(classes))[:, None], 1.0, -1.0)
        gamma = resolve_gamma(self.gamma, X.shape[1], lambda: _variance(X))
        spec = make_kernel_spec(self.kernel, gamma, self.degree, self.coef0)
        c2 = float(self.intercept_scaling) ** 2 if self.fit_intercept else 0.0
        lam, T, k = float(self.lam), int(self.max_iter), int(self.batch_size)
        n = X.shape[0]

        t0 = time.perf_counter()
        draws = check_random_state(self.random_state).randint(n, size=(T, k))
        kernel_rows = _KernelRows(X, spec, c2, float(self.cache_size) * 2**20)
        alpha, violations = _pegasos_loop(Y, draws, lam, kernel_rows)
        seconds = time.perf_counter() - t0

        support = np.flatnonzero(alpha.any(axis=0))
        scale = 1.0 / (lam * T * k)
        self.kernel_spec_ = spec
        self.alpha_ = alpha[0] if alpha.shape[0] == 1 else alpha
        self.support_ = support
        self.support_vectors_ = dense_rows(X[support])
        self.dual_coef_ = alpha[:, support] * Y[:, support] * scale
        self.intercept_ = c2 * self.dual_coef_.sum(axis=1)
        self.n_iter_ = T
        self.fit_stats_ = {
            "seconds": seconds,
            "violations": violations,
            "kernel_rows_computed": kernel_rows.computed,
            "kernel_matrix_cached": kernel_rows.full is not None,
        }
        logger.info(
            "PegasosSVC: %d steps, %d violations, %d support vectors, %.3f s",
            T,
            violations,
            support.size,
            seconds,
        )
        return self

    def decision_function(self, X) -> np.ndarray:
        """``Σ_j dual_coef_j K(x_j, x) + intercept_``.

        Returns
        -------
        ndarray of shape (n_samples,) for two classes (positive means
        ``classes_[1]``), else (n_samples, n_classes).
        """
        dec = self._decision(X)
        return dec[:, 0] if dec.shape[1] == 1 else dec

    def _decision(self, X) -> np.ndarray:
        check_is_fitted(self)
        X = validate_data(self, X, accept_sparse="csr", dtype=np.float64, reset=False)
        return kernel_matrix(X, self.support_vectors_, self.kernel_spec_) @ self.dual_coef_.T + self.intercept_

    def predict(self, X) -> np.ndarray:
        """Predicted class labels."""
        return labels_from_decision(self._decision(X), self.classes_)

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.sparse = True
        return tags


def _pegasos_loop(Y: np.ndarray, draws: np.ndarray, lam: float, kernel_rows: _KernelRows) -> tuple[np.ndarray, int]:
    """The Pegasos steps for ``P`` problems sharing the draws.

    ``Y`` (P x n) holds the ±1 labels of each problem, ``draws`` (T x k) the
    examples of each step.  Returns the counts ``α`` (P x n) and the number of
    violations.
    """
    P, n = Y.shape
    T, k = draws.shape
    s = np.zeros((P, n))
    alpha = np.zeros((P, n), dtype=np.int64)
    violations = 0
    report = max(1, T // 10)
    if P == 1 and k == 1:
        # The common case, with scalars: no temporary arrays on steps without a violation.
        y, s1, a1 = Y[0], s[0], alpha[0]
        for t, i in enumerate(draws[:, 0].tolist(), start=1):
            yi = y[i]
            if yi * s1[i] < lam * t:  # y_i · s_i / (λ t) < 1
                a1[i] += 1
                s1 += yi * kernel_rows.row(i)
                violations += 1
            if t % report == 0:
                logger.debug("step %d: %d violations", t, violations)
        return alpha, violations
    cols = np.arange(P)[:, None]
    for t in range(1, T + 1):
        batch = draws[t - 1]
        yb = Y[:, batch]
        viol = yb * s[:, batch] < lam * t * k  # (P, k)
        if viol.any():
            hit = viol.any(axis=0)
            coef = np.where(viol, yb, 0.0)[:, hit]
            s += coef @ kernel_rows.rows(batch[hit])
            np.add.at(alpha, (np.broadcast_to(cols, viol.shape)[viol], np.broadcast_to(batch, viol.shape)[viol]), 1)
            violations += int(viol.sum())
        if t % report == 0:
            logger.debug("step %d: %d violations", t, violations)
    return alpha, violations
