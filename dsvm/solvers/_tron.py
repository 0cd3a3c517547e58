"""Trust-region Newton-CG (TRON, as in LIBLINEAR) for the L2-loss primal.

Lin, Weng & Keerthi, "Trust region Newton method for large-scale logistic
regression" (JMLR 2008), the primal solver of LIBLINEAR, on the same
distributed operator as the semismooth Newton method: every CG step is one
generalized Hessian-vector pass, every trial point one evaluation pass.

Differences from LIBLINEAR: the bias is not regularised (its curvature comes
only from the active rows), and the stopping rule is the relative gradient
norm of :func:`dsvm.solvers.semismooth_newton`, so both solvers answer the
same question.
"""

from __future__ import annotations

import logging
import time

import numpy as np

from ._finite import check_matrix, check_point
from ._result import SolverResult

logger = logging.getLogger(__name__)

# LIBLINEAR's constants
ETA0, ETA1, ETA2 = 1e-4, 0.25, 0.75
SIGMA1, SIGMA2, SIGMA3 = 0.25, 0.5, 4.0


def _steihaug_cg(hvp, g, delta, rtol, max_iter):
    """Approximately minimise gᵀs + ½ sᵀHs within ‖s‖ ≤ delta (truncated CG)."""
    s = np.zeros_like(g)
    r = -g
    d = r.copy()
    rr = float(r @ r)
    gnorm = np.sqrt(rr)
    it = 0
    while it < max_iter:
        if np.sqrt(rr) <= rtol * gnorm:
            break
        Hd = hvp(d)
        it += 1
        dHd = float(d @ Hd)
        if dHd <= 0:
            dHd = 1e-300
        alpha = rr / dHd
        s_next = s + alpha * d
        if np.linalg.norm(s_next) > delta:
            # Step to the boundary along d.
            sd, dd, ss = float(s @ d), float(d @ d), float(s @ s)
            rad = np.sqrt(max(sd * sd + dd * (delta * delta - ss), 0.0))
            tau = (delta * delta - ss) / (sd + rad) if sd >= 0 else (rad - sd) / dd
            s = s + tau * d
            r = r - tau * Hd
            return s, r, it, True
        s = s_next
        r = r - alpha * Hd
        rr_new = float(r @ r)
        d = r + (rr_new / rr) * d
        rr = rr_new
    return s, r, it, False


def _starting_point(op, dim: int, x0, reg: np.ndarray, label: str):
    """``(x, Φ(x), ∇Φ(x), ‖∇Φ(0)‖)`` at the start (zero or ``x0``), checked finite."""
    x = np.zeros(dim) if x0 is None else np.asarray(x0, dtype=np.float64).copy()
    res = op.evaluate(x, x, (), "none")
    f = 0.5 * float((reg * x) @ x) + res.loss
    g = reg * x + res.grad
    g_ref = float(np.linalg.norm(g))
    if x0 is not None and np.any(x):
        zero = np.zeros(dim)
        g_ref = float(np.linalg.norm(op.evaluate(zero, zero, (), "none").grad))
    check_point(f, g, method="tron", it=0, label=label)
    check_point(0.0, np.array([g_ref]), method="tron", it=0, label=label)  # the gradient at zero
    return x, f, g, max(g_ref, np.finfo(float).tiny)


def _updated_radius(delta: float, snorm: float, actred: float, prered: float, alpha: float) -> float:
    """LIBLINEAR's TRON radius rule: shrink the region after a poor step, keep or widen it after a good one
    (``actred`` / ``prered``: the actual and the predicted reduction; ``alpha``: the step's scale)."""
    if actred < ETA0 * prered:
        return min(max(alpha, SIGMA1) * snorm, SIGMA2 * delta)
    if actred < ETA1 * prered:
        return max(SIGMA1 * delta, min(alpha * snorm, SIGMA2 * delta))
    if actred < ETA2 * prered:
        return max(SIGMA1 * delta, min(alpha * snorm, SIGMA3 * delta))
    return max(delta, min(alpha * snorm, SIGMA3 * delta))


def _stop_reason(f: float, gnorm: float, g_tol: float, actred: float, prered: float) -> str | None:
    """Why TRON stops after an iteration, or None: an unbounded objective, the gradient rule, or reductions
    below the objective's rounding."""
    if f < -1e32:
        return "unbounded"
    if gnorm <= g_tol:
        return "tol"
    if abs(actred) <= 1e-12 * abs(f) and abs(prered) <= 1e-12 * abs(f):
        return "precision"
    return None


def _step(op, x, g, reg, delta: float, cg_rtol: float, cg_max_iter: int, it: int, label: str):
    """The trust-region step by Steihaug's CG: ``(s, gᵀs, predicted reduction, CG steps)``."""

    def hvp(v):
        return reg * v + op.hess_vec(x, v)

    s, r, cg_steps, _ = _steihaug_cg(hvp, g, delta, cg_rtol, cg_max_iter)
    check_matrix(s, what="trust-region step (from Hessian-vector products)", method="tron", it=it, label=label)
    if not op.fit_intercept:
        s[-1] = 0.0
    gs = float(g @ s)
    return s, gs, -0.5 * (gs - float(s @ r)), cg_steps


def _trial(op, x, s, reg, it: int, label: str):
    """``(x + s, Φ(x + s), its pass)``; a loss that overflows on a step too long is ``+inf`` (the step is then
    rejected and the region shrinks), while NaN is an error (it never comes from a long step of a finite problem)."""
    x_new = x + s
    res_new = op.evaluate(x, x_new, (), "none")
    f_new = 0.5 * float((reg * x_new) @ x_new) + res_new.loss
    if np.isinf(f_new):
        f_new = np.inf
    else:
        check_point(f_new, res_new.grad, method="tron", it=it, label=label, trial=True)
    return x_new, f_new, res_new


def _logged_info(it, f, g, n_active, cg_steps, accepted, delta, t_iter, label) -> dict:
    """The iteration's history entry, logged."""
    info = {"iter": it, "objective": f, "grad_norm": float(np.linalg.norm(g)), "n_active": n_active,
            "cg_steps": cg_steps, "step": 1.0 if accepted else 0.0, "radius": delta,
            "seconds": time.perf_counter() - t_iter}
    logger.info("%stron it=%d obj=%.8e |g|=%.3e |A|=%d cg=%d radius=%.3e %s %.3fs", label, it, f,
                info["grad_norm"], n_active, cg_steps, delta, "accepted" if accepted else "rejected", info["seconds"])
    return info


def trust_region_newton(
    op,
    dim: int,
    *,
    x0: np.ndarray | None = None,
    tol: float = 1e-4,
    max_iter: int = 100,
    cg_max_iter: int = 250,
    cg_rtol: float = 0.1,
    label: str = "",
    callback=None,
) -> SolverResult:
    """Minimise ``½‖w‖² + L(w, b)`` by TRON on an operator (see :mod:`dsvm.solvers._newton`)."""
    start = time.perf_counter()
    passes0 = op.n_passes
    reg = np.ones(dim)
    reg[-1] = 0.0
    x, f, g, g_ref = _starting_point(op, dim, x0, reg, label)
    delta = float(np.linalg.norm(g))
    history: list[dict] = []
    converged, stop_reason, it = False, "max_iter", 0
    for it in range(1, max_iter + 1):
        t_iter = time.perf_counter()
        gnorm = float(np.linalg.norm(g))
        if gnorm <= tol * g_ref:
            converged, stop_reason, it = True, "tol", it - 1
            break
        s, gs, prered, cg_steps = _step(op, x, g, reg, delta, cg_rtol, cg_max_iter, it, label)
        x_new, f_new, res_new = _trial(op, x, s, reg, it, label)
        actred = f - f_new
        snorm = float(np.linalg.norm(s))
        if it == 1:
            delta = min(delta, snorm)
        delta = _updated_radius(delta, snorm, actred, prered, SIGMA3 if f_new - f - gs <= 0
                                else max(SIGMA1, -0.5 * (gs / (f_new - f - gs))))
        accepted = actred > ETA0 * prered
        if accepted:
            x, f, g = x_new, f_new, reg * x_new + res_new.grad
            check_point(f, g, method="tron", it=it, label=label)
        info = _logged_info(it, f, g, res_new.n_active, cg_steps, accepted, delta, t_iter, label)
        history.append(info)
        if callback is not None:
            callback(it, x, info)
        stop = _stop_reason(f, float(np.linalg.norm(g)), tol * g_ref, actred, prered)
        if stop is not None:
            converged, stop_reason = stop == "tol", stop
            break
    else:
        if float(np.linalg.norm(g)) <= tol * g_ref:
            converged, stop_reason = True, "tol"
    return SolverResult(
        x=x, objective=f, n_iter=it, converged=converged, grad_norm=float(np.linalg.norm(g)), grad_norm0=g_ref,
        n_passes=op.n_passes - passes0, seconds=time.perf_counter() - start, method="tron", stop_reason=stop_reason,
        history=history,
    )
