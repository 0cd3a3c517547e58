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
    preconditioner: np.ndarray | Callable[[np.ndarray], np.ndarray] | None = None,
) -> CGResult:
    """Solve ``H x = b`` for symmetric positive (semi)definite ``H`` given as ``hvp``.

    Stops when ``‖H x − b‖ ≤ rtol ‖b‖`` (an inexact Newton forcing term) or
    after ``max_iter`` products.  ``preconditioner`` is optional: a diagonal
    (its inverse is applied) or a callable applying the inverse of a
    symmetric positive definite approximation of ``H`` to a vector.
    """
    b = np.asarray(b, dtype=np.float64)
    x = np.zeros_like(b)
    r = b.copy()
    bnorm = float(np.linalg.norm(b))
    if bnorm == 0.0:
        return CGResult(x, 0, 0.0, True)
    apply = _inverse(preconditioner)
    z = apply(r)
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
        z = apply(r)
        rz_new = float(r @ z)
        p = z + (rz_new / rz) * p
        rz = rz_new
    return CGResult(x, it, rnorm, rnorm <= rtol * bnorm)


def _inverse(preconditioner) -> Callable[[np.ndarray], np.ndarray]:
    """``v ↦ P⁻¹ v`` for a preconditioner given as a diagonal, a callable or None (the identity)."""
    if preconditioner is None:
        return lambda v: v
    if callable(preconditioner):
        return preconditioner
    inv_m = 1.0 / np.asarray(preconditioner, dtype=np.float64)
    return lambda v: inv_m * v
