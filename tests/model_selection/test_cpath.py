"""The C path of the CV search: a solve at the next C opens from the last one's passes, scaled, with no pass."""

import warnings
from collections import Counter

import numpy as np
from helpers import make_circles_problem

from dsvm import NystroemSVC
from dsvm.blocks import aligned_vector, as_row_blocks
from dsvm.model_selection._cpath import PathPoint, _point_after, merge_stats
from dsvm.problems import SquaredHingeOperator
from dsvm.solvers import semismooth_newton


def _circle_operator():
    X, y = make_circles_problem(n=500, seed=2)
    fmap = NystroemSVC(n_components=50, gamma=0.3, dtype="float64", random_state=0, max_iter=1)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fmap.fit(X, y)
    rb = as_row_blocks(fmap.feature_map_.transform_block(X), 128)
    codes = aligned_vector((y > 0).astype(np.int32), rb)

    def op(C):
        return SquaredHingeOperator(rb, codes, 1, np.array([C, C]), None)

    return op, fmap.coef_.shape[1] + 1


def test_a_path_point_opens_the_next_C_with_the_scaled_passes_and_no_pass_over_the_data():
    op, dim = _circle_operator()
    r1 = semismooth_newton(op(1.0), dim, tol=1e-10)
    point = _point_after(r1, 1.0)
    assert point.at_x is not None and point.at_x.hess is not None and point.g0_per_cost > 0
    plain = semismooth_newton(op(10.0), dim, x0=r1.x, tol=1e-10)
    start = point.start(10.0)
    warm = semismooth_newton(op(10.0), dim, x0=start.x0, initial=start.initial, g_ref=start.g_ref, tol=1e-10)
    np.testing.assert_allclose(warm.objective, plain.objective, rtol=1e-12)
    np.testing.assert_allclose(warm.x, plain.x, rtol=1e-7, atol=1e-9)
    assert warm.n_iter == plain.n_iter and warm.n_passes <= plain.n_passes - 2  # opening and zero passes saved
    # what it hands the solver is what passes at C = 10 compute
    fresh = op(10.0).evaluate(r1.x, r1.x, (), "full")
    np.testing.assert_allclose(start.initial.hess, fresh.hess, rtol=1e-9, atol=1e-9)
    np.testing.assert_allclose(start.initial.grad, fresh.grad, rtol=1e-9, atol=1e-9)
    np.testing.assert_allclose(start.initial.loss, fresh.loss, rtol=1e-12)
    zero = np.zeros(dim)
    np.testing.assert_allclose(start.g_ref, np.linalg.norm(op(10.0).evaluate(zero, zero).grad), rtol=1e-12)
    # and the objective and relative gradient it reports at C = 10 are the fresh ones
    f, g_rel = point.objective_and_relative_gradient(10.0, np.r_[np.ones(dim - 1), 0.0])
    np.testing.assert_allclose(f, 0.5 * r1.x[:-1] @ r1.x[:-1] + fresh.loss, rtol=1e-12)
    np.testing.assert_allclose(g_rel, np.linalg.norm(np.r_[r1.x[:-1], 0.0] + fresh.grad) / start.g_ref, rtol=1e-9)


def test_the_solver_s_last_pass_is_the_pass_at_its_solution():
    op, dim = _circle_operator()
    res = semismooth_newton(op(3.0), dim, tol=1e-8, max_iter=3)  # stopped part way: a delta-updated Gram
    fresh = op(3.0).evaluate(res.x, res.x, (), "full")
    np.testing.assert_allclose(res.last_pass.hess, fresh.hess, rtol=1e-8, atol=1e-8)
    np.testing.assert_allclose(res.last_pass.grad, fresh.grad, rtol=1e-10, atol=1e-12)
    assert res.last_pass.n_active == fresh.n_active


def test_a_point_without_a_kept_pass_starts_from_x_alone():
    start = PathPoint(x=np.ones(3), C=2.0).start(4.0)
    assert start.initial is None and start.g_ref is None and np.array_equal(start.x0, np.ones(3))


def test_merged_stats_add_counts_and_keep_the_larger_maximum():
    merged = merge_stats(Counter(n_solves=2, max_newton_iter=5), {"n_solves": 3, "max_newton_iter": 4, "restarts": 1})
    assert merged == Counter(n_solves=5, max_newton_iter=5, restarts=1)
