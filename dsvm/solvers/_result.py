"""What every solver returns."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

__all__ = ["SolverResult", "relative_gap"]


@dataclass
class SolverResult:
    """What a solver returns (plain numpy / Python values)."""

    x: np.ndarray
    objective: float
    n_iter: int
    converged: bool
    grad_norm: float
    grad_norm0: float
    n_passes: int
    seconds: float
    method: str
    stop_reason: str
    history: list[dict] = field(default_factory=list)
    #: Newton's last pass at ``x`` (loss, gradient, active rows and, with ``hessian="gram"``, the Gram matrix
    #: there): the opening (:class:`~dsvm.solvers.Start` ``initial``) of a solve that continues from ``x``;
    #: None for the other solvers and for a resumed solve that made no pass
    last_pass: Any = None
    #: ``(P(x) − D) / P(x)`` for a dual point ``D`` bounds the optimum from below
    #: (:mod:`dsvm.problems._duality`): an upper bound on the relative suboptimality; nan where none
    duality_gap: float = float("nan")


def relative_gap(primal: float, dual: float) -> float:
    """``(P − D) / |P|``, never below 0 (rounding can put the bound a hair above ``P`` at the optimum); nan
    where either is not finite."""
    if not np.isfinite(primal) or not np.isfinite(dual):
        return float("nan")
    return max(0.0, primal - dual) / max(abs(primal), np.finfo(float).tiny)
