"""Evaluation of a fitted model in one pass over (possibly out-of-core) data: a classifier's confusion
matrix and its scores (shared with the CV search), a regression model's R², RMSE and MAE."""

from __future__ import annotations

import time
from typing import Any

import numpy as np

from ..blocks import aligned_vector
from ..checks import check_n_rows
from ._base import model_decision_blocks, prediction_input, unpack_dataset
from ._block_tasks import confusion_from_decision, regression_sums

__all__ = ["evaluate", "class_scores", "score_from_confusion", "SCORINGS", "regression_sums", "regression_scores"]

SCORINGS = (
    "accuracy", "balanced_accuracy", "f1", "precision", "recall", "f1_macro", "precision_macro", "recall_macro",
)


def class_scores(cm: np.ndarray) -> dict[str, np.ndarray]:
    """Per-class precision, recall, F1, support and predicted counts from a confusion matrix (rows: true
    class, columns: predicted); 0 where a ratio's denominator is 0."""
    cm = np.asarray(cm, dtype=np.float64)
    tp = np.diag(cm)
    support, predicted = cm.sum(axis=1), cm.sum(axis=0)
    with np.errstate(invalid="ignore", divide="ignore"):
        recall = np.where(support > 0, tp / support, 0.0)
        precision = np.where(predicted > 0, tp / predicted, 0.0)
        f1 = np.where(precision + recall > 0, 2 * precision * recall / (precision + recall), 0.0)
    return {"precision": precision, "recall": recall, "f1": f1, "support": support, "predicted": predicted}


def score_from_confusion(cm: np.ndarray, scoring: str) -> float:
    """A classification score from a confusion matrix (rows true, columns predicted).

    The positive class of the binary scores ``f1``/``precision``/``recall`` is
    the second class (``classes_[1]``), as scikit-learn's ``pos_label=1`` for
    0/1 or -1/1 labels.
    """
    cm = np.asarray(cm, dtype=np.float64)
    n = cm.sum()
    if n == 0:
        return float("nan")
    scores = class_scores(cm)
    recall, support = scores["recall"], scores["support"]
    if scoring == "accuracy":
        return float(np.trace(cm) / n)
    if scoring == "balanced_accuracy":
        return float(recall[support > 0].mean())
    if scoring in ("f1", "precision", "recall"):
        if cm.shape[0] != 2:
            raise ValueError(f"scoring={scoring!r} is for binary problems; use {scoring}_macro")
        return float(scores[scoring][1])
    if scoring.endswith("_macro") and scoring.removesuffix("_macro") in ("f1", "precision", "recall"):
        present = (support > 0) | (scores["predicted"] > 0)
        return float(scores[scoring.removesuffix("_macro")][present].mean())
    raise ValueError(f"scoring={scoring!r} is not supported; choose one of {SCORINGS}")


def regression_scores(sums: np.ndarray) -> dict[str, float]:
    """R² (0 for constant targets), RMSE and MAE from the :func:`regression_sums` summed over all blocks."""
    sse, sae, s, ss, n = (float(v) for v in sums)
    if n == 0:
        return {"r2": float("nan"), "rmse": float("nan"), "mae": float("nan")}
    sst = ss - s * s / n
    return {"r2": 1.0 - sse / sst if sst > 0 else 0.0, "rmse": float(np.sqrt(sse / n)), "mae": sae / n}


def _checked_input(model, X, y):
    X_rb, checked = prediction_input(model, X)  # before unpacking: a Dataset's format is checked
    X, y = unpack_dataset(X, y)
    if y is None:
        raise ValueError("evaluate needs labels: pass y or a Dataset that holds them")
    check_n_rows(X_rb.n_rows, y)
    return X_rb, checked, aligned_vector(y, X_rb)


def evaluate(model, X, y=None) -> dict[str, Any]:
    """A classifier's accuracy, confusion matrix and per-class precision / recall / F1, or a regression
    model's R², RMSE and MAE, in one pass.

    Parameters
    ----------
    model : fitted NystroemSVC or NystroemSVR
    X : array, sparse matrix, dask array or Dataset
    y : labels or targets (omit when ``X`` is a Dataset)

    Returns
    -------
    dict
        Classifier: ``accuracy``, ``balanced_accuracy``, ``n_test``, ``confusion`` (rows: true class,
        columns: predicted), ``per_class`` and ``predict_seconds``.  Regression model: ``r2``, ``rmse``,
        ``mae``, ``n_test`` and ``predict_seconds``.

    Examples
    --------
    >>> from sklearn.datasets import make_moons
    >>> from dsvm import NystroemSVC, evaluate
    >>> X, y = make_moons(n_samples=200, noise=0.1, random_state=0)
    >>> clf = NystroemSVC(n_components=50, random_state=0).fit(X, y)
    >>> report = evaluate(clf, X, y)
    >>> report["n_test"], report["accuracy"] > 0.95
    (200, True)
    >>> sum(map(sum, report["confusion"]))  # rows: true class, columns: predicted
    200
    """
    X_rb, checked, y_rb = _checked_input(model, X, y)
    t0 = time.perf_counter()
    dec = model_decision_blocks(model, X_rb, checked)
    if not hasattr(model, "classes_"):
        sums = dec.map_reduce(regression_sums, aligned=(y_rb,))
        return {**regression_scores(sums), "n_test": int(sums[4]), "predict_seconds": time.perf_counter() - t0}
    cm = dec.map_reduce(confusion_from_decision, aligned=(y_rb,), shared=(model.classes_,))
    seconds = time.perf_counter() - t0
    n = int(cm.sum())
    scores = class_scores(cm)
    per_class = [
        {
            "label": label.item() if hasattr(label, "item") else label,
            "precision": float(scores["precision"][i]),
            "recall": float(scores["recall"][i]),
            "f1": float(scores["f1"][i]),
            "support": int(scores["support"][i]),
        }
        for i, label in enumerate(model.classes_)
    ]
    recalls = [c["recall"] for c in per_class if c["support"] > 0]
    return {
        "accuracy": float(np.trace(cm) / n) if n else float("nan"),
        "balanced_accuracy": float(np.mean(recalls)) if recalls else float("nan"),
        "n_test": n,
        "confusion": cm.tolist(),
        "per_class": per_class,
        "predict_seconds": seconds,
    }
