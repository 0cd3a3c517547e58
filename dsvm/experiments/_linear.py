"""The linear problem of Table 3: the L2-loss SVM on one in-memory Nyström feature matrix, and every
solver timed on it "at equal objective" (down a tolerance ladder until within ``REACH_RTOL`` of ``Φ*``).

LA-SN and dsvm's TRON run through :func:`dsvm.solvers.solve` as the
estimators do; LIBLINEAR's DCD and TRON (scikit-learn's ``LinearSVC``) are the
anchors they are compared with.
"""

from __future__ import annotations

import logging
import time
import warnings

import numpy as np
from sklearn.exceptions import ConvergenceWarning
from sklearn.svm import LinearSVC

from ..blocks import as_row_blocks
from ..problems import SquaredHingeOperator
from ..solvers import SUBSAMPLE_TOL, SolverResult, Start, resolve_hessian, solve
from ..svm import block_rows_for, encode_labels, warm_start_problem

logger = logging.getLogger(__name__)

__all__ = ["TOL_LADDER", "NEWTON_LADDER", "REACH_RTOL", "SOLVERS", "LinearProblem", "optimum", "run_solver",
           "time_to_objective"]

TOL_LADDER = (1e-1, 1e-2, 1e-3, 1e-4, 1e-5, 1e-6)
NEWTON_LADDER = (1e-4, 1e-5, 1e-6, 1e-8)  # LA-SN at its default tol; tighter only if that misses Φ*
REACH_RTOL = 1e-4
SOLVERS = ("LA-SN", "LA-DCD", "LA-TRON", "dsvm-TRON")


class LinearProblem:
    """The L2-loss linear SVM on one in-memory Nyström feature matrix.

    ``F`` is kept in float32 for dsvm's solvers (as :class:`~dsvm.NystroemSVC`
    keeps it) and in float64 for LIBLINEAR and for evaluating objectives.
    ``single_core=True`` keeps it in one row block, so dsvm's solvers run on
    one thread like LIBLINEAR (with BLAS limited to one thread); otherwise in
    NystroemSVC's blocks, which run in parallel threads.
    """

    def __init__(self, F: np.ndarray, y_pm: np.ndarray, C: float, single_core: bool = True):
        self.F = np.ascontiguousarray(F, dtype=np.float32)
        self._F64 = None
        self.y = np.asarray(y_pm, dtype=np.float64)
        self.C = float(C)
        self.dim = self.F.shape[1] + 1
        # one block: one thread (with BLAS limited to one thread), as LIBLINEAR;
        # else NystroemSVC's layout, whose blocks run in parallel threads
        n = self.F.shape[0]
        block_rows = n if single_core else block_rows_for(self.F.shape[1], self.F.dtype)
        self.features = as_row_blocks(self.F, block_rows, min_blocks=1 if single_core else None)
        self._blocks64 = None
        _, self._codes = encode_labels(self.y, self.features)

    @property
    def F64(self) -> np.ndarray:
        """``F`` in float64 (made on first use: only LIBLINEAR and objectives need it)."""
        if self._F64 is None:
            self._F64 = self.F.astype(np.float64)
        return self._F64

    def objective(self, w: np.ndarray, b: float) -> float:
        """dsvm's objective ``½‖w‖² + C Σ max(0, 1 − y (F w + b))²`` in float64."""
        r = np.maximum(0.0, 1.0 - self.y * (self.F64 @ w + b))
        return 0.5 * float(w @ w) + self.C * float(r @ r)

    def operator(self, float64: bool = False):
        """The problem as a squared-hinge operator on the float32 (or float64) features."""
        if not float64:
            return SquaredHingeOperator(self.features, self._codes, 1, np.array([self.C, self.C]))
        if self._blocks64 is None:
            self._blocks64 = as_row_blocks(self.F64, max(1024, self.features.chunks[0]), min_blocks=1)
            self._codes64 = encode_labels(self.y, self._blocks64)[1]
        return SquaredHingeOperator(self._blocks64, self._codes64, 1, np.array([self.C, self.C]))

    def hessian(self) -> str:
        """The Newton system's method ``NystroemSVC`` would choose for this problem."""
        return resolve_hessian("auto", self.F.shape[0], self.dim, False)

    def subsample_operator(self):
        """The subsample problem ``NystroemSVC`` warm-starts its Newton solve from (same rows,
        same scaled costs, copied out), or None where it would not (:func:`dsvm.svm.warm_start_problem`)."""
        problem = warm_start_problem(self.features, [self._codes, None], hessian=self.hessian())
        if problem is None:
            return None
        F, (codes, weights) = problem
        return SquaredHingeOperator(F, codes, 1, np.array([self.C, self.C]), weights)


def solve_from_subsample(op, sub_op, dim: int, *, tol: float, max_iter: int, hessian: str) -> SolverResult:
    """The Newton solve of ``op`` from the loose solution of ``sub_op`` (the same problem on a row subsample,
    :meth:`LinearProblem.subsample_operator`), as a fit opens; from zero when ``sub_op`` is None.  The
    result's ``n_passes`` and ``seconds`` include the subsample's (its passes read ``m`` rows each)."""
    if sub_op is None:
        return solve("newton", op, dim, tol=tol, max_iter=max_iter, hessian=hessian)
    warm = solve("newton", sub_op, dim, tol=max(tol, SUBSAMPLE_TOL), max_iter=30, hessian=hessian, label="[subsample] ")
    res = solve("newton", op, dim, tol=tol, max_iter=max_iter, hessian=hessian, start=Start(x0=warm.x))
    res.n_passes += warm.n_passes
    res.seconds += warm.seconds
    return res


def optimum(problem: LinearProblem, tol: float = 1e-9) -> float:
    """``Φ*``: the objective of a tight semismooth Newton solve on float64 features."""
    res = solve("newton", problem.operator(float64=True), problem.dim, tol=tol, max_iter=200, hessian="gram")
    return problem.objective(res.x[:-1], res.x[-1])


def run_solver(problem: LinearProblem, solver: str, tol: float, max_iter: int | None = None) -> dict:
    """One timed solve: ``{"seconds", "w", "b", "objective", "n_iter", "converged"}``.

    Only the solve is timed (the features exist already).
    """
    if solver == "LA-SN":
        # as NystroemSVC solves: from the subsample's solution where its "auto" warm start applies
        op, sub_op = problem.operator(), problem.subsample_operator()
        t0 = time.perf_counter()
        res = solve_from_subsample(op, sub_op, problem.dim, tol=tol, max_iter=max_iter or 100, hessian=problem.hessian())
        seconds = time.perf_counter() - t0
        w, b, n_iter, converged = res.x[:-1], float(res.x[-1]), res.n_iter, res.converged
    elif solver == "dsvm-TRON":
        op = problem.operator()
        t0 = time.perf_counter()
        res = solve("tron", op, problem.dim, tol=tol, max_iter=max_iter or 1000)
        seconds = time.perf_counter() - t0
        w, b, n_iter, converged = res.x[:-1], float(res.x[-1]), res.n_iter, res.converged
    elif solver in ("LA-DCD", "LA-TRON"):
        model = LinearSVC(C=problem.C, loss="squared_hinge", dual=solver == "LA-DCD", tol=tol,
                          intercept_scaling=1.0, max_iter=max_iter or 100_000)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always", ConvergenceWarning)
            t0 = time.perf_counter()
            model.fit(problem.F64, problem.y)
            seconds = time.perf_counter() - t0
        converged = not any(issubclass(c.category, ConvergenceWarning) for c in caught)
        w, b, n_iter = model.coef_[0].copy(), float(model.intercept_[0]), int(np.max(model.n_iter_))
    else:
        raise ValueError(f"unknown solver {solver!r}; choose one of {SOLVERS}")
    return {"seconds": seconds, "w": w, "b": b, "objective": problem.objective(w, b), "n_iter": int(n_iter),
            "converged": bool(converged)}


def time_to_objective(
    problem: LinearProblem,
    solver: str,
    target: float,
    *,
    ladder: tuple[float, ...] = TOL_LADDER,
    start: int = 0,
    budget_s: float = 120.0,
    rtol: float = REACH_RTOL,
) -> dict:
    """Run ``solver`` down the tolerance ladder until its objective is within ``rtol`` of ``target``.

    The time of the first run that gets there counts (not the runs before
    it).  A run is not started when the ones so far plus the last one's time
    would exceed ``budget_s``; the iteration limit of LIBLINEAR's runs is set
    from its measured iteration rate so that no single run takes much longer
    than the budget left.  Returns the last run's figures with ``reached``,
    ``tol``, ``ladder_index``, ``rel_gap`` and the list of ``tried`` runs.
    """
    spent, last, tried = 0.0, None, []
    rate = None  # LIBLINEAR iterations per second, from the previous run
    for i in range(start, len(ladder)):
        tol = ladder[i]
        max_iter = None
        if solver in ("LA-DCD", "LA-TRON") and rate is not None:
            max_iter = max(10, int(rate * max(budget_s - spent, 1.0)))
        run = run_solver(problem, solver, tol, max_iter)
        spent += run["seconds"]
        gap = (run["objective"] - target) / abs(target)
        reached = gap <= rtol
        tried.append({"tol": tol, "seconds": run["seconds"], "rel_gap": gap, "n_iter": run["n_iter"],
                      "converged": run["converged"]})
        last = {**run, "tol": tol, "ladder_index": i, "rel_gap": gap, "reached": reached}
        logger.info("%s tol=%g: %.3fs, objective gap %.2e%s", solver, tol, run["seconds"], gap,
                    "" if reached else " (not reached)")
        if reached:
            break
        if run["n_iter"] > 0 and run["seconds"] > 0:
            rate = run["n_iter"] / run["seconds"]
        if spent + run["seconds"] > budget_s:
            break
    last["tried"] = tried
    last["spent_seconds"] = spent
    return last
