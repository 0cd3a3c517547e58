"""The sensitivity grid over (k, C) (dsvm.experiments._sensitivity_grid)."""

from __future__ import annotations

import numpy as np
import pytest
from helpers import make_xor_problem

from dsvm import experiments as ex


@pytest.fixture(scope="module")
def tiny_split():
    X, y = make_xor_problem(500, seed=1)
    return ex.Split("xor", X[:300], y[:300], X[300:], y[300:], {"n_train": 300, "n_test": 200})


def test_sensitivity_grid(tiny_split):
    s = ex.sensitivity(tiny_split.X_train, tiny_split.y_train, gamma=0.2, ks=[10, 40], Cs=[1.0, 10.0], folds=2,
                       name="xor")
    assert np.shape(s["cv_accuracy"]) == (2, 2) and np.shape(s["test_accuracy"]) == (2, 2)
    assert s["n_80"] == 240 and s["n_20"] == 60
    assert np.all((np.asarray(s["cv_accuracy"]) > 0.4) & (np.asarray(s["cv_accuracy"]) <= 1))
    best = s["best_by_cv"]
    assert s["cv_accuracy"][s["k"].index(best["k"])][s["C"].index(best["C"])] == pytest.approx(best["cv_accuracy"])
