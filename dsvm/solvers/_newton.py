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

import dataclasses
import logging
import time

import numpy as np
import scipy.linalg

from ..blas import blas_for_order
from ._cg import conjugate_gradient
from ._finite import check_matrix, check_point
from ._result import SolverResult

logger = logging.getLogger(__name__)

ARMIJO_SIGMA = 1e-4
BACKTRACK = 0.5
MAX_BACKTRACKS = 20
SUBSAMPLE_TOL = 1e-2  # a warm start needs the active set roughly right, not a tight optimum


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
    if dim > 8192:
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


def semismooth_newton(  # noqa: C901
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
    """
    if hessian not in ("gram", "cg"):
        raise ValueError(f"hessian must be 'gram' or 'cg', got {hessian!r}")
    start = time.perf_counter()
    reg = np.ones(dim)
    reg[-1] = 0.0
    x = np.zeros(dim) if x0 is None else np.asarray(x0, dtype=np.float64).copy()
    use_gram = hessian == "gram"
    passes0 = op.n_passes

    history: list[dict] = []
    # The fused pass evaluates a few step sizes; near the solution t = 1 is the
    # rule.  Shorter steps are looked for in a second pass only when all fail.
    grid = np.array([1.0, 0.5, 0.25, 0.1])
    fine_grid = BACKTRACK ** np.arange(4, MAX_BACKTRACKS + 1)
    if resume is not None:
        if int(resume["dim"]) != dim or str(resume["hessian"]) != hessian:
            raise ValueError("the saved solver state belongs to a problem of another size or method")
        x, f, g = np.array(resume["x"], dtype=np.float64), float(resume["f"]), np.array(resume["g"], dtype=np.float64)
        H_loss = np.array(resume["H_loss"]) if use_gram else None
        g_ref, last_full = float(resume["g_ref"]), int(resume["last_full"])
        prev_changed = None if int(resume["prev_changed"]) < 0 else int(resume["prev_changed"])
        prev_active, first_it = int(resume["prev_active"]), int(resume["it"]) + 1
        history = list(resume.get("history", []))
        logger.info("%snewton: resuming after iteration %d (obj=%.8e)", label, first_it - 1, f)
        last = None  # the state holds no pass result
    else:
        if initial is not None and use_gram and initial.hess is None:
            raise ValueError("initial must hold the Gram matrix at x0 (a 'full' pass) for hessian='gram'")
        res = initial if initial is not None else op.evaluate(x, x, (), "full" if use_gram else "none")
        H_loss = res.hess
        last = res
        f = _objective(reg, x, res.loss)
        g = reg * x + res.grad
        if g_ref is not None:
            g_ref = float(g_ref)
        elif x0 is None or not np.any(x):
            g_ref = float(np.linalg.norm(g))
        else:
            zero = np.zeros(dim)
            g_ref = float(np.linalg.norm(op.evaluate(zero, zero, (), "none").grad))
        check_point(f, g, method="newton", it=0, label=label)
        check_point(0.0, np.array([g_ref]), method="newton", it=0, label=label)  # the gradient at zero
        check_matrix(H_loss, what="Gram matrix of the Newton system", method="newton", it=0, label=label)
        g_ref = max(g_ref, np.finfo(float).tiny)
        last_full = 0
        prev_changed, prev_active = None, res.n_active
        first_it = 1
    converged, stop_reason, it = False, "max_iter", first_it - 1

    for it in range(first_it, max_iter + 1):
        t_iter, passes_before = time.perf_counter(), op.n_passes
        gnorm = float(np.linalg.norm(g))
        if gnorm <= tol * g_ref:
            converged, stop_reason, it = True, "tol", it - 1
            break
        cg_steps = 0
        if use_gram:
            d = _solve_newton_system(H_loss, reg, -g)
        else:
            forcing = min(0.5, np.sqrt(gnorm / g_ref))
            cg = conjugate_gradient(
                lambda v: reg * v + op.hess_vec(x, v), -g, rtol=forcing, max_iter=cg_max_iter,  # noqa: B023
                preconditioner=None,
            )
            d, cg_steps = cg.x, cg.n_iter
        if not op.fit_intercept:
            d[-1] = 0.0
        gd = float(g @ d)
        if not np.isfinite(gd) or gd >= 0.0:
            d, gd = -g, -float(g @ g)

        if use_gram:
            # Rows that enter or leave A cost as much as rows that stay would in a
            # full recomputation: update unless the last step changed more rows
            # than stayed active, and refresh regularly to bound rounding drift.
            full = it - last_full >= refresh_every or (prev_changed is not None and prev_changed >= prev_active)
            mode = "full" if full else "delta"
        else:
            mode = "none"
        x_trial = x + d
        res1 = op.evaluate(x, x_trial, grid, mode)
        wx, wd = float((reg * x) @ d), float((reg * d) @ d)

        def armijo(ts, losses):
            phi = 0.5 * (reg * x) @ x + ts * wx + 0.5 * ts**2 * wd + losses  # noqa: B023
            return phi <= f + ARMIJO_SIGMA * ts * gd  # noqa: B023

        ok = armijo(grid, res1.loss_grid)
        t = None
        if ok[0]:
            t = 1.0
        elif ok.any():
            t = float(grid[np.argmax(ok)])
        else:
            ok_fine = armijo(fine_grid, op.evaluate(x, x_trial, fine_grid, "none").loss_grid)
            if ok_fine.any():
                t = float(fine_grid[np.argmax(ok_fine)])
        if t is not None and t != 1.0:
            x_trial = x + t * d
            res1 = op.evaluate(x, x_trial, (), mode)
        elif t is None:
            g_trial = reg * x_trial + res1.grad
            # no step decreased Φ: rounding (stop below), or a loss that is NaN (an error, never "converged")
            check_point(res1.loss, np.append(g_trial, res1.loss_grid), method="newton", it=it, label=label,
                        trial=True)
            if np.linalg.norm(g_trial) < 0.5 * gnorm:
                t = 1.0  # rounding noise hides the decrease; the gradient says the step is good
            else:
                stop_reason = "precision"
                it -= 1
                logger.info("%snewton: line search found no decrease at |g|/|g0|=%.2e; stopping", label, gnorm / g_ref)
                break
        if use_gram:
            if mode == "full":
                H_loss, last_full = res1.hess, it
            else:
                H_loss = H_loss + res1.hess
        prev_changed, prev_active, last = res1.n_changed, res1.n_active, res1
        stable = t == 1.0 and res1.n_changed == 0 and mode != "none"
        x = x_trial
        f = _objective(reg, x, res1.loss)
        g = reg * x + res1.grad
        check_point(f, g, method="newton", it=it, label=label)
        check_matrix(H_loss, what="Gram matrix of the Newton system", method="newton", it=it, label=label)
        info = {
            "iter": it,
            "objective": f,
            "grad_norm": float(np.linalg.norm(g)),
            "n_active": res1.n_active,
            "cg_steps": cg_steps,
            "step": t,
            "hessian_update": mode,
            "seconds": time.perf_counter() - t_iter,
            "passes": op.n_passes - passes_before,
        }
        history.append(info)
        if on_state is not None:
            on_state({
                "dim": dim, "hessian": hessian, "x": x, "f": f, "g": g, "g_ref": g_ref, "it": it,
                "last_full": last_full, "prev_changed": -1 if prev_changed is None else prev_changed,
                "prev_active": prev_active, "H_loss": H_loss if use_gram else np.zeros(0), "history": history,
            })
        logger.info(
            "%snewton it=%d obj=%.8e |g|=%.3e |A|=%d cg=%d t=%.3g H=%s %.3fs",
            label, it, f, info["grad_norm"], res1.n_active, cg_steps, t, mode, info["seconds"],
        )
        if callback is not None:
            callback(it, x, info)
        if stable and use_gram:
            # The loss is quadratic on a fixed active set, so a full Newton step that
            # leaves the active set unchanged lands on the exact minimiser (finite
            # termination of the semismooth Newton method): nothing is left to gain.
            converged, stop_reason = True, "active set stable"
            break
    else:
        gnorm = float(np.linalg.norm(g))
        if gnorm <= tol * g_ref:
            converged, stop_reason = True, "tol"

    return SolverResult(
        x=x,
        objective=f,
        n_iter=it,
        converged=converged,
        grad_norm=float(np.linalg.norm(g)),
        grad_norm0=g_ref,
        n_passes=op.n_passes - passes0,
        seconds=time.perf_counter() - start,
        method=f"newton-{hessian}",
        stop_reason=stop_reason,
        history=history,
        last_pass=None if last is None else dataclasses.replace(last, hess=H_loss, loss_grid=np.zeros(0), n_changed=0),
    )


def newton_from_subsample(op, sub_op, dim: int, *, tol: float = 1e-4, max_iter: int = 100, hessian: str = "gram",
                          x0: np.ndarray | None = None, label: str = "", **options) -> SolverResult:
    """:func:`semismooth_newton` on ``op``, first solved loosely on ``sub_op`` when given.

    ``sub_op`` is the same problem on a row subsample with its costs scaled
    by ``n / m`` (so that its loss estimates the full one).  From zero every
    row is active and the first Gram matrix covers all ``n`` rows; from the
    subsample's solution it covers only the rows active there, close to the
    final active set, and the full solve needs fewer iterations.  The result's
    ``n_passes`` and ``seconds`` include the subsample's (its passes read
    ``m`` rows each).
    """
    if sub_op is None:
        return semismooth_newton(op, dim, x0=x0, tol=tol, max_iter=max_iter, hessian=hessian, label=label, **options)
    solver_options = {k: v for k, v in options.items()
                      if k not in ("resume", "on_state", "callback", "initial", "g_ref")}
    warm = semismooth_newton(sub_op, dim, x0=x0, tol=max(tol, SUBSAMPLE_TOL), max_iter=30, hessian=hessian,
                             label=label + "[subsample] ", **solver_options)
    res = semismooth_newton(op, dim, x0=warm.x, tol=tol, max_iter=max_iter, hessian=hessian, label=label, **options)
    res.n_passes += warm.n_passes
    res.seconds += warm.seconds
    return res
