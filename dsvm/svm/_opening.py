"""The subsample warm start ("opening") of every Newton fit, in-memory or Dask input alike: solved in this
process, its first passes made with the features.

The *opening* of a Newton solve is where it starts and what is already known there: a starting point
``x0``, the pass at ``x0`` (loss, gradient, Gram matrix) and ``‖∇Φ(0)‖``, handed to the solver as one
:class:`dsvm.solvers.Start`.  A fit's opening comes from a row subsample (here); the CV search's next ``C``
opens from the last solve's pass, scaled (:class:`dsvm.model_selection._cpath.PathPoint`).

From zero every row is active, and a Newton solve's first Gram matrix covers
all ``n`` rows (about ``2·10¹³`` flops at 10M rows and k = 1000).  The fit
opens from a row subsample's solution instead, without a pass over the
features:

1. the subsample's rows (the warm start's rows: drawn by a hash of the row
   index, so the same for any chunking; costs scaled by ``n / m``) come back
   with one ``take`` of ``X`` (``O(m p)`` bytes);
2. their features are computed here and the subsample problem of every class
   solved in memory, to the warm start's loose tolerance;
3. the feature stage evaluates, on every block while it is being made, the
   passes each full solve opens with (:func:`dsvm.problems.opening_evaluations`:
   the gradient at 0 for the stopping rule, loss, gradient and Gram matrix at
   the subsample's solution), so no pass reads ``F`` for them.

The full solve then starts at the subsample's solution with a first Gram
matrix over the rows active there only, and needs fewer passes.  The size:
the warm start's ``max(10000, 4 r)`` rows (``solver_options["warm_rows"]``),
and where a pass costs more than its products (``F`` on disk, or implicit
features whose passes compute the kernel blocks) four times more, while that
stays at most ``n / 8`` and the subsample's solve costs at most half of that
cost (a pass saved pays for it).  Before a CG solve it is larger still
(:data:`CG_ROWS_PER_FEATURE` rows per feature, within bounds of rows, cost and
memory; and four times larger while that costs at most a pass, since a Newton
iteration saved there is a pass and its CG steps): there it is also the
preconditioner, see below.

When: ``solver_options["warm_start"]``: ``"auto"`` (default: the subsample
when there are at least four times as many rows),
``"subsample"`` (a subsample of ``warm_rows`` rows), ``"columns"`` (below) or ``"none"``.  Rows are
drawn by a hash of their index (independent of chunking), with costs scaled by
``n / m`` so that the subsample's loss estimates the full one.
:func:`warm_start_problem` gives the same subsample of a feature matrix for
callers that hold only features (the paper experiments): it copies the
subsample's in-memory features out (:func:`subsample_problem`), so its passes
read ``m`` rows, not ``n`` (for the Gram variant only, under ``"auto"``).

Where the rows are few for a subsample (at most ``16 m``: the first Gram
matrix over every row at a sixteenth of the full size costs no more than the
subsample's), there are at least 512 features and the full solve uses the
Gram matrix, ``"auto"`` opens from the
*leading columns* instead for features held in this process (and for implicit
features over input held here with a triangular map, from 2048 features where
the rows are too few for any subsample) (:func:`column_opening`): the problem on the
first quarter of the feature columns, solved loosely over every row, is a
Nyström problem of its own (a triangular map's first landmarks, or the leading
eigen-directions), and its solution padded with zeros starts the full solve
where only the rows near the boundary are active.  Its columns are views of the
features, its Gram matrices ``1/16`` of the full one's size.

With ``hessian="cg"`` the subsample is still solved by Cholesky (up to an order of
:data:`dsvm.solvers.GRAM_MAX_DIM`), and its Gram matrix at its solution — costs scaled by
``n / m``, so an estimate of the full problem's — is factored once and
preconditions every CG solve of the full problem (FALKON's idea: a Nyström
preconditioner from a sample of the rows; here a sample of the rows active at
the solve's start).  A pass is then a Hessian product, and the full Gram
matrix (``n_A r²`` flops per refresh, float64 for implicit features) is never
summed: what makes large ``k`` affordable.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np
import psutil
import scipy.sparse as sp

from .. import config
from ..blocks import BlockReduction, RowBlocks, aligned_vector, as_row_blocks, row_index_blocks, row_uniform
from ..problems import FeatureStore, PassResult, opening_evaluations, opening_results
from ..solvers import GRAM_MAX_DIM, MIXED_PRECISION_ORDER, SUBSAMPLE_TOL, Start, solve
from ._base import WARM_START_OPTIONS, block_rows_for, problem_log_prefix

logger = logging.getLogger(__name__)

__all__ = ["Opening", "opening_size", "column_opening_size", "column_opening",
           "subsample_opening", "subsample_size", "subsample_indices", "subsample_problem", "warm_start_rows",
           "warm_start_problem"]


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


#: the values of ``solver_options["warm_start"]``
WARM_START_MODES = ("auto", "subsample", "columns", "none")


def default_warm_rows(r: int) -> int:
    """The subsample's rows where ``warm_rows`` is not given: ``max(10000, 4 r)``."""
    return max(10_000, 4 * r)


def subsample_size(n: int, r: int, mode: str = "auto", warm_rows: int | None = None, hessian: str = "gram",
                   distributed: bool = False) -> int | None:
    """Rows of the Newton solve's subsample warm start, or None for no warm start.

    See the module docstring for the modes; ``warm_rows`` defaults to ``max(10000, 4 r)``.
    """
    if mode not in WARM_START_MODES:
        raise ValueError(f"solver_options warm_start must be 'auto', 'subsample', 'columns' or 'none', got {mode!r}")
    if warm_rows is not None and not (isinstance(warm_rows, (int, float, np.integer, np.floating))
                                      and not isinstance(warm_rows, bool) and warm_rows >= 1
                                      and float(warm_rows).is_integer()):
        raise ValueError(f"solver_options warm_rows must be a whole number of rows, at least 1, got {warm_rows!r}")
    if mode in ("none", "columns") or (mode == "auto" and (hessian != "gram" or distributed)):
        return None
    m = int(warm_rows) if warm_rows is not None else default_warm_rows(r)
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


#: the subsample solve is counted as this many Gram matrices over its rows, besides its features (the first
#: over all its rows, then updates)
SUBSAMPLE_GRAM_PASSES = 2


@dataclass
class Opening:
    """A Newton fit's opening: the subsample solutions and the passes to make with the features.

    Attributes
    ----------
    xs : list of ndarray
        The subsample problem's solution, per problem.
    reduction : BlockReduction
        The opening passes (:func:`dsvm.problems.opening_evaluations`), for the feature stage.
    stats : dict
        ``rows`` (the subsample's), ``seconds`` (taking, features and solves), ``n_iter`` per problem.
    hessian_estimates : list
        Per problem, for ``hessian="cg"``: the subsample's Gram matrix at its solution (costs scaled to the
        full problem's), which preconditions the full solve's CG; None where there is none.
    """

    xs: list[np.ndarray]
    reduction: BlockReduction
    ops: list = field(repr=False)
    stats: dict = field(default_factory=dict)
    hessian_estimates: list = field(default_factory=list, repr=False)

    def starts(self, out: list) -> list[tuple[PassResult, float]]:
        """``(pass at xs[j], ‖∇Φ(0)‖)`` per problem from the feature stage's sum of :attr:`reduction`."""
        return opening_results(self.ops, self.reduction, out)


def opening_size(n: int, p: int, k: int, r: int, options: dict, read_seconds: float = 0.0,
                 hessian: str = "gram") -> int | None:
    """Rows of the subsample opening, or None for none (see the module docstring).

    ``read_seconds``: what one pass costs beyond its products with ``F`` (reading it from the scratch disk,
    or computing the kernel blocks of implicit features; 0 for ``F`` in memory).  ``hessian``: the full
    solve's Newton variant; for ``"cg"`` the subsample also preconditions it (:func:`_cg_opening_size`).
    """
    warm_rows = options.get("warm_rows")
    # both Newton variants open from the subsample: for CG its Gram matrix also preconditions the full solve
    m = subsample_size(n, r, options.get("warm_start", "auto"), warm_rows, "gram")
    if m is None or warm_rows is not None:
        return m
    rate = float(config.get("flops-per-thread")) * (os.cpu_count() or 1)
    per_row = (2.0 * k * (p + r) + SUBSAMPLE_GRAM_PASSES * r * r) / rate
    if hessian != "cg":
        while read_seconds > 0 and 32 * m <= n and 4 * m * per_row <= 0.5 * read_seconds:
            m *= 4
        return m
    # its features (float32, or float64: 8 bytes counted) are held in this process with its Gram matrix;
    # bounded by the machine's memory, not what is free now, so that a fit's subsample does not vary
    held = int(CG_OPENING_MEMORY * psutil.virtual_memory().total / (8.0 * r))
    pass_seconds = read_seconds + 4.0 * n * r / rate
    # a CG solve's Newton iteration is a pass and its CG steps: a start one iteration closer saves more than a
    # pass, so the subsample grows while four times its rows cost at most a whole pass
    while read_seconds > 0 and 32 * m <= n and 4 * m <= held and 4 * m * per_row <= pass_seconds:
        m *= 4
    return max(m, min(_cg_opening_size(n, r, per_row, pass_seconds), held))


#: the CG variant's subsample grows to this many rows per feature: it is the solve's start and its
#: preconditioner, both better with more rows per feature (the performance page, bench_k) ...
CG_ROWS_PER_FEATURE = 16
#: ... while it costs at most this many of the full problem's passes, as the cost model sees them,
CG_OPENING_PASSES = 32
#: and its features take at most this share of the machine's memory
CG_OPENING_MEMORY = 0.125


def _cg_opening_size(n: int, r: int, per_row: float, pass_seconds: float) -> int:
    """The CG variant's subsample rows: :data:`CG_ROWS_PER_FEATURE` rows per feature, at most ``n / 16`` rows
    and :data:`CG_OPENING_PASSES` passes' cost (``per_row`` each)."""
    return int(min(CG_ROWS_PER_FEATURE * r, n // 16, CG_OPENING_PASSES * pass_seconds / per_row))


def _estimate(res) -> np.ndarray | None:
    """The subsample solve's Gram matrix at its solution (costs scaled by ``n / m``: an estimate of the full
    problem's), float32 where the solver factors it in float32 anyway (half the memory held per problem)."""
    if res.last_pass is None or res.last_pass.hess is None:
        return None
    H = res.last_pass.hess
    return H.astype(np.float32) if H.shape[0] >= MIXED_PRECISION_ORDER else H


def _finite(X) -> bool:
    data = X.data if sp.issparse(X) else np.asarray(X)
    return data.dtype.kind != "f" or bool(np.isfinite(data).all())


def subsample_opening(est, X: RowBlocks, aligned: Sequence[RowBlocks | None], fmap, hessian: str,
                      make_operator: Callable, labels: Sequence, m: int, checked: bool,
                      kind: str = "memory") -> Opening | None:
    """Solve the subsample problem of every class here and prepare the opening passes (module docstring).

    ``aligned`` are ``X``'s aligned arrays (labels or targets, sample weights);
    ``make_operator(features, aligned, j)`` the operator of problem ``j``; ``kind`` the fit's feature
    store (:class:`~dsvm.problems.FeatureStore`), whose passes the opening's run with.
    None when the subsample holds NaN or infinity (the feature stage reports the row).
    """
    t0 = time.perf_counter()
    n = X.n_rows
    fraction = m / n
    rows = subsample_indices(n, fraction)
    X_sub = X.take(rows)
    if not checked and not _finite(X_sub):
        return None
    taken = [None if a is None else np.asarray(a.take(rows)) for a in aligned]
    weights = np.full(rows.size, 1.0 / fraction) if taken[1] is None else taken[1] / fraction
    r = fmap.n_output
    # a few large blocks (two per core): each block's Gram matrix is an (r+1)² float64 sum made, copied and
    # added whatever its rows, which at r in the thousands costs more than the products of BLOCK_BYTES' rows
    X_sub = as_row_blocks(X_sub, max(block_rows_for(r, fmap.dtype), rows.size))
    with FeatureStore(X_sub, fmap, "memory", check_finite=False) as store:
        F_sub = store.features
        sub_aligned = [aligned_vector(taken[0], F_sub), aligned_vector(weights, F_sub)]
        xs, iters, estimates = [], [], []
        # the subsample is in this process: its Newton systems by Cholesky while the Gram matrix is small
        sub_hessian = "gram" if r + 1 <= GRAM_MAX_DIM else hessian
        for j in range(len(labels)):
            res = _loose_solve(est, make_operator(F_sub, sub_aligned, j), r + 1, sub_hessian,
                               problem_log_prefix(labels, j) + "[subsample] ")
            xs.append(res.x)
            iters.append(res.n_iter)
            estimates.append(_estimate(res) if hessian == "cg" and sub_hessian == "gram" else None)
    rows_for_passes = FeatureStore.request_rows(X, fmap, kind)
    ops = [make_operator(rows_for_passes, aligned, j) for j in range(len(labels))]
    seconds = time.perf_counter() - t0
    logger.info("opening: %d of %d rows solved in this process in %.2fs (%s Newton iterations); the first "
                "passes of the full solve run with the features", rows.size, n, seconds, iters)
    return Opening(xs, opening_evaluations(ops, xs, hessian), ops,
                   {"rows": int(rows.size), "seconds": seconds, "n_iter": iters}, estimates)


def _loose_solve(est, op, dim: int, hessian: str, label: str, deadline: float | None = None):
    """An opening's Newton solve: to ``max(tol, SUBSAMPLE_TOL)`` in at most 30 iterations, with the
    estimator's solver options less the opening's own."""
    options = {k: v for k, v in (est.solver_options or {}).items() if k not in WARM_START_OPTIONS}
    return solve("newton", op, dim, tol=max(est.tol, SUBSAMPLE_TOL), max_iter=30, hessian=hessian, label=label,
                 start=Start(deadline=deadline), options=options)


#: the column opening solves the features' leading ``1 / COLUMN_OPENING_SHARE`` of columns ...
COLUMN_OPENING_SHARE = 4
#: ... under ``warm_start="auto"`` where the features have at least this many columns (below it the first
#: Gram matrix over every row costs little) ...
COLUMN_OPENING_MIN_FEATURES = 512
#: ... and the rows are at most this many times the subsample's ``max(10000, 4 r)``: its first Gram matrix,
#: over every row at a sixteenth of the full one's size, then costs at most the subsample's
COLUMN_OPENING_MAX_SUBSAMPLES = 16
#: implicit features in this process open from their columns from this many features, where the rows are too
#: few for a subsample opening: their first Gram matrix over every row is summed in float64 from kernel rows,
#: which the opening's own passes cost less than only at this size (the performance page)
IMPLICIT_COLUMN_OPENING_MIN_FEATURES = 2048


def column_opening_size(n: int, r: int, options: dict, kind: str, distributed: bool, gram: bool = True,
                        triangular: bool = True) -> int | None:
    """Columns the column opening solves, or None for none (the module docstring).

    ``"auto"`` takes it for features held in this process (``kind="memory"``, not ``distributed``) with at
    least :data:`COLUMN_OPENING_MIN_FEATURES` columns, where no ``warm_rows`` is given, the rows are too
    few for the subsample to cost less (:data:`COLUMN_OPENING_MAX_SUBSAMPLES`; for implicit features over
    input in this process: a ``triangular`` map, whose leading columns need only its first landmarks' kernel,
    at least :data:`IMPLICIT_COLUMN_OPENING_MIN_FEATURES` columns and too few rows for a subsample opening at
    all) and the full solve can use
    the Gram matrix (``gram``: not ``hessian="cg"``, ``r + 1 <= GRAM_MAX_DIM``; CG takes its preconditioner
    from the subsample opening); the fit then has no subsample opening.  ``"columns"`` takes it wherever
    there are at least 8 columns.
    """
    mode = options.get("warm_start", "auto")
    rows_fit = (kind == "memory" and n <= COLUMN_OPENING_MAX_SUBSAMPLES * default_warm_rows(r)) or (
        kind == "implicit" and triangular and r >= IMPLICIT_COLUMN_OPENING_MIN_FEATURES
        and n < 4 * default_warm_rows(r))
    wanted = mode == "columns" or (
        mode == "auto" and rows_fit and not distributed and gram and r >= COLUMN_OPENING_MIN_FEATURES
        and r + 1 <= GRAM_MAX_DIM and options.get("warm_rows") is None)
    return r // COLUMN_OPENING_SHARE if wanted and r >= 8 else None


def column_opening(est, store: FeatureStore, aligned: Sequence[RowBlocks | None], make_operator: Callable,
                   labels: Sequence, r0: int, deadline: float | None = None) -> tuple[list[np.ndarray], dict]:
    """Every problem solved loosely on the features' first ``r0`` columns: the full solves' starts (zero in
    the other coordinates, so each has its leading problem's objective) and the opening's stats.

    Valid for every map because the leading columns are a smaller map of their own: the first landmarks'
    Cholesky map (the map is triangular) or the leading eigen-directions (sorted by eigenvalue).  In-process
    blocks are sliced as views, Dask and disk blocks in every pass; implicit passes compute the leading
    map's kernel blocks (:meth:`FeatureStore.leading_columns`).
    """
    t0 = time.perf_counter()
    r = store.features.n_cols
    leading = store.leading_columns(r0)
    gram_order = max(r0, getattr(leading, "kernel_cols", r0))  # implicit passes sum the Gram matrix over the kernel
    hessian = "gram" if gram_order + 1 <= GRAM_MAX_DIM else "cg"
    xs, iters = [], []
    for j in range(len(labels)):
        res = _loose_solve(est, make_operator(leading, aligned, j), r0 + 1, hessian,
                           problem_log_prefix(labels, j) + "[columns] ", deadline)
        x = np.zeros(r + 1)
        x[:r0], x[-1] = res.x[:-1], res.x[-1]
        xs.append(x)
        iters.append(res.n_iter)
    seconds = time.perf_counter() - t0
    logger.info("opening: the first %d of %d feature columns solved in %.2fs (%s Newton iterations)", r0, r,
                seconds, iters)
    return xs, {"columns": int(r0), "seconds": seconds, "n_iter": iters}
