"""Solvers on k-vectors.  Pure numpy: they see an operator's methods (:mod:`dsvm.solvers._contract`),
never Dask.  Every caller goes through :func:`solve` (the registry of :mod:`dsvm.solvers._registry`)."""

from ._minibatch_pegasos import pegasos_progress
from ._newton import GRAM_MAX_DIM, MIXED_PRECISION_ORDER, SUBSAMPLE_TOL, choose_hessian, semismooth_newton
from ._registry import REGISTRY, Start, resolve_hessian, solve
from ._result import SolverResult

__all__ = [
    "solve", "Start", "REGISTRY", "resolve_hessian", "choose_hessian", "SolverResult", "SUBSAMPLE_TOL", "MIXED_PRECISION_ORDER", "GRAM_MAX_DIM", "pegasos_progress",
    "semismooth_newton",
]
