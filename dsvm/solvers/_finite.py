"""What a solver does with NaN or infinity: it stops with :class:`~dsvm.exceptions.NonFiniteError`, naming the
quantity, the iteration and what to change, instead of "converging" on it or returning it as a model.

A trial point whose loss overflows is only a rejected step (the line search or the trust region shrinks
it); the point a solver stands on, its objective, gradient and Newton matrix, must be finite.
"""

from __future__ import annotations

import numpy as np

from ..checks import all_finite
from ..exceptions import NonFiniteError

__all__ = ["NonFiniteError", "check_point", "check_matrix", "check_result"]

#: what a user can change when a solver's numbers overflow
REMEDY = ("the loss overflows float64: lower C (or the sample and class weights), scale the features "
          "(scale='standard'), and for regression the targets; float32 features overflow first in the Newton "
          "matrix (dtype='float64')")


def check_point(f: float, g: np.ndarray, *, method: str, it: int, label: str = "", trial: bool = False) -> None:
    """Refuse a non-finite objective ``f`` or gradient ``g`` at the point a solver stands on after ``it``
    iterations (0: its start), or with ``trial`` at the trial point of iteration ``it`` that the line search
    could not use.  A trial point is refused only for NaN: an overflow there is a rejected step."""
    if trial:
        if not (np.isnan(f) or np.isnan(g).any()):
            return
    elif np.isfinite(f) and all_finite(g):
        return
    what = "objective" if not np.isfinite(f) else "gradient"
    where = (f"at the trial point of iteration {it}" if trial else "at its starting point" if it == 0
             else f"after iteration {it}")
    raise NonFiniteError(f"{label}{method}: the {what} is not finite {where} (objective {f:.3g}); {REMEDY}")


def check_matrix(H: np.ndarray | None, *, what: str, method: str, it: int, label: str = "") -> None:
    """Refuse a non-finite matrix ``what`` (the Newton system's Gram matrix) built at iteration ``it``."""
    if H is None or all_finite(H):
        return
    raise NonFiniteError(f"{label}{method}: the {what} holds NaN or infinity at iteration {it}; {REMEDY}")


def check_result(x: np.ndarray, objective: float, *, method: str, label: str = "") -> None:
    """Refuse a solution or objective that is not finite (the last guard of :func:`dsvm.solvers.solve`)."""
    if all_finite(x) and np.isfinite(objective):
        return
    what = "objective" if all_finite(x) else "solution"
    raise NonFiniteError(f"{label}{method}: the {what} is not finite; {REMEDY}")
