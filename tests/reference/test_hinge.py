"""Reference solvers: primal QP = dual QP = LIBSVM; subgradient descent's rate; bad input."""

import importlib.util

import numpy as np
import pytest
from sklearn.svm import SVC

from dsvm.approx import kernel_matrix, make_kernel_spec
from dsvm.reference import binary_labels, dual_qp, hinge_objective, primal_qp, subgradient_descent

needs_qp_solver = pytest.mark.skipif(
    importlib.util.find_spec("clarabel") is None,
    reason="the reference QPs need Clarabel: pip install 'dsvm[reference]'",
)

LINEAR = make_kernel_spec("linear", 1.0)
RBF = make_kernel_spec("rbf", 0.3)


def _linear_problem(n=100, p=5, seed=0):
    """Overlapping classes (not separable), so some slacks are positive."""
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, p))
    y = np.where(X @ rng.normal(size=p) + 0.8 * rng.normal(size=n) > 0, 1, -1)
    return X, y


def _ball_problem(n=100, p=5, seed=0):
    """A non-linear boundary (a sphere)."""
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, p))
    y = np.where(np.linalg.norm(X, axis=1) > np.sqrt(p), 1, -1)
    return X, y


def _libsvm(X, y, C, spec):
    """LIBSVM's α·y (scattered to all rows), intercept and dual objective."""
    if spec.name == "linear":
        svc = SVC(kernel="linear", C=C, tol=1e-10).fit(X, y)
    else:
        svc = SVC(kernel="rbf", gamma=spec.gamma, C=C, tol=1e-10).fit(X, y)
    coef = np.zeros(len(y))
    coef[svc.support_] = svc.dual_coef_[0]
    K = kernel_matrix(X, X, spec)
    objective = np.abs(coef).sum() - 0.5 * coef @ K @ coef
    return coef, float(svc.intercept_[0]), float(objective)


def _rel(a, b):
    return abs(a - b) / max(abs(a), abs(b))


@needs_qp_solver
@pytest.mark.parametrize("C", [0.1, 1.0, 10.0])
def test_linear_primal_and_dual_agree_and_match_libsvm(C):
    X, y = _linear_problem()
    primal = primal_qp(X, y, C)
    dual = dual_qp(kernel_matrix(X, X, LINEAR), y, C)
    assert primal.status == dual.status == "Solved"
    # strong duality: the two optima and the gap inside the dual solution
    assert _rel(primal.objective, dual.objective) <= 1e-8
    assert 0 <= dual.gap <= 1e-8 * dual.objective + 1e-12
    # the same classifier
    w_dual = X.T @ dual.dual_coef
    np.testing.assert_allclose(w_dual, primal.w, rtol=0, atol=1e-8 * np.linalg.norm(primal.w))
    assert dual.b_method == "free"
    assert abs(dual.b - primal.b) <= 1e-8 * (1 + abs(primal.b))
    np.testing.assert_allclose(primal.xi, np.maximum(0, 1 - y * (X @ primal.w + primal.b)), atol=1e-12)
    assert primal.xi.max() > 1  # misclassified points: the soft margin is in use
    # LIBSVM keeps its kernel cache in float32, so its α are good to ~1e-7 · C
    coef, intercept, objective = _libsvm(X, y, C, LINEAR)
    np.testing.assert_allclose(dual.dual_coef, coef, rtol=0, atol=1e-5 * C)
    np.testing.assert_allclose(X.T @ coef, primal.w, rtol=0, atol=1e-5 * np.linalg.norm(primal.w))
    assert abs(intercept - dual.b) <= 1e-5 * (1 + abs(dual.b))
    assert _rel(objective, dual.objective) <= 1e-9


@needs_qp_solver
@pytest.mark.parametrize("C", [1.0, 10.0])
def test_rbf_dual_matches_libsvm_and_the_feature_space_primal(C):
    X, y = _ball_problem()
    K = kernel_matrix(X, X, RBF)
    dual = dual_qp(K, y, C)
    assert dual.gap <= 1e-8 * dual.objective
    assert 0 < dual.free.size <= dual.support.size < len(y)
    if C == 1.0:
        assert dual.free.size < dual.support.size  # some α at the bound C
    coef, intercept, objective = _libsvm(X, y, C, RBF)
    np.testing.assert_allclose(dual.dual_coef, coef, rtol=0, atol=1e-5 * C)
    assert abs(intercept - dual.b) <= 1e-5 * (1 + abs(dual.b))
    assert _rel(objective, dual.objective) <= 1e-9
    np.testing.assert_array_equal(dual.support, np.flatnonzero(coef))
    # the primal in feature space (empirical kernel map) has the same optimum
    primal = primal_qp(X, y, C, kernel=RBF)
    assert _rel(primal.objective, dual.objective) <= 1e-8
    np.testing.assert_allclose(primal.features @ primal.features.T, K, atol=1e-10)
    np.testing.assert_allclose(primal.decision, dual.decision, atol=1e-7)


@needs_qp_solver
def test_bias_without_free_support_vectors_uses_the_kkt_interval():
    X, y = _linear_problem()
    C = 1e-3  # every support vector at the bound C
    dual = dual_qp(kernel_matrix(X, X, LINEAR), y, C)
    assert dual.b_method == "kkt-interval" and dual.free.size == 0
    _, intercept, _ = _libsvm(X, y, C, LINEAR)
    assert abs(dual.b - intercept) <= 1e-6  # LIBSVM takes the midpoint of the same interval
    # any b in the interval is optimal: no duality gap, same optimum as the primal QP
    assert dual.gap <= 1e-8 * dual.objective
    assert _rel(primal_qp(X, y, C).objective, dual.objective) <= 1e-8


@needs_qp_solver
@pytest.mark.parametrize("labels", [(0, 1), (1, 2), ("no", "yes"), (False, True)])
def test_any_two_labels(labels):
    X, y = _linear_problem(n=60)
    y_lab = np.where(y > 0, labels[1], labels[0])
    ref = primal_qp(X, y, 1.0)
    res = primal_qp(X, y_lab, 1.0)
    np.testing.assert_array_equal(res.classes, np.array(labels))
    np.testing.assert_allclose(res.w, ref.w, atol=1e-9)
    dual = dual_qp(kernel_matrix(X, X, LINEAR), y_lab, 1.0)
    assert _rel(dual.objective, ref.objective) <= 1e-8
    y_pm, classes = binary_labels(y_lab)
    np.testing.assert_array_equal(y_pm, y)


@needs_qp_solver
def test_subgradient_gap_shrinks_at_least_like_one_over_sqrt_k():
    X, y = _linear_problem()
    C = 1.0
    f_star = primal_qp(X, y, C).objective
    result = subgradient_descent(X, y, C, n_iter=6400, eta0=1.0)
    # η_k = η0/k does not depend on n_iter, so the first n steps of this run
    # are the run with n_iter = n: read the best objective after n steps.
    ns = np.array([100, 400, 1600, 6400])
    gaps = (result.history[ns] - f_star) / f_star
    assert np.all(gaps > -1e-9)  # never below the optimum
    assert np.all(np.diff(gaps) < 0)
    assert np.all(gaps * np.sqrt(ns) <= gaps[0] * np.sqrt(ns[0]))  # gap·√n bounded
    slope = np.polyfit(np.log(ns), np.log(gaps), 1)[0]
    assert slope <= -0.3
    assert gaps[-1] <= 1e-3
    # the best iterate, not the last, is what comes back
    assert result.objective == result.history[-1] == pytest.approx(hinge_objective(result.w, result.b, X, y, C))
    assert np.all(np.diff(result.history) <= 0)
    short = subgradient_descent(X, y, C, n_iter=100, eta0=1.0)
    np.testing.assert_array_equal(short.history, result.history[:101])


def test_subgradient_keeps_the_best_iterate_when_steps_overshoot():
    X, y = _linear_problem(n=60)
    result = subgradient_descent(X, y, 10.0, n_iter=50, eta0=5.0)  # steps too long: f oscillates
    assert 0 < result.best_iter < 50  # the last iterates were worse than the best one
    assert np.all(result.history[result.best_iter :] == result.objective)
    assert result.history[result.best_iter - 1] > result.objective
    assert result.objective == pytest.approx(hinge_objective(result.w, result.b, X, y, 10.0))
    assert result.history[0] == pytest.approx(10.0 * len(y))  # w = 0, b = 0: every slack is 1


@pytest.mark.parametrize("C", [0.0, -1.0, np.nan, np.inf, "1"])
def test_bad_C(C):
    X, y = _linear_problem(n=20)
    K = kernel_matrix(X, X, LINEAR)
    with pytest.raises(ValueError, match="C must be"):
        primal_qp(X, y, C)
    with pytest.raises(ValueError, match="C must be"):
        dual_qp(K, y, C)
    with pytest.raises(ValueError, match="C must be"):
        subgradient_descent(X, y, C, 10, 1.0)


def test_bad_input():
    X, y = _linear_problem(n=20)
    K = kernel_matrix(X, X, LINEAR)
    with pytest.raises(ValueError, match="X has 20 rows but y has 19"):
        primal_qp(X, y[:-1], 1.0)
    with pytest.raises(ValueError, match="K has 20 rows but y has 19"):
        dual_qp(K, y[:-1], 1.0)
    with pytest.raises(ValueError, match="X has 20 rows but y has 21"):
        subgradient_descent(X, np.r_[y, 1], 1.0, 10, 1.0)
    for fn in (lambda yy: primal_qp(X, yy, 1.0), lambda yy: dual_qp(K, yy, 1.0)):
        with pytest.raises(ValueError, match="exactly two classes.*got 1"):
            fn(np.ones(20))
        with pytest.raises(ValueError, match="exactly two classes.*got 3"):
            fn(np.arange(20) % 3)
    with pytest.raises(ValueError, match="square"):
        dual_qp(K[:, :10], y, 1.0)
    with pytest.raises(ValueError, match="symmetric"):
        dual_qp(K + np.triu(np.ones_like(K), 1), y, 1.0)
    X_nan = X.copy()
    X_nan[3, 1] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        primal_qp(X_nan, y, 1.0)
    with pytest.raises(ValueError, match="kernel must be"):
        primal_qp(X, y, 1.0, kernel="rbf")
    with pytest.raises(ValueError, match="n_iter"):
        subgradient_descent(X, y, 1.0, 0, 1.0)
    with pytest.raises(ValueError, match="eta0"):
        subgradient_descent(X, y, 1.0, 10, 0.0)


def test_missing_solver_says_how_to_install(monkeypatch):
    import sys

    monkeypatch.setitem(sys.modules, "clarabel", None)  # makes `import clarabel` fail
    X, y = _linear_problem(n=20)
    with pytest.raises(ImportError, match=r"pip install 'dsvm\[reference\]'"):
        primal_qp(X, y, 1.0)
    subgradient_descent(X, y, 1.0, 5, 1.0)  # needs no QP solver
