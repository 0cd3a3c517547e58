"""The exact kernel SVM with dsvm's loss, the squared hinge: the optimum that Nyström fits approach as k grows.

dsvm's estimators minimise, over the functions ``f = Σ_j β_j K(·, x_j) + b`` of
the kernel's space (the bias not regularised)::

    ½ βᵀKβ + C Σ_i max(0, 1 − y_i f(x_i))²

on features ``F = K(X, L)·M`` of k landmarks; with every training row a landmark
they solve this problem itself.  :func:`exact_squared_hinge` solves it without
the approximation, by Newton's method on the active set (Chapelle, *Training a
support vector machine in the primal*, Neural Computation 2007): at the
optimum ``β`` is zero outside the rows of margin below 1 (the active set ``A``),
and for a given ``A`` the optimum of the objective's quadratic piece is the
bordered system::

    [K_AA + I/(2C)  1] [β_A]   [y_A]
    [1ᵀ             0] [ b ] = [ 0 ]

Each iteration solves it, evaluates the new function on every row (``n x |A|``
kernel values, in blocks), steps to it with an exact line search (the objective
along the step is convex and piecewise quadratic) and takes the rows of margin
below 1 as the next ``A``, until ``A`` repeats.  Memory and time grow with
``|A|²`` and ``|A|³``: a reference for data of tens of thousands of rows whose
active set is a few thousand, started (``active``) from the active set of a
Nyström fit.
"""

from __future__ import annotations

import logging
import warnings
from dataclasses import dataclass

import numpy as np
import scipy.linalg
from numpy.typing import ArrayLike
from sklearn.exceptions import ConvergenceWarning
from sklearn.utils import check_array

from ..approx import KernelSpec, kernel_matrix
from ..checks import check_positive_int
from ._hinge import _check_X_y

logger = logging.getLogger(__name__)

#: rows of kernel values computed at once when a function is evaluated on every row
BLOCK_ROWS = 4096
#: bisection steps of the line search (to the resolution of a float64 step)
LINE_SEARCH_STEPS = 60


@dataclass
class SquaredHingeResult:
    """Solution of :func:`exact_squared_hinge`: ``f(x) = Σ_j beta_j K(x, support_vectors_j) + b``.

    Attributes
    ----------
    support : ndarray of shape (n_support,)
        Training rows with a nonzero coefficient: the rows of margin below 1 at the solution.
    support_vectors : ndarray of shape (n_support, p)
        Those rows.
    beta : ndarray of shape (n_support,)
        Their coefficients, ``2C (y − f)`` on each.
    b : float
        The bias.
    objective : float
        ``½ βᵀKβ + C Σ max(0, 1 − y f)²`` at the solution.
    n_iter : int
        Newton iterations.
    spec : KernelSpec
        The kernel.
    classes : ndarray of shape (2,)
        ``classes[1]`` is predicted where ``f > 0``.

    Examples
    --------
    >>> import numpy as np
    >>> from dsvm import KernelSpec
    >>> from dsvm.reference import exact_squared_hinge
    >>> X = np.array([[0.0], [0.2], [1.0], [1.2]])
    >>> result = exact_squared_hinge(X, ["a", "a", "b", "b"], C=10.0, spec=KernelSpec("rbf", gamma=1.0))
    >>> result.predict([[0.1], [1.1]]).tolist()
    ['a', 'b']
    """

    support: np.ndarray
    support_vectors: np.ndarray
    beta: np.ndarray
    b: float
    objective: float
    n_iter: int
    spec: KernelSpec
    classes: np.ndarray

    def decision_function(self, X: ArrayLike) -> np.ndarray:
        """The function's values ``f(X)``.

        Parameters
        ----------
        X : array-like of shape (n, p)

        Returns
        -------
        ndarray of shape (n,), float64
        """
        X = check_array(X, dtype=np.float64, input_name="X")  # NaN or infinity: one line, never a label
        return _function(X, self.support_vectors, self.beta, self.b, self.spec)

    def predict(self, X: ArrayLike) -> np.ndarray:
        """The labels ``f(X)`` predicts: ``classes[1]`` where ``f > 0``, else ``classes[0]``.

        Parameters
        ----------
        X : array-like of shape (n, p)

        Returns
        -------
        ndarray of shape (n,)
        """
        return self.classes[(self.decision_function(X) > 0).astype(int)]


def _function(X: np.ndarray, S: np.ndarray, beta: np.ndarray, b: float, spec: KernelSpec) -> np.ndarray:
    if not S.shape[0]:
        return np.full(X.shape[0], b)
    parts = [kernel_matrix(X[s : s + BLOCK_ROWS], S, spec) @ beta for s in range(0, X.shape[0], BLOCK_ROWS)]
    return np.concatenate(parts) + b if parts else np.zeros(0)


def _active_optimum(K_AA: np.ndarray, y_A: np.ndarray, C: float) -> tuple[np.ndarray, float]:
    """``(β_A, b)`` of the bordered system: the optimum when exactly the rows ``A`` are active."""
    m = y_A.size
    S = np.empty((m + 1, m + 1))
    S[:m, :m] = K_AA
    S[np.arange(m), np.arange(m)] += 1.0 / (2.0 * C)
    S[:m, m] = S[m, :m] = 1.0
    S[m, m] = 0.0
    solution = scipy.linalg.solve(S, np.append(y_A, 0.0), assume_a="sym", check_finite=False)
    return solution[:m], float(solution[m])


def _exact_step(f0: np.ndarray, f1: np.ndarray, q: tuple[float, float, float], y: np.ndarray, C: float) -> float:
    """The step ``t`` in [0, 1] minimising the objective from ``(β0, f0)`` towards ``(β1, f1)``.

    ``q = (β0ᵀKβ0, β0ᵀKβ1, β1ᵀKβ1)``; the objective along the step is convex and
    piecewise quadratic, so its slope is increasing: bisection on the slope.
    """
    q00, q01, q11 = q
    d = f1 - f0

    def slope(t: float) -> float:
        residual = np.maximum(0.0, 1.0 - y * (f0 + t * d))
        return (1.0 - t) * (q01 - q00) + t * (q11 - q01) - 2.0 * C * float(np.dot(residual * y, d))

    if slope(1.0) <= 0.0:
        return 1.0
    lo, hi = 0.0, 1.0
    for _ in range(LINE_SEARCH_STEPS):
        mid = 0.5 * (lo + hi)
        lo, hi = (mid, hi) if slope(mid) < 0.0 else (lo, mid)
    return 0.5 * (lo + hi)


def _objective(beta: np.ndarray, f_support: np.ndarray, b: float, f: np.ndarray, y: np.ndarray, C: float) -> float:
    """``½ βᵀKβ + C Σ max(0, 1 − y f)²`` with ``Kβ = f − b`` read on the support."""
    return 0.5 * float(beta @ (f_support - b)) + C * float(np.sum(np.maximum(0.0, 1.0 - y * f) ** 2))


def _check_active(active: ArrayLike, n: int) -> np.ndarray:
    """The sorted distinct row indices of ``active`` (a 1-D sequence of integers in 0..n-1)."""
    rows = np.asarray(active)
    if rows.ndim != 1 or (rows.size and rows.dtype.kind not in "iu"):
        raise ValueError(f"active must be a 1-D sequence of row indices, got an array of shape {rows.shape} "
                         f"and dtype {rows.dtype}")
    rows = np.unique(rows.astype(np.int64))
    if rows.size and (rows[0] < 0 or rows[-1] >= n):
        raise ValueError(f"active holds row indices outside 0..{n - 1}")
    return rows


def exact_squared_hinge(X: ArrayLike, y: ArrayLike, C: float, spec: KernelSpec, active: ArrayLike | None = None,
                        max_iter: int = 100, max_active: int = 30_000) -> SquaredHingeResult:
    """The exact kernel squared-hinge SVM (bias not regularised) by Newton's method on the active set.

    Parameters
    ----------
    X : array-like of shape (n, p)
        Dense training rows.
    y : array-like of shape (n,)
        Two distinct labels (:func:`binary_labels`).
    C : float
        Positive.
    spec : KernelSpec
        The kernel.
    active : array-like of int, optional
        Rows to start from as the active set (the rows of margin below 1 under a Nyström fit, say).
        When None or empty: every row (those active at ``f = 0``), which needs ``n <= max_active``.
    max_iter : int, default=100
        From a start far from the optimum the line search can take short steps (large C): start from a
        Nyström fit's active rows, from which a few iterations suffice.
    max_active : int, default=30000
        The largest active set whose system is formed (its kernel matrix and the bordered system:
        ``16 max_active²`` bytes).

    Returns
    -------
    SquaredHingeResult

    Raises
    ------
    ValueError
        If an active set holds more than ``max_active`` rows (start from a smaller one); ``active`` is not a
        1-D sequence of row indices in range; ``max_iter`` or ``max_active`` is not a positive integer; the
        input is not a binary problem with one label per row.
    TypeError
        If ``spec`` is not a :class:`~dsvm.KernelSpec`.

    Warns
    -----
    sklearn.exceptions.ConvergenceWarning
        When ``max_iter`` iterations end away from the optimum.

    Examples
    --------
    >>> import numpy as np
    >>> from dsvm import KernelSpec
    >>> from dsvm.reference import exact_squared_hinge
    >>> X = np.random.default_rng(0).normal(size=(200, 2))
    >>> y = np.where(X[:, 0] ** 2 + X[:, 1] ** 2 > 1.4, 1, -1)
    >>> result = exact_squared_hinge(X, y, C=10.0, spec=KernelSpec("rbf", gamma=1.0))
    >>> bool((result.predict(X) == y).mean() > 0.95)
    True
    """
    X, y_pm, classes, C = _check_X_y(X, y, C)
    if not isinstance(spec, KernelSpec):
        raise TypeError(f"spec must be a KernelSpec (dsvm.KernelSpec('rbf', gamma=...)), got {type(spec).__name__}")
    max_iter, max_active = check_positive_int("max_iter", max_iter), check_positive_int("max_active", max_active)
    A = np.arange(X.shape[0]) if active is None else _check_active(active, X.shape[0])
    support, beta, b, f = np.zeros(0, dtype=np.int64), np.zeros(0), 0.0, None
    for it in range(1, max_iter + 1):
        if not A.size:  # no row active: restart from the rows active at f = 0 (the optimum always has some)
            A = np.arange(X.shape[0])
        if A.size > max_active:
            raise ValueError(f"the active set holds {A.size} rows, more than max_active={max_active}: "
                             "start from a smaller one (active=)")
        beta_A, b_A = _active_optimum(kernel_matrix(X[A], X[A], spec), y_pm[A], C)
        f_A = _function(X, X[A], beta_A, b_A, spec)
        # the Newton point is the optimum when the rows it leaves active are A: no line search there (its
        # slope at the optimum is rounding noise, whose sign would stall the iteration)
        optimal = np.array_equal(np.flatnonzero(y_pm * f_A < 1.0), A)
        if f is None or optimal:
            t = 1.0
        else:
            q = (float(beta @ (f[support] - b)), float(beta @ (f_A[support] - b_A)), float(beta_A @ (f_A[A] - b_A)))
            t = _exact_step(f, f_A, q, y_pm, C)
        union = np.union1d(support, A)
        coef = np.zeros(union.size)
        coef[np.searchsorted(union, A)] += t * beta_A
        coef[np.searchsorted(union, support)] += (1.0 - t) * beta
        f = f_A if f is None else (1.0 - t) * f + t * f_A
        support, beta, b = union[coef != 0.0], coef[coef != 0.0], (1.0 - t) * b + t * b_A
        logger.info("exact squared hinge: iteration %d, |A| = %d, step %.3g, objective %.10g",
                    it, A.size, t, _objective(beta, f[support], b, f, y_pm, C))
        if optimal:
            break
        A = np.flatnonzero(y_pm * f < 1.0)
    else:
        warnings.warn(f"exact_squared_hinge did not converge in {max_iter} iterations (raise max_iter, or start "
                      "from the rows a Nyström fit leaves active)", ConvergenceWarning, stacklevel=2)
    return SquaredHingeResult(support=support, support_vectors=X[support], beta=beta, b=b,
                              objective=_objective(beta, f[support], b, f, y_pm, C), n_iter=it, spec=spec,
                              classes=classes)
