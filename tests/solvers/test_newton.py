"""The semismooth Newton solver against independent oracles on fixed features."""

import threading
import warnings

import numpy as np
import pytest
from helpers import lbfgs_sqhinge_optimum, make_circles_problem, sqhinge_objective_dense
from sklearn.exceptions import ConvergenceWarning
from sklearn.svm import LinearSVC

from dsvm import NystroemSVC
from dsvm.blocks import aligned_vector, as_row_blocks
from dsvm.problems import SquaredHingeOperator
from dsvm.solvers import choose_hessian, semismooth_newton
from dsvm.svm import encode_labels


def _features(n=800, seed=0):
    X, y = make_circles_problem(n=n, p=5, seed=seed)
    clf = NystroemSVC(n_components=60, gamma=0.2, dtype="float64", random_state=seed, max_iter=1)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        clf.fit(X, y)
    return clf.feature_map_.transform_block(X), y


def _operator(F, y, C, sample_weight=None, class_weight=(1.0, 1.0), block_rows=97, fit_intercept=True):
    rb = as_row_blocks(F, block_rows)
    classes, codes = encode_labels(y, rb)
    sw = None if sample_weight is None else aligned_vector(sample_weight, rb)
    return SquaredHingeOperator(rb, codes, 1, C * np.asarray(class_weight), sw, fit_intercept)


@pytest.mark.parametrize("hessian", ["gram", "cg"])
def test_objective_matches_liblinear_and_lbfgs(hessian):
    F, y = _features()
    C = 10.0
    res = semismooth_newton(_operator(F, y, C), F.shape[1] + 1, tol=1e-10, hessian=hessian)
    assert res.converged
    y_pm = np.where(y == 1, 1.0, -1.0)
    c = np.full(len(y), C)
    ours = sqhinge_objective_dense(F, y_pm, c, res.x[:-1], res.x[-1])
    np.testing.assert_allclose(res.objective, ours, rtol=1e-12)
    # LIBLINEAR regularises the bias as (b/s)²/2; a large s makes that negligible.
    ref = LinearSVC(C=C, loss="squared_hinge", dual=False, tol=1e-12, intercept_scaling=1e3, max_iter=100_000).fit(F, y)
    liblinear = sqhinge_objective_dense(F, y_pm, c, ref.coef_[0], ref.intercept_[0])
    assert abs(ours - liblinear) <= 1e-6 * liblinear
    assert ours <= liblinear * (1 + 1e-9)
    assert abs(ours - lbfgs_sqhinge_optimum(F, y_pm, c)) <= 1e-6 * ours


def test_weighted_objective_matches_dense_reference():
    F, y = _features(seed=1)
    rng = np.random.default_rng(0)
    sw = rng.uniform(0.1, 3.0, size=len(y))
    cw = np.array([0.7, 2.5])
    res = semismooth_newton(_operator(F, y, 2.0, sw, cw), F.shape[1] + 1, tol=1e-10)
    y_pm = np.where(y == 1, 1.0, -1.0)
    c = 2.0 * cw[(y == 1).astype(int)] * sw
    np.testing.assert_allclose(res.objective, lbfgs_sqhinge_optimum(F, y_pm, c), rtol=1e-6)


def test_gram_and_cg_agree_and_gram_needs_fewer_passes():
    F, y = _features(seed=2)
    g = semismooth_newton(_operator(F, y, 5.0), F.shape[1] + 1, tol=1e-9, hessian="gram")
    c = semismooth_newton(_operator(F, y, 5.0), F.shape[1] + 1, tol=1e-9, hessian="cg")
    np.testing.assert_allclose(g.objective, c.objective, rtol=1e-9)
    np.testing.assert_allclose(g.x, c.x, rtol=1e-4, atol=1e-6)
    assert g.n_passes < c.n_passes


def test_no_intercept_matches_liblinear_without_bias():
    F, y = _features(seed=3)
    res = semismooth_newton(_operator(F, y, 1.0, fit_intercept=False), F.shape[1] + 1, tol=1e-10)
    assert res.x[-1] == 0.0
    ref = LinearSVC(C=1.0, dual=False, tol=1e-12, fit_intercept=False, max_iter=100_000).fit(F, y)
    y_pm = np.where(y == 1, 1.0, -1.0)
    ref_obj = sqhinge_objective_dense(F, y_pm, np.ones(len(y)), ref.coef_[0], 0.0)
    np.testing.assert_allclose(res.objective, ref_obj, rtol=1e-8)


def test_warm_start_at_the_solution_stops_immediately():
    F, y = _features(seed=4)
    op = _operator(F, y, 3.0)
    first = semismooth_newton(op, F.shape[1] + 1, tol=1e-8)
    again = semismooth_newton(op, F.shape[1] + 1, x0=first.x, tol=1e-8)
    assert again.n_iter == 0 and again.converged
    np.testing.assert_allclose(again.objective, first.objective, rtol=1e-12)


def test_every_iteration_decreases_the_objective_and_is_logged(caplog):
    F, y = _features(seed=5)
    with caplog.at_level("INFO", logger="dsvm.solvers._newton"):
        res = semismooth_newton(_operator(F, y, 10.0), F.shape[1] + 1, tol=1e-8)
    objs = [h["objective"] for h in res.history]
    assert all(b <= a for a, b in zip(objs, objs[1:]))
    # this thread's records only: a solve another test left running in a pool thread logs to the same logger
    lines = [r.getMessage() for r in caplog.records if "newton it=" in r.getMessage() and r.thread == threading.get_ident()]
    # and a thread's ident can be reused: this solve's lines are those naming its iterates' objectives, in order
    ours = [line for line in lines if any(f"obj={h['objective']:.8e}" in line for h in res.history)]
    assert [f"it={i + 1} obj={h['objective']:.8e}" for i, h in enumerate(res.history)] == [
        line[len("newton "):line.index(" |g|")] for line in ours]
    assert len(ours) == res.n_iter
    assert all("obj=" in line and "|g|=" in line and "|A|=" in line and "cg=" in line for line in ours)


def test_max_iter_reached_is_reported():
    F, y = _features(seed=6)
    res = semismooth_newton(_operator(F, y, 10.0), F.shape[1] + 1, tol=1e-12, max_iter=2)
    assert not res.converged and res.stop_reason == "max_iter" and res.n_iter == 2


def test_cost_model_picks_gram_for_small_k_and_cg_for_huge_k():
    assert choose_hessian(50_000, 501, distributed=False) == "gram"
    assert choose_hessian(50_000, 10_001, distributed=False) == "cg"
    # few rows, large k: the Gram pass is cheap but the factorisation is not
    assert choose_hessian(2_000, 6_000, distributed=False) == "cg"


# --------------------------------------------------------------- float32 factor, float64 refinement
def _newton_system(order: int, n: int, scale: float, seed: int = 0):
    from dsvm.solvers._newton import _newton_matrix

    rng = np.random.default_rng(seed)
    F1 = np.hstack([rng.random((n, order - 1)) * scale, np.ones((n, 1))])
    H_loss = 2 * 10.0 * F1.T @ F1
    reg = np.ones(order)
    reg[-1] = 0.0
    rhs = rng.normal(size=order)
    return H_loss, reg, rhs, np.linalg.solve(_newton_matrix(H_loss, reg), rhs)


@pytest.mark.parametrize("scale, float32_used", [(0.05, True), (1e3, False)])
def test_large_newton_systems_solve_in_float32_with_float64_refinement(monkeypatch, scale, float32_used):
    import dsvm.solvers._newton as newton

    results = []
    real = newton._refined_float32_solve
    monkeypatch.setattr(newton, "_refined_float32_solve", lambda H, b: results.append(real(H, b)) or results[-1])
    # scale 1e3: condition number ~1e11, beyond what a float32 factor can refine: float64 takes over
    H_loss, reg, rhs, ref = _newton_system(newton.MIXED_PRECISION_ORDER + 10, 3000, scale)
    x = newton._solve_newton_system(H_loss, reg, rhs)
    assert (results[0] is not None) == float32_used
    np.testing.assert_allclose(x, ref, rtol=1e-7, atol=1e-9 * np.abs(ref).max())


def test_float32_factor_gives_the_same_newton_solve(monkeypatch):
    import dsvm.solvers._newton as newton

    rng = np.random.default_rng(7)
    r = newton.MIXED_PRECISION_ORDER + 20
    F = rng.normal(size=(3000, r)) / np.sqrt(r)
    y = np.where(F[:, :5].sum(axis=1) + 0.3 * rng.normal(size=3000) > 0, 1, -1)
    op = _operator(F, y, 1.0, block_rows=1000)
    mixed = semismooth_newton(op, r + 1, tol=1e-8)
    monkeypatch.setattr(newton, "MIXED_PRECISION_ORDER", 10**9)
    plain = semismooth_newton(op, r + 1, tol=1e-8)
    assert mixed.converged and plain.converged
    np.testing.assert_allclose(mixed.objective, plain.objective, rtol=1e-10)
    np.testing.assert_allclose(mixed.x, plain.x, rtol=1e-6, atol=1e-8)


@pytest.mark.parametrize("fit_intercept", [True, False])
def test_cg_preconditioned_by_a_subsample_gram_gives_the_gram_solution_in_fewer_steps(fit_intercept):
    F, y = _features(n=2000, seed=4)
    y = np.where(np.random.default_rng(0).random(len(y)) < 0.2, -y, y)  # noisy labels: most rows active, as at scale
    C, dim = 20.0, F.shape[1] + 1
    # the opening of a fit: every 4th row, costs scaled by 4, solved by Cholesky; its Gram matrix at its solution
    sub = semismooth_newton(_operator(F[::4], y[::4], C, np.full(len(y[::4]), 4.0), fit_intercept=fit_intercept),
                            dim, tol=1e-2, hessian="gram")
    g = semismooth_newton(_operator(F, y, C, fit_intercept=fit_intercept), dim, tol=1e-9, hessian="gram")
    runs = [semismooth_newton(_operator(F, y, C, fit_intercept=fit_intercept), dim, x0=sub.x, tol=1e-9, hessian="cg",
                              hessian_estimate=estimate) for estimate in (None, sub.last_pass.hess)]
    plain, pre = runs
    assert pre.converged and plain.converged
    np.testing.assert_allclose(pre.objective, g.objective, rtol=1e-9)
    np.testing.assert_allclose(pre.x, g.x, rtol=1e-4, atol=1e-6)
    steps = [sum(h["cg_steps"] for h in r.history) for r in (plain, pre)]
    assert steps[1] < steps[0] / 2, steps
    assert fit_intercept or pre.x[-1] == 0.0


def test_a_hessian_estimate_that_does_not_factor_leaves_cg_unpreconditioned(caplog):
    F, y = _features(seed=5)
    dim = F.shape[1] + 1
    plain = semismooth_newton(_operator(F, y, 5.0), dim, tol=1e-9, hessian="cg")
    with caplog.at_level("INFO", logger="dsvm.solvers._newton"):
        res = semismooth_newton(_operator(F, y, 5.0), dim, tol=1e-9, hessian="cg",
                                hessian_estimate=-1e3 * np.eye(dim))
    assert "does not factor" in caplog.text
    np.testing.assert_allclose(res.objective, plain.objective, rtol=1e-12)
    assert [h["cg_steps"] for h in res.history] == [h["cg_steps"] for h in plain.history]
    caplog.clear()
    with caplog.at_level("INFO", logger="dsvm.solvers._newton"):
        res = semismooth_newton(_operator(F, y, 5.0), dim, tol=1e-9, hessian="cg",
                                hessian_estimate=np.full((dim, dim), np.nan))
    assert "not finite" in caplog.text and res.converged
    np.testing.assert_allclose(res.objective, plain.objective, rtol=1e-12)


def test_the_gram_variant_ignores_a_hessian_estimate():
    F, y = _features(seed=6)
    dim = F.shape[1] + 1
    a = semismooth_newton(_operator(F, y, 5.0), dim, tol=1e-9, hessian="gram")
    b = semismooth_newton(_operator(F, y, 5.0), dim, tol=1e-9, hessian="gram", hessian_estimate=np.eye(dim))
    np.testing.assert_array_equal(a.x, b.x)


def test_a_resumed_cg_solve_is_preconditioned_by_the_estimate_its_checkpoint_kept():
    F, y = _features(n=2000, seed=7)
    y = np.where(np.random.default_rng(2).random(len(y)) < 0.2, -y, y)
    dim = F.shape[1] + 1
    sub = semismooth_newton(_operator(F[::4], y[::4], 5.0, np.full(len(y[::4]), 4.0)), dim, tol=1e-2)
    states = []
    whole = semismooth_newton(_operator(F, y, 5.0), dim, x0=sub.x, tol=1e-9, hessian="cg",
                              hessian_estimate=sub.last_pass.hess, on_state=states.append)
    assert whole.n_iter >= 3
    np.testing.assert_array_equal(states[0]["H_loss"], sub.last_pass.hess)
    resumed = semismooth_newton(_operator(F, y, 5.0), dim, tol=1e-9, hessian="cg", resume=states[0])
    np.testing.assert_array_equal(resumed.x, whole.x)
    assert [h["cg_steps"] for h in resumed.history] == [h["cg_steps"] for h in whole.history]
