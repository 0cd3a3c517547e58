"""Per-block pieces of the L2-loss (squared hinge) SVM objective — pure numpy.

The primal problem over ``x = (w, b)``::

    Φ(x) = ½‖w‖² + Σ_i c_i max(0, 1 − y_i (f_iᵀ w + b))²

with per-row costs ``c_i = C · class_weight[y_i] · sample_weight_i``.  Every
function below sees one block of feature rows ``F`` (float32 or float64) and
returns quantities that are *sums over rows*, so the results of all blocks are
simply added (see :func:`dsvm.blockwise.tree_sum`).  Vectors ``x`` are float64
with the bias last; ``A = {i : y_i (f_iᵀ w + b) < 1}`` is the active set.

Products ``Fᵀ v`` are taken over slabs of :data:`SLAB_ROWS` rows whose float32
partial sums are accumulated in float64, so that the gradient keeps about
float64-slab accuracy without ever copying ``F`` to float64.
"""

from __future__ import annotations

import numpy as np

SLAB_ROWS = 8192


def labels_pm1(codes: np.ndarray, positive: int) -> np.ndarray:
    """±1 labels for the one-vs-rest problem of class code ``positive``."""
    return np.where(codes == positive, 1.0, -1.0)


def row_costs(codes: np.ndarray, sample_weight: np.ndarray | None, class_cost: np.ndarray) -> np.ndarray:
    """``c_i = class_cost[code_i] * sample_weight_i`` (``class_cost`` already includes C)."""
    c = class_cost[codes]
    if sample_weight is not None:
        c = c * sample_weight
    return c


def margins(F: np.ndarray, x: np.ndarray) -> np.ndarray:
    """``F w + b`` in float64 (the GEMV runs in F's dtype)."""
    w = x[:-1].astype(F.dtype, copy=False)
    return (F @ w).astype(np.float64) + x[-1]


def tdot(F: np.ndarray, v: np.ndarray) -> np.ndarray:
    """``Fᵀ v`` accumulated in float64 over row slabs (v float64, length n)."""
    n = F.shape[0]
    out = np.zeros(F.shape[1], dtype=np.float64)
    vv = v.astype(F.dtype, copy=False)
    for s in range(0, n, SLAB_ROWS):
        out += F[s : s + SLAB_ROWS].T @ vv[s : s + SLAB_ROWS]
    return out


def _augmented_gram(F: np.ndarray, rows: np.ndarray, c: np.ndarray) -> np.ndarray:
    """``[F 1]_Rᵀ diag(c_R) [F 1]_R`` in float64, shape (r+1, r+1)."""
    r = F.shape[1]
    G = np.zeros((r + 1, r + 1), dtype=np.float64)
    if not np.any(rows):
        return G
    sc = np.sqrt(c[rows])
    S = F[rows]
    S *= sc[:, None].astype(F.dtype)
    G[:r, :r] = S.T @ S  # numpy dispatches Sᵀ S to SYRK
    G[:r, r] = G[r, :r] = tdot(S, sc)
    G[r, r] = float(np.sum(c[rows]))
    return G


def _grad_loss(F: np.ndarray, y: np.ndarray, c: np.ndarray, r: np.ndarray) -> np.ndarray:
    """Gradient of Σ c r² with r = max(0, 1 − y m): −2 [Fᵀ(c y r); Σ c y r]."""
    s = c * y * r
    return -2.0 * np.concatenate([tdot(F, s), [np.sum(s)]])


def sqhinge_pass(F, codes, sample_weight, params):
    """One fused pass over a block for the semismooth Newton method.

    ``params`` (a dict, shared by all blocks):

    ``x0``, ``x1``
        current point and trial point (float64, bias last);
    ``t_grid``
        step sizes ``t`` at which to evaluate the loss on the segment
        ``x0 + t (x1 − x0)`` (for a batched Armijo line search);
    ``hessian``
        ``"none"``, ``"full"`` (``[F 1]_Aᵀ C [F 1]_A`` at ``x1``) or ``"delta"``
        (the change of that matrix from the active set at ``x0`` to the one at
        ``x1``);
    ``positive``, ``class_cost``
        the one-vs-rest positive class code and the per-class costs.

    Returns a dict of additive quantities, all evaluated at ``x1`` except
    ``loss_grid``.
    """
    x0, x1 = params["x0"], params["x1"]
    y = labels_pm1(codes, params["positive"])
    c = row_costs(codes, sample_weight, params["class_cost"])
    z1 = y * margins(F, x1)
    t_grid = np.asarray(params.get("t_grid", ()), dtype=np.float64)
    hessian = params.get("hessian", "none")
    need_z0 = t_grid.size > 0 or hessian == "delta"
    z0 = y * margins(F, x0) if need_z0 else None

    active = z1 < 1.0
    r1 = np.where(active, 1.0 - z1, 0.0)
    out = {
        "loss": float(np.dot(c, r1 * r1)),
        "grad": _grad_loss(F, y, c, r1),
        "n_active": int(active.sum()),
        "n_changed": 0,
        "loss_grid": np.zeros(t_grid.size),
        "hess": None,
    }
    if t_grid.size:
        dz = z1 - z0
        R = 1.0 - z0[:, None] - dz[:, None] * t_grid[None, :]
        np.maximum(R, 0.0, out=R)
        out["loss_grid"] = c @ (R * R)
    if hessian == "full":
        out["hess"] = _augmented_gram(F, active, c)
    elif hessian == "delta":
        before = z0 < 1.0
        plus = active & ~before
        minus = before & ~active
        out["n_changed"] = int(plus.sum() + minus.sum())
        out["hess"] = _augmented_gram(F, plus, c) - _augmented_gram(F, minus, c)
    return out


def sqhinge_hvp(F, codes, sample_weight, params):
    """``[F 1]_Aᵀ C [F 1]_A V`` for the active set at ``params["x"]``.

    ``params["V"]`` has shape (r+1,) or (r+1, m) (several vectors at once).
    """
    x, V = params["x"], params["V"]
    y = labels_pm1(codes, params["positive"])
    c = row_costs(codes, sample_weight, params["class_cost"])
    active = (y * margins(F, x)) < 1.0
    weights = np.where(active, c, 0.0)
    V2 = V[:, None] if V.ndim == 1 else V
    out = np.empty_like(V2, dtype=np.float64)
    for j in range(V2.shape[1]):
        u = margins(F, V2[:, j]) * weights
        out[:-1, j] = tdot(F, u)
        out[-1, j] = np.sum(u)
    return out[:, 0] if V.ndim == 1 else out


def sqhinge_objective_dense(F: np.ndarray, y: np.ndarray, c: np.ndarray, w: np.ndarray, b: float) -> float:
    """Reference primal objective in float64 (dense, for tests and reports)."""
    m = np.asarray(F, dtype=np.float64) @ np.asarray(w, dtype=np.float64) + b
    r = np.maximum(0.0, 1.0 - y * m)
    return 0.5 * float(np.dot(w, w)) + float(np.dot(c, r * r))
