"""Decision values of linear models on Nyström features, and the label each predicts.

One rule for every estimator, metric and file writer: the product ``F coefᵀ``
is taken in the features' dtype and the intercept added in float64
(:func:`decisions`); a row's class is the positive one where a single binary
problem's value is above 0, else the problem with the largest value
(:func:`predicted_codes`).
"""

from __future__ import annotations

import numpy as np

from ..approx import check_features
from ..blocks import RowBlocks
from ..checks import all_finite, check_finite_block, first_non_finite_row
from ..exceptions import NonFiniteError

__all__ = ["decisions", "decision_block", "decision_blocks", "predicted_codes", "labels_from_decision"]


def decisions(F: np.ndarray, coef: np.ndarray, intercept: np.ndarray) -> np.ndarray:
    """``F coefᵀ + intercept``: the product in F's dtype, the sum in float64, one column per model."""
    return (F @ coef.T.astype(F.dtype)).astype(np.float64) + intercept


def decision_block(X_block, fmap, coef: np.ndarray, intercept: np.ndarray, check_finite: bool = True,
                   scaling=None, offset: int = 0) -> np.ndarray:
    """Decision values of one block of input rows (NaN or infinity in them named by row when ``check_finite``),
    scaled first by a fitted :class:`~dsvm.approx.Scaling` if one is given.

    Features and decision values that are not finite (a kernel overflowing the features' dtype on rows far
    from the training data, say) are a :class:`~dsvm.exceptions.NonFiniteError` naming the first such row,
    never a label: checked here, in the block function, so a Dask prediction pays no extra pass.
    """
    if check_finite:
        check_finite_block(X_block, offset)
    if scaling is not None:
        X_block = scaling.transform_block(X_block)
    with np.errstate(over="ignore", invalid="ignore"):  # an overflow is named just below, with its row
        F = fmap.transform_block(X_block)
        check_features(F, X_block, fmap, offset)
        dec = decisions(F, coef, intercept)
    if not all_finite(dec):
        row = offset + first_non_finite_row(dec)
        raise NonFiniteError(
            f"the decision values of row {row} hold NaN or infinity: its features times the model's coefficients "
            f"overflow {np.dtype(F.dtype).name} (largest |coefficient| {float(np.abs(coef).max()):.3g}); "
            "predict with a model of dtype='float64' or scale the features"
        )
    return dec


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
