"""``n_components="auto"``: the number of landmarks chosen by the fit itself.

A path of fits at ``k = 250, 500, 1000, …`` (doubling, at most :data:`K_MAX` and
the rows) on the training rows less a held-out part, each scored on
that part (accuracy, or R² for regression); the path stops when a doubling
gains less than ``k_tol`` or when the next fit, expected to take
:data:`GROWTH` times the last, would not end within ``time_budget``.  The
chosen k is the path's last (it gained less than ``k_tol``, or the budget
ends the path), unless it scored more than ``k_tol`` below the best, which is
then chosen.  Each path fit starts from the one before where the landmarks nest
(uniform ones: the first k of 2k are the k, for a fixed seed; the other methods
choose afresh at each k, and their fits start afresh).  The model is
then fitted on every row at the chosen k, from the path's model there: on the
last path fit's features where that is the chosen one (no second feature
stage), else on the chosen fit's landmarks and map.

The held-out rows are those whose hash of their global index
(:func:`~dsvm.blocks.row_uniform`) falls below the held fraction: the same
rows for any chunking, in memory or out of core, and no pass to draw them.
They stay in the fits with zero cost (as the rows of another fold do).
"""

from __future__ import annotations

import copy
import dataclasses
import logging
import time
from collections.abc import Callable, Sequence

import numpy as np

from ..approx import landmark_weights
from ..blocks import RowBlocks, row_index_blocks, row_uniform
from ..checks import resolve_seed
from ..problems import predicted_codes
from ._fitting import fit_problems

logger = logging.getLogger(__name__)

K_START = 250
K_MAX = 8000
#: rows held out to score the path: this fraction, at most MAX_HELD_ROWS of them
HELD_FRACTION = 0.2
MAX_HELD_ROWS = 200_000
#: a path fit's time against the one before (doubling k: the Gram matrix and its factorisation grow faster)
GROWTH = 3.0
#: the hash seed of the held-out rows (fixed: the held-out part is part of what "auto" means)
HELD_SEED = 28


def k_schedule(n_rows: int) -> list[int]:
    """The path's k values: doubling from :data:`K_START`, at most :data:`K_MAX`; where the rows run out
    first, the last is every row (landmarks are drawn from all rows, the held-out ones included)."""
    ks, k = [], K_START
    while k <= min(K_MAX, n_rows):
        ks.append(k)
        k *= 2
    if n_rows <= K_MAX and (not ks or ks[-1] < n_rows):
        ks.append(n_rows)
    return ks


def held_fraction(n: int) -> float:
    return min(HELD_FRACTION, MAX_HELD_ROWS / max(n, 1))


def _held_block(rows: np.ndarray, fraction: float) -> np.ndarray:
    return (row_uniform(rows, HELD_SEED) < fraction).astype(np.float64)


def _train_weight_block(held: np.ndarray, sample_weight) -> np.ndarray:
    w = 1.0 - held
    return w if sample_weight is None else w * sample_weight


def held_out_rows(X_rb: RowBlocks) -> RowBlocks:
    """1.0 for every held-out row, else 0.0 (lazy on Dask)."""
    return row_index_blocks(X_rb).map_blocks(_held_block, None, np.float64, shared=(held_fraction(X_rb.n_rows),))


def _remaining(est, t_start: float) -> float | None:
    """What is left of ``time_budget`` (None: no budget)."""
    if est.time_budget is None:
        return None
    return max(est.time_budget - (time.perf_counter() - t_start), 0.0)


def _path_estimator(est, k: int, t_start: float):
    """The estimator of one path fit: ``k`` landmarks, no checkpoint or calibration, what is left of the budget."""
    sub = copy.copy(est)
    sub.n_components, sub.checkpoint, sub.time_budget = k, None, _remaining(est, t_start)
    if hasattr(sub, "probability"):
        sub.probability = False
    return sub


def _budget_allows(est, t_start: float, path: list[dict], last_solve: float) -> bool:
    """Whether the next path fit and the final solve on its features (each ``GROWTH`` times the last path
    fit's, and its solve's, ``last_solve`` seconds) end within ``time_budget``."""
    if est.time_budget is None or not path:
        return True
    expected = GROWTH * (path[-1]["seconds"] + last_solve)
    return time.perf_counter() - t_start + expected <= est.time_budget


def _path_ends(est, path: list[dict], t_start: float, last_k: bool, last_solve: float) -> bool:
    """Whether the path stops after its latest fit: the last k, a doubling that gained less than ``k_tol``,
    or a next fit that would pass ``time_budget``."""
    if last_k or (len(path) >= 2 and path[-1]["score"] - path[-2]["score"] < est.k_tol):
        return True
    if not _budget_allows(est, t_start, path, last_solve):
        logger.info("auto k: a fit at the next k would pass time_budget=%gs; stopping", est.time_budget)
        return True
    return False


def _final_estimator(est, k: int, t_start: float):
    """The estimator of the fit on every row at the chosen ``k``, with what is left of ``time_budget``."""
    final = copy.copy(est)
    final.n_components, final.time_budget = k, _remaining(est, t_start)
    return final


def _best(path: list[dict]) -> dict:
    """The path's best-scoring fit (the smallest k among equals)."""
    return max(path, key=lambda p: (p["score"], -p["k"]))


def _chosen(path: list[dict], k_tol: float) -> dict:
    """The path's last fit (it is paid for, and gained less than ``k_tol`` or was the last the budget
    allowed), unless it scored more than ``k_tol`` below the best, which is then chosen."""
    best = _best(path)
    return path[-1] if path[-1]["score"] >= best["score"] - k_tol else best


def start_from(earlier) -> Callable:
    """``start(feature_map)``: an earlier fit's model as a starting point on ``feature_map`` where its
    landmarks are the first of that map's (nested landmarks: uniform ones with the same seed), or where that
    map dropped dependent landmarks (the pivoted Cholesky map, ``kept``); else None."""
    old = earlier.feature_map
    alpha = earlier.coef @ np.asarray(old.normalization, dtype=np.float64)  # the landmarks' coefficients

    def start(fmap):
        k = old.n_components
        if fmap.n_components >= k and np.array_equal(fmap.components[:k], old.components):
            weights = landmark_weights(alpha, fmap.normalization, fmap.eigenvalues)
        elif fmap.kept is not None:
            # Σ α_i K(·, l_i) in the new features: w = F(L_old)ᵀ α, exact for the landmarks the map kept
            weights = alpha @ np.asarray(fmap.transform_block(old.components), dtype=np.float64)
        else:
            return None
        return [np.append(w, b) for w, b in zip(weights, earlier.intercept)]

    return start


def fit_auto(est, X_rb: RowBlocks, aligned: Sequence, fit: Callable, score: Callable, t_start: float,
             prepare_problem: Callable | None = None):
    """The whole ``n_components="auto"`` fit: the path, then the fit on every row at the chosen k.

    ``fit(sub_estimator, aligned, start, feature_map_of=None, then=None)`` runs
    :func:`~dsvm.svm._fitting.fit_problems` on ``aligned`` (labels or targets, row weights);
    ``score(result, held)`` scores a result on the rows ``held`` marks.  Each path fit starts
    from the one before where the landmarks nest (:func:`start_from`; the seed is fixed once).  Where
    the chosen k is the path's last, the final problems are solved on that fit's features, from its
    model; otherwise the final fit reuses the chosen fit's map.  Returns the final
    :class:`~dsvm.svm._fitting.FitResult` with ``k_path`` set.
    """
    est = copy.copy(est)
    est.random_state = resolve_seed(est.random_state)
    held = held_out_rows(X_rb)
    train_weights = held.map_blocks(_train_weight_block, None, np.float64, aligned=(aligned[1],))
    if X_rb.is_distributed:
        held, train_weights = held.persist(), train_weights.persist()
    ks = k_schedule(X_rb.n_rows)
    path, results, final, began, ended, drawn = [], {}, [], [0.0], [False], [0]

    def then(result, solve_again):
        # the landmarks drawn, not the map's count: a pivoted Cholesky map keeps fewer, and two path fits
        # may keep as many (a linear kernel: its rank), while the final fit must draw the chosen fit's
        k = drawn[0]
        results[k] = result
        path.append({"k": k, "score": float(score(result, held)), "seconds": time.perf_counter() - began[0]})
        logger.info("auto k: k=%d held-out score %.5f in %.2fs", k, path[-1]["score"], path[-1]["seconds"])
        ended[0] = _path_ends(est, path, t_start, k == ks[-1], result.solver_stats["solve_seconds"])
        keep = (k, _best(path)["k"])  # what the choice may still be: the latest fit or the best
        for old in [j for j in results if j not in keep]:  # a path fit's map holds a k x k matrix
            del results[old]
        if ended[0] and _chosen(path, est.k_tol)["k"] == k:
            sub = _final_estimator(est, k, t_start)
            calibrate = prepare_problem if getattr(sub, "probability", False) else None
            final.append(solve_again(sub, list(aligned), start_from(result), calibrate))
        return result

    for k in ks:
        began[0], drawn[0] = time.perf_counter(), k
        start = start_from(results[path[-1]["k"]]) if path else None
        fit(_path_estimator(est, k, t_start), [aligned[0], train_weights], start, then=then)
        if ended[0]:
            break
    chosen = _chosen(path, est.k_tol)
    logger.info("auto k: chose k=%d (held-out score %.5f) of %s", chosen["k"], chosen["score"],
                [p["k"] for p in path])
    if not final:  # an earlier k than the last: a fit on its map
        earlier = results[chosen["k"]]
        final.append(fit(_final_estimator(est, chosen["k"], t_start), list(aligned), start_from(earlier), earlier))
    stats = dict(final[0].solver_stats, fit_seconds=time.perf_counter() - t_start,
                 auto_k_seconds=float(sum(p["seconds"] for p in path)))
    return dataclasses.replace(final[0], k_path=path, solver_stats=stats)


def _held_decisions(X_block, held: np.ndarray, expansion, intercept: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The held-out rows of a block (a mask) and their decision values (as
    :func:`~dsvm.problems.decision_blocks` takes them), the kernel computed for those rows only."""
    mask = held > 0.0
    return mask, expansion.product_block(X_block[mask]).astype(np.float64) + intercept


def _accuracy_sums(X_block, codes: np.ndarray, held: np.ndarray, expansion, intercept) -> np.ndarray:
    mask, dec = _held_decisions(X_block, held, expansion, intercept)
    return np.array([float(np.count_nonzero(predicted_codes(dec) == codes[mask])), float(mask.sum())])


def _r2_sums(X_block, targets: np.ndarray, held: np.ndarray, expansion, intercept) -> np.ndarray:
    mask, dec = _held_decisions(X_block, held, expansion, intercept)
    t = np.asarray(targets, dtype=np.float64)[mask]
    return np.array([float(np.square(dec[:, 0] - t).sum()), float(t.sum()), float(np.square(t).sum()),
                     float(mask.sum())])


def _held_sums(X_rb: RowBlocks, result, truth: RowBlocks, held: RowBlocks, sums: Callable) -> np.ndarray:
    expansion = result.feature_map.expansion(result.coef)
    return X_rb.map_reduce(sums, aligned=(truth, held), shared=(expansion, result.intercept))


def held_accuracy(X_rb: RowBlocks, codes: RowBlocks) -> Callable:
    """``score(result, held)``: the accuracy of a fit's one-vs-rest labels on the held-out rows."""
    def score(result, held):
        right, total = _held_sums(X_rb, result, codes, held, _accuracy_sums)
        return right / max(total, 1.0)

    return score


def held_r2(X_rb: RowBlocks, targets: RowBlocks) -> Callable:
    """``score(result, held)``: a regression fit's R² on the held-out rows."""
    def score(result, held):
        res, s, s2, n = _held_sums(X_rb, result, targets, held, _r2_sums)
        total = s2 - s * s / max(n, 1.0)
        return 1.0 - res / total if total > 0 else 0.0

    return score


def fit_or_choose(est, X_rb: RowBlocks, checked: bool, aligned: Sequence, labels: Sequence, make_operator: Callable,
                  t_start: float, score: Callable, prepare_problem: Callable | None = None,
                  start: Callable | None = None):
    """:func:`~dsvm.svm._fitting.fit_problems` at the estimator's ``n_components``, or, for ``"auto"``,
    :func:`fit_auto` with ``score`` (:func:`held_accuracy`, :func:`held_r2`)."""
    if est.n_components != "auto":
        return fit_problems(est, X_rb, checked, aligned, labels, make_operator, t_start,
                            prepare_problem=prepare_problem, start=start)

    def fit(sub, al, st, feature_map_of=None, then=None):
        calibrate = prepare_problem if getattr(sub, "probability", False) else None
        return fit_problems(sub, X_rb, checked, al, labels, make_operator, time.perf_counter(),
                            prepare_problem=calibrate, start=st, feature_map_of=feature_map_of, then=then)

    return fit_auto(est, X_rb, aligned, fit, score, t_start, prepare_problem)
