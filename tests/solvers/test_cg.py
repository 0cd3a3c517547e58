"""Conjugate gradient against numpy's direct solve."""

import numpy as np
import pytest

from dsvm.solvers._cg import conjugate_gradient


def _spd(n, cond, seed=0):
    rng = np.random.default_rng(seed)
    Q, _ = np.linalg.qr(rng.normal(size=(n, n)))
    return (Q * np.geomspace(1.0, cond, n)) @ Q.T


@pytest.mark.parametrize("cond", [10.0, 1e6])
def test_solves_spd_systems_to_the_requested_residual(cond):
    H = _spd(40, cond)
    b = np.random.default_rng(1).normal(size=40)
    res = conjugate_gradient(lambda v: H @ v, b, rtol=1e-10, max_iter=2000)
    assert res.converged
    assert np.linalg.norm(H @ res.x - b) <= 1e-8 * np.linalg.norm(b)
    np.testing.assert_allclose(res.x, np.linalg.solve(H, b), rtol=1e-6 * cond ** 0.5, atol=1e-12)
    # the residual it reports is the true one, up to rounding of the recursion
    assert abs(res.residual_norm - np.linalg.norm(b - H @ res.x)) <= 1e-9 * np.linalg.norm(b)


def test_zero_right_hand_side_takes_no_step():
    res = conjugate_gradient(lambda v: pytest.fail("no product needed"), np.zeros(5))
    assert res.converged and res.n_iter == 0 and not res.x.any()


def test_iteration_cap_is_reported_as_not_converged():
    H = _spd(60, 1e8, seed=2)
    b = np.ones(60)
    res = conjugate_gradient(lambda v: H @ v, b, rtol=1e-12, max_iter=5)
    assert res.n_iter == 5 and not res.converged
    np.testing.assert_allclose(res.residual_norm, np.linalg.norm(b - H @ res.x), rtol=1e-6)


def test_singular_system_with_b_in_the_range_converges():
    rng = np.random.default_rng(3)
    A = rng.normal(size=(30, 10))
    H = A @ A.T  # rank 10
    b = H @ rng.normal(size=30)
    res = conjugate_gradient(lambda v: H @ v, b, rtol=1e-10, max_iter=200)
    assert res.converged and np.linalg.norm(H @ res.x - b) <= 1e-9 * np.linalg.norm(b)


def test_zero_curvature_stops_without_nan():
    H = np.diag([1.0, 0.0])
    res = conjugate_gradient(lambda v: H @ v, np.array([0.0, 1.0]), rtol=1e-8)
    assert np.all(np.isfinite(res.x)) and not res.converged and res.n_iter == 1


def test_diagonal_preconditioner_needs_fewer_steps_on_a_badly_scaled_matrix():
    rng = np.random.default_rng(4)
    d = np.geomspace(1.0, 1e6, 50)
    E = rng.normal(size=(50, 50)) * 0.01
    H = np.diag(d) + np.sqrt(d)[:, None] * (E @ E.T) * np.sqrt(d)[None, :]
    b = rng.normal(size=50)
    plain = conjugate_gradient(lambda v: H @ v, b, rtol=1e-8, max_iter=1000)
    pre = conjugate_gradient(lambda v: H @ v, b, rtol=1e-8, max_iter=1000, preconditioner=np.diag(H))
    assert pre.converged and pre.n_iter < plain.n_iter / 2
    np.testing.assert_allclose(pre.x, np.linalg.solve(H, b), rtol=1e-5)


def test_callable_preconditioner_applies_an_approximate_inverse():
    rng = np.random.default_rng(5)
    A = rng.normal(size=(4000, 300)) * np.geomspace(1.0, 1e-3, 300)  # columns of very different scales
    H = np.eye(300) + 50.0 * A.T @ A  # badly conditioned (κ ~ 10⁵)
    H_approx = np.eye(300) + 50.0 * A[::2].T @ A[::2] * 2.0  # half the rows, scaled: as a row subsample's Gram
    b = rng.normal(size=300)
    plain = conjugate_gradient(lambda v: H @ v, b, rtol=1e-10, max_iter=1000)
    pre = conjugate_gradient(lambda v: H @ v, b, rtol=1e-10, max_iter=1000,
                             preconditioner=lambda v: np.linalg.solve(H_approx, v))
    exact = conjugate_gradient(lambda v: H @ v, b, rtol=1e-10, preconditioner=lambda v: np.linalg.solve(H, v))
    assert pre.converged and pre.n_iter < plain.n_iter / 2
    assert exact.converged and exact.n_iter <= 2
    np.testing.assert_allclose(pre.x, np.linalg.solve(H, b), rtol=1e-7)
