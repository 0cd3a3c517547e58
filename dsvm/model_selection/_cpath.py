"""The C-path engine of the CV search: every fold and every ``C`` of one ``(gamma, k)``, warm-started.

Per fold the ``C`` values are solved in increasing order, each from the
previous solution; with the Newton method there the loss, gradient and Gram
matrix are the previous solve's times ``C_new / C_old`` (:class:`CachedOperator`),
so the next solve opens without a pass over the data.  The other folds start
from the first fold's solution, their opening Gram matrices obtained from the
first fold's by exchanging the rows of the two held-out folds
(:meth:`dsvm.problems.PassResult.exchanged`).  A larger nested ``k`` starts
from the smaller one's solution mapped into its feature space
(:func:`map_to_larger_k`); the refit from the fold models' mean
(:func:`refit_start`).
"""

from __future__ import annotations

import logging
import time
from collections import defaultdict
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from typing import Any

import numpy as np

from ..blocks import RowBlocks
from ..problems import SquaredHingeOperator
from ..solvers import Start, resolve_hessian
from ..svm import solve_with
from ._folds import MAX_SPLITS_PER_WORD, cv_confusion_block

logger = logging.getLogger(__name__)

__all__ = ["CachedOperator", "cv_pair", "landmark_coefs", "weights_from_landmark_coefs", "map_to_larger_k",
           "record_functions", "refit_start"]


class CachedOperator:
    """A squared-hinge operator that answers a warm-started Newton solve's opening passes.

    Along a fold's C path the next solve starts at the previous solution
    ``x``.  There the loss, its gradient and its generalized Hessian are the
    previous solve's last values times ``C_new / C_old`` (same rows, same
    active set, costs linear in C), so the solver's opening pass (loss,
    gradient and Gram matrix at ``x``) and its reference pass at ``x = 0``
    (for the relative tolerance) need no pass over the data at all — exact,
    not an approximation.  The wrapper remembers the pass results at the
    points the solver evaluates, with the Gram matrix tracked through the
    ``"full"`` and ``"delta"`` passes, so the final point's can be handed on.
    """

    KEEP = 4

    def __init__(self, op, start=None, zero=None):
        self.op = op
        self.fit_intercept = op.fit_intercept
        self.zero = zero
        self._results: dict[bytes, Any] = {}
        if start is not None:
            self._remember(start[0], start[1])

    @property
    def n_passes(self) -> int:
        return self.op.n_passes

    @property
    def n_rows(self) -> int:
        return self.op.n_rows

    @property
    def n_blocks(self) -> int:
        return self.op.n_blocks

    @property
    def is_distributed(self) -> bool:
        return self.op.is_distributed

    @staticmethod
    def _key(x) -> bytes:
        return np.asarray(x, dtype=np.float64).tobytes()

    def _remember(self, x, res):
        self._results[self._key(x)] = res
        while len(self._results) > self.KEEP:
            self._results.pop(next(iter(self._results)))

    def result_at(self, x):
        """The pass result (loss, gradient, Gram matrix in ``hess``) at ``x``, if known."""
        return self._results.get(self._key(x))

    def evaluate(self, x0, x1, t_grid=(), hessian="none"):
        """The wrapped operator's pass, or the one remembered at ``x1`` (see the class docstring)."""
        same = len(t_grid) == 0 and np.array_equal(x0, x1)
        if same and hessian == "none" and not np.any(x1) and self.zero is not None:
            return self.zero
        if same:
            known = self.result_at(x1)
            if known is not None and (hessian == "none" or known.hess is not None):
                return replace(known, hess=None if hessian == "none" else known.hess.copy(), n_changed=0)
        res = self.op.evaluate(x0, x1, t_grid, hessian)
        if same and not np.any(x1):
            self.zero = replace(res, hess=None)
        gram = None
        if hessian == "full":
            gram = res.hess
        elif hessian == "delta":
            before = self.result_at(x0)
            if before is not None and before.hess is not None:
                gram = before.hess + res.hess
        self._remember(x1, replace(res, hess=gram, loss_grid=np.zeros(0), n_changed=0))
        return res

    def hess_vec(self, x, v):
        """The wrapped operator's Hessian-vector product (always a pass)."""
        return self.op.hess_vec(x, v)


def landmark_coefs(w: np.ndarray, normalization: np.ndarray) -> np.ndarray:
    """``α = normalizationᵀ w``: feature-space weights (last axis) as the coefficients of the
    landmarks' kernel functions, ``Σ_i α_i K(·, l_i)``."""
    return w @ normalization


def weights_from_landmark_coefs(alpha: np.ndarray, normalization: np.ndarray, lam: np.ndarray) -> np.ndarray:
    """Inverse of :func:`landmark_coefs` for a map ``V Λ^{-1/2}`` over the same landmarks or a
    nested superset (``alpha`` then covers its first landmarks): ``w = Λ^{1/2} Vᵀ α``."""
    return (alpha @ normalization[:, : alpha.shape[-1]].T) * lam


def map_to_larger_k(prev, normalization: np.ndarray, lam: np.ndarray, c_rows) -> np.ndarray:
    """Starting points for a larger k from the solutions of a smaller (nested) k.

    A solution ``w`` on the first ``k_s`` landmarks is the function
    ``Σ_i α_i K(·, l_i)`` with ``α = M_s w = normalization_sᵀ w`` (zero for the
    other landmarks), which the larger map ``M = V Λ^{-1/2}`` represents by
    ``w' = M⁺ α = Λ^{1/2} Vᵀ α = lam * (normalization @ α)`` — the same
    decision function and the same norm (up to the eigenvalue cut-off), so the
    larger problem starts where the smaller one ended.  Taken for the first
    fold, at the smaller k's C nearest to the first C.
    """
    norm_s, W_s, Cs_s = prev
    C0 = min(c for c, _ in c_rows)
    ci = int(np.argmin([abs(np.log(c) - np.log(C0)) for c in Cs_s]))
    w_small = W_s[:1, ci]  # (1, n_problems, r_s + 1): the first fold
    alpha = landmark_coefs(w_small[..., :-1], norm_s)  # (1, P, k_s)
    w_big = weights_from_landmark_coefs(alpha, normalization, lam)
    return np.concatenate([w_big, w_small[..., -1:]], axis=-1)


def record_functions(funcs: dict, landmarks: np.ndarray, normalization: np.ndarray, W: np.ndarray, Cs, c_rows) -> None:
    """Per candidate row: the fold models' mean decision function as landmark coefficients.

    A fold solution ``w`` is ``Σ_i α_i K(·, l_i) + b`` with ``α = normalizationᵀ w``;
    the mean over folds of ``(α, b)`` is the refit's starting point (:func:`refit_start`).
    """
    c_index = {c: i for i, c in enumerate(Cs)}
    for C, row in c_rows:
        w = W[:, c_index[C]].mean(axis=0)  # (problems, r + 1)
        funcs[row] = (landmarks, landmark_coefs(w[:, :-1], normalization), w[:, -1].copy())


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
        w = weights_from_landmark_coefs(alpha, fmap.normalization, fmap.eigenvalues)
        return [np.r_[w[j], intercept[j]] for j in range(w.shape[0])]

    return start


def cv_pair(est, ctx, F: RowBlocks, c_rows, class_w, positives, shared_seconds, cms, fit_t, score_t, stats, label,  # noqa: C901
            *, x_start=None, n_jobs=None, return_train_score=False):
    """Every fold and every C of one (gamma, k) on its feature blocks ``F``: ``(W, Cs)``.

    The first fold runs the C path first, starting at the smallest C from
    ``x_start[0]`` (one row per problem; the solution of a smaller nested k,
    see :func:`map_to_larger_k`) or from zero.  The other folds start from
    the first fold's solution at the smallest C; at every further C they
    continue their own path or, with the fold-block layout, restart from the
    first fold's solution for that C, whichever has the lower objective.
    """
    S = ctx.n_splits
    Cs = sorted({c for c, _ in c_rows})
    dim = F.n_cols + 1
    hessian = resolve_hessian(est.hessian, F.n_rows, dim, F.is_distributed)
    W = np.zeros((S, len(Cs), len(positives), dim))
    seconds = np.zeros((S, len(Cs)))

    def run_split(s, starts):
        """Fold ``s``'s C path.  ``starts[ci] = (x per problem, opening)`` restarts the path at
        ``Cs[ci]`` from ``x``; ``opening[j] = (pass result at x[j] with its Gram matrix, pass result
        at 0 or None)`` spares the solver its opening passes."""
        x = [None] * len(positives)
        last = [None] * len(positives)  # (pass result at x[j] with Gram, C it belongs to)
        zeros = [None] * len(positives)  # (pass result at 0, C): per fold, linear in C
        local = defaultdict(float)
        for ci, C in enumerate(Cs):
            if ci in starts:
                xs, opening = starts[ci]
                x = [None if v is None else np.array(v) for v in xs]
                last = [None] * len(positives)
                if opening is not None:
                    last = [(o[0], C) for o in opening]
                    zeros = [(o[1], C) if o[1] is not None else z for o, z in zip(opening, zeros)]
            t0 = time.perf_counter()
            F_s, codes_s, w_s = ctx.training_rows(F, s)
            for j, pos in enumerate(positives):
                if s > 0 and ci > 0 and ci not in starts and last[j] is not None and zeros[j] is not None:
                    # continue the C path or restart from the first fold's solution for this C,
                    # whichever starts with the lower objective (closer to the optimum: the
                    # objective is 1-strongly convex in w)
                    reg = np.r_[np.ones(dim - 1), 0.0]
                    ratio = C / last[j][1]
                    g_cont = np.linalg.norm(reg * x[j] + last[j][0].grad * ratio)
                    g_ref = np.linalg.norm(zeros[j][0].grad * (C / zeros[j][1]))
                    if g_cont > est.tol * g_ref:
                        alt = exchange_result(s, ci, j)
                        f_cont = 0.5 * float(x[j][:-1] @ x[j][:-1]) + last[j][0].loss * ratio
                        xa = W[0, ci, j]
                        if alt is not None and 0.5 * float(xa[:-1] @ xa[:-1]) + alt.loss < f_cont:
                            x[j], last[j] = np.array(xa), (alt, C)
                            local["restarts"] += 1
                op = SquaredHingeOperator(F_s, codes_s, pos, C * class_w, w_s, est.fit_intercept)
                if est.solver == "newton":
                    g, z = last[j], zeros[j]
                    op = CachedOperator(op, start=None if g is None else (x[j], g[0].scaled(C / g[1])),
                                        zero=None if z is None else z[0].scaled(C / z[1]))
                prefix = f"{label}[fold {s} C={C:g}{' class ' + str(j) if len(positives) > 1 else ''}] "
                res = solve_with(est, op, dim, hessian, start=Start(x0=x[j]), label=prefix)
                x[j] = res.x
                if isinstance(op, CachedOperator):
                    known = op.result_at(res.x)
                    last[j] = None if known is None or known.hess is None else (known, C)
                    if op.zero is not None:
                        zeros[j] = (op.zero, C)
                local["n_solves"] += 1
                local["newton_iter"] += res.n_iter
                local["max_newton_iter"] = max(local["max_newton_iter"], res.n_iter)
                local["solver_passes"] += res.n_passes
                local["not_converged"] += not res.converged
            W[s, ci] = np.stack(x)
            seconds[s, ci] = time.perf_counter() - t0
            if s == 0:
                first_results[ci] = list(last), list(zeros)
        return local

    first_results: dict[int, tuple] = {}
    exchange: dict = {}
    local_passes = [0]

    def exchange_result(s, ci, j):
        """Fold ``s``'s pass result (with Gram matrix) at the first fold's solution for ``Cs[ci]``, from
        the first fold's by exchanging the rows of the two held-out folds (fold-block layout): passes
        over those two folds' rows instead of one over all training rows.  ``None`` if not available."""
        if est.solver != "newton" or ctx.fold_blocks is None or ci not in first_results:
            return None
        last0 = first_results[ci][0][j]
        if last0 is None or (ci, j) not in exchange:
            return None
        x0 = W[0, ci, j]
        Fs, cs, ws = ctx.held_out_rows(F, s)
        minus = SquaredHingeOperator(Fs, cs, positives[j], Cs[ci] * class_w, ws, est.fit_intercept)
        local_passes[0] += 1
        return last0[0].scaled(Cs[ci] / last0[1]).exchanged(exchange[(ci, j)], minus.evaluate(x0, x0, (), "full"))

    zero_plus: dict = {}

    def zero_result(s, j):
        """Fold ``s``'s pass result at 0 for ``Cs[0]``, likewise from the first fold's."""
        z0 = first_results[0][1][j] if 0 in first_results else None
        if est.solver != "newton" or ctx.fold_blocks is None or z0 is None:
            return None
        zero = np.zeros(dim)
        cost = Cs[0] * class_w
        if j not in zero_plus:  # the first fold's held-out rows: the same for every other fold
            F0, c0, w0 = ctx.held_out_rows(F, 0)
            zero_plus[j] = SquaredHingeOperator(F0, c0, positives[j], cost, w0, est.fit_intercept).evaluate(zero, zero)
            local_passes[0] += 1
        Fs, cs, ws = ctx.held_out_rows(F, s)
        minus = SquaredHingeOperator(Fs, cs, positives[j], cost, ws, est.fit_intercept).evaluate(zero, zero)
        local_passes[0] += 1
        return z0[0].scaled(Cs[0] / z0[1]).exchanged(zero_plus[j], minus)

    t0 = time.perf_counter()
    parts = [run_split(0, {0: (list(x_start[0]) if x_start is not None else [None] * len(positives), None)})]
    if ctx.fold_blocks is not None and est.solver == "newton":
        # the first fold's held-out rows at its solutions: shared by every other fold's exchange
        for ci in first_results:
            for j, pos in enumerate(positives):
                F0, c0, w0 = ctx.held_out_rows(F, 0)
                x0 = W[0, ci, j]
                op0 = SquaredHingeOperator(F0, c0, pos, Cs[ci] * class_w, w0, est.fit_intercept)
                exchange[(ci, j)] = op0.evaluate(x0, x0, (), "full")
                local_passes[0] += 1
    starts = {}
    for s in range(1, S):
        opening = [exchange_result(s, 0, j) for j in range(len(positives))]
        if any(o is None for o in opening):
            starts[s] = {0: (list(W[0, 0]), None)}
        else:
            starts[s] = {0: (list(W[0, 0]), [(o, zero_result(s, j)) for j, o in enumerate(opening)])}
    rest = range(1, S)
    if n_jobs is not None and n_jobs != 1 and len(rest) > 1:
        workers = len(rest) if n_jobs < 0 else min(int(n_jobs), len(rest))
        with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="dsvm-cv") as pool:
            parts += list(pool.map(lambda s: run_split(s, starts[s]), rest))
    else:
        parts += [run_split(s, starts[s]) for s in rest]
    stats["exchange_passes"] += local_passes[0]
    for p in parts:
        for key, v in p.items():
            if key.startswith("max_"):
                stats[key] = max(stats[key], v)
            else:
                stats[key] += v
    stats["solve_seconds"] += time.perf_counter() - t0

    t0 = time.perf_counter()
    cm = np.zeros((S, len(Cs), 2, ctx.classes.size, ctx.classes.size))
    for word, packed in enumerate(ctx.packed):
        ids = list(range(word * MAX_SPLITS_PER_WORD, min(S, (word + 1) * MAX_SPLITS_PER_WORD)))
        local = [s - word * MAX_SPLITS_PER_WORD for s in ids]
        cm[ids] = F.map_reduce(
            cv_confusion_block, aligned=(ctx.codes, packed),
            shared=(W[ids], local, ctx.classes.size, bool(return_train_score)),
        )
    t_score = time.perf_counter() - t0
    stats["score_seconds"] += t_score
    c_index = {c: i for i, c in enumerate(Cs)}
    for C, row in c_rows:
        ci = c_index[C]
        cms[row] = cm[:, ci]
        fit_t[row] = seconds[:, ci] + shared_seconds / (S * len(Cs))
        score_t[row] = t_score / (S * len(Cs))
    logger.info("%s%d folds x %d C: solves %.2fs, scoring %.3fs", label, S, len(Cs), seconds.sum(), t_score)
    return W, Cs
