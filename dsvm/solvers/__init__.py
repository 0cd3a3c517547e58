"""Solvers on k-vectors.  Pure numpy: they see an operator's methods (:mod:`dsvm.solvers.contract`),
never Dask.  Every caller goes through :func:`solve` (the registry of :mod:`dsvm.solvers.registry`)."""

from .cg import CGResult, conjugate_gradient
from .contract import ClassificationContract, OperatorContract
from .dcd import dual_coordinate_descent
from .finite import NonFiniteError
from .minibatch_pegasos import minibatch_pegasos, minibatch_pegasos_step, pegasos_progress
from .newton import SUBSAMPLE_TOL, choose_hessian, newton_from_subsample, semismooth_newton
from .registry import REGISTRY, SolverSpec, resolve_hessian, solve
from .result import SolverResult
from .tron import trust_region_newton

__all__ = [
    "solve", "REGISTRY", "SolverSpec", "resolve_hessian", "choose_hessian", "SolverResult",
    "OperatorContract", "ClassificationContract",
    "CGResult", "conjugate_gradient", "semismooth_newton", "newton_from_subsample", "SUBSAMPLE_TOL",
    "trust_region_newton", "dual_coordinate_descent", "minibatch_pegasos", "minibatch_pegasos_step",
    "pegasos_progress", "NonFiniteError",
]
