"""The one solver dispatch: every caller (estimators, calibration, CV search, experiments) solves through
:func:`solve`, and the ``"auto"`` choice of the Newton system's method is :func:`resolve_hessian`."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..options import HESSIANS, SOLVERS
from ._dcd import dual_coordinate_descent
from ._finite import check_result
from ._minibatch_pegasos import minibatch_pegasos
from ._newton import choose_hessian, semismooth_newton
from ._result import SolverResult, relative_gap
from ._tron import trust_region_newton

__all__ = ["SolverSpec", "Start", "SolveRequest", "REGISTRY", "resolve_hessian", "solve"]


@dataclass(frozen=True)
class SolverSpec:
    """What dsvm knows about one solver.

    Attributes
    ----------
    name : str
    options : frozenset of str
        The ``solver_options`` keys the solver takes.
    defaults : mapping
        Defaults of those options where the solver function's own differ (the estimators' defaults).
    takes_start : bool
        A starting point ``x0`` is used (Newton, TRON); the others start from zero.
    resumable : bool
        ``resume`` / ``on_state`` are supported (checkpoints).
    seeded : bool
        ``random_state`` is used (DCD's coordinate order, Pegasos' visiting order).
    min_max_iter : int
        The least iteration limit the solver runs with (DCD: LIBLINEAR's epochs).
    loss : str
        What the reported ``objective`` is: the squared hinge, or the hinge (Pegasos).
    classification_only : bool
        Needs the classification part of the operator contract (``gather`` / ``fold``).
    """

    name: str
    run: Callable[[Any, int, SolveRequest], SolverResult] = field(repr=False)
    options: frozenset[str]
    defaults: Mapping[str, Any] = field(default_factory=dict)
    takes_start: bool = False
    resumable: bool = False
    seeded: bool = False
    min_max_iter: int = 0
    loss: str = "squared_hinge"
    classification_only: bool = False


@dataclass(frozen=True)
class Start:
    """Where a solve begins, and the hooks through which a fit's Newton state flows in and out.

    Every field is optional; a solver reads the ones it uses (``REGISTRY[name].takes_start`` and
    ``resumable`` say which) and the others start from zero.

    Attributes
    ----------
    x0 : ndarray, optional
        Starting point (Newton, TRON).
    resume : dict, optional
        Newton: a saved state to continue from (checkpoints).
    on_state : callable, optional
        Newton: receives the state after each iteration (checkpoints).
    initial, g_ref : PassResult, float, optional
        Newton: the pass at ``x0`` and ``‖∇Φ(0)‖`` made elsewhere (with the features, or by a C path),
        so the solve does not make them again.
    deadline : float, optional
        Newton: a ``time.perf_counter()`` value it does not begin an iteration expected to end after
        (the estimators' ``time_budget``).
    hessian_estimate : ndarray, optional
        Newton with ``hessian="cg"``: an estimate of the loss part of the Newton matrix near ``x0``
        (a row subsample's Gram matrix, its costs scaled to the full problem's), factored once and
        used to precondition every CG solve.
    """

    x0: np.ndarray | None = None
    resume: dict | None = None
    on_state: Callable | None = None
    initial: Any = None
    g_ref: float | None = None
    deadline: float | None = None
    hessian_estimate: np.ndarray | None = None


@dataclass(frozen=True)
class SolveRequest:
    """What :func:`solve` hands every solver: the stopping rule, the start, and the solver's own options."""

    tol: float
    max_iter: int
    hessian: str
    start: Start
    C: float | None
    random_state: int | None
    label: str
    options: Mapping[str, Any]


def _newton(op, dim, req: SolveRequest) -> SolverResult:
    s = req.start
    return semismooth_newton(op, dim, x0=s.x0, tol=req.tol, max_iter=req.max_iter, hessian=req.hessian, label=req.label,
                             resume=s.resume, on_state=s.on_state, initial=s.initial, g_ref=s.g_ref,
                             deadline=s.deadline, hessian_estimate=s.hessian_estimate, **req.options)


def _tron(op, dim, req: SolveRequest) -> SolverResult:
    return trust_region_newton(op, dim, x0=req.start.x0, tol=req.tol, max_iter=req.max_iter, label=req.label,
                               **req.options)


def _dcd(op, dim, req: SolveRequest) -> SolverResult:
    return dual_coordinate_descent(op, dim, tol=req.tol, max_iter=req.max_iter, label=req.label,
                                   random_state=req.random_state, **req.options)


def _pegasos(op, dim, req: SolveRequest) -> SolverResult:
    if req.C is None:
        raise ValueError("solver='pegasos' needs C (its step size is 1 / (λ t) with λ = 1 / (C n))")
    return minibatch_pegasos(op, dim, C=req.C, random_state=req.random_state, label=req.label, **req.options)


REGISTRY: dict[str, SolverSpec] = {
    "newton": SolverSpec("newton", _newton, frozenset({"cg_max_iter", "refresh_every", "gap_tol"}), takes_start=True,
                         resumable=True),
    "tron": SolverSpec("tron", _tron, frozenset({"cg_max_iter", "cg_rtol"}), takes_start=True),
    "dcd": SolverSpec("dcd", _dcd, frozenset({"intercept_scaling"}), seeded=True, min_max_iter=1000,
                      classification_only=True),
    "pegasos": SolverSpec("pegasos", _pegasos, frozenset({"epochs", "batch_size", "progress_tol"}),
                          {"batch_size": 64}, seeded=True, loss="hinge", classification_only=True),
}
if tuple(REGISTRY) != SOLVERS:  # pragma: no cover - a solver added to one list only
    raise RuntimeError(f"dsvm.solvers.REGISTRY {tuple(REGISTRY)} != dsvm.options.SOLVERS {SOLVERS}")


def resolve_hessian(hessian: str, n_rows: int, dim: int, distributed: bool) -> str:
    """The Newton system's method: ``"gram"`` or ``"cg"`` as asked, or chosen by
    :func:`~dsvm.solvers.choose_hessian` for ``"auto"``."""
    if hessian == "auto":
        return choose_hessian(n_rows, dim, distributed)
    if hessian in ("gram", "cg"):
        return hessian
    raise ValueError(f"hessian={hessian!r} is not supported; choose one of {HESSIANS}")


def solve(name: str, op, dim: int, *, tol: float, max_iter: int, hessian: str = "auto", start: Start | None = None,
          C: float | None = None, random_state: int | None = None, label: str = "",
          options: Mapping[str, Any] | None = None) -> SolverResult:
    """Solve one problem with the named solver — the only solver dispatch in dsvm.

    Parameters
    ----------
    name : {"newton", "tron", "dcd", "pegasos"}
    op : operator
        The problem (:mod:`dsvm.solvers._contract`).
    dim : int
        Coordinates of ``x = (w, b)`` (features + 1).
    tol, max_iter : float, int
        Stopping rule (DCD runs at least ``REGISTRY["dcd"].min_max_iter`` epochs).
    hessian : {"auto", "gram", "cg"}
        Newton only: how its system is solved (``"auto"``: :func:`resolve_hessian`).
    start : Start, optional
        Where the solve begins and Newton's hooks (starting point, checkpoint state in and out, the
        opening pass and ``‖∇Φ(0)‖`` made elsewhere); default: from zero.
    C : float, optional
        Pegasos only: the cost (its step sizes depend on it).
    random_state : int, optional
        Seed of the seeded solvers.
    label : str
        Prefix of log lines.
    options : mapping, optional
        The solver's own options (``REGISTRY[name].options``).

    Raises
    ------
    ValueError
        An unknown solver or option, naming the allowed ones.
    NonFiniteError
        The objective, gradient or solution became NaN or infinite (never returned as a result).
    """
    if name not in REGISTRY:
        raise ValueError(f"solver={name!r} is not supported; choose one of {tuple(REGISTRY)}")
    spec = REGISTRY[name]
    options = dict(options or {})
    unknown = set(options) - spec.options
    if unknown:
        raise ValueError(f"solver_options {sorted(unknown)} do not apply to solver={name!r}; "
                         f"it takes {sorted(spec.options)}")
    if name == "newton":
        hessian = resolve_hessian(hessian, op.n_rows, dim, op.is_distributed) if hessian == "auto" else hessian
    request = SolveRequest(tol=tol, max_iter=max(max_iter, spec.min_max_iter), hessian=hessian,
                           start=start or Start(), C=C, random_state=random_state, label=label,
                           options={**spec.defaults, **options})
    res = spec.run(op, dim, request)
    check_result(res.x, res.objective, method=res.method, label=label)
    if name in ("newton", "tron") and np.isnan(res.duality_gap):
        res.duality_gap = _certificate(op, res)
    return res


def _certificate(op, res: SolverResult) -> float:
    """The relative duality gap at the solution: from a pass the solve made there, else from one more pass
    (a solve resumed at its end); nan for an operator that bounds nothing."""
    if not hasattr(op, "dual_bound"):
        return float("nan")
    bound = op.dual_bound(res.x)
    if bound is None:
        bound = op.evaluate(res.x, res.x).dual_bound(res.x, op.fit_intercept)
    return relative_gap(res.objective, bound)
