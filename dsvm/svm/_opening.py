"""The subsample warm start ("opening") of every Newton fit, in-memory or Dask input alike: solved in this
process, its first passes made with the features.

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
and with ``F`` on disk four times more, while that stays at most ``n / 8``
and the subsample's solve costs at most half a read of ``F`` (a pass saved
pays for it).
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np
import scipy.sparse as sp

from .. import config
from ..blocks import BlockReduction, RowBlocks, aligned_vector, as_row_blocks
from ..problems import FeatureStore, PassResult, opening_evaluations, opening_results
from ..solvers import SUBSAMPLE_TOL, solve
from ._base import block_rows_for
from ._warm_start import WARM_START_OPTIONS, subsample_indices, subsample_size

logger = logging.getLogger(__name__)

__all__ = ["Opening", "opening_size", "subsample_opening"]

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
    """

    xs: list[np.ndarray]
    reduction: BlockReduction
    ops: list = field(repr=False)
    stats: dict = field(default_factory=dict)

    def starts(self, out: list) -> list[tuple[PassResult, float]]:
        """``(pass at xs[j], ‖∇Φ(0)‖)`` per problem from the feature stage's sum of :attr:`reduction`."""
        return opening_results(self.ops, self.reduction, out)


def opening_size(n: int, p: int, k: int, r: int, options: dict, hessian: str, read_seconds: float = 0.0) -> int | None:
    """Rows of the subsample opening, or None for none (see the module docstring).

    ``read_seconds``: one read of ``F`` from the scratch disk (0 when ``F`` is not on disk).
    """
    warm_rows = options.get("warm_rows")
    m = subsample_size(n, r, options.get("warm_start", "auto"), warm_rows, hessian)
    if m is None or warm_rows is not None or read_seconds <= 0:
        return m
    rate = float(config.get("flops-per-thread")) * (os.cpu_count() or 1)
    per_row = (2.0 * k * (p + r) + SUBSAMPLE_GRAM_PASSES * r * r) / rate
    while 32 * m <= n and 4 * m * per_row <= 0.5 * read_seconds:
        m *= 4
    return m


def _finite(X) -> bool:
    data = X.data if sp.issparse(X) else np.asarray(X)
    return data.dtype.kind != "f" or bool(np.isfinite(data).all())


def subsample_opening(est, X: RowBlocks, aligned: Sequence[RowBlocks | None], fmap, hessian: str,
                      make_operator: Callable, labels: Sequence, m: int, checked: bool) -> Opening | None:
    """Solve the subsample problem of every class here and prepare the opening passes (module docstring).

    ``aligned`` are ``X``'s aligned arrays (labels or targets, sample weights);
    ``make_operator(features, aligned, j)`` the operator of problem ``j``.
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
    X_sub = as_row_blocks(X_sub, block_rows_for(r, fmap.dtype))
    with FeatureStore(X_sub, fmap, "memory", check_finite=False) as store:
        F_sub = store.features
        sub_aligned = [aligned_vector(taken[0], F_sub), aligned_vector(weights, F_sub)]
        options = {k: v for k, v in (est.solver_options or {}).items() if k not in WARM_START_OPTIONS}
        xs, iters = [], []
        for j, label in enumerate(labels):
            plain = label.item() if hasattr(label, "item") else label
            prefix = f"[class {plain!r}] " if len(labels) > 1 else ""
            res = solve("newton", make_operator(F_sub, sub_aligned, j), r + 1, tol=max(est.tol, SUBSAMPLE_TOL),
                        max_iter=30, hessian=hessian, label=prefix + "[subsample] ", options=options)
            xs.append(res.x)
            iters.append(res.n_iter)
    ops = [make_operator(X, aligned, j) for j in range(len(labels))]
    seconds = time.perf_counter() - t0
    logger.info("opening: %d of %d rows solved in this process in %.2fs (%s Newton iterations); the first "
                "passes of the full solve run with the features", rows.size, n, seconds, iters)
    return Opening(xs, opening_evaluations(ops, xs, hessian), ops,
                   {"rows": int(rows.size), "seconds": seconds, "n_iter": iters})
