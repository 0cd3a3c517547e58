"""The rule of the subsample warm start of the Newton solve: the same problem on a row subsample, solved loosely
first.  Fits open through :mod:`dsvm.svm._opening`; :func:`warm_start_problem` gives the same subsample of a
feature matrix for callers that hold only features (the paper experiments).

From zero every row is active and the Newton method's first Gram matrix
covers all ``n`` rows; from a subsample's solution it covers only the rows
active there, close to the final active set, and the full solve needs fewer
iterations.  ``solver_options["warm_start"]``: ``"auto"`` (default: the
subsample when there are at least four times as many rows and the Gram
variant runs), ``"subsample"`` (a subsample of ``warm_rows``
rows, default ``max(10000, 4 k)``) or ``"none"``.  Rows are drawn by a hash of
their index (independent of chunking), with costs scaled by ``n / m`` so that
the subsample's loss estimates the full one.  :func:`warm_start_problem`
copies the subsample's in-memory features out (:func:`subsample_problem`), so
its passes read ``m`` rows, not ``n``.
"""

from __future__ import annotations

import logging

import numpy as np

from ..blocks import RowBlocks, row_index_blocks, row_uniform

logger = logging.getLogger(__name__)

__all__ = ["WARM_START_OPTIONS", "subsample_size", "subsample_indices", "subsample_problem", "warm_start_rows",
           "warm_start_problem"]

# solver_options keys of the estimators' Newton solve that are not the solver's own
WARM_START_OPTIONS = ("warm_start", "warm_rows")


def _in_subsample(rows, fraction: float) -> np.ndarray:
    """The rule of the subsample: rows whose index hash is below ``fraction``."""
    return row_uniform(rows) < fraction


def _subsample_weight_block(rows, sample_weight, fraction):
    """``1 / fraction`` (times the sample weight) for rows drawn by a hash of their index, else 0."""
    w = np.where(_in_subsample(rows, fraction), 1.0 / fraction, 0.0)
    return w if sample_weight is None else w * sample_weight


def subsample_indices(n: int, fraction: float, step: int = 2**20) -> np.ndarray:
    """The indices (increasing) of the subsample's rows among ``n`` rows (as :func:`warm_start_rows` weights them)."""
    parts = [start + np.flatnonzero(_in_subsample(np.arange(start, min(start + step, n)), fraction))
             for start in range(0, n, step)]
    return np.concatenate(parts) if parts else np.zeros(0, dtype=np.int64)


def _positive_block(weights):
    return np.asarray(weights) > 0


def subsample_size(n: int, r: int, mode: str = "auto", warm_rows: int | None = None, hessian: str = "gram",
                   distributed: bool = False) -> int | None:
    """Rows of the Newton solve's subsample warm start, or None for no warm start.

    See the module docstring for the modes; ``warm_rows`` defaults to ``max(10000, 4 r)``.
    """
    if mode not in ("auto", "subsample", "none"):
        raise ValueError(f"solver_options warm_start must be 'auto', 'subsample' or 'none', got {mode!r}")
    if mode == "none" or (mode == "auto" and (hessian != "gram" or distributed)):
        return None
    m = int(warm_rows) if warm_rows is not None else max(10_000, 4 * r)
    if m >= n or (mode == "auto" and 4 * m > n):
        return None
    return m


def warm_start_rows(X: RowBlocks, aligned, *, solver: str, options: dict, hessian: str, r: int):
    """The aligned arrays of the subsample problem (``[aligned[0], row weights]``, zero weight off the
    subsample), or None where there is no warm start (another solver, or :func:`subsample_size` says so)."""
    if solver != "newton":
        return None
    n = X.n_rows
    m = subsample_size(n, r, options.get("warm_start", "auto"), options.get("warm_rows"), hessian, X.is_distributed)
    if m is None:
        return None
    weights = row_index_blocks(X).map_blocks(
        _subsample_weight_block, None, np.float64, aligned=(aligned[1],), shared=(m / n,)
    )
    if X.is_distributed:
        weights = weights.persist()
    logger.info("warm start: Newton on a subsample of about %d of %d rows first", m, n)
    return [aligned[0], weights]


def subsample_problem(F: RowBlocks, warm_aligned):
    """``(features, aligned)`` of the subsample problem (``warm_aligned[1]``: its row weights,
    zero off the subsample): its rows copied out for in-memory blocks (passes over ``m`` rows),
    else all rows with the others weighted zero."""
    if F.is_distributed:
        return F, warm_aligned
    keep = warm_aligned[1].map_blocks(_positive_block, None, bool)
    return F.compress(keep), [None if a is None else a.compress(keep) for a in warm_aligned]


def warm_start_problem(features: RowBlocks, aligned, *, hessian: str, options: dict | None = None):
    """The subsample problem a Newton fit of these features opens from (same rows, same scaled costs),
    as ``(features, aligned)``, or None where the fit would not warm-start."""
    rows = warm_start_rows(features, aligned, solver="newton", options=options or {}, hessian=hessian,
                           r=features.n_cols)
    return None if rows is None else subsample_problem(features, rows)
