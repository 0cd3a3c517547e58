"""newton, tron, dcd and pegasos behind one interface (NystroemSVC(solver=...))."""

import dask.array as da
import numpy as np
import pytest
from helpers import make_circles_problem, sqhinge_objective_dense
from scipy.optimize import minimize

from dsvm import NystroemSVC, NystroemSVR

PARAMS = dict(C=5.0, gamma=0.3, n_components=60, random_state=0, dtype="float64", tol=1e-8)


def _dense_l2_objective(model, X, y):
    F = model.feature_map_.transform_block(X)
    y_pm = np.where(y == model.classes_[1], 1.0, -1.0)
    return sqhinge_objective_dense(F, y_pm, np.full(len(y), PARAMS["C"]), model.coef_[0], model.intercept_[0])


def test_newton_tron_and_dcd_reach_the_same_l2_optimum():
    X, y = make_circles_problem(n=800, seed=11)
    # LIBLINEAR regularises the bias as ½(b/s)²; on a problem this small s must be
    # large for that term to vanish next to the loss (the default s = 1 suits large n).
    models = {
        s: NystroemSVC(solver=s, **PARAMS, solver_options={"intercept_scaling": 10.0} if s == "dcd" else None,
                       max_iter=20_000 if s == "dcd" else 100).fit(X, y)
        for s in ("newton", "tron", "dcd")
    }
    objs = {s: _dense_l2_objective(m, X, y) for s, m in models.items()}
    best = min(objs.values())
    for s, value in objs.items():
        assert (value - best) / best <= 1e-5, (s, objs)
    # each reports its own objective: newton and tron the L2 primal, dcd adds LIBLINEAR's ½ b²
    np.testing.assert_allclose(models["newton"].objective_, objs["newton"], rtol=1e-10)
    np.testing.assert_allclose(models["tron"].objective_, objs["tron"], rtol=1e-10)
    b = models["dcd"].intercept_[0]
    np.testing.assert_allclose(models["dcd"].objective_, objs["dcd"] + 0.5 * (b / 10.0) ** 2, rtol=1e-10)
    for m in models.values():
        st = m.solver_stats_["problems"][0]
        assert st["n_passes"] >= 1 and st["seconds"] > 0 and st["n_iter"] >= 1
    assert models["tron"].solver_stats_["problems"][0]["method"] == "tron"


def test_tron_on_dask_input_streams_like_newton():
    X, y = make_circles_problem(n=600, seed=12)
    Xd, yd = da.from_array(X, chunks=(100, -1)), da.from_array(y, chunks=100)
    a = NystroemSVC(solver="tron", **PARAMS).fit(Xd, yd)
    b = NystroemSVC(solver="newton", **PARAMS).fit(X, y)
    np.testing.assert_allclose(a.objective_, b.objective_, rtol=1e-7)


def test_pegasos_minimises_the_hinge_objective():
    X, y = make_circles_problem(n=1000, seed=13)
    C = 1.0
    m = NystroemSVC(solver="pegasos", C=C, gamma=0.3, n_components=60, random_state=0,
                    solver_options={"epochs": 30, "batch_size": 16}).fit(X, y)
    F = m.feature_map_.transform_block(X).astype(np.float64)
    y_pm = np.where(y == m.classes_[1], 1.0, -1.0)

    def hinge(x):
        w, b = x[:-1], x[-1]
        return 0.5 * w @ w + C * np.maximum(0, 1 - y_pm * (F @ w + b)).sum()

    # reference optimum of the same (non-smooth) problem by a generic solver
    ref = minimize(hinge, np.zeros(F.shape[1] + 1), method="Powell", options={"maxiter": 200000, "xtol": 1e-8})
    best = min(ref.fun, hinge(np.concatenate([m.coef_[0], m.intercept_])))
    np.testing.assert_allclose(m.objective_, hinge(np.concatenate([m.coef_[0], m.intercept_])), rtol=1e-6)
    assert m.objective_ <= 1.05 * best
    assert m.score(X, y) > 0.9


def test_pegasos_is_deterministic_and_streams_dask_blocks():
    X, y = make_circles_problem(n=500, seed=14)
    kw = dict(solver="pegasos", C=1.0, gamma=0.3, n_components=40, random_state=3, solver_options={"epochs": 3})
    a = NystroemSVC(**kw).fit(X, y)
    b = NystroemSVC(**kw).fit(X, y)
    np.testing.assert_array_equal(a.coef_, b.coef_)
    c = NystroemSVC(**kw, block_rows=500).fit(da.from_array(X, chunks=(500, -1)), da.from_array(y, chunks=500))
    np.testing.assert_allclose(c.coef_, a.coef_, rtol=1e-5, atol=1e-7)


def test_pegasos_without_intercept_minimises_the_problem_without_bias():
    """fit_intercept=False: no hidden bias is trained and then dropped (LinearSVC's hinge optimum is the oracle)."""
    from sklearn.svm import LinearSVC

    rng = np.random.RandomState(0)
    X = rng.randn(1000, 3)
    y = (X[:, 0] + 0.3 * rng.randn(1000) > 1).astype(int)  # unbalanced: a bias would matter
    m = NystroemSVC(kernel="linear", solver="pegasos", n_components=3, fit_intercept=False, random_state=0,
                    solver_options={"epochs": 200}).fit(X, y)
    F = m.feature_map_.transform_block(X).astype(np.float64)
    y_pm = np.where(y == 1, 1.0, -1.0)
    ref = LinearSVC(loss="hinge", fit_intercept=False, C=m.C, max_iter=100_000, tol=1e-8).fit(F, y_pm).coef_[0]
    best = 0.5 * ref @ ref + m.C * np.maximum(0, 1 - y_pm * (F @ ref)).sum()
    assert m.intercept_[0] == 0.0
    assert m.objective_ <= 1.01 * best  # it was 954 against 684 when the bias was trained and dropped


def test_every_solver_is_reproducible_given_random_state():
    X, y = make_circles_problem(n=400, seed=15)
    for solver in ("newton", "tron", "dcd", "pegasos"):
        a, b = (NystroemSVC(solver=solver, C=5.0, gamma=0.3, n_components=30, random_state=4).fit(X, y)
                for _ in range(2))
        np.testing.assert_array_equal(a.coef_, b.coef_, err_msg=solver)


def test_multiclass_with_every_solver():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(450, 2))
    y = np.digitize(X[:, 0] + 0.3 * X[:, 1] ** 2, [-0.5, 0.5])
    for solver in ("newton", "tron", "dcd", "pegasos"):
        m = NystroemSVC(solver=solver, C=5.0, gamma=0.5, n_components=40, random_state=0).fit(X, y)
        assert m.coef_.shape[0] == 3 and m.score(X, y) > 0.85, solver


def test_solver_options_are_checked():
    X, y = make_circles_problem(n=100)
    with pytest.raises(ValueError, match="do not apply to solver='newton'"):
        NystroemSVC(solver_options={"epochs": 3}).fit(X, y)
    with pytest.raises(ValueError, match="solver="):
        NystroemSVR(solver="dcd").fit(X, y.astype(float))


def test_dcd_refuses_features_that_do_not_fit(monkeypatch):
    import psutil

    X, y = make_circles_problem(n=200)

    class Tiny:
        available = 1000

    monkeypatch.setattr(psutil, "virtual_memory", lambda: Tiny())
    with pytest.raises(MemoryError, match="solver='dcd' needs the 200 x"):
        NystroemSVC(solver="dcd", n_components=20, gamma=0.3).fit(X, y)
