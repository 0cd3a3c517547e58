"""NystroemSVR: the L2-loss SVR objective against LIBLINEAR and a dense reference."""

import dask.array as da
import numpy as np
import pytest
from helpers import sqeps_objective_dense
from scipy.optimize import minimize
from sklearn.svm import LinearSVR
from sklearn.utils.estimator_checks import parametrize_with_checks

from dsvm import NystroemSVR


def _data(n=500, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.uniform(-3, 3, size=(n, 2))
    y = np.sin(X[:, 0]) * np.cos(X[:, 1]) + 0.1 * rng.normal(size=n)
    return X, y


@pytest.mark.parametrize("epsilon", [0.0, 0.1])
@pytest.mark.parametrize("hessian", ["gram", "cg"])
def test_objective_matches_liblinear_on_same_features(epsilon, hessian):
    X, y = _data()
    C = 5.0
    m = NystroemSVR(C=C, epsilon=epsilon, gamma=0.5, n_components=60, dtype="float64", tol=1e-10,
                    hessian=hessian, random_state=0).fit(X, y)
    F = m.feature_map_.transform_block(X)
    ours = sqeps_objective_dense(F, y, np.full(len(y), C), m.coef_[0], m.intercept_[0], epsilon)
    np.testing.assert_allclose(m.objective_, ours, rtol=1e-10)
    ref = LinearSVR(C=C, epsilon=epsilon, loss="squared_epsilon_insensitive", dual=False, tol=1e-12,
                    intercept_scaling=1e3, max_iter=100_000).fit(F, y)
    theirs = sqeps_objective_dense(F, y, np.full(len(y), C), ref.coef_, ref.intercept_[0], epsilon)
    assert abs(ours - theirs) <= 1e-6 * theirs and ours <= theirs * (1 + 1e-9)
    np.testing.assert_allclose(m.predict(X), ref.predict(F), atol=1e-3)


def test_weighted_objective_matches_lbfgs():
    X, y = _data(seed=1)
    sw = np.random.default_rng(2).uniform(0.2, 2.0, size=len(y))
    C, eps = 2.0, 0.05
    m = NystroemSVR(C=C, epsilon=eps, gamma=0.5, n_components=40, dtype="float64", tol=1e-10,
                    random_state=0).fit(X, y, sample_weight=sw)
    F = m.feature_map_.transform_block(X)
    c = C * sw

    def fun(x):
        w, b = x[:-1], x[-1]
        e = F @ w + b - y
        r = np.maximum(0, np.abs(e) - eps)
        s = 2 * c * np.sign(e) * r
        return 0.5 * w @ w + c @ (r * r), np.concatenate([w + F.T @ s, [s.sum()]])

    ref = minimize(fun, np.zeros(F.shape[1] + 1), jac=True, method="L-BFGS-B",
                   options={"maxiter": 20000, "ftol": 1e-15, "gtol": 1e-10})
    np.testing.assert_allclose(m.objective_, ref.fun, rtol=1e-6)


def test_fits_a_nonlinear_function_and_dask_agrees():
    X, y = _data(n=1500, seed=3)
    m = NystroemSVR(C=10.0, epsilon=0.05, gamma=0.5, n_components=100, random_state=0, tol=1e-6).fit(X, y)
    assert m.score(X, y) > 0.9
    Xd, yd = da.from_array(X, chunks=(200, -1)), da.from_array(y, chunks=200)
    md = NystroemSVR(C=10.0, epsilon=0.05, gamma=0.5, n_components=100, random_state=0, tol=1e-6).fit(Xd, yd)
    pred = md.predict(Xd)
    assert isinstance(pred, da.Array)
    np.testing.assert_allclose(pred.compute(), m.predict(X), atol=1e-3)
    assert md.score(Xd, yd) == pytest.approx(m.score(X, y), abs=1e-4)


def test_bad_targets():
    X, y = _data(n=50)
    y[3] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        NystroemSVR(n_components=10).fit(X, y)
    with pytest.raises(ValueError, match="NaN"):
        NystroemSVR(n_components=10).fit(da.from_array(X, chunks=(10, -1)), da.from_array(y, chunks=10))
    with pytest.raises(ValueError, match="epsilon"):
        NystroemSVR(epsilon=-1.0).fit(X, np.zeros(len(X)))


@parametrize_with_checks([NystroemSVR(n_components=50, random_state=0)], expected_failed_checks=lambda e: {
    "check_sample_weight_equivalence_on_dense_data": "landmarks are sampled from rows, so duplicated rows change them",
    "check_sample_weight_equivalence_on_sparse_data": "landmarks are sampled from rows, so duplicated rows change them",
})
def test_sklearn_compatible(estimator, check):
    check(estimator)
