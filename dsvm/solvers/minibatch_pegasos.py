"""Mini-batch Pegasos on Nyström features (hinge loss), streaming over row blocks.

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
order (a sequential chain of tasks on a cluster; see
:meth:`dsvm.blockwise.RowBlocks.fold`).
"""

from __future__ import annotations

import logging
import time

import numpy as np

from .newton import SolverResult

logger = logging.getLogger(__name__)


def pegasos_block(F, codes, sample_weight, state, params):
    """Run the Pegasos steps of one block; returns the updated state dict."""
    from ..losses import labels_pm1, row_costs

    w, b, t = state["w"].copy(), float(state["b"]), int(state["t"])
    lam, C, batch = params["lam"], params["C"], params["batch_size"]
    y = labels_pm1(codes, params["positive"])
    weight = row_costs(codes, sample_weight, params["class_cost"]) / C
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


def pegasos(op, dim: int, *, C: float, n_epochs: int = 5, batch_size: int = 64, random_state: int | None = 0,
            label: str = "") -> SolverResult:
    """Pegasos on a :class:`~dsvm.operator.SquaredHingeOperator`'s features and labels."""
    start = time.perf_counter()
    passes0 = op.n_passes
    F, (codes, sw) = op.features, op.aligned
    n = F.n_rows
    class_cost = op.fixed_params["class_cost"]
    params = {
        "lam": 1.0 / (C * n), "C": float(C), "batch_size": int(batch_size), "positive": op.fixed_params["positive"],
        "class_cost": class_cost, "max_weight": float(np.max(class_cost) / C), "seed": 0 if random_state is None else int(random_state),
        "fit_intercept": bool(op.fit_intercept),
    }
    if sw is not None:
        params["max_weight"] *= float(sw.map_reduce(_max_block, combine=max))
    rng = np.random.default_rng(params["seed"])
    state = {"w": np.zeros(dim - 1), "b": 0.0, "t": 0}
    history = []
    for epoch in range(1, n_epochs + 1):
        t0 = time.perf_counter()
        state = F.fold(pegasos_block, state, aligned=(codes, sw), shared=(params,), order=rng.permutation(F.n_blocks))
        op.n_passes += 1
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


def _max_block(v):
    return float(np.max(v)) if len(v) else 0.0
