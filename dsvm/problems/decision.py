"""Decision values of linear models on Nyström features, and the label each predicts.

One rule for every estimator, metric and file writer: the product ``F coefᵀ``
is taken in the features' dtype and the intercept added in float64
(:func:`decisions`); a row's class is the positive one where a single binary
problem's value is above 0, else the problem with the largest value
(:func:`predicted_codes`).
"""

from __future__ import annotations

import numpy as np

from ..blocks import RowBlocks
from ..checks import check_finite_block

__all__ = ["decisions", "decision_block", "decision_blocks", "predicted_codes", "labels_from_decision"]


def decisions(F: np.ndarray, coef: np.ndarray, intercept: np.ndarray) -> np.ndarray:
    """``F coefᵀ + intercept``: the product in F's dtype, the sum in float64, one column per model."""
    return (F @ coef.T.astype(F.dtype)).astype(np.float64) + intercept


def decision_block(X_block, fmap, coef: np.ndarray, intercept: np.ndarray, check_finite: bool = True,
                   scaling=None, offset: int = 0) -> np.ndarray:
    """Decision values of one block of input rows (NaN or infinity named by row when ``check_finite``),
    scaled first by a fitted :class:`~dsvm.approx.Scaling` if one is given."""
    if check_finite:
        check_finite_block(X_block, offset)
    if scaling is not None:
        X_block = scaling.transform_block(X_block)
    return decisions(fmap.transform_block(X_block), coef, intercept)


def decision_blocks(X: RowBlocks, fmap, coef: np.ndarray, intercept: np.ndarray, check_finite: bool = True,
                    scaling=None) -> RowBlocks:
    """Decision values ``F(scaling(X)) coefᵀ + intercept`` block by block, shape (n, n_problems); lazy on Dask."""
    return X.map_blocks(
        decision_block, coef.shape[0], np.float64, shared=(fmap, coef, intercept, check_finite, scaling),
        with_offset=True,
    )


def predicted_codes(dec: np.ndarray) -> np.ndarray:
    """The class index each row's decision values predict, problems on the last axis.

    With one column (one binary problem): 1 where the value is above 0, else 0;
    with several (one-vs-rest): the index of the largest (the first one on a tie).
    """
    dec = np.asarray(dec)
    if dec.shape[-1] == 1:
        return (dec[..., 0] > 0).astype(np.int64)
    return np.argmax(dec, axis=-1)


def labels_from_decision(dec: np.ndarray, classes: np.ndarray) -> np.ndarray:
    """The class labels decision values (problems on the last axis) predict: ``classes[predicted_codes(dec)]``."""
    return classes[predicted_codes(dec)]
