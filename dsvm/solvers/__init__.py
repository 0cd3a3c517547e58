"""Solvers on k-vectors.  Pure numpy: they see operators' callables, never Dask."""

from .cg import CGResult, conjugate_gradient
from .newton import SolverResult, choose_hessian, newton_from_subsample, semismooth_newton

__all__ = ["CGResult", "conjugate_gradient", "SolverResult", "choose_hessian", "newton_from_subsample", "semismooth_newton"]
