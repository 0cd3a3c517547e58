"""Conjugate gradient on k-vectors; it only sees a Hessian-vector product callable."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np


@dataclass
class CGResult:
    x: np.ndarray
    n_iter: int
    residual_norm: float
    converged: bool


def conjugate_gradient(
    hvp: Callable[[np.ndarray], np.ndarray],
    b: np.ndarray,
    *,
    rtol: float = 1e-2,
    max_iter: int = 200,
    preconditioner: np.ndarray | None = None,
) -> CGResult:
    """Solve ``H x = b`` for symmetric positive (semi)definite ``H`` given as ``hvp``.

    Stops when ``‖H x − b‖ ≤ rtol ‖b‖`` (an inexact Newton forcing term) or
    after ``max_iter`` products.  ``preconditioner`` is an optional diagonal
    (the inverse is applied).
    """
    b = np.asarray(b, dtype=np.float64)
    x = np.zeros_like(b)
    r = b.copy()
    bnorm = float(np.linalg.norm(b))
    if bnorm == 0.0:
        return CGResult(x, 0, 0.0, True)
    inv_m = None if preconditioner is None else 1.0 / preconditioner
    z = r if inv_m is None else inv_m * r
    p = z.copy()
    rz = float(r @ z)
    it = 0
    rnorm = bnorm
    while it < max_iter:
        Hp = hvp(p)
        it += 1
        pHp = float(p @ Hp)
        if pHp <= 0.0:
            break  # direction of zero curvature: stop with what we have
        alpha = rz / pHp
        x += alpha * p
        r -= alpha * Hp
        rnorm = float(np.linalg.norm(r))
        if rnorm <= rtol * bnorm:
            return CGResult(x, it, rnorm, True)
        z = r if inv_m is None else inv_m * r
        rz_new = float(r @ z)
        p = z + (rz_new / rz) * p
        rz = rz_new
    return CGResult(x, it, rnorm, rnorm <= rtol * bnorm)
