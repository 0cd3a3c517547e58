"""What every solver returns."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

__all__ = ["SolverResult"]


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
