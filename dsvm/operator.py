"""The distributed operator of the solve: the L2-loss SVM over row-blocked features.

A :class:`SquaredHingeOperator` binds the feature blocks ``F``, the label codes
and optional sample weights (all aligned :class:`~dsvm.blockwise.RowBlocks`)
to one binary (one-vs-rest) problem and exposes it to the solvers as plain
callables on float64 k-vectors:

* :meth:`evaluate` — one fused pass: loss on a batch of step sizes, loss,
  gradient, active-set size and (optionally) the generalized Hessian ``[F 1]_Aᵀ
  C [F 1]_A`` or its change since the last point, all in one round trip;
* :meth:`hess_vec` — generalized Hessian-vector products for CG.

Solvers never see Dask; only sums over rows come back (scalars, k-vectors, a
``k x k`` matrix).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ._validation import check_finite_block
from .blockwise import RowBlocks
from .losses import sqhinge_hvp, sqhinge_pass


@dataclass
class PassResult:
    """Sums over all rows returned by :meth:`SquaredHingeOperator.evaluate`."""

    loss: float
    grad: np.ndarray
    n_active: int
    n_changed: int
    loss_grid: np.ndarray
    hess: np.ndarray | None


class SquaredHingeOperator:
    """One binary squared-hinge problem on row-blocked features.

    Parameters
    ----------
    features : RowBlocks
        Feature rows ``F`` (n x r).
    codes : RowBlocks
        Integer class code of every row, aligned with ``features``.
    positive : int
        Code of the positive class (rows with another code are −1).
    class_cost : ndarray
        Cost ``C * class_weight`` per class code.
    sample_weight : RowBlocks or None
        Optional per-row weights, aligned with ``features``.
    fit_intercept : bool
        If False the bias coordinate is held at zero.
    """

    def __init__(
        self,
        features: RowBlocks,
        codes: RowBlocks,
        positive: int,
        class_cost: np.ndarray,
        sample_weight: RowBlocks | None = None,
        fit_intercept: bool = True,
    ):
        self.features = features
        self.codes = codes
        self.positive = int(positive)
        self.class_cost = np.asarray(class_cost, dtype=np.float64)
        self.sample_weight = sample_weight
        self.fit_intercept = bool(fit_intercept)
        self.n_features = None  # set lazily from the first result
        self.n_passes = 0

    def _params(self, **kw) -> dict:
        return {"positive": self.positive, "class_cost": self.class_cost, **kw}

    def evaluate(self, x0: np.ndarray, x1: np.ndarray, t_grid=(), hessian: str = "none") -> PassResult:
        """Loss, gradient and Hessian data at ``x1``; loss along ``x0 → x1`` at ``t_grid``."""
        params = self._params(
            x0=np.asarray(x0, dtype=np.float64),
            x1=np.asarray(x1, dtype=np.float64),
            t_grid=np.asarray(t_grid, dtype=np.float64),
            hessian=hessian,
        )
        out = self.features.map_reduce(sqhinge_pass, aligned=(self.codes, self.sample_weight), shared=(params,))
        self.n_passes += 1
        grad = out["grad"]
        hess = out["hess"]
        if hess is not None:
            hess = 2.0 * hess
        if not self.fit_intercept:
            grad = grad.copy()
            grad[-1] = 0.0
            if hess is not None:
                hess[-1, :] = 0.0
                hess[:, -1] = 0.0
        return PassResult(
            loss=float(out["loss"]),
            grad=grad,
            n_active=int(out["n_active"]),
            n_changed=int(out["n_changed"]),
            loss_grid=np.asarray(out["loss_grid"], dtype=np.float64),
            hess=hess,
        )

    def hess_vec(self, x: np.ndarray, v: np.ndarray) -> np.ndarray:
        """``2 [F 1]_Aᵀ C [F 1]_A v`` (the loss part of the generalized Hessian)."""
        params = self._params(x=np.asarray(x, dtype=np.float64), V=np.asarray(v, dtype=np.float64))
        out = 2.0 * self.features.map_reduce(sqhinge_hvp, aligned=(self.codes, self.sample_weight), shared=(params,))
        self.n_passes += 1
        if not self.fit_intercept:
            out[-1] = 0.0
        return out


# ---------------------------------------------------------------------------
# The feature stage and block-wise prediction
# ---------------------------------------------------------------------------

FEATURE_STORES = ("auto", "memory", "recompute")


def _feature_block(X_block, fmap, check_finite, offset=0):
    if check_finite:
        check_finite_block(X_block, offset)
    return fmap.transform_block(X_block)


def feature_blocks(X: RowBlocks, fmap, *, check_finite: bool = True, store: str = "memory") -> RowBlocks:
    """Nyström features ``F = K(X, L) · M`` of every row block.

    ``store="memory"`` keeps the blocks (persisted in the cluster's memory for
    Dask input); ``"recompute"`` leaves them lazy, so every pass recomputes
    them from ``X``.  The feature map enters the graph once.
    """
    if store not in FEATURE_STORES:
        raise ValueError(f"feature_store={store!r} is not supported; choose one of {FEATURE_STORES}")
    F = X.map_blocks(_feature_block, fmap.n_output, fmap.dtype, shared=(fmap, check_finite), with_offset=True)
    if store in ("memory", "auto"):
        F = F.persist()
    return F


def _decision_block(X_block, fmap, coef, intercept, check_finite, offset=0):
    if check_finite:
        check_finite_block(X_block, offset)
    F = fmap.transform_block(X_block)
    return (F @ coef.T.astype(F.dtype)).astype(np.float64) + intercept


def decision_blocks(X: RowBlocks, fmap, coef: np.ndarray, intercept: np.ndarray, check_finite: bool = True) -> RowBlocks:
    """Decision values ``F(X) coefᵀ + intercept`` block by block, shape (n, n_problems)."""
    return X.map_blocks(
        _decision_block, coef.shape[0], np.float64, shared=(fmap, coef, intercept, check_finite), with_offset=True
    )
