"""What a solver may call on the problem it solves: the operator contract.

The solvers are pure numpy on k-vectors; they never import the problems or
the row blocks.  An operator (:mod:`dsvm.problems._operators`, or a wrapper
such as the CV search's cached operator) provides these methods; a solver
uses no other.  Every method that reads the rows adds one to ``n_passes``.

=====================  ========================================================
solver                 uses
=====================  ========================================================
semismooth Newton      ``evaluate`` (+ ``hess_vec`` for ``hessian="cg"``)
TRON                   ``evaluate``, ``hess_vec``
DCD                    ``gather``
minibatch Pegasos      ``fold``, ``hinge_objective``, ``class_cost``, ``max_sample_weight``
=====================  ========================================================

All of them read ``n_passes`` and ``fit_intercept``; :func:`dsvm.solvers.solve`
reads ``n_rows`` and ``is_distributed`` to choose the Newton system's method.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Protocol

import numpy as np

__all__ = ["OperatorContract", "ClassificationContract"]


class OperatorContract(Protocol):
    """One L2-loss problem over row blocks, as a solver sees it."""

    n_passes: int
    fit_intercept: bool

    @property
    def n_rows(self) -> int: ...

    @property
    def n_blocks(self) -> int: ...

    @property
    def is_distributed(self) -> bool: ...

    def evaluate(self, x0: np.ndarray, x1: np.ndarray, t_grid: Sequence[float] = (), hessian: str = "none"):
        """One pass: loss, gradient, active-set size and changes at ``x1``, the loss along ``x0 → x1``
        at ``t_grid`` and the generalized Hessian (``"full"``), its change from ``x0`` (``"delta"``) or
        none; returns an object with ``loss, grad, n_active, n_changed, loss_grid, hess``."""
        ...

    def hess_vec(self, x: np.ndarray, v: np.ndarray) -> np.ndarray:
        """The generalized Hessian of the loss at ``x`` times ``v`` (one pass)."""
        ...


class ClassificationContract(OperatorContract, Protocol):
    """A binary squared-hinge problem: what the classification-only solvers need besides."""

    @property
    def class_cost(self) -> np.ndarray:
        """``C · class_weight`` per class code."""
        ...

    def gather(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(F, y in ±1, c)`` in this process (MemoryError when F will not fit)."""
        ...

    def fold(self, step: Callable, state: Any, params: Any, order: Sequence[int] | None = None) -> Any:
        """``state = step(F_i, y_i, c_i, state, params)`` block by block, in ``order``."""
        ...

    def hinge_objective(self, x: np.ndarray) -> float:
        """``½‖w‖² + Σ c_i max(0, 1 − y_i m_i)`` at ``x``."""
        ...

    def max_sample_weight(self) -> float:
        """The largest sample weight (1.0 without sample weights)."""
        ...
