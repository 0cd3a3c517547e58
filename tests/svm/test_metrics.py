"""evaluate() and the scores of a confusion matrix against scikit-learn's metrics."""

import dask.array as da
import numpy as np
import pytest
from helpers import make_circles_problem
from sklearn.metrics import (
    accuracy_score,
    balanced_accuracy_score,
    confusion_matrix,
    f1_score,
    precision_recall_fscore_support,
    precision_score,
    recall_score,
)

from dsvm import NystroemSVC, evaluate
from dsvm.svm import SCORINGS, score_from_confusion
from dsvm.svm._metrics import class_scores


@pytest.fixture(scope="module")
def three_classes():
    X, _ = make_circles_problem(n=900, p=4, seed=5)
    r = np.linalg.norm(X, axis=1)
    y = np.digitize(r, np.quantile(r, [0.3, 0.7]))
    model = NystroemSVC(C=2.0, gamma=0.4, n_components=40, random_state=0).fit(X[:600], y[:600])
    return model, X[600:], y[600:]


@pytest.mark.parametrize("dask_input", [False, True])
def test_evaluate_equals_scikit_learn_on_the_models_predictions(three_classes, dask_input):
    model, X, y = three_classes
    pred = model.predict(X)
    result = evaluate(model, da.from_array(X, chunks=70) if dask_input else X, y)
    np.testing.assert_array_equal(result["confusion"], confusion_matrix(y, pred))
    assert result["accuracy"] == pytest.approx(accuracy_score(y, pred), abs=1e-15)
    assert result["balanced_accuracy"] == pytest.approx(balanced_accuracy_score(y, pred), abs=1e-15)
    precision, recall, f1, support = precision_recall_fscore_support(y, pred, zero_division=0)
    got = result["per_class"]
    assert [c["label"] for c in got] == [0, 1, 2] and result["n_test"] == len(y)
    np.testing.assert_allclose([c["precision"] for c in got], precision, rtol=1e-15)
    np.testing.assert_allclose([c["recall"] for c in got], recall, rtol=1e-15)
    np.testing.assert_allclose([c["f1"] for c in got], f1, rtol=1e-15)
    np.testing.assert_array_equal([c["support"] for c in got], support)


def _confusions():
    rng = np.random.default_rng(2)
    yield rng.integers(0, 2, 200), rng.integers(0, 2, 200)
    yield rng.integers(0, 4, 300), rng.integers(0, 4, 300)
    t = rng.integers(0, 3, 100)
    yield t, np.where(t == 2, 0, t)  # a class never predicted: its precision is 0, not NaN


@pytest.mark.parametrize("case", range(3))
@pytest.mark.parametrize("scoring", SCORINGS)
def test_score_from_confusion_equals_the_scikit_learn_scorers(case, scoring):
    y, pred = list(_confusions())[case]
    labels = np.arange(y.max() + 1)
    cm = confusion_matrix(y, pred, labels=labels)
    if scoring in ("f1", "precision", "recall") and len(labels) != 2:
        with pytest.raises(ValueError, match="for binary problems"):
            score_from_confusion(cm, scoring)
        return
    sk = {
        "accuracy": lambda: accuracy_score(y, pred),
        "balanced_accuracy": lambda: balanced_accuracy_score(y, pred),
        "f1": lambda: f1_score(y, pred, zero_division=0),
        "precision": lambda: precision_score(y, pred, zero_division=0),
        "recall": lambda: recall_score(y, pred, zero_division=0),
        "f1_macro": lambda: f1_score(y, pred, average="macro", zero_division=0),
        "precision_macro": lambda: precision_score(y, pred, average="macro", zero_division=0),
        "recall_macro": lambda: recall_score(y, pred, average="macro", zero_division=0),
    }[scoring]()
    assert score_from_confusion(cm, scoring) == pytest.approx(sk, rel=1e-12)


def test_class_scores_are_zero_where_a_denominator_is():
    cm = np.array([[5, 0, 0], [2, 0, 0], [0, 0, 0]])
    s = class_scores(cm)
    np.testing.assert_array_equal(s["precision"], [5 / 7, 0.0, 0.0])
    np.testing.assert_array_equal(s["recall"], [1.0, 0.0, 0.0])
    np.testing.assert_array_equal(s["support"], [5, 2, 0])
    assert np.all(np.isfinite(s["f1"]))
    with pytest.raises(ValueError, match="scoring='roc_auc' is not supported"):
        score_from_confusion(cm, "roc_auc")
