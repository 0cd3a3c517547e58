"""Semismooth Newton method for the L2-loss (squared hinge) SVM primal.

Pure numpy on k-vectors.  The solver sees an *operator* with two methods
(:class:`dsvm.solvers._contract.OperatorContract`):

``evaluate(x0, x1, t_grid, hessian)``
    loss, gradient and active-set data at ``x1``, the loss along the segment
    ``x0 → x1`` at the step sizes ``t_grid`` and, if asked, the generalized
    Hessian ``2 [F 1]_Aᵀ C [F 1]_A`` at ``x1`` (``"full"``) or its change from
    the active set at ``x0`` (``"delta"``);
``hess_vec(x, v)``
    the generalized Hessian (loss part) times ``v``.

Each iteration (Yin & Li's semismooth Newton, with the bias not regularised):

1. direction ``d`` from ``(P + ∂²L) d = −g`` — either by Cholesky on the
   ``(r+1) x (r+1)`` system assembled from one Gram pass (``hessian="gram"``),
   or by conjugate gradient whose products are passes over the data
   (``hessian="cg"``);
2. Armijo backtracking ``Φ(x + t d) ≤ Φ(x) + σ t gᵀd`` over ``t ∈ {1, β, β², …}``,
   all candidates evaluated in the *same* pass that also computes the gradient
   and the Hessian change at ``x + d``.  When ``t = 1`` is accepted (the rule
   near the solution, where the method converges superlinearly) an iteration
   costs a single pass over the data.

The Gram variant updates ``F_Aᵀ C F_A`` with the rows that entered or left
the active set (``"delta"``) rather than recomputing it, and refreshes it in
full every ``refresh_every`` iterations or when the active set changes a lot.

Stopping: ``‖∇Φ(x)‖ ≤ tol · ‖∇Φ(0)‖``.  If rounding makes the Armijo test fail
for every step while the gradient is not yet small (float32 features at a very
tight ``tol``), the solver stops and reports ``converged=False`` with
``stop_reason="precision"``.
"""

from __future__ import annotations

import logging
import numbers
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import scipy.linalg

from ..blas import blas_for_order
from ._cg import conjugate_gradient
from ._finite import check_matrix, check_point
from ._result import SolverResult, relative_gap

logger = logging.getLogger(__name__)

ARMIJO_SIGMA = 1e-4
BACKTRACK = 0.5
MAX_BACKTRACKS = 20
SUBSAMPLE_TOL = 1e-2  # a warm start needs the active set roughly right, not a tight optimum


#: the largest Newton system (order ``k + 1``) the Gram variant is chosen for: its ``(k+1)²`` partial sums
#: must stay small
GRAM_MAX_DIM = 8192


def choose_hessian(n_rows: int, dim: int, distributed: bool) -> str:
    """Pick ``"gram"`` or ``"cg"`` for the Newton direction by a rough cost model.

    Per solve, with ``k = dim``:

    * Gram: about three full Gram passes (``2 n k²`` flops each, at GEMM speed,
      the rest are cheap active-set updates) plus one Cholesky (``k³/3``) per
      iteration;
    * CG: about 15 Newton iterations × 20 CG steps, each a pass reading ``F``
      three times (memory bound) plus one round trip of latency.

    Constants are conservative for one commodity node (200 GFLOP/s float32
    GEMM, 60 GFLOP/s float64 factorisation, 10 GB/s, 10 ms per round trip on a
    local scheduler, 50 ms on a cluster).  The ``k x k`` partial sums must
    also stay small: above ``k = 8192`` CG is always chosen.
    """
    if dim > GRAM_MAX_DIM:
        return "cg"
    gemm, fact, bw = 2e11, 6e10, 1e10
    latency = 0.05 if distributed else 0.01
    gram = 3 * 2.0 * n_rows * dim**2 / gemm + 15 * (dim**3 / 3) / fact
    cg = 15 * 20 * (3 * 4.0 * n_rows * dim / bw + latency)
    return "gram" if gram <= cg else "cg"


def _objective(reg: np.ndarray, x: np.ndarray, loss: float) -> float:
    return 0.5 * float(np.dot(reg * x, x)) + loss


def _newton_matrix(H_loss: np.ndarray, reg: np.ndarray) -> np.ndarray:
    """``H_loss + diag(reg)`` as a new matrix, with a free bias direction made nonsingular.

    Made in Fortran order (the transpose of the symmetric ``H_loss``), which
    LAPACK factors without a further copy.
    """
    H = H_loss.T.copy(order="K")
    H[np.diag_indices(H.shape[0])] += reg
    if H[-1, -1] <= 0.0:  # no active row or no intercept: bias direction is free
        H[-1, -1] = 1.0
    return H


# From this order on the Newton system is factored in float32 and the solution refined in
# float64 (below it the float64 factorisation costs too little for the refinement to pay).
MIXED_PRECISION_ORDER = 1000
REFINE_RTOL = 1e-10  # relative residual the refinement stops at (float64 Cholesky reaches ~1e-12)
MAX_REFINE = 6


def _refined_float32_solve(H: np.ndarray, rhs: np.ndarray) -> np.ndarray | None:
    """``H⁻¹ rhs`` by a float32 Cholesky factor and float64 iterative refinement, or None.

    Each refinement step solves for the float64 residual ``rhs − H x`` with the
    float32 factor and gains about ``−log10(κ · 2⁻²⁴)`` digits: about three at
    κ ~ 10⁴, so a Newton matrix of that condition reaches :data:`REFINE_RTOL`
    in a few of the :data:`MAX_REFINE` steps.  A float32 factorisation does the same flops at about twice the
    float64 rate, so above :data:`MIXED_PRECISION_ORDER` factor and refinement
    together cost less than the float64 factorisation (the documentation's
    performance page lists the measurements).  None when the factor does not exist
    or the refinement stalls (κ near 1/eps32): the caller then factors in float64.
    """
    try:
        c32 = scipy.linalg.cho_factor(H.astype(np.float32, order="F"), lower=False, overwrite_a=True,
                                      check_finite=False)
    except np.linalg.LinAlgError:
        return None
    x = scipy.linalg.cho_solve(c32, rhs.astype(np.float32), check_finite=False).astype(np.float64)
    target = REFINE_RTOL * float(np.linalg.norm(rhs))
    previous = np.inf
    for _ in range(MAX_REFINE):
        r = rhs - H @ x
        norm = float(np.linalg.norm(r))
        if norm <= target:
            return x
        if not np.isfinite(norm) or norm >= 0.5 * previous:
            return None  # not contracting: the float32 factor is too inaccurate for this matrix
        previous = norm
        x += scipy.linalg.cho_solve(c32, r.astype(np.float32), check_finite=False)
    return x if float(np.linalg.norm(rhs - H @ x)) <= target else None


def _solve_newton_system(H_loss: np.ndarray, reg: np.ndarray, rhs: np.ndarray) -> np.ndarray:
    with blas_for_order(H_loss.shape[0]):
        H = _newton_matrix(H_loss, reg)
        if H.shape[0] >= MIXED_PRECISION_ORDER:
            x = _refined_float32_solve(H, rhs)
            if x is not None:
                return x
        try:
            # H is a fresh copy: factor it in place (it is not used afterwards)
            c = scipy.linalg.cho_factor(H, lower=False, overwrite_a=True, check_finite=False)
            return scipy.linalg.cho_solve(c, rhs, check_finite=False)
        except np.linalg.LinAlgError:
            sol, *_ = scipy.linalg.lstsq(_newton_matrix(H_loss, reg), rhs, check_finite=False)
            return sol


def _factored_estimate(H_est: np.ndarray, reg: np.ndarray, fit_intercept: bool) -> Callable | None:
    """``v ↦ (diag(reg) + H_est)⁻¹ v`` by a Cholesky factor made once, or None when it does not factor.

    A preconditioner need not be exact: from :data:`MIXED_PRECISION_ORDER` on the
    factor is float32 (half the float64 factorisation's time) unless only a float64
    one exists.  Without an intercept the bias row is dropped, as the operators drop it.
    """
    H_est = np.asarray(H_est)
    order = H_est.shape[0]
    if not np.isfinite(H_est).all():
        logger.warning("newton: the Hessian estimate is not finite; CG runs without a preconditioner")
        return None
    if not fit_intercept:
        H_est = H_est.copy()
        H_est[-1, :] = H_est[:, -1] = 0.0
    factor = None
    for dtype in ((np.float32, np.float64) if order >= MIXED_PRECISION_ORDER else (np.float64,)):
        with blas_for_order(order):
            H = _newton_matrix(H_est, reg).astype(dtype, order="F", copy=False)
            try:
                factor = scipy.linalg.cho_factor(H, lower=False, overwrite_a=True, check_finite=False)
                break
            except np.linalg.LinAlgError:
                continue
    if factor is None:
        logger.warning("newton: the Hessian estimate does not factor; CG runs without a preconditioner")
        return None

    def apply(v: np.ndarray) -> np.ndarray:
        with blas_for_order(order):
            return scipy.linalg.cho_solve(factor, v.astype(factor[0].dtype), check_finite=False).astype(np.float64)

    return apply


def _preconditioning(op, hessian: str, hessian_estimate, resume: dict | None, reg: np.ndarray):
    """``(estimate, v ↦ P⁻¹ v)`` for CG: the Hessian estimate given, or on a resume the one the solve
    began with (its checkpoint keeps it); ``(None, None)`` for the Gram variant or without one."""
    if hessian != "cg":
        return None, None
    if resume is not None:
        kept = np.asarray(resume.get("H_loss", np.zeros(0)))
        hessian_estimate = kept if kept.size else None
    if hessian_estimate is None:
        return None, None
    estimate = np.asarray(hessian_estimate)  # float32 at a large order (the opening keeps it so): factored so
    return estimate, _factored_estimate(estimate, reg, op.fit_intercept)


# The fused pass evaluates a few step sizes; near the solution t = 1 is the
# rule.  Shorter steps are looked for in a second pass only when all fail.
_GRID = np.array([1.0, 0.5, 0.25, 0.1])
_FINE_GRID = BACKTRACK ** np.arange(4, MAX_BACKTRACKS + 1)


@dataclass(frozen=True)
class _Options:
    """What every iteration of one solve reads: the problem's size and method, its options and hooks."""

    dim: int
    hessian: str
    reg: np.ndarray  # the regularisation's diagonal: ones, with a zero for the bias
    cg_max_iter: int
    refresh_every: int
    gap_tol: float | None  # stop once the relative duality gap is at most this (None: the gradient rule only)
    label: str
    callback: Callable | None
    on_state: Callable | None
    tol: float = 0.0  # the stopping rule's relative gradient norm
    estimate: np.ndarray | None = None  # the Hessian estimate that preconditions CG (``hessian="cg"``)
    precondition: Callable | None = None  # v ↦ P⁻¹ v from it

    @property
    def use_gram(self) -> bool:
        return self.hessian == "gram"


@dataclass(frozen=True)
class _State:
    """Where a solve stands after iteration ``it`` (0 at its start): all the next iteration and a checkpoint need."""

    x: np.ndarray
    f: float
    g: np.ndarray
    H_loss: np.ndarray | None  # the loss part of the Newton matrix (``hessian="gram"`` only)
    g_ref: float
    it: int
    last_full: int  # the iteration whose pass computed H_loss in full
    prev_changed: int | None  # rows that entered or left the active set in the last step (None at the start)
    prev_active: int
    history: list[dict]
    last: Any  # the pass that gave f and g (None after a resume: the checkpoint holds no pass)


def _resumed(resume: dict, o: _Options) -> _State:
    """The state ``on_state`` was given, refused when it belongs to another problem."""
    if int(resume["dim"]) != o.dim or str(resume["hessian"]) != o.hessian:
        raise ValueError("the saved solver state belongs to a problem of another size or method")
    changed = int(resume["prev_changed"])
    s = _State(
        x=np.array(resume["x"], dtype=np.float64), f=float(resume["f"]), g=np.array(resume["g"], dtype=np.float64),
        H_loss=np.array(resume["H_loss"]) if o.use_gram else None, g_ref=float(resume["g_ref"]),
        it=int(resume["it"]), last_full=int(resume["last_full"]), prev_changed=None if changed < 0 else changed,
        prev_active=int(resume["prev_active"]), history=list(resume.get("history", [])), last=None,
    )
    logger.info("%snewton: resuming after iteration %d (obj=%.8e)", o.label, s.it, s.f)
    return s


def _opening(op, x: np.ndarray, initial, g_ref: float | None, o: _Options) -> _State:
    """The state at the starting point ``x``, from the pass ``initial`` when one was made elsewhere.

    The stopping rule's reference ``‖∇Φ(0)‖`` is ``g_ref`` when given, the
    gradient's norm at a start at zero, else a pass at zero.
    """
    if initial is not None and o.use_gram and initial.hess is None:
        raise ValueError("initial must hold the Gram matrix at x0 (a 'full' pass) for hessian='gram'")
    res = initial if initial is not None else op.evaluate(x, x, (), "full" if o.use_gram else "none")
    f = _objective(o.reg, x, res.loss)
    g = o.reg * x + res.grad
    if g_ref is not None:
        g_ref = float(g_ref)
    elif not np.any(x):
        g_ref = float(np.linalg.norm(g))
    else:
        zero = np.zeros(o.dim)
        g_ref = float(np.linalg.norm(op.evaluate(zero, zero, (), "none").grad))
    check_point(f, g, method="newton", it=0, label=o.label)
    check_point(0.0, np.array([g_ref]), method="newton", it=0, label=o.label)  # the gradient at zero
    check_matrix(res.hess, what="Gram matrix of the Newton system", method="newton", it=0, label=o.label)
    return _State(x=x, f=f, g=g, H_loss=res.hess, g_ref=max(g_ref, np.finfo(float).tiny), it=0, last_full=0,
                  prev_changed=None, prev_active=res.n_active, history=[], last=res)


def _small_gradient(s: _State, tol: float) -> bool:
    """The stopping rule ``‖∇Φ(x)‖ ≤ tol · ‖∇Φ(0)‖``."""
    return float(np.linalg.norm(s.g)) <= tol * s.g_ref


def _direction(op, s: _State, gnorm: float, o: _Options) -> tuple[np.ndarray, float, int]:
    """The Newton direction ``d``, ``gᵀd`` and the CG steps spent on it.

    CG solves only as tightly as the gradient is small (an inexact Newton
    forcing term).  A direction that does not descend (rounding in a nearly
    singular system) is replaced by steepest descent.
    """
    cg_steps = 0
    if o.use_gram:
        d = _solve_newton_system(s.H_loss, o.reg, -s.g)
    else:
        # on a fixed active set the gradient after a full step is CG's residual: no tighter than the
        # stopping rule needs (half its margin), however small sqrt(|g| / |g0|) has become
        forcing = min(0.5, max(np.sqrt(gnorm / s.g_ref), 0.5 * o.tol * s.g_ref / gnorm))
        cg = conjugate_gradient(lambda v: o.reg * v + op.hess_vec(s.x, v), -s.g, rtol=forcing,
                                max_iter=o.cg_max_iter, preconditioner=o.precondition)
        d, cg_steps = cg.x, cg.n_iter
    if not op.fit_intercept:
        d[-1] = 0.0
    gd = float(s.g @ d)
    if not np.isfinite(gd) or gd >= 0.0:
        d, gd = -s.g, -float(s.g @ s.g)
    return d, gd, cg_steps


def _gram_update(s: _State, it: int, o: _Options) -> str:
    """The Hessian the passes of iteration ``it`` compute: ``"full"``, ``"delta"`` or ``"none"`` (CG)."""
    if not o.use_gram:
        return "none"
    # Rows that enter or leave A cost as much as rows that stay would in a
    # full recomputation: update unless the last step changed more rows
    # than stayed active, and refresh regularly to bound rounding drift.
    full = it - s.last_full >= o.refresh_every or (s.prev_changed is not None and s.prev_changed >= s.prev_active)
    return "full" if full else "delta"


def _line_search(op, s: _State, d: np.ndarray, gd: float, mode: str, gnorm: float, it: int, o: _Options):
    """Armijo's step ``t`` along ``d``, the pass at ``x + t d`` (with the Hessian ``mode``) and that point.

    The steps of ``_GRID`` are judged in the pass at ``x + d``, those of
    ``_FINE_GRID`` in a second pass when all fail.  ``t`` is None when no
    step decreases Φ and the gradient at ``x + d`` does not say the step is good.
    """
    x_trial = s.x + d
    res = op.evaluate(s.x, x_trial, _GRID, mode)
    wx, wd = float((o.reg * s.x) @ d), float((o.reg * d) @ d)

    def armijo(ts, losses):
        phi = 0.5 * (o.reg * s.x) @ s.x + ts * wx + 0.5 * ts**2 * wd + losses
        return phi <= s.f + ARMIJO_SIGMA * ts * gd

    ok = armijo(_GRID, res.loss_grid)
    if ok[0]:
        return 1.0, res, x_trial
    if ok.any():
        t = float(_GRID[np.argmax(ok)])
    else:
        ok_fine = armijo(_FINE_GRID, op.evaluate(s.x, x_trial, _FINE_GRID, "none").loss_grid)
        if not ok_fine.any():
            return (1.0 if _rounding_hides_decrease(res, x_trial, gnorm, it, o) else None), res, x_trial
        t = float(_FINE_GRID[np.argmax(ok_fine)])
    x_trial = s.x + t * d
    return t, op.evaluate(s.x, x_trial, (), mode), x_trial


def _rounding_hides_decrease(res, x_trial: np.ndarray, gnorm: float, it: int, o: _Options) -> bool:
    """Whether the full step, which decreased Φ at no step size, is good all the same.

    Rounding can hide the decrease; the gradient at the trial point then shows
    it.  A loss that is NaN is an error, never "converged".
    """
    g_trial = o.reg * x_trial + res.grad
    check_point(res.loss, np.append(g_trial, res.loss_grid), method="newton", it=it, label=o.label, trial=True)
    return np.linalg.norm(g_trial) < 0.5 * gnorm


def _advanced(s: _State, res, x_trial: np.ndarray, mode: str, it: int, o: _Options) -> _State:
    """The state after iteration ``it`` stepped to ``x_trial``, whose pass is ``res`` (history not yet added)."""
    H_loss, last_full = s.H_loss, s.last_full
    if mode == "full":
        H_loss, last_full = res.hess, it
    elif mode == "delta":
        H_loss = H_loss + res.hess
    f = _objective(o.reg, x_trial, res.loss)
    g = o.reg * x_trial + res.grad
    check_point(f, g, method="newton", it=it, label=o.label)
    check_matrix(H_loss, what="Gram matrix of the Newton system", method="newton", it=it, label=o.label)
    return _State(x=x_trial, f=f, g=g, H_loss=H_loss, g_ref=s.g_ref, it=it, last_full=last_full,
                  prev_changed=res.n_changed, prev_active=res.n_active, history=s.history, last=res)


def _matrix_kept(s: _State, o: _Options) -> np.ndarray:
    """The matrix a checkpoint keeps: the Gram matrix (``"gram"``), or the Hessian estimate that
    preconditions CG, so that a resumed solve takes the same steps (empty where there is none)."""
    if o.use_gram:
        return s.H_loss
    return np.zeros(0) if o.estimate is None else o.estimate


def _checkpoint(s: _State, o: _Options) -> dict:
    """What ``on_state`` is given: numpy arrays and numbers from which ``_resumed`` continues."""
    return {
        "dim": o.dim, "hessian": o.hessian, "x": s.x, "f": s.f, "g": s.g, "g_ref": s.g_ref, "it": s.it,
        "last_full": s.last_full, "prev_changed": -1 if s.prev_changed is None else s.prev_changed,
        "prev_active": s.prev_active, "H_loss": _matrix_kept(s, o), "history": s.history,
    }


def _report(s: _State, info: dict, o: _Options) -> None:
    """Hand the finished iteration on: its checkpoint state, then its log line, then the callback."""
    if o.on_state is not None:
        o.on_state(_checkpoint(s, o))
    logger.info(
        "%snewton it=%d obj=%.8e |g|=%.3e gap=%.2e |A|=%d cg=%d t=%.3g H=%s %.3fs",
        o.label, s.it, s.f, info["grad_norm"], info["duality_gap"], info["n_active"], info["cg_steps"], info["step"],
        info["hessian_update"], info["seconds"],
    )
    if o.callback is not None:
        o.callback(s.it, s.x, info)


def _gap(op, f: float, res, x: np.ndarray) -> float:
    """The relative duality gap at ``x`` from its pass ``res`` (nan where the pass made no dual sums)."""
    bound = res.dual_bound(x, op.fit_intercept) if hasattr(res, "dual_bound") else float("nan")
    return relative_gap(f, bound)


def _iteration(op, s: _State, o: _Options) -> tuple[_State, str | None]:
    """One Newton iteration from ``s``: the state it reaches, and the stop reason when the solve ends there."""
    it, t_iter, passes_before = s.it + 1, time.perf_counter(), op.n_passes
    gnorm = float(np.linalg.norm(s.g))
    d, gd, cg_steps = _direction(op, s, gnorm, o)
    mode = _gram_update(s, it, o)
    t, res, x_trial = _line_search(op, s, d, gd, mode, gnorm, it, o)
    if t is None:
        logger.info("%snewton: line search found no decrease at |g|/|g0|=%.2e; stopping", o.label, gnorm / s.g_ref)
        return s, "precision"
    new = _advanced(s, res, x_trial, mode, it, o)
    info = {
        "iter": it,
        "objective": new.f,
        "grad_norm": float(np.linalg.norm(new.g)),
        "n_active": res.n_active,
        "cg_steps": cg_steps,
        "step": t,
        "hessian_update": mode,
        "duality_gap": _gap(op, new.f, res, x_trial),
        "seconds": time.perf_counter() - t_iter,
        "passes": op.n_passes - passes_before,
    }
    new = replace(new, history=[*s.history, info])
    _report(new, info, o)
    # The loss is quadratic on a fixed active set, so a full Newton step that
    # leaves the active set unchanged lands on the exact minimiser (finite
    # termination of the semismooth Newton method): nothing is left to gain.
    stable = mode != "none" and t == 1.0 and res.n_changed == 0
    if stable:
        return new, "active set stable"
    return new, "gap" if o.gap_tol is not None and info["duality_gap"] <= o.gap_tol else None


def _past_deadline(s: _State, deadline: float | None) -> bool:
    """Whether an iteration as long as the last one (or none yet) would end after ``deadline``."""
    if deadline is None:
        return False
    last = s.history[-1]["seconds"] if s.history else 0.0
    return time.perf_counter() + last > deadline


def semismooth_newton(
    op,
    dim: int,
    *,
    x0: np.ndarray | None = None,
    tol: float = 1e-4,
    max_iter: int = 100,
    hessian: str = "gram",
    cg_max_iter: int = 250,
    refresh_every: int = 10,
    callback=None,
    label: str = "",
    resume: dict | None = None,
    on_state=None,
    initial=None,
    g_ref: float | None = None,
    gap_tol: float | None = None,
    deadline: float | None = None,
    hessian_estimate: np.ndarray | None = None,
) -> SolverResult:
    """Minimise ``½‖w‖² + L(w, b)`` by the semismooth Newton method.

    Parameters
    ----------
    op : operator
        See the module docstring.
    dim : int
        Number of coordinates of ``x = (w, b)`` (features + 1).
    x0 : ndarray, optional
        Starting point (warm start); zeros by default.
    tol : float
        Relative gradient-norm tolerance.
    max_iter : int
        Maximum number of Newton iterations.
    hessian : {"gram", "cg"}
        How the Newton system is solved.
    cg_max_iter : int
        Cap on CG steps per Newton iteration.
    refresh_every : int
        Full recomputation of the Gram matrix at least this often.
    callback : callable, optional
        Called as ``callback(iteration, x, info_dict)`` after each iteration.
    label : str
        Prefix for log lines (e.g. the class being fitted).
    resume : dict, optional
        A state given earlier to ``on_state``: the solve continues from it
        exactly as if it had not been interrupted.
    on_state : callable, optional
        Called as ``on_state(state)`` after each iteration (before its log
        line) with everything needed to resume: a dict of numpy arrays and
        numbers (the checkpoint of :mod:`dsvm.svm._checkpoint`).
    initial : pass result, optional
        ``op.evaluate(x0, x0, (), "full")`` (``"none"`` for CG) made
        elsewhere, e.g. while the features were computed: the solve's first
        pass, which is then not made again.
    g_ref : float, optional
        ``‖∇Φ(0)‖``, the reference of the stopping rule, when known (else a
        start away from zero costs a pass at zero).
    gap_tol : float, optional
        Also stop (converged) once the relative duality gap of an iteration's
        point is at most this: a bound on the relative suboptimality.
    deadline : float, optional
        A ``time.perf_counter()`` value: no iteration begins that, taking as
        long as the last one, would end after it (stop reason ``"time_budget"``).
    hessian_estimate : ndarray, optional
        For ``hessian="cg"``: an estimate of the loss part of the Newton matrix
        (``dim x dim``, e.g. a row subsample's Gram matrix with its costs scaled
        to the whole problem's), factored once with the regularisation: every
        CG solve is preconditioned by it.  Ignored for ``hessian="gram"``.
    """
    if hessian not in ("gram", "cg"):
        raise ValueError(f"hessian must be 'gram' or 'cg', got {hessian!r}")
    if gap_tol is not None and (isinstance(gap_tol, bool) or not isinstance(gap_tol, numbers.Real)
                                or not 0.0 < gap_tol < 1.0):
        raise ValueError(f"solver_options gap_tol must be a number between 0 and 1, got {gap_tol!r}")
    start, passes0 = time.perf_counter(), op.n_passes
    reg = np.ones(dim)
    reg[-1] = 0.0
    x = np.zeros(dim) if x0 is None else np.asarray(x0, dtype=np.float64).copy()
    estimate, precondition = _preconditioning(op, hessian, hessian_estimate, resume, reg)
    o = _Options(dim, hessian, reg, cg_max_iter, refresh_every, None if gap_tol is None else float(gap_tol), label,
                 callback, on_state, tol, estimate, precondition)
    s = _resumed(resume, o) if resume is not None else _opening(op, x, initial, g_ref, o)
    # An iteration ends the solve with a reason ("precision", "active set stable"); else the
    # stopping rule or the iteration limit does.
    reason = None
    while reason is None and s.it < max_iter and not _small_gradient(s, tol):
        if _past_deadline(s, deadline):
            reason = "time_budget"
            break
        s, reason = _iteration(op, s, o)
    if reason is None:
        reason = "tol" if _small_gradient(s, tol) else "max_iter"
    return SolverResult(
        x=s.x,
        objective=s.f,
        n_iter=s.it,
        converged=reason in ("tol", "active set stable", "gap"),
        grad_norm=float(np.linalg.norm(s.g)),
        grad_norm0=s.g_ref,
        n_passes=op.n_passes - passes0,
        seconds=time.perf_counter() - start,
        method=f"newton-{hessian}",
        stop_reason=reason,
        history=s.history,
        duality_gap=float("nan") if s.last is None else _gap(op, s.f, s.last, s.x),
        last_pass=None if s.last is None else replace(s.last, hess=s.H_loss, loss_grid=np.zeros(0), n_changed=0),
    )
