"""Evaluation of a fitted classifier in one pass over (possibly out-of-core) data."""

from __future__ import annotations

import time
from typing import Any

import numpy as np

from ._validation import check_n_rows
from .blockwise import aligned_vector
from ._base import unpack_dataset


def _codes_of(y_block, classes):
    y_block = np.asarray(y_block)
    codes = np.searchsorted(classes, y_block)
    codes = np.clip(codes, 0, len(classes) - 1)
    unknown = classes[codes] != y_block
    return codes, unknown


def _confusion_block(X_block, y_block, fmap, coef, intercept, classes):
    m = len(classes)
    dec = fmap.transform_block(X_block) @ coef.T.astype(fmap.dtype) + intercept
    pred = (dec[:, 0] > 0).astype(np.int64) if coef.shape[0] == 1 else np.argmax(dec, axis=1)
    true, unknown = _codes_of(y_block, classes)
    if unknown.any():
        bad = np.unique(np.asarray(y_block)[unknown])[:5]
        raise ValueError(f"y holds labels {bad.tolist()} that the model was not trained on (classes: {classes.tolist()})")
    return np.bincount(true * m + pred, minlength=m * m).reshape(m, m)


def evaluate(model, X, y=None) -> dict[str, Any]:
    """Accuracy, confusion matrix and per-class precision / recall / F1 in one pass.

    Parameters
    ----------
    model : fitted NystroemSVC
    X : array, sparse matrix, dask array or Dataset
    y : labels (omit when ``X`` is a Dataset)

    Returns
    -------
    dict with ``accuracy``, ``n_test``, ``confusion`` (rows: true class,
    columns: predicted), ``per_class`` and ``predict_seconds``.
    """
    if not hasattr(model, "classes_"):
        raise ValueError(f"evaluate reports classification metrics; a {type(model).__name__} is a regression model "
                         "(its score method gives R²)")
    X_rb, checked = model._validate_predict_input(X)  # before unpacking: a Dataset's format is checked
    X, y = unpack_dataset(X, y)
    if y is None:
        raise ValueError("evaluate needs labels: pass y or a Dataset that holds them")
    check_n_rows(X_rb.n_rows, y)
    y_rb = aligned_vector(y, X_rb)
    t0 = time.perf_counter()
    cm = X_rb.map_reduce(
        _confusion_block, aligned=(y_rb,), shared=(model.feature_map_, model.coef_, model.intercept_, model.classes_)
    )
    seconds = time.perf_counter() - t0
    n = int(cm.sum())
    per_class = []
    for i, label in enumerate(model.classes_):
        tp = cm[i, i]
        predicted, actual = cm[:, i].sum(), cm[i, :].sum()
        precision = tp / predicted if predicted else 0.0
        recall = tp / actual if actual else 0.0
        f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
        per_class.append(
            {
                "label": label.item() if hasattr(label, "item") else label,
                "precision": float(precision),
                "recall": float(recall),
                "f1": float(f1),
                "support": int(actual),
            }
        )
    recalls = [c["recall"] for c in per_class if c["support"] > 0]
    return {
        "accuracy": float(np.trace(cm) / n) if n else float("nan"),
        "balanced_accuracy": float(np.mean(recalls)) if recalls else float("nan"),
        "n_test": n,
        "confusion": cm.tolist(),
        "per_class": per_class,
        "predict_seconds": seconds,
    }
