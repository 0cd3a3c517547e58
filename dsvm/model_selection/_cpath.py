"""The C-path engine of the CV search: every fold and every ``C`` of one ``(gamma, k)``, warm-started.

Per fold the ``C`` values are solved in increasing order, each from the
previous solution; with the Newton method there the loss, gradient and Gram
matrix are the previous solve's last pass times ``C_new / C_old``
(:class:`PathPoint`), handed to the solver as its opening
(:class:`dsvm.solvers.Start`, the warm start every Newton fit uses), so the
next solve opens without a pass over the data.  The other folds start
from the first fold's solution, their opening Gram matrices obtained from the
first fold's by exchanging the rows of the two held-out folds
(:meth:`dsvm.problems.PassResult.exchanged`).  A larger nested ``k`` starts
from the smaller one's solution mapped into its feature space
(:func:`map_to_larger_k`); the refit from the fold models' mean
(:func:`refit_start`).
"""

from __future__ import annotations

import logging
import threading
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..approx import landmark_weights
from ..blocks import RowBlocks
from ..problems import SquaredHingeOperator
from ..solvers import Start, resolve_hessian
from ..svm import solve_with
from ._folds import MAX_SPLITS_PER_WORD, cv_confusion_block

logger = logging.getLogger(__name__)

__all__ = ["PathPoint", "PairResult", "cv_pair", "merge_stats", "landmark_coefs",
           "map_to_larger_k", "record_functions", "refit_start"]


@dataclass(frozen=True)
class PathPoint:
    """Where one problem's C path stands: the solution ``x`` at cost ``C`` and what the Newton solver knew there.

    ``at_x`` is the solver's last pass at ``x`` with its Gram matrix (None where
    there is none: CG, another solver, a fresh start) and ``g0_per_cost`` is
    ``‖∇Φ(0)‖ / C``.  On fixed rows loss, gradient and Gram matrix are linear in
    the cost, so a solve at another ``C`` opens from these without a pass over
    the data — exact, not an approximation.  Frozen: fold threads share points.
    """

    x: np.ndarray | None
    C: float
    at_x: Any = None
    g0_per_cost: float | None = None

    def start(self, C: float) -> Start:
        """The solver's :class:`~dsvm.solvers.Start` for a solve at cost ``C`` from this point."""
        ratio = C / self.C
        return Start(x0=self.x, initial=None if self.at_x is None else self.at_x.scaled(ratio),
                     g_ref=None if self.g0_per_cost is None else self.g0_per_cost * C)

    def objective_and_relative_gradient(self, C: float, reg: np.ndarray) -> tuple[float, float]:
        """``(Φ(x), ‖∇Φ(x)‖ / ‖∇Φ(0)‖)`` at cost ``C`` from the known pass (needs ``at_x`` and ``g0_per_cost``)."""
        ratio = C / self.C
        f = 0.5 * float(self.x[:-1] @ self.x[:-1]) + self.at_x.loss * ratio
        g = np.linalg.norm(reg * self.x + self.at_x.grad * ratio)
        return f, float(g / (self.g0_per_cost * C))


def _point_after(res, C: float, keep_pass: bool = True) -> PathPoint:
    """The path point a solve at cost ``C`` ends at (with ``keep_pass``, the Newton solver's last pass where it
    holds a Gram matrix, and its gradient at zero)."""
    last = res.last_pass if keep_pass else None
    return PathPoint(x=res.x, C=C, at_x=last if last is not None and last.hess is not None else None,
                     g0_per_cost=res.grad_norm0 / C if keep_pass else None)


@dataclass
class PairResult:
    """What :func:`cv_pair` returns for one ``(gamma, k)``.

    Attributes
    ----------
    W : ndarray of shape (folds, len(Cs), problems, dim)
        The fold solutions.
    Cs : list of float
        The costs, increasing.
    confusions : ndarray of shape (len(c_rows), folds, 2, classes, classes)
        Per row of ``c_rows``: the held-out ``[0]`` and training ``[1]`` confusion matrices.
    fit_seconds, score_seconds : ndarray of shape (len(c_rows), folds)
        Per row of ``c_rows``: its share of the solve and scoring time.
    stats : Counter
        Counts and seconds to add to the search's (:func:`merge_stats`).
    """

    W: np.ndarray
    Cs: list[float]
    confusions: np.ndarray
    fit_seconds: np.ndarray
    score_seconds: np.ndarray
    stats: Counter = field(default_factory=Counter)


def merge_stats(total: dict, part: dict) -> dict:
    """``total`` with ``part`` added: sums, except ``max_*`` keys, which keep the larger value."""
    merged = Counter(total)
    for key, v in part.items():
        merged[key] = max(merged[key], v) if key.startswith("max_") else merged[key] + v
    return merged


def landmark_coefs(w: np.ndarray, normalization: np.ndarray) -> np.ndarray:
    """``α = normalizationᵀ w``: feature-space weights (last axis) as the coefficients of the
    landmarks' kernel functions, ``Σ_i α_i K(·, l_i)``."""
    return w @ normalization


def map_to_larger_k(prev, normalization: np.ndarray, lam: np.ndarray, c_rows) -> np.ndarray:
    """Starting points for a larger k from the solutions of a smaller (nested) k.

    A solution ``w`` on the first ``k_s`` landmarks is the function
    ``Σ_i α_i K(·, l_i)`` with ``α = M_s w = normalization_sᵀ w`` (zero for the
    other landmarks), which the larger map represents by ``w' = M⁺ α``
    (:func:`dsvm.approx.landmark_weights`: ``Λ^{1/2} Vᵀ α`` for the eigen map,
    ``R α`` for the Cholesky map) — the same decision function and the same
    norm (up to the eigenvalue cut-off), so the
    larger problem starts where the smaller one ended.  Taken for the first
    fold, at the smaller k's C nearest to the first C.
    """
    norm_s, W_s, Cs_s = prev
    C0 = min(c for c, _ in c_rows)
    ci = int(np.argmin([abs(np.log(c) - np.log(C0)) for c in Cs_s]))
    w_small = W_s[:1, ci]  # (1, n_problems, r_s + 1): the first fold
    alpha = landmark_coefs(w_small[..., :-1], norm_s)  # (1, P, k_s)
    w_big = landmark_weights(alpha, normalization, lam)
    return np.concatenate([w_big, w_small[..., -1:]], axis=-1)


def record_functions(landmarks: np.ndarray, normalization: np.ndarray, W: np.ndarray, Cs, c_rows) -> dict:
    """Per candidate row of ``c_rows``: the fold models' mean decision function as landmark coefficients.

    A fold solution ``w`` is ``Σ_i α_i K(·, l_i) + b`` with ``α = normalizationᵀ w``;
    the mean over folds of ``(α, b)`` is the refit's starting point (:func:`refit_start`).
    Returns ``{row: (landmarks, α per problem, b per problem)}``.
    """
    c_index = {c: i for i, c in enumerate(Cs)}
    funcs = {}
    for C, row in c_rows:
        w = W[:, c_index[C]].mean(axis=0)  # (problems, r + 1)
        funcs[row] = (landmarks, landmark_coefs(w[:, :-1], normalization), w[:, -1].copy())
    return funcs


def refit_start(function):
    """``start`` for the refit (see :func:`dsvm.svm.fit_classifier`): the fold models' mean function mapped
    into the refit's feature space, when the refit draws the same landmarks (same seed, nested
    uniform or the same k-means) — a few Newton iterations fewer than starting from zero."""
    if function is None:
        return None
    landmarks, alpha, intercept = function

    def start(fmap):
        if fmap.components.shape != landmarks.shape or not np.array_equal(fmap.components, landmarks):
            return None
        w = landmark_weights(alpha, fmap.normalization, fmap.eigenvalues)
        return [np.r_[w[j], intercept[j]] for j in range(w.shape[0])]

    return start



class _CPath:
    """The solves of one ``(gamma, k)``: fold 0's C path first (:meth:`run_first_fold`), then the other folds'
    (:meth:`run_other_fold`, from threads), which open from it."""

    def __init__(self, est, ctx, F: RowBlocks, Cs, class_w, positives, label: str):
        self.est, self.ctx, self.F, self.Cs = est, ctx, F, Cs
        self.class_w, self.positives, self.label = class_w, positives, label
        self.dim = F.n_cols + 1
        self.hessian = resolve_hessian(est.hessian, F.n_rows, self.dim, F.is_distributed)
        self.reg = np.r_[np.ones(self.dim - 1), 0.0]
        # the fold-block layout lets a fold's passes be had from fold 0's by exchanging two folds' rows;
        # only a Gram opening (Newton, hessian="gram") has a use for them
        self.exchanges = est.solver == "newton" and self.hessian == "gram" and ctx.fold_blocks is not None
        # set by run_first_fold, read-only while the other folds run
        self._W0 = None  # fold 0's solutions (len(Cs), problems, dim)
        self._passes0: dict = {}  # (C index, problem) -> (fold 0's pass at its solution, its held-out rows' pass)
        self._lock = threading.Lock()
        self.exchange_passes = 0

    def _operator(self, F, codes, weights, j: int, C: float) -> SquaredHingeOperator:
        return SquaredHingeOperator(F, codes, self.positives[j], C * self.class_w, weights, self.est.fit_intercept)

    def _held_out_pass(self, s: int, j: int, C: float, x) -> Any:
        Fs, cs, ws = self.ctx.held_out_rows(self.F, s)
        with self._lock:
            self.exchange_passes += 1
        return self._operator(Fs, cs, ws, j, C).evaluate(x, x, (), "full")

    def run_first_fold(self, x_start) -> tuple[np.ndarray, np.ndarray, Counter]:
        """Fold 0's C path from ``x_start[0]`` (or zero), and what the other folds open from:
        ``(W_0, seconds per C, counts)``."""
        start = [PathPoint(x=None if x_start is None else np.array(x_start[0][j]), C=self.Cs[0])
                 for j in range(len(self.positives))]
        W0, seconds, counts, points = self._run_fold(0, start, keep=self.exchanges)
        self._W0 = W0
        if self.exchanges:  # fold 0's held-out rows at its solutions: shared by every other fold's exchange
            for ci, fold_points in enumerate(points):
                for j, p in enumerate(fold_points):
                    self._passes0[(ci, j)] = (p.at_x, self._held_out_pass(0, j, self.Cs[ci], W0[ci, j]))
        return W0, seconds, counts

    def run_other_fold(self, s: int) -> tuple[np.ndarray, np.ndarray, Counter]:
        """Fold ``s``'s C path, opening from fold 0's solution at the smallest C: ``(W_s, seconds per C, counts)``."""
        assert self._W0 is not None, "run_first_fold first"
        start = []
        for j in range(len(self.positives)):
            at_x = self._exchanged_pass(s, 0, j)
            start.append(PathPoint(x=np.array(self._W0[0, j]), C=self.Cs[0], at_x=at_x))
        if any(p.at_x is None for p in start):  # one opening for all problems, or none
            start = [PathPoint(x=p.x, C=p.C) for p in start]
        return self._run_fold(s, start, keep=False)[:3]

    def _run_fold(self, s: int, start: list[PathPoint], keep: bool):
        """Fold ``s``'s C path: ``(W_s, seconds per C, counts, points per C)``; the points (each holding a Gram
        matrix) only with ``keep``."""
        points, counts, kept = list(start), Counter(), []
        W_s = np.zeros((len(self.Cs), len(self.positives), self.dim))
        seconds = np.zeros(len(self.Cs))
        for ci in range(len(self.Cs)):
            t0 = time.perf_counter()
            F_s, codes_s, w_s = self.ctx.training_rows(self.F, s)
            for j in range(len(self.positives)):
                if s > 0 and ci > 0:
                    points[j], restarted = self._continue_or_restart(s, ci, j, points[j])
                    counts["restarts"] += restarted
                points[j], res = self._solve(F_s, codes_s, w_s, s, ci, j, points[j])
                counts.update(n_solves=1, newton_iter=res.n_iter, solver_passes=res.n_passes,
                              not_converged=int(not res.converged))
                counts["max_newton_iter"] = max(counts["max_newton_iter"], res.n_iter)
            W_s[ci] = np.stack([p.x for p in points])
            seconds[ci] = time.perf_counter() - t0
            if keep:
                kept.append(list(points))
        return W_s, seconds, counts, kept

    def _solve(self, F_s, codes_s, w_s, s, ci, j, point: PathPoint):
        """Problem ``j`` of fold ``s`` at ``Cs[ci]`` from ``point``: ``(the point it ends at, the solver result)``."""
        C = self.Cs[ci]
        op = self._operator(F_s, codes_s, w_s, j, C)
        start = point.start(C) if self.est.solver == "newton" else Start(x0=point.x)
        problem = f" class {j}" if len(self.positives) > 1 else ""
        res = solve_with(self.est, op, self.dim, self.hessian, start=start,
                         label=f"{self.label}[fold {s} C={C:g}{problem}] ")
        return _point_after(res, C, keep_pass=self.est.solver == "newton"), res

    def _continue_or_restart(self, s, ci, j, point: PathPoint) -> tuple[PathPoint, bool]:
        """Fold ``s`` continues its path at ``Cs[ci]``, or restarts from fold 0's solution for that ``C`` when
        it starts with the lower objective (closer to the optimum: the objective is 1-strongly convex in w).
        ``(point, restarted)``."""
        if point.at_x is None or point.g0_per_cost is None:
            return point, False
        C = self.Cs[ci]
        f_cont, g_rel = point.objective_and_relative_gradient(C, self.reg)
        if g_rel <= self.est.tol:
            return point, False
        alt = self._exchanged_pass(s, ci, j)
        xa = self._W0[ci, j]
        if alt is not None and 0.5 * float(xa[:-1] @ xa[:-1]) + alt.loss < f_cont:
            return PathPoint(x=np.array(xa), C=C, at_x=alt, g0_per_cost=point.g0_per_cost), True
        return point, False

    def _exchanged_pass(self, s: int, ci: int, j: int):
        """Fold ``s``'s pass (with Gram matrix) at fold 0's solution for ``Cs[ci]``, from fold 0's by
        exchanging the rows of the two held-out folds: passes over those two folds' rows instead of one
        over all training rows.  None where fold 0 kept no such pass."""
        known, plus = self._passes0.get((ci, j), (None, None))
        if known is None:
            return None
        minus = self._held_out_pass(s, j, self.Cs[ci], self._W0[ci, j])
        return known.exchanged(plus, minus)

    def confusions(self, W: np.ndarray, return_train_score: bool) -> np.ndarray:
        """Held-out (and training) confusion matrices of every fold and C: ``(folds, len(Cs), 2, m, m)``."""
        ctx, S = self.ctx, self.ctx.n_splits
        cm = np.zeros((S, len(self.Cs), 2, ctx.classes.size, ctx.classes.size))
        for word, packed in enumerate(ctx.packed):
            ids = list(range(word * MAX_SPLITS_PER_WORD, min(S, (word + 1) * MAX_SPLITS_PER_WORD)))
            local = [s - word * MAX_SPLITS_PER_WORD for s in ids]
            cm[ids] = self.F.map_reduce(cv_confusion_block, aligned=(ctx.codes, packed),
                                        shared=(W[ids], local, ctx.classes.size, bool(return_train_score)))
        return cm


def _run_folds(path: _CPath, x_start, n_jobs) -> tuple[np.ndarray, np.ndarray, Counter]:
    """Fold 0's path, then the others' (in threads with ``n_jobs``): ``(W, seconds, counts)``."""
    W0, sec0, counts = path.run_first_fold(x_start)
    rest = range(1, path.ctx.n_splits)
    if n_jobs is not None and n_jobs != 1 and len(rest) > 1:
        workers = len(rest) if n_jobs < 0 else min(int(n_jobs), len(rest))
        with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="dsvm-cv") as pool:
            parts = list(pool.map(path.run_other_fold, rest))
    else:
        parts = [path.run_other_fold(s) for s in rest]
    for _, _, c in parts:
        counts = merge_stats(counts, c)
    W = np.stack([W0] + [w for w, _, _ in parts])
    seconds = np.stack([sec0] + [t for _, t, _ in parts])
    return W, seconds, counts


def cv_pair(est, ctx, F: RowBlocks, c_rows, class_w, positives, shared_seconds: float, label: str, *,
            x_start=None, n_jobs=None, return_train_score=False) -> PairResult:
    """Every fold and every C of one (gamma, k) on its feature blocks ``F``.

    The first fold runs the C path first, starting at the smallest C from
    ``x_start[0]`` (one row per problem; the solution of a smaller nested k,
    see :func:`map_to_larger_k`) or from zero.  The other folds start from
    the first fold's solution at the smallest C; at every further C they
    continue their own path or, with the fold-block layout, restart from the
    first fold's solution for that C, whichever has the lower objective.
    ``shared_seconds`` (landmarks and features) is spread over the fold times.
    """
    Cs = sorted({c for c, _ in c_rows})
    S = ctx.n_splits
    path = _CPath(est, ctx, F, Cs, class_w, positives, label)
    t0 = time.perf_counter()
    W, seconds, counts = _run_folds(path, x_start, n_jobs)
    counts.update(exchange_passes=path.exchange_passes, solve_seconds=time.perf_counter() - t0)
    t0 = time.perf_counter()
    cm = path.confusions(W, return_train_score)
    t_score = time.perf_counter() - t0
    counts["score_seconds"] += t_score
    c_index = [Cs.index(C) for C, _ in c_rows]
    logger.info("%s%d folds x %d C: solves %.2fs, scoring %.3fs", label, S, len(Cs), seconds.sum(), t_score)
    return PairResult(W=W, Cs=Cs, confusions=np.stack([cm[:, ci] for ci in c_index]),
                      fit_seconds=np.stack([seconds[:, ci] + shared_seconds / (S * len(Cs)) for ci in c_index]),
                      score_seconds=np.full((len(c_rows), S), t_score / (S * len(Cs))), stats=counts)
