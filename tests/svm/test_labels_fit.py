"""The labels of a fit: the rule of :mod:`dsvm.io._label_text` (a missing-value marker is no class) holds for
the ``y`` given to ``fit`` as it holds for every file dsvm reads."""

import numpy as np
import pytest

import dsvm


def _problem(n: int = 40):
    rng = np.random.default_rng(0)
    X = rng.normal(size=(n, 2))
    return X, X[:, 0] > 0


@pytest.mark.parametrize("marker", ["nan", "NA", "null", ""])
@pytest.mark.parametrize("kind", ["numpy", "object", "pandas"])
def test_a_missing_value_marker_in_y_is_a_missing_label_not_a_class(marker, kind):
    """``y = ['a', 'nan', ...]`` became the classes ['a', 'nan'] and predictions 'nan'; the CSV reader refuses it."""
    X, positive = _problem()
    y = np.where(positive, "a", "b").astype("<U8")
    y[5] = marker
    if kind == "object":
        y = y.astype(object)
    elif kind == "pandas":
        import pandas as pd

        y = pd.Series(y)
    with pytest.raises(ValueError, match=r"^y: the label of row 5 is (missing|empty)"):
        dsvm.NystroemSVC(n_components=10).fit(X, y)


def test_none_in_y_is_a_missing_label_not_a_type_error():
    X, positive = _problem()
    y = np.where(positive, "a", "b").astype(object)
    y[7] = None
    with pytest.raises(ValueError, match=r"^y: the label of row 7 is missing \(None\)"):
        dsvm.NystroemSVC(n_components=10).fit(X, y)


def test_text_classes_are_kept():
    X, positive = _problem()
    model = dsvm.NystroemSVC(n_components=10, random_state=0).fit(X, np.where(positive, "nano", "b"))
    assert model.classes_.tolist() == ["b", "nano"]
