"""Dual coordinate descent (LIBLINEAR's DCD, the paper's LA-DCD) on in-memory features.

Hsieh, Chang, Lin, Keerthi & Sundararajan, "A dual coordinate descent method
for large-scale linear SVM" (ICML 2008), as implemented by LIBLINEAR and
reached through scikit-learn's ``LinearSVC(dual=True)``.  LIBLINEAR appends a
constant feature ``s`` (``intercept_scaling``) instead of an unregularised
bias, so its problem is

    ½‖w‖² + ½ (b / s)² + Σ_i c_i max(0, 1 − y_i (f_iᵀ w + b))²

and that is the objective this solver reports.  With LIBLINEAR's default
``s = 1`` the bias penalty ``½ b²`` is tiny next to the loss of a large
problem, so the optimum of the semismooth Newton method's objective is missed
by at most ``½ b*²``; a large ``s`` makes that smaller still but slows DCD
down badly.

The feature matrix must fit in this process's memory (see
:meth:`dsvm.problems.SquaredHingeOperator.gather`); out-of-core block
minimisation would need warm-started dual variables per block, which
LIBLINEAR's interface does not expose.
"""

from __future__ import annotations

import time
import warnings

import numpy as np

from ._finite import check_result
from ._result import SolverResult, relative_gap


def dual_coordinate_descent(op, dim: int, *, tol: float = 1e-4, max_iter: int = 1000,
                            intercept_scaling: float = 1.0, random_state: int | None = None,
                            label: str = "") -> SolverResult:
    """LIBLINEAR DCD for the L2-loss SVM on a classification operator (it needs ``op.gather()``).

    ``random_state`` seeds LIBLINEAR's order of coordinates (None: numpy's global generator).
    """
    # imported here: Dask workers import this package, and scikit-learn would add over 100 MiB to each
    from sklearn.exceptions import ConvergenceWarning
    from sklearn.svm import LinearSVC

    start = time.perf_counter()
    F, y, c = op.gather()
    s = intercept_scaling if op.fit_intercept else 1.0
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", ConvergenceWarning)
        svc = LinearSVC(C=1.0, loss="squared_hinge", dual=True, tol=tol, max_iter=max_iter,
                        fit_intercept=op.fit_intercept, intercept_scaling=s, random_state=random_state).fit(
            np.asarray(F, dtype=np.float64), y, sample_weight=c)
    converged = not any(issubclass(w.category, ConvergenceWarning) for w in caught)
    w = svc.coef_[0]
    b = float(svc.intercept_[0]) if op.fit_intercept else 0.0
    m = np.asarray(F, dtype=np.float64) @ w + b
    rho = np.maximum(0.0, 1.0 - y * m)
    objective = 0.5 * float(w @ w) + (0.5 * (b / s) ** 2 if op.fit_intercept else 0.0) + float(c @ (rho * rho))
    gap = relative_gap(objective, _dual_bound(np.asarray(F, dtype=np.float64), y, c, rho, m, s if op.fit_intercept else 0.0))
    n_iter = int(np.max(svc.n_iter_))
    check_result(np.concatenate([w, [b]]), objective, method="dcd", label=label)
    return SolverResult(
        x=np.concatenate([w, [b]]), objective=objective, n_iter=n_iter, converged=converged,
        grad_norm=float("nan"), grad_norm0=float("nan"), n_passes=n_iter + 1,
        seconds=time.perf_counter() - start, method="dcd", stop_reason="tol" if converged else "max_iter",
        history=[{"iter": n_iter, "objective": objective, "duality_gap": gap}], duality_gap=gap,
    )


def _dual_bound(F: np.ndarray, y: np.ndarray, c: np.ndarray, rho: np.ndarray, m: np.ndarray, s: float) -> float:
    """LIBLINEAR's dual at the primal point's dual candidate ``α_i = 2 c_i y_i ρ_i``, best scaled.

    Its problem has features ``[f_i, s]`` and no free bias, so every ``t α`` (``t ≥ 0``) is feasible:
    ``D(t α) = t (Σ |α| ρ + Σ α m) − t² (Σ c ρ² + ½ ‖Σ α_i [f_i, s]‖²)``, maximised at
    ``t = a / (2 q)`` (see :mod:`dsvm.problems._duality` for the general form).
    """
    alpha = 2.0 * c * y * rho
    loss = float(c @ (rho * rho))
    u, total = F.T @ alpha, float(alpha.sum())
    a = 2.0 * loss + float(alpha @ m)
    q = loss + 0.5 * (float(u @ u) + (s * total) ** 2)
    return a * a / (4.0 * q) if a > 0.0 and q > 0.0 else 0.0
