"""Platt scaling of decision values: probability estimates for :class:`~dsvm.NystroemSVC`.

With ``probability=True`` a classifier learns, per binary (one-vs-rest)
problem, a sigmoid

    P(y = +1 | f) = 1 / (1 + exp(A f + B))

of its decision value ``f`` (Platt 1999), fitted as LIBSVM and scikit-learn's
``SVC(probability=True)`` do:

* on **held-out decision values**: an internal ``n_folds``-fold cross-validation
  (default 5, as LIBSVM) inside ``fit``.  The folds are assigned by a hash of
  the global row index and the seed, so they do not depend on how the rows are
  blocked (numpy and dask input give the same folds) and need nothing on the
  client.  Like LIBSVM's, the folds are random, not stratified;
* with Platt's smoothed targets ``t+ = (N+ + 1)/(N+ + 2)``, ``t- = 1/(N- + 2)``
  and the robust Newton method with backtracking of Lin, Lin & Weng (2007),
  "A note on Platt's probabilistic outputs for support vector machines"
  (:func:`fit_platt`, a port of LIBSVM's ``sigmoid_train``).

Reuse: the fold models are trained on the **feature matrix of the final fit**
(the same ``FeatureStore``), the held-out rows masked out by a zero weight —
for the L2-loss objective a zero cost removes a row exactly, so each fold
model is the model of the remaining rows *in the feature space of the full
data*: the landmarks and the Nyström map are those of all rows (LIBSVM's fold
models have no such shared stage).  Folds after the first start from the first
fold's solution (warm start).

Out of core: the held-out decision values are computed block-wise in one
pass and only ``(f_i, t_i)`` pairs come back to the client — 9 bytes per row.
Up to :data:`MAX_PLATT_ROWS` rows all pairs are used; above, a seeded uniform
subsample of about that many rows (hash-selected, again independent of the
blocking), which bounds client memory to ~20 MB while two parameters are fitted.
Rows with zero sample weight are not used; other weights do not weight the
sigmoid fit (as in LIBSVM).

Multiclass: one sigmoid per one-vs-rest problem, the probabilities normalised
to sum to one (scikit-learn's ``SVC`` uses pairwise coupling of one-vs-one
sigmoids instead; one-vs-rest is what this package trains).
"""

from __future__ import annotations

import logging
import warnings

import numpy as np
from sklearn.exceptions import ConvergenceWarning

from ..blocks import RowBlocks
from ..problems import SquaredHingeOperator
from ..solvers import Start
from ._block_tasks import (
    concat_pairs,
    fold_block,
    fold_weight_block,
    heldout_pairs_block,
    platt_log_proba,
    proba_block,
)
from ._fitting import solve_with

logger = logging.getLogger(__name__)

#: At most about this many (decision value, label) pairs are brought to the
#: client for the sigmoid fit; beyond it a uniform random subsample is used.
MAX_PLATT_ROWS = 2_000_000


# ---------------------------------------------------------------------------
# The sigmoid


def fit_platt(
    dec, positive, *, max_iter: int = 100, min_step: float = 1e-10, sigma: float = 1e-12, eps: float = 1e-5
) -> tuple[float, float]:
    """Fit ``P(y=1|f) = 1/(1+exp(A f + B))`` to decision values ``dec``; return ``(A, B)``.

    Platt's method with the smoothed targets and the Newton iteration with
    backtracking line search of Lin, Lin & Weng (2007) — the algorithm of
    LIBSVM's ``sigmoid_train``, vectorised.

    Parameters
    ----------
    dec : array of shape (n,)
        Decision values (held out).
    positive : bool array of shape (n,)
        True for rows of the positive class.
    max_iter, min_step, sigma, eps
        LIBSVM's constants: iterations, smallest step, Hessian ridge, gradient
        tolerance.
    """
    f = np.asarray(dec, dtype=np.float64).ravel()
    pos = np.asarray(positive, dtype=bool).ravel()
    if f.shape != pos.shape:
        raise ValueError(f"dec and positive must have the same length, got {f.shape} and {pos.shape}")
    prior1 = float(pos.sum())
    prior0 = float(pos.size - prior1)
    hi, lo = (prior1 + 1.0) / (prior1 + 2.0), 1.0 / (prior0 + 2.0)
    t = np.where(pos, hi, lo)

    def objective(A, B):
        z = f * A + B
        # t z + log(1 + exp(-z)) == (t - 1) z + log(1 + exp(z)); logaddexp is stable for both signs
        return float(np.sum(t * z + np.logaddexp(0.0, -z)))

    A, B = 0.0, float(np.log((prior0 + 1.0) / (prior1 + 1.0)))
    fval = objective(A, B)
    it = 0
    for it in range(1, max_iter + 1):
        z = f * A + B
        p = _sigmoid_neg(z)  # P(y=1|f) = 1/(1+exp(z))
        q = 1.0 - p
        d2 = p * q
        h11 = sigma + float(np.dot(f * f, d2))
        h22 = sigma + float(d2.sum())
        h21 = float(np.dot(f, d2))
        d1 = t - p
        g1 = float(np.dot(f, d1))
        g2 = float(d1.sum())
        if abs(g1) < eps and abs(g2) < eps:
            break
        det = h11 * h22 - h21 * h21
        dA = -(h22 * g1 - h21 * g2) / det
        dB = -(-h21 * g1 + h11 * g2) / det
        gd = g1 * dA + g2 * dB
        step = 1.0
        while step >= min_step:
            newA, newB = A + step * dA, B + step * dB
            newf = objective(newA, newB)
            if newf < fval + 1e-4 * step * gd:
                A, B, fval = newA, newB, newf
                break
            step *= 0.5
        if step < min_step:
            logger.info("platt: line search failed after %d iterations (|g| = %.2e, %.2e)", it, g1, g2)
            break
    else:
        logger.info("platt: reached max_iter=%d", max_iter)
    logger.info("platt: A=%.6g B=%.6g on %d rows (%d positive), %d iterations", A, B, f.size, int(prior1), it)
    return float(A), float(B)


def _sigmoid_neg(z: np.ndarray) -> np.ndarray:
    """``1 / (1 + exp(z))`` without overflow."""
    out = np.empty_like(z, dtype=np.float64)
    nonneg = z >= 0
    e = np.exp(-z[nonneg])
    out[nonneg] = e / (1.0 + e)
    out[~nonneg] = 1.0 / (1.0 + np.exp(z[~nonneg]))
    return out


# ---------------------------------------------------------------------------
# Folds independent of the blocking


class PlattCalibration:
    """Held-out Platt scaling of one fit, run on that fit's feature blocks.

    :meth:`fit_problem` is called once per binary problem with the feature
    blocks, label codes and sample weights of the fit; :attr:`probA` /
    :attr:`probB` collect the sigmoids.
    """

    def __init__(self, est, n_problems: int, n_folds: int = 5, seed: int = 0):
        if n_folds < 2:
            raise ValueError(f"Platt scaling needs at least 2 folds, got {n_folds}")
        self.est = est
        self.n_folds = int(n_folds)
        self.seed = int(seed)
        self.probA = np.zeros(n_problems)
        self.probB = np.zeros(n_problems)
        self.stats: list[dict] = []
        self._folds = None
        self._weights = None

    def _prepare(self, codes: RowBlocks, sample_weight: RowBlocks | None) -> None:
        if self._folds is not None:
            return
        n = codes.n_rows
        rate = min(1.0, MAX_PLATT_ROWS / max(n, 1))
        if rate < 1.0:
            logger.info("platt: fitting the sigmoids on a %.3g subsample (~%d of %d rows)", rate, MAX_PLATT_ROWS, n)
        folds = codes.map_blocks(fold_block, None, np.int16, shared=(self.n_folds, self.seed, rate), with_offset=True)
        self._folds = folds.persist()
        self._weights = [
            self._folds.map_blocks(fold_weight_block, None, np.float64, aligned=(sample_weight,), shared=(f,)).persist()
            for f in range(self.n_folds)
        ]

    def fit_problem(self, F: RowBlocks, codes: RowBlocks, sample_weight: RowBlocks | None, positive: int,
                    class_cost: np.ndarray, j: int, hessian: str, label: str = "") -> None:
        """Fold models of problem ``j``, their held-out decision values, the sigmoid.

        ``hessian`` is the fit's Newton system method; ``label`` prefixes log lines and warnings.
        """
        self._prepare(codes, sample_weight)
        dim = F.n_cols + 1
        W = np.zeros((self.n_folds, dim))
        x0 = None
        not_converged = 0
        passes = iters = 0
        for f in range(self.n_folds):
            op = SquaredHingeOperator(F, codes, positive, class_cost, self._weights[f], self.est.fit_intercept)
            res = solve_with(self.est, op, dim, hessian, start=Start(x0=x0), label=f"{label}[platt fold {f}] ")
            W[f] = res.x
            x0 = W[0] if x0 is None else x0
            not_converged += not res.converged
            passes += res.n_passes
            iters += res.n_iter
        if not_converged:
            warnings.warn(
                f"{label}{not_converged} of {self.n_folds} calibration fold solves did not converge; increase max_iter",
                ConvergenceWarning, stacklevel=4,
            )
        dec, pos = F.map_reduce(  # the fold models as the blocks take them (lifted over implicit features)
            heldout_pairs_block, aligned=(codes, self._folds, sample_weight), shared=(op.block_point(W), positive),
            combine=concat_pairs,
        )
        if dec.size == 0:
            raise ValueError("no row is left to fit the probability sigmoid on (all sample weights are zero?)")
        self.probA[j], self.probB[j] = fit_platt(dec, pos)
        self.stats.append({"problem": j, "n_rows": int(dec.size), "n_passes": passes, "n_iter": iters,
                           "A": self.probA[j], "B": self.probB[j]})


__all__ = ["fit_platt", "platt_log_proba", "proba_block", "PlattCalibration", "MAX_PLATT_ROWS"]
