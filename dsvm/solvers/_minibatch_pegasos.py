"""Mini-batch Pegasos on Nyström features (hinge loss), streaming over row blocks.

(The solver ``solver="pegasos"`` of the Nyström estimators; kernelized
Pegasos on the exact kernel is the estimator :class:`dsvm.PegasosSVC`.)

Shalev-Shwartz, Singer, Srebro & Cotter, "Pegasos: primal estimated
sub-gradient solver for SVM" (Math. Programming 2011), for

    min_{w, b}  ½‖w‖² + Σ_i c_i max(0, 1 − y_i (f_iᵀ w + b))

i.e. ``λ = 1 / (C n)`` with per-row weights ``c_i / C``.  Step ``t`` takes a
mini-batch ``A_t``, sets ``η_t = 1 / (λ t)`` and

    w ← (1 − η_t λ) w + η_t / |A_t| Σ_{i ∈ A_t, margin < 1} (c_i / C) y_i f_i,

then projects ``w`` onto the ball of radius ``sqrt(max_i(c_i / C) / λ)``.  The
bias (with ``fit_intercept``; else it stays 0) is an unregularised coordinate
moved by the same sub-gradient step.
Epochs visit the blocks in a random order and the rows of a block in a random
order (a sequential chain of tasks on a cluster): the operator's ``fold``
hands each block's features, ±1 labels and row costs to the step function.

What it is for.  Pegasos minimises the hinge (L1) loss itself, where the
other solvers minimise the squared hinge, and it holds one row block and
one ``k``-vector at a time, so it streams data and features of any size,
with any ``k``.  Its price is the sublinear rate: hundreds of passes where
semismooth Newton needs 10–20 (each Newton pass also returns the ``k x k``
Gram update), and an answer accurate to a few digits at best.  Use Newton
(the default) whenever its ``(k+1) x (k+1)`` systems fit, i.e. ``k`` up to a
few thousand; Pegasos when the hinge loss is wanted or ``k`` is beyond that.

What is returned is the weighted average of the iterates, ``x̄_t = (1 − ρ_t)
x̄_{t−1} + ρ_t x_t`` with ``ρ_t = 2 / (t + 1)`` (weights proportional to
``t``; Lacoste-Julien, Schmidt & Bach 2012): with ``1/(λ t)`` steps the last
iterate swings far around the optimum while the average converges at the
``O(1/(λ T))`` rate and its objective falls steadily, which makes the
stopping test below meaningful.

When to stop.  The step-size scale is ``1/λ = C n`` steps: before that the
steps are longer than one and the iterate is still dominated by them.  The
default budget is ``1/λ`` steps, i.e. ``C · batch_size`` epochs (at least
:data:`MIN_EPOCHS`, at most :data:`MAX_EPOCHS`).  After each epoch one more
pass evaluates the hinge objective of the average; the solve has converged
when that objective fell by less than ``progress_tol`` per epoch, relative,
over the last :data:`WINDOW` epochs (and did not rise).  A budget used up
before that returns ``converged=False``; the estimator then warns.  The
test is relative, so it stops at the same point of the objective's decay
whatever the scale of ``C`` (measurements in the documentation's performance
page).
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Sequence

import numpy as np

from ._result import SolverResult

logger = logging.getLogger(__name__)

MIN_EPOCHS = 20
MAX_EPOCHS = 1000
WINDOW = 5  # epochs over which the objective's progress is measured
PROGRESS_TOL = 1e-3


def default_epochs(C: float, batch_size: int) -> int:
    """The epoch budget for ``1/λ = C n`` steps of ``batch_size`` rows: ``C · batch_size`` epochs,
    clipped to ``[MIN_EPOCHS, MAX_EPOCHS]``."""
    return int(min(MAX_EPOCHS, max(MIN_EPOCHS, math.ceil(C * batch_size))))


def minibatch_pegasos_step(F, y, c, state, params):
    """Run the Pegasos steps of one block (features ``F``, labels ``y`` in ±1, row costs ``c``);
    returns the updated state dict."""
    w, b, t = state["w"].copy(), float(state["b"]), int(state["t"])
    w_avg, b_avg = state["w_avg"].copy(), float(state["b_avg"])
    lam, C, batch = params["lam"], params["C"], params["batch_size"]
    weight = c / C
    radius = np.sqrt(params["max_weight"] / lam)
    rng = np.random.default_rng([params["seed"], int(state["t"])])
    order = rng.permutation(F.shape[0])
    for start in range(0, order.size, batch):
        idx = order[start : start + batch]
        t += 1
        eta = 1.0 / (lam * t)
        Fb = F[idx]
        m = (Fb @ w.astype(F.dtype)).astype(np.float64) + b
        viol = y[idx] * m < 1.0
        w *= 1.0 - eta * lam
        if viol.any():
            s = (weight[idx] * y[idx])[viol]
            w += (eta / idx.size) * (Fb[viol].T.astype(np.float64) @ s)
            if params["fit_intercept"]:
                b += (eta / idx.size) * float(s.sum())
        norm = np.linalg.norm(w)
        if norm > radius:
            w *= radius / norm
        rho = 2.0 / (t + 1)
        w_avg += rho * (w - w_avg)
        b_avg += rho * (b - b_avg)
    return {"w": w, "b": b, "t": t, "w_avg": w_avg, "b_avg": b_avg}


def pegasos_progress(objectives: Sequence[float]) -> float:
    """How much the hinge objective fell per epoch, relative to its last value, over the last
    ``WINDOW`` epochs (fewer when fewer ran); NaN before the second epoch."""
    window = min(len(objectives) - 1, WINDOW)
    if window < 1:
        return float("nan")
    before, now = objectives[-1 - window], objectives[-1]
    return (before - now) / max(abs(now), np.finfo(float).tiny) / window


def _progress_stalled(objectives: list[float], tol: float) -> bool:
    """The objective fell by at most ``tol`` per epoch (relative) over the last ``WINDOW`` epochs, and did not rise."""
    return len(objectives) > WINDOW and 0.0 <= pegasos_progress(objectives) <= tol


def minibatch_pegasos(op, dim: int, *, C: float, epochs: int | None = None, batch_size: int = 64,
                      progress_tol: float = PROGRESS_TOL, random_state: int | None = 0,
                      label: str = "") -> SolverResult:
    """Mini-batch Pegasos on a classification operator (``op.fold``, ``op.hinge_objective``).

    Each epoch is one pass over the rows, visiting the blocks in a seeded
    random order, and one more pass for the hinge objective of the averaged
    iterate.

    Parameters
    ----------
    op : ClassificationContract
        The problem (:mod:`dsvm.solvers._contract`).
    dim : int
        Features + 1 (the bias).
    C : float
        Cost of the hinge loss (``λ = 1 / (C n)``).
    epochs : int or None
        Epoch budget; ``None``: :func:`default_epochs`.
    batch_size : int
        Rows per step.
    progress_tol : float
        Converged when the hinge objective of the averaged iterate fell by less
        than this per epoch (relative) over the last ``WINDOW`` epochs.
    random_state : int or None
        Seed of the visiting order.
    label : str
        Prefix for log lines.

    Returns
    -------
    SolverResult
        ``stop_reason`` is ``"progress"`` (converged) or ``"epochs"`` (the
        budget ran out first: ``converged=False``).
    """
    start = time.perf_counter()
    passes0 = op.n_passes
    n = op.n_rows
    budget = default_epochs(C, batch_size) if epochs is None else epochs
    for name, value in (("epochs", budget), ("batch_size", batch_size)):
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
            raise ValueError(f"solver_options {name} must be a positive integer, got {value!r}")
    if not (isinstance(progress_tol, (int, float)) and progress_tol > 0):
        raise ValueError(f"solver_options progress_tol must be a positive number, got {progress_tol!r}")
    class_cost = op.class_cost
    params = {
        "lam": 1.0 / (C * n), "C": float(C), "batch_size": int(batch_size),
        "max_weight": float(np.max(class_cost) / C) * op.max_sample_weight(),
        "seed": 0 if random_state is None else int(random_state), "fit_intercept": bool(op.fit_intercept),
    }
    rng = np.random.default_rng(params["seed"])
    state = {"w": np.zeros(dim - 1), "b": 0.0, "t": 0, "w_avg": np.zeros(dim - 1), "b_avg": 0.0}
    history: list[dict] = []
    objectives: list[float] = []
    converged = False
    for epoch in range(1, budget + 1):
        t0 = time.perf_counter()
        state = op.fold(minibatch_pegasos_step, state, params, order=rng.permutation(op.n_blocks))
        obj = op.hinge_objective(_point(state, op.fit_intercept))
        objectives.append(obj)
        history.append({"iter": epoch, "objective": obj, "steps": state["t"], "seconds": time.perf_counter() - t0})
        logger.info("%spegasos epoch=%d steps=%d hinge objective=%.8e %.3fs", label, epoch, state["t"], obj,
                    history[-1]["seconds"])
        if _progress_stalled(objectives, progress_tol):
            converged = True
            break
    return SolverResult(
        x=_point(state, op.fit_intercept), objective=objectives[-1] if objectives else float("nan"),
        n_iter=int(state["t"]), converged=converged, grad_norm=float("nan"), grad_norm0=float("nan"),
        n_passes=op.n_passes - passes0, seconds=time.perf_counter() - start, method="pegasos",
        stop_reason="progress" if converged else "epochs", history=history,
    )


def _point(state: dict, fit_intercept: bool) -> np.ndarray:
    """``(w̄, b̄)``: the averaged iterate (bias 0 without an intercept)."""
    return np.concatenate([state["w_avg"], [state["b_avg"] if fit_intercept else 0.0]])
