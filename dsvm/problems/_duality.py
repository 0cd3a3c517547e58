"""The duality gap of an L2-loss problem: a certificate of how far a point is from the optimum.

The primal is ``P(w, b) = ½‖w‖² + Σ ℓ_i(m_i)`` with margins ``m_i = f_iᵀw + b``
and ``ℓ_i(m) = c_i ρ_i(m)²`` (squared hinge ``ρ = (1 − y m)₊``, or the
squared ε-insensitive ``ρ = (|m − y| − ε)₊``).  Its Fenchel dual, over one
variable per row, is

    D(α) = Σ (−ℓ_i*(−α_i)) − ½‖Σ α_i f_i‖²,   subject to Σ α_i = 0 (the free bias),

and on an active row ``−ℓ_i*(−α_i) = |α_i| ξ_i + α_i m_i − α_i²/(4 c_i)``
read at the point whose residual ``ξ_i`` and margin ``m_i`` gave ``α_i``
(the conjugate is linear in the row's constant, ``ξ_i + σ_i m_i``).  The
primal point gives the dual candidate ``α_i = −ℓ_i'(m_i) = 2 c_i σ_i ξ_i``
(optimal at the optimum), for which every sum ``D`` needs is a sum a Newton
pass already makes: the loss gradient ``−Σ α_i [f_i 1]`` and the same over
the rows of positive ``α`` (``pos_grad``), ``Σ α_i m_i``, and the loss and
``Σ α_i m_i`` of those rows (``dual_sums``).

The candidate breaks ``Σ α_i = 0`` away from the optimum, so its two sign
groups are scaled, ``α⁺ → t α⁺``, ``α⁻ → t ρ α⁻`` with ``ρ`` restoring the
constraint; ``D`` is then a concave quadratic in ``t``, maximised in closed
form.  Any such ``α`` is feasible, so ``D(α) ≤ P* ≤ P(x)``: the gap
``P(x) − D(α)`` bounds the suboptimality, and it reaches 0 at the optimum
(where ``t = ρ = 1``).  Without an intercept there is no constraint and
both groups take the same ``t``.  No extra pass is made.
"""

from __future__ import annotations

import numpy as np

__all__ = ["dual_bound"]


def _best_scale(a: float, q: float) -> float:
    """``max_{t ≥ 0} t a − t² q``: ``a² / (4 q)`` (0 when ``a ≤ 0``)."""
    if not a > 0.0 or not q > 0.0:
        return 0.0
    return a * a / (4.0 * q)


def dual_bound(x: np.ndarray, loss: float, grad: np.ndarray, pos_grad: np.ndarray, dual_sums: np.ndarray,
               fit_intercept: bool) -> float:
    """A lower bound on the problem's optimum from the sums of one pass at ``x`` (module docstring).

    ``grad`` and ``pos_grad`` are loss gradients ``(Σ g_i f_i, Σ g_i)`` over all rows and over the rows of
    ``g_i < 0`` (positive dual variable), in the features' coordinates; ``dual_sums`` is
    ``(Σ α_i m_i, loss of those rows, Σ α_i m_i over them)``.
    """
    alpha_m, loss_pos, alpha_m_pos = (float(v) for v in dual_sums)
    u, u_pos = -np.asarray(grad[:-1], dtype=np.float64), -np.asarray(pos_grad[:-1], dtype=np.float64)
    u_neg = u - u_pos
    # the conjugates' linear parts of each group, Σ |α| ξ = 2 · its loss
    e_pos, e_neg = 2.0 * loss_pos + alpha_m_pos, 2.0 * (loss - loss_pos) + (alpha_m - alpha_m_pos)
    if not fit_intercept:
        return _best_scale(e_pos + e_neg, loss + 0.5 * float(u @ u))
    a_pos = -float(pos_grad[-1])  # Σ α over the positive group
    a_neg = a_pos + float(grad[-1])  # |Σ α| over the negative group (Σ α = −grad_b)
    if not (a_pos > 0.0 and a_neg > 0.0):
        return 0.0  # only α = 0 keeps Σ α = 0 within this family
    rho = a_pos / a_neg
    v = u_pos + rho * u_neg
    return _best_scale(e_pos + rho * e_neg, loss_pos + rho * rho * (loss - loss_pos) + 0.5 * float(v @ v))
