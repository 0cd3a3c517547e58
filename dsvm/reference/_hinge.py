"""Reference solvers for the hinge-loss (L1) soft-margin SVM, for small problems.

These are the textbook formulations, solved as plainly as possible, to check
the large-scale solvers against and to teach from.  Nothing here scales: the
QPs are dense in ``n`` (the dual holds the ``n x n`` matrix ``yyᵀ∘K``).

* :func:`primal_qp` — the primal QP in the variables ``(w, b, ξ)``::

      min  ½‖w‖² + C Σ ξ_i   s.t.  y_i (w·x_i + b) ≥ 1 − ξ_i,  ξ_i ≥ 0

* :func:`dual_qp` — the dual QP in ``α``::

      max  Σ α_i − ½ αᵀ (yyᵀ∘K) α   s.t.  0 ≤ α_i ≤ C,  yᵀα = 0

* :func:`subgradient_descent` — full subgradient descent on the primal
  objective ``f(w, b) = ½‖w‖² + C Σ max(0, 1 − y_i (w·x_i + b))`` with the
  step ``η_k = η0 / k``, keeping the best iterate.

The QPs are solved by the interior-point solver Clarabel (an optional
dependency, ``pip install 'dsvm[reference]'``), imported only when a QP is
solved.  Both QPs are handed to it in its standard form
``min ½ zᵀPz + qᵀz  s.t.  Az + s = h,  s ∈ 𝒦`` with the cone ``𝒦`` a product of
a zero cone (equality rows: the dual's ``yᵀα = 0`` goes in as it is, neither
eliminated nor penalised) and a non-negative cone (inequality rows).

Labels: any two distinct values.  The sorted unique labels are ``classes``;
``classes[0]`` becomes −1 and ``classes[1]`` becomes +1 (so ``{-1, +1}`` maps to
itself, and a positive decision value means ``classes[1]``, as in
scikit-learn).
"""

from __future__ import annotations

import logging
import time
import warnings
from dataclasses import dataclass

import numpy as np
import scipy.linalg
import scipy.sparse as sp
from sklearn.exceptions import ConvergenceWarning
from sklearn.utils import check_array

from ..approx import KernelSpec, kernel_matrix
from ..checks import check_positive, check_positive_int

logger = logging.getLogger(__name__)

__all__ = [
    "PrimalQPResult",
    "DualQPResult",
    "SubgradientResult",
    "binary_labels",
    "primal_qp",
    "dual_qp",
    "subgradient_descent",
    "hinge_objective",
    "dual_bias",
    "require_clarabel",
]

INSTALL_HINT = "pip install 'dsvm[reference]'"


# --------------------------------------------------------------------------- results
@dataclass
class PrimalQPResult:
    """Solution of :func:`primal_qp`.

    Attributes
    ----------
    w : ndarray of shape (p,) or (r,)
        Weights (for a non-linear kernel: in the coordinates of ``features``).
    b : float
        Bias.
    xi : ndarray of shape (n,)
        Slacks ``max(0, 1 − y_i f(x_i))`` at the returned ``(w, b)`` (the optimal
        ``ξ`` for them).
    objective : float
        ``½‖w‖² + C Σ ξ_i`` evaluated at the returned point.
    decision : ndarray of shape (n,)
        ``f(x_i) = w·x_i + b`` on the training rows.
    classes : ndarray of shape (2,)
        Original labels; ``classes[1]`` is the +1 class.
    status : str
        Solver status (``"Solved"`` on success).
    iterations : int
        Interior-point iterations.
    solve_time : float
        Seconds spent in the solver.
    features : ndarray of shape (n, r) or None
        For a non-linear kernel, the empirical feature map ``Φ`` with
        ``ΦΦᵀ = K(X, X)`` on which the linear primal was solved; ``None`` for
        the linear kernel.
    """

    w: np.ndarray
    b: float
    xi: np.ndarray
    objective: float
    decision: np.ndarray
    classes: np.ndarray
    status: str
    iterations: int
    solve_time: float
    features: np.ndarray | None = None


@dataclass
class DualQPResult:
    """Solution of :func:`dual_qp`.

    Attributes
    ----------
    alpha : ndarray of shape (n,)
        Dual variables, clipped to ``[0, C]``.
    b : float
        Bias (see :func:`dual_qp` for how it is computed).
    objective : float
        Dual objective ``Σα − ½ αᵀQα`` (the value being maximised).
    primal_objective : float
        Primal objective of the classifier defined by ``(α, b)``:
        ``½ αᵀQα + C Σ max(0, 1 − y_i f(x_i))``.  ``primal_objective −
        objective ≥ 0`` is the duality gap.
    dual_coef : ndarray of shape (n,)
        ``α_i y_i``; ``f(x) = Σ_i dual_coef_i K(x_i, x) + b``.
    support : ndarray of int
        Indices with ``α_i > sv_tol · C``.
    free : ndarray of int
        Indices with ``sv_tol · C < α_i < (1 − sv_tol) · C``.
    decision : ndarray of shape (n,)
        ``f(x_i)`` on the training rows.
    classes : ndarray of shape (2,)
    status : str
    iterations : int
    solve_time : float
    b_method : str
        ``"free"`` (median over free support vectors) or ``"kkt-interval"``
        (midpoint of the interval allowed by the KKT conditions).
    """

    alpha: np.ndarray
    b: float
    objective: float
    primal_objective: float
    dual_coef: np.ndarray
    support: np.ndarray
    free: np.ndarray
    decision: np.ndarray
    classes: np.ndarray
    status: str
    iterations: int
    solve_time: float
    b_method: str

    @property
    def gap(self) -> float:
        """Duality gap ``primal_objective − objective``."""
        return self.primal_objective - self.objective


@dataclass
class SubgradientResult:
    """Result of :func:`subgradient_descent`.

    Attributes
    ----------
    w, b :
        The best iterate (lowest objective seen).
    objective : float
        Its objective.
    history : ndarray of shape (n_iter + 1,)
        ``history[k]`` is the best objective among the iterates ``0..k``
        (``history[0]`` is the starting point's).
    best_iter : int
        Index ``k`` of the best iterate.
    classes : ndarray of shape (2,)
    """

    w: np.ndarray
    b: float
    objective: float
    history: np.ndarray
    best_iter: int
    classes: np.ndarray


# --------------------------------------------------------------------------- input
def require_clarabel():
    """Import Clarabel (an optional dependency), or raise ``ImportError`` saying how to install it."""
    try:
        import clarabel
    except ImportError as exc:
        raise ImportError(
            "dsvm.reference solves its QPs with the optional dependency Clarabel, which is not "
            f"installed; install it with `{INSTALL_HINT}` (or `pip install clarabel`)"
        ) from exc
    return clarabel


def binary_labels(y) -> tuple[np.ndarray, np.ndarray]:
    """Map two distinct labels to ``±1``.

    Parameters
    ----------
    y : array-like of shape (n,)
        Any two distinct labels (numbers, strings, booleans).

    Returns
    -------
    y_pm : ndarray of shape (n,), float64
        ``-1.0`` for ``classes[0]``, ``+1.0`` for ``classes[1]``.
    classes : ndarray of shape (2,)
        The sorted unique labels.

    Raises
    ------
    ValueError
        If ``y`` is not one-dimensional, holds NaN, or does not hold exactly
        two distinct labels.
    """
    y = np.asarray(y)
    if y.ndim == 2 and y.shape[1] == 1:
        y = y.ravel()
    if y.ndim != 1:
        raise ValueError(f"y must be 1-dimensional, got shape {y.shape}")
    if y.dtype.kind == "f" and not np.isfinite(y).all():
        raise ValueError("y contains NaN or infinity")
    classes, codes = np.unique(y, return_inverse=True)
    if len(classes) != 2:
        raise ValueError(
            f"y must hold exactly two classes for a binary SVM, got {len(classes)}: {classes[:5].tolist()}"
            + (" ..." if len(classes) > 5 else "")
        )
    return np.where(codes == 1, 1.0, -1.0), classes


def _check_X_y(X, y, C) -> tuple[np.ndarray, np.ndarray, np.ndarray, float]:
    C = check_positive("C", C)
    X = check_array(X, accept_sparse=False, dtype=np.float64, input_name="X")
    y_arr = np.asarray(y)
    n_y = y_arr.shape[0] if y_arr.ndim else 0
    if n_y != X.shape[0]:
        raise ValueError(f"X has {X.shape[0]} rows but y has {n_y} labels; they must have one label per row")
    y_pm, classes = binary_labels(y_arr)
    return X, y_pm, classes, C


def _clarabel_settings(clarabel, tol: float, max_iter: int, verbose: bool):
    settings = clarabel.DefaultSettings()
    settings.verbose = bool(verbose)
    settings.max_iter = int(max_iter)
    settings.tol_gap_abs = tol
    settings.tol_gap_rel = tol
    settings.tol_feas = tol
    settings.tol_ktratio = min(settings.tol_ktratio, tol)
    return settings


def _solve(P: sp.csc_matrix, q, A: sp.csc_matrix, h, n_eq: int, n_ineq: int, tol, max_iter, verbose):
    """``min ½ zᵀPz + qᵀz`` s.t. the first ``n_eq`` rows of ``Az = h`` hold with
    equality and the remaining ``n_ineq`` rows as ``Az ≤ h``."""
    clarabel = require_clarabel()
    cones = []
    if n_eq:
        cones.append(clarabel.ZeroConeT(n_eq))
    cones.append(clarabel.NonnegativeConeT(n_ineq))
    settings = _clarabel_settings(clarabel, tol, max_iter, verbose)
    t0 = time.perf_counter()
    solver = clarabel.DefaultSolver(
        sp.triu(P, format="csc"), np.asarray(q, float), A.tocsc(), np.asarray(h, float), cones, settings
    )
    sol = solver.solve()
    seconds = time.perf_counter() - t0
    status = str(sol.status).split(".")[-1]
    if status not in ("Solved", "AlmostSolved"):
        raise RuntimeError(f"the QP solver stopped with status {status!r} after {sol.iterations} iterations")
    if status == "AlmostSolved":
        warnings.warn(
            f"the QP solver reached only the reduced accuracy 'AlmostSolved' (tol={tol:g}); "
            "the solution may be less accurate than asked",
            ConvergenceWarning,
            stacklevel=3,
        )
    logger.info("clarabel: %s in %d iterations, %.3f s, objective %.12g", status, sol.iterations, seconds, sol.obj_val)
    return np.asarray(sol.x, dtype=np.float64), status, int(sol.iterations), seconds


def hinge_objective(w: np.ndarray, b: float, X: np.ndarray, y_pm: np.ndarray, C: float) -> float:
    """Primal objective ``½‖w‖² + C Σ max(0, 1 − y_i (w·x_i + b))`` (labels ``±1``)."""
    margins = y_pm * (X @ w + b)
    return 0.5 * float(w @ w) + C * float(np.maximum(0.0, 1.0 - margins).sum())


def _empirical_features(K: np.ndarray) -> np.ndarray:
    """``Φ`` (n x r) with ``ΦΦᵀ = K`` up to eigenvalues below ``n·eps·λ_max``."""
    K = 0.5 * (K + K.T)
    lam, V = scipy.linalg.eigh(K)
    keep = lam > max(lam[-1], 0.0) * K.shape[0] * np.finfo(np.float64).eps
    return V[:, keep] * np.sqrt(lam[keep])


# --------------------------------------------------------------------------- primal
def primal_qp(
    X,
    y,
    C: float,
    kernel: KernelSpec | str | None = None,
    *,
    tol: float = 1e-10,
    max_iter: int = 200,
    verbose: bool = False,
) -> PrimalQPResult:
    """Solve the primal QP of the hinge-loss soft-margin SVM.

    The variables are ``z = (w, b, ξ)`` (``p + 1 + n`` of them)::

        min  ½ zᵀ P z + qᵀ z,   P = diag(1_p, 0, 0_n),   q = (0_p, 0, C·1_n)
        s.t. −y_i (w·x_i + b) − ξ_i ≤ −1      (n rows)
             −ξ_i ≤ 0                          (n rows)

    Parameters
    ----------
    X : array-like of shape (n, p)
    y : array-like of shape (n,)
        Two distinct labels (see the module docstring).
    C : float
        Positive cost of the hinge loss.
    kernel : None, "linear" or KernelSpec, default=None
        ``None``/``"linear"`` is the textbook primal, linear in ``X``.  For a
        :class:`~dsvm.approx.KernelSpec` the primal lives in feature space; it
        is solved on the empirical feature map ``Φ`` (``ΦΦᵀ = K(X, X)`` from an
        eigendecomposition), which by the representer theorem has the same
        optimum.  ``w`` is then in the coordinates of ``Φ``
        (returned as ``features``) and only the training decision values are
        meaningful without it.
    tol : float, default=1e-10
        Clarabel's gap and feasibility tolerances (absolute and relative).
    max_iter : int, default=200
        Interior-point iteration limit.
    verbose : bool, default=False
        Let the solver print its iteration log.

    Returns
    -------
    PrimalQPResult

    Raises
    ------
    ValueError
        Mismatched lengths, not exactly two classes, ``C ≤ 0``, NaN in ``X``.
    ImportError
        If Clarabel is not installed.
    RuntimeError
        If the solver does not reach a solution.
    """
    X, y_pm, classes, C = _check_X_y(X, y, C)
    tol = check_positive("tol", tol)
    max_iter = check_positive_int("max_iter", max_iter)
    features = None
    if kernel is not None and not (kernel == "linear" or (isinstance(kernel, KernelSpec) and kernel.name == "linear")):
        if not isinstance(kernel, KernelSpec):
            raise ValueError(
                f"kernel must be None, 'linear' or a KernelSpec (dsvm.approx.make_kernel_spec), got {kernel!r}"
            )
        features = _empirical_features(kernel_matrix(X, X, kernel))
        Z = features
    else:
        Z = X
    n, p = Z.shape
    P = sp.diags(np.r_[np.ones(p), np.zeros(1 + n)], format="csc")
    q = np.r_[np.zeros(p + 1), np.full(n, C)]
    eye = sp.identity(n, format="csr")
    margin_rows = sp.hstack([sp.csr_matrix(-y_pm[:, None] * Z), sp.csr_matrix(-y_pm[:, None]), -eye])
    slack_rows = sp.hstack([sp.csr_matrix((n, p + 1)), -eye])
    A = sp.vstack([margin_rows, slack_rows], format="csc")
    h = np.r_[-np.ones(n), np.zeros(n)]
    z, status, iterations, seconds = _solve(P, q, A, h, 0, 2 * n, tol, max_iter, verbose)
    w, b = z[:p], float(z[p])
    decision = Z @ w + b
    xi = np.maximum(0.0, 1.0 - y_pm * decision)
    objective = 0.5 * float(w @ w) + C * float(xi.sum())
    return PrimalQPResult(
        w=w,
        b=b,
        xi=xi,
        objective=objective,
        decision=decision,
        classes=classes,
        status=status,
        iterations=iterations,
        solve_time=seconds,
        features=features,
    )


# --------------------------------------------------------------------------- dual
def dual_bias(alpha, y_pm, g, C, sv_tol: float = 1e-6) -> tuple[float, str, np.ndarray]:
    """The bias from the KKT conditions given ``g_i = Σ_j α_j y_j K_ij``: ``(b, how, free)`` — the median of
    ``y_i − g_i`` over the free support vectors (``"free"``), else the middle of the bound ones' ``"kkt-interval"``."""
    lo_a, hi_a = sv_tol * C, (1.0 - sv_tol) * C
    free = np.flatnonzero((alpha > lo_a) & (alpha < hi_a))
    r = y_pm - g  # the b that puts x_i exactly on its margin
    if free.size:
        # All free vectors give the same b at the exact optimum; the median
        # ignores the few whose α is only just inside the threshold.
        return float(np.median(r[free])), "free", free
    at_zero, at_c = alpha <= lo_a, alpha >= hi_a
    pos = y_pm > 0
    # α_i = 0 ⇒ y_i f_i ≥ 1;  α_i = C ⇒ y_i f_i ≤ 1.
    lower = r[(at_zero & pos) | (at_c & ~pos)]
    upper = r[(at_zero & ~pos) | (at_c & pos)]
    lo = lower.max() if lower.size else -np.inf
    hi = upper.min() if upper.size else np.inf
    if np.isfinite(lo) and np.isfinite(hi):
        b = 0.5 * (lo + hi)
    else:
        b = lo if np.isfinite(lo) else hi
    return float(b), "kkt-interval", free


def dual_qp(
    K,
    y,
    C: float,
    *,
    tol: float = 1e-10,
    max_iter: int = 200,
    sv_tol: float = 1e-6,
    verbose: bool = False,
) -> DualQPResult:
    """Solve the dual QP of the hinge-loss soft-margin SVM.

    With ``Q = yyᵀ∘K`` the solver gets (as a minimisation)::

        min  ½ αᵀQα − 1ᵀα
        s.t. yᵀα = 0            (one equality row, passed as a zero cone)
             −α ≤ 0,  α ≤ C     (2n inequality rows)

    The bias is the median of ``y_i − Σ_j α_j y_j K_ij`` over the free support
    vectors (``sv_tol·C < α_i < (1 − sv_tol)·C``), for which the KKT
    conditions put ``x_i`` exactly on its margin.  If no vector is free, ``b``
    is the midpoint of the interval the KKT conditions allow (``α_i = 0 ⇒
    y_i f_i ≥ 1``, ``α_i = C ⇒ y_i f_i ≤ 1``), as LIBSVM does.

    Parameters
    ----------
    K : array-like of shape (n, n)
        Symmetric positive semidefinite kernel matrix of the training rows
        (e.g. :func:`dsvm.approx.kernel_matrix`).
    y : array-like of shape (n,)
        Two distinct labels (see the module docstring).
    C : float
        Positive cost of the hinge loss (the upper bound on ``α``).
    tol : float, default=1e-10
        Clarabel's gap and feasibility tolerances.
    max_iter : int, default=200
    sv_tol : float, default=1e-6
        Relative threshold (times ``C``) deciding which ``α_i`` sit at a bound.
    verbose : bool, default=False

    Returns
    -------
    DualQPResult

    Raises
    ------
    ValueError
        ``K`` not square, not symmetric or not finite, mismatched lengths, not
        exactly two classes, ``C ≤ 0``.
    ImportError
        If Clarabel is not installed.
    RuntimeError
        If the solver does not reach a solution.
    """
    C = check_positive("C", C)
    tol = check_positive("tol", tol)
    max_iter = check_positive_int("max_iter", max_iter)
    sv_tol = check_positive("sv_tol", sv_tol)
    K = check_array(K, dtype=np.float64, input_name="K")
    if K.shape[0] != K.shape[1]:
        raise ValueError(f"K must be a square kernel matrix, got shape {K.shape}")
    scale = max(np.abs(K).max(), 1.0)
    if not np.allclose(K, K.T, rtol=0.0, atol=1e-10 * scale):
        raise ValueError("K must be symmetric (a kernel matrix of the training rows against themselves)")
    y_arr = np.asarray(y)
    n_y = y_arr.shape[0] if y_arr.ndim else 0
    if n_y != K.shape[0]:
        raise ValueError(f"K has {K.shape[0]} rows but y has {n_y} labels; they must match")
    y_pm, classes = binary_labels(y_arr)
    n = K.shape[0]
    K = 0.5 * (K + K.T)
    Q = (y_pm[:, None] * y_pm[None, :]) * K
    eye = sp.identity(n, format="csr")
    A = sp.vstack([sp.csr_matrix(y_pm[None, :]), -eye, eye], format="csc")
    h = np.r_[0.0, np.zeros(n), np.full(n, C)]
    alpha, status, iterations, seconds = _solve(sp.csc_matrix(Q), -np.ones(n), A, h, 1, 2 * n, tol, max_iter, verbose)
    alpha = np.clip(alpha, 0.0, C)
    coef = alpha * y_pm
    g = K @ coef
    b, b_method, free = dual_bias(alpha, y_pm, g, C, sv_tol)
    quad = float(coef @ g)
    decision = g + b
    dual_obj = float(alpha.sum()) - 0.5 * quad
    primal_obj = 0.5 * quad + C * float(np.maximum(0.0, 1.0 - y_pm * decision).sum())
    return DualQPResult(
        alpha=alpha,
        b=b,
        objective=dual_obj,
        primal_objective=primal_obj,
        dual_coef=coef,
        support=np.flatnonzero(alpha > sv_tol * C),
        free=free,
        decision=decision,
        classes=classes,
        status=status,
        iterations=iterations,
        solve_time=seconds,
        b_method=b_method,
    )


# --------------------------------------------------------------------------- subgradient
def subgradient_descent(
    X,
    y,
    C: float,
    n_iter: int,
    eta0: float,
    *,
    w0=None,
    b0: float = 0.0,
) -> SubgradientResult:
    """Subgradient descent on the primal hinge objective, keeping the best iterate.

    Minimises ``f(w, b) = ½‖w‖² + C Σ_i max(0, 1 − y_i (w·x_i + b))`` with the
    (full, deterministic) subgradient ``(w − C Σ_{i∈V} y_i x_i, −C Σ_{i∈V} y_i)``,
    ``V = {i : y_i (w·x_i + b) < 1}``, and the step ``η_k = η0 / k`` for
    ``k = 1, 2, …``.  A subgradient step need not decrease ``f``, so the best
    iterate seen is returned, not the last.

    ``f`` is 1-strongly convex in ``w`` (which suits ``η0/k`` with ``η0 ≈ 1``)
    but not in the unregularised ``b``; the best-iterate gap typically shrinks
    like ``1/√k`` or faster.

    Parameters
    ----------
    X : array-like of shape (n, p)
    y : array-like of shape (n,)
        Two distinct labels (see the module docstring).
    C : float
        Positive cost of the hinge loss.
    n_iter : int
        Number of steps.
    eta0 : float
        Positive initial step.
    w0 : array-like of shape (p,), default=None
        Starting weights (zeros by default).
    b0 : float, default=0.0
        Starting bias.

    Returns
    -------
    SubgradientResult
    """
    X, y_pm, classes, C = _check_X_y(X, y, C)
    n_iter = check_positive_int("n_iter", n_iter)
    eta0 = check_positive("eta0", eta0)
    p = X.shape[1]
    w = np.zeros(p) if w0 is None else np.array(w0, dtype=np.float64).ravel()
    if w.shape != (p,):
        raise ValueError(f"w0 must have {p} entries (one per column of X), got {w.shape[0]}")
    b = float(b0)
    yX = y_pm[:, None] * X
    history = np.empty(n_iter + 1)

    def evaluate(w, b):
        margins = yX @ w + y_pm * b
        violated = margins < 1.0
        return 0.5 * float(w @ w) + C * float((1.0 - margins[violated]).sum()), violated

    f, violated = evaluate(w, b)
    best = (f, w.copy(), b, 0)
    history[0] = f
    for k in range(1, n_iter + 1):
        eta = eta0 / k
        gw = w - C * yX[violated].sum(axis=0)
        gb = -C * float(y_pm[violated].sum())
        w = w - eta * gw
        b = b - eta * gb
        f, violated = evaluate(w, b)
        if f < best[0]:
            best = (f, w.copy(), b, k)
        history[k] = best[0]
    logger.info("subgradient descent: best objective %.10g at iteration %d of %d", best[0], best[3], n_iter)
    return SubgradientResult(
        w=best[1], b=best[2], objective=best[0], history=history, best_iter=best[3], classes=classes
    )
