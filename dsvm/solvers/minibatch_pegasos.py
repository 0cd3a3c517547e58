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
"""

from __future__ import annotations

import logging
import time

import numpy as np

from .result import SolverResult

logger = logging.getLogger(__name__)


def minibatch_pegasos_step(F, y, c, state, params):
    """Run the Pegasos steps of one block (features ``F``, labels ``y`` in ±1, row costs ``c``);
    returns the updated state dict."""
    w, b, t = state["w"].copy(), float(state["b"]), int(state["t"])
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
    return {"w": w, "b": b, "t": t}


def minibatch_pegasos(op, dim: int, *, C: float, epochs: int = 10, batch_size: int = 64,
                      random_state: int | None = 0, label: str = "") -> SolverResult:
    """Mini-batch Pegasos on a classification operator (``op.fold``, ``op.hinge_objective``): ``epochs``
    passes over the rows, each visiting the blocks in a seeded random order."""
    start = time.perf_counter()
    passes0 = op.n_passes
    n = op.n_rows
    class_cost = op.class_cost
    params = {
        "lam": 1.0 / (C * n), "C": float(C), "batch_size": int(batch_size),
        "max_weight": float(np.max(class_cost) / C) * op.max_sample_weight(),
        "seed": 0 if random_state is None else int(random_state), "fit_intercept": bool(op.fit_intercept),
    }
    rng = np.random.default_rng(params["seed"])
    state = {"w": np.zeros(dim - 1), "b": 0.0, "t": 0}
    history = []
    for epoch in range(1, epochs + 1):
        t0 = time.perf_counter()
        state = op.fold(minibatch_pegasos_step, state, params, order=rng.permutation(op.n_blocks))
        x = np.concatenate([state["w"], [state["b"] if op.fit_intercept else 0.0]])
        obj = op.hinge_objective(x)
        history.append({"iter": epoch, "objective": obj, "steps": state["t"], "seconds": time.perf_counter() - t0})
        logger.info("%spegasos epoch=%d steps=%d hinge objective=%.8e %.3fs", label, epoch, state["t"], obj,
                    history[-1]["seconds"])
    x = np.concatenate([state["w"], [state["b"] if op.fit_intercept else 0.0]])
    return SolverResult(
        x=x, objective=history[-1]["objective"], n_iter=int(state["t"]), converged=True, grad_norm=float("nan"),
        grad_norm0=float("nan"), n_passes=op.n_passes - passes0, seconds=time.perf_counter() - start,
        method="pegasos", stop_reason="epochs", history=history,
    )
