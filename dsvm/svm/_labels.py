"""Labels, class weights and sample weights of a classification fit, and the fit's input checks.

One pass over the labels finds the classes (unless a dataset records them)
and encodes every row as an integer code; one pass over the sample weights
rejects NaN, infinite or negative ones naming the row.  No Dask imports: dask
inputs go through :mod:`dsvm.blocks`.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from sklearn.utils import compute_class_weight
from sklearn.utils.multiclass import check_classification_targets

from ..blocks import RowBlocks, aligned_vector, is_dask_array, row_index_blocks
from ..io import label_texts
from ._base import check_params, prepare_fit_input
from ._block_tasks import (
    class_counts_block,
    encode_block,
    encode_codes,
    unique_block,
    unique_combine,
    weight_stats_block,
    weight_stats_combine,
)

__all__ = ["encode_codes", "encode_labels", "check_labels", "check_classes", "class_weights",
           "check_sample_weight_blocks", "ClassificationInput", "prepare_classification"]


def encode_labels(y, like: RowBlocks, classes: np.ndarray | None = None) -> tuple[np.ndarray, RowBlocks]:
    """``classes`` (sorted unique labels) and integer codes aligned with ``like``.

    ``classes`` may be given when already known (a dataset records its label
    set at ingest), saving a pass; encoding still fails on any other label.
    """
    if is_dask_array(y):
        if y.ndim == 2 and y.shape[1] == 1:
            y = y[:, 0]
        if y.ndim != 1:
            raise ValueError(f"y must be 1-dimensional, got shape {y.shape}")
        y_rb = aligned_vector(y, like)
        if classes is not None:
            classes = np.unique(np.asarray(classes)).astype(y.dtype, copy=False)
        else:
            classes = y_rb.map_reduce(unique_block, combine=unique_combine)
    else:
        y_arr = np.asarray(y)
        classes = np.unique(y_arr)
        y_rb = aligned_vector(y_arr, like)
    codes = y_rb.map_blocks(encode_block, None, np.int32, shared=(classes,))
    return classes, codes


def check_sample_weight_blocks(sw: RowBlocks, codes: RowBlocks | None = None, n_groups: int = 1) -> np.ndarray:
    """Reject NaN, infinite or negative sample weights (naming the first such row); return weight sums.

    One pass over the weights (numpy or Dask blocks alike).  The sums are per
    class code when ``codes`` is given, else a single total; a caller raises
    when a sum it needs is zero.
    """
    mass, first = sw.map_reduce(weight_stats_block, aligned=(codes, row_index_blocks(sw)), shared=(n_groups,),
                                combine=weight_stats_combine)
    if np.isfinite(first[0]):
        raise ValueError(f"sample_weight contains NaN or infinity at row {int(first[0])}")
    if np.isfinite(first[1]):
        raise ValueError(f"sample_weight must be non-negative; row {int(first[1])} has a negative weight")
    return np.asarray(mass, dtype=np.float64)


def check_labels(y: np.ndarray) -> np.ndarray:
    """In-memory classification labels (scikit-learn's check: not continuous, not multi-output).

    Labels that are not numbers follow the rule of every file dsvm reads (:func:`dsvm.io.label_texts`): a
    missing one (None, NaN, ``""``, a marker such as ``"nan"`` or ``"NA"``) or one holding control
    characters is a ``ValueError`` naming its row, never a class.
    """
    if np.asarray(y).dtype.kind in "OU":
        label_texts(y, "y")
    check_classification_targets(y)
    return y


def check_classes(classes: np.ndarray) -> None:
    """A classifier's training labels: at least two classes, not continuous values."""
    if classes.size < 2:
        raise ValueError(
            f"the training labels hold {classes.size} class ({classes.tolist()}); a classifier needs at least 2"
        )
    if classes.dtype.kind == "f" and not np.all(np.mod(classes, 1) == 0):
        raise ValueError("Unknown label type: y looks continuous (non-integer floats); use NystroemSVR for regression")


def class_weights(class_weight, classes: np.ndarray, codes: RowBlocks) -> np.ndarray:
    """Per-class weights for ``None``, ``"balanced"`` or a dict, with scikit-learn's semantics
    (``"balanced"`` counts the classes in one pass over ``codes``)."""
    if class_weight is None:
        return np.ones(classes.size)
    if isinstance(class_weight, str) and class_weight == "balanced":
        counts = codes.map_reduce(class_counts_block, shared=(classes.size,))
        if np.any(counts == 0):
            raise ValueError("class_weight='balanced' needs every class to be present")
        return counts.sum() / (classes.size * counts)
    if isinstance(class_weight, dict):
        unknown = set(class_weight) - set(classes.tolist())
        if unknown:
            raise ValueError(f"class_weight names labels {sorted(unknown)!r} that are not in y")
        weights = compute_class_weight(class_weight, classes=classes, y=classes)
        bad = [c for c, w in zip(classes.tolist(), weights) if not np.isfinite(w) or w < 0]
        if bad:
            raise ValueError(f"class_weight must be finite and non-negative; label {bad[0]!r} has "
                             f"{class_weight[bad[0]]!r}")
        return weights
    raise ValueError(f"class_weight must be None, 'balanced' or a dict, got {class_weight!r}")


@dataclass
class ClassificationInput:
    """A classification fit's checked input: rows, label codes, the sorted classes, aligned sample weights
    (or None), and whether X's rows were checked finite already."""

    X: RowBlocks
    codes: RowBlocks
    classes: np.ndarray
    sample_weight: RowBlocks | None
    checked: bool


def prepare_classification(est, X, y=None, sample_weight=None) -> ClassificationInput:
    """Fit's checks for a classifier: its parameters and ``probability``, the labels (at least two
    classes, not continuous; a Dataset's declared classes); sets ``classes_`` and ``n_features_in_``."""
    check_params(est)
    if not isinstance(est.probability, (bool, np.bool_)):
        raise ValueError(f"probability must be True or False, got {est.probability!r}")
    known_classes = getattr(X, "classes", None) if y is None and hasattr(X, "X") else None
    fit_input = prepare_fit_input(est, X, y, sample_weight, check_labels)
    classes, codes = encode_labels(fit_input.y, fit_input.X, known_classes)
    check_classes(classes)
    est.classes_ = classes
    return ClassificationInput(fit_input.X, codes, classes, fit_input.sample_weight, fit_input.checked)
