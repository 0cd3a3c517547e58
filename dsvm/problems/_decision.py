"""Decision values of linear models on Nyström features, and the label each predicts.

One rule for every estimator, metric and file writer.  A fitted model predicts
through its coefficients folded into the landmarks: ``F coefᵀ = K(X, L) M coefᵀ
= K(X, L) α`` with ``α = M coefᵀ`` computed once in float64
(:meth:`dsvm.approx.FeatureMap.expansion`), so the features ``F`` of the rows
are never formed; the product ``K α`` is taken in the map's dtype and the
intercept added in float64 (:func:`decision_block`).  Where features are at hand
(the folds of a fit) the product ``F coefᵀ`` is taken in the features' dtype
and the intercept added in float64 (:func:`decisions`).  A row's class is the
positive one where a single binary problem's value is above 0, else the problem
with the largest value (:func:`predicted_codes`).
"""

from __future__ import annotations

import numpy as np

from ..approx import check_expansion
from ..blocks import RowBlocks
from ..checks import all_finite, check_finite_block, first_non_finite_row
from ..exceptions import NonFiniteError

__all__ = ["decisions", "decision_block", "decision_blocks", "predicted_codes", "labels_from_decision"]


def decisions(F: np.ndarray, coef: np.ndarray, intercept: np.ndarray) -> np.ndarray:
    """``F coefᵀ + intercept``: the product in F's dtype, the sum in float64, one column per model."""
    return (F @ coef.T.astype(F.dtype)).astype(np.float64) + intercept


def decision_block(X_block, expansion, intercept: np.ndarray, check_finite: bool = True, scaling=None,
                   offset: int = 0) -> np.ndarray:
    """Decision values ``K(X_block, L) α + intercept`` of one block of input rows, shape (n_block, n_problems).

    Parameters
    ----------
    X_block : ndarray or scipy.sparse matrix of shape (n_block, p)
        Input rows, the first of which is row ``offset`` of the input.
    expansion : KernelExpansion
        The model's coefficients folded into its landmarks (:meth:`dsvm.approx.FeatureMap.expansion`).
    intercept : ndarray of shape (n_problems,)
    check_finite : bool, default=True
        Refuse NaN or infinity in ``X_block``, naming the row.
    scaling : Scaling, optional
        A fitted :class:`~dsvm.approx.Scaling`, applied to the rows first.
    offset : int, default=0

    Returns
    -------
    ndarray of shape (n_block, n_problems), float64

    Raises
    ------
    NonFiniteError
        Kernel values or decision values that are not finite (a kernel overflowing the map's dtype on rows far
        from the training data, say), naming the first such row, never a label: checked here, in the block
        function, so a Dask prediction pays no extra pass.
    """
    if check_finite:
        check_finite_block(X_block, offset)
    if scaling is not None:
        X_block = scaling.transform_block(X_block)
    with np.errstate(over="ignore", invalid="ignore"):  # an overflow is named just below, with its row
        values = expansion.product_block(X_block)
    check_expansion(values, X_block, expansion, offset)
    with np.errstate(over="ignore"):
        dec = values.astype(np.float64) + intercept
    if not all_finite(dec):
        row = offset + first_non_finite_row(dec)
        raise NonFiniteError(
            f"the decision values of row {row} hold NaN or infinity: the intercept "
            f"({float(np.abs(intercept).max()):.3g}) added to its kernel values times the model's coefficients "
            "overflows float64"
        )
    return dec


def decision_blocks(X: RowBlocks, fmap, coef: np.ndarray, intercept: np.ndarray, check_finite: bool = True,
                    scaling=None) -> RowBlocks:
    """Decision values ``F(scaling(X)) coefᵀ + intercept`` block by block, shape (n, n_problems); lazy on Dask.

    Computed as ``K(scaling(X), L) α + intercept`` (:func:`decision_block`), ``α`` folded once here
    (:meth:`dsvm.approx.FeatureMap.expansion`) and shipped with the landmarks to every block.
    """
    expansion = fmap.expansion(coef)
    return X.map_blocks(
        decision_block, coef.shape[0], np.float64, shared=(expansion, intercept, check_finite, scaling),
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
