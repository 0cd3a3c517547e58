"""dsvm.reference.exact_squared_hinge: the exact kernel squared-hinge SVM.

Oracles: NystroemSVC with every training row a landmark (the same problem, solved by dsvm's Newton
method on its features); the problem's optimality conditions; starts that must not change the optimum.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from sklearn.exceptions import ConvergenceWarning

from dsvm import KernelSpec, NystroemSVC
from dsvm.reference import SquaredHingeResult, exact_squared_hinge

SPEC = KernelSpec("rbf", gamma=0.5)


def _problem(n=240, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 3))
    y = np.where(X[:, 0] ** 2 + 0.5 * X[:, 1] ** 2 + 0.3 * rng.normal(size=n) > 1.0, "out", "in")
    return X, y


def test_the_optimum_of_nystroem_with_every_row_a_landmark():
    X, y = _problem()
    exact = exact_squared_hinge(X, y, C=5.0, spec=SPEC)
    full = NystroemSVC(C=5.0, gamma=0.5, n_components=len(X), dtype="float64", tol=1e-12, eig_rtol=1e-14,
                       random_state=0).fit(X, y)
    assert full.components_.shape[0] == len(X)
    np.testing.assert_allclose(exact.objective, full.objective_, rtol=1e-7)
    X_test, _ = _problem(100, seed=1)
    np.testing.assert_allclose(exact.decision_function(X_test), full.decision_function(X_test), rtol=1e-5, atol=1e-6)
    assert exact.predict(X_test).tolist() == full.predict(X_test).tolist()


def _check_optimal(X, y, C, r):
    y_pm = np.where(y == r.classes[1], 1.0, -1.0)
    f = r.decision_function(X)
    # β = 2C (y − f) on the rows of margin below 1 and zero elsewhere; the bias makes Σ β = 0
    active = np.flatnonzero(y_pm * f < 1)
    np.testing.assert_array_equal(r.support, active)
    np.testing.assert_allclose(r.beta, 2 * C * (y_pm[active] - f[active]), rtol=1e-8, atol=1e-10)
    assert abs(r.beta.sum()) < 1e-8 * np.abs(r.beta).sum()


@pytest.mark.parametrize("seed", range(8))
@pytest.mark.parametrize("C", [0.1, 5.0, 1000.0])
def test_it_stops_at_the_optimum_without_a_warning(seed, C):
    # seed 7 at C = 5 once ran to max_iter: at the optimum the line search's slope is rounding noise
    X, y = _problem(seed=seed)
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConvergenceWarning)
        r = exact_squared_hinge(X, y, C=C, spec=SPEC)
    assert r.n_iter < 30
    _check_optimal(X, y, C, r)


def test_optimality_conditions():
    X, y = _problem()
    _check_optimal(X, y, 5.0, exact_squared_hinge(X, y, C=5.0, spec=SPEC))


@pytest.mark.parametrize("start", ["few", "wrong", "empty"])
def test_any_start_reaches_the_same_optimum(start):
    X, y = _problem()
    ref = exact_squared_hinge(X, y, C=5.0, spec=SPEC)
    rows = {"few": np.arange(0, len(X), 7), "wrong": np.setdiff1d(np.arange(len(X)), ref.support),
            "empty": np.zeros(0, dtype=int)}[start]
    other = exact_squared_hinge(X, y, C=5.0, spec=SPEC, active=rows)
    np.testing.assert_allclose(other.objective, ref.objective, rtol=1e-10)
    np.testing.assert_array_equal(other.support, ref.support)


def test_bad_input_is_named():
    X, y = _problem()
    with pytest.raises(ValueError, match="max_active=100"):
        exact_squared_hinge(X, y, C=1.0, spec=SPEC, max_active=100)
    with pytest.raises(ValueError, match="outside 0..239"):
        exact_squared_hinge(X, y, C=1.0, spec=SPEC, active=[0, 240])
    with pytest.raises(ValueError, match="two classes"):
        exact_squared_hinge(X, np.zeros(len(X)), C=1.0, spec=SPEC)
    with pytest.raises(ValueError, match="1-D sequence of row indices"):
        exact_squared_hinge(X, y, C=1.0, spec=SPEC, active=[0.5, 1.5])
    with pytest.raises(ValueError, match="1-D sequence of row indices"):
        exact_squared_hinge(X, y, C=1.0, spec=SPEC, active=[[0, 1]])
    with pytest.raises(ValueError, match="max_iter"):
        exact_squared_hinge(X, y, C=1.0, spec=SPEC, max_iter=0)
    with pytest.raises(TypeError, match="KernelSpec"):
        exact_squared_hinge(X, y, C=1.0, spec="rbf")


def test_the_docstring_example_runs():
    import doctest

    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS)
    for obj in (exact_squared_hinge, SquaredHingeResult):
        for test in doctest.DocTestFinder().find(obj, obj.__name__):
            runner.run(test)
    assert runner.tries >= 9 and runner.failures == 0


def test_an_active_set_still_changing_at_max_iter_is_a_warning():
    X, y = _problem()
    with pytest.warns(ConvergenceWarning, match="did not converge in 1 iterations"):
        r = exact_squared_hinge(X, y, C=5.0, spec=SPEC, active=np.arange(0, len(X), 7), max_iter=1)
    assert r.n_iter == 1 and r.objective > exact_squared_hinge(X, y, C=5.0, spec=SPEC).objective


def test_a_row_with_nan_is_refused_not_labelled():
    X, y = _problem()
    r = exact_squared_hinge(X, y, C=5.0, spec=SPEC)
    with pytest.raises(ValueError, match="NaN"):
        r.predict(np.array([[0.0, np.nan, 1.0]]))
