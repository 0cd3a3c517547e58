"""TRON (trust-region Newton-CG) on a dense operator written from the formulas, against L-BFGS."""

import numpy as np
import pytest
from helpers import DenseSquaredHinge, lbfgs_sqhinge_optimum

from dsvm.solvers._tron import trust_region_newton


def _data(n=300, r=8, seed=0):
    rng = np.random.default_rng(seed)
    F = rng.normal(size=(n, r))
    y = np.where(F @ rng.normal(size=r) + 0.5 + 0.7 * rng.normal(size=n) > 0, 1.0, -1.0)
    return F, y


@pytest.mark.parametrize("fit_intercept", [True, False])
def test_reaches_the_optimum_of_an_independent_solver(fit_intercept):
    F, y = _data()
    op = DenseSquaredHinge(F, y, C=2.0, sample_weight=np.linspace(0.5, 1.5, len(y)), fit_intercept=fit_intercept)
    res = trust_region_newton(op, F.shape[1] + 1, tol=1e-8, max_iter=200)
    assert res.converged and res.method == "tron"
    optimum = lbfgs_sqhinge_optimum(F, y, op.c, fit_intercept=fit_intercept)
    np.testing.assert_allclose(op.objective(res.x), optimum, rtol=1e-8)
    np.testing.assert_allclose(res.objective, op.objective(res.x), rtol=1e-12)
    if not fit_intercept:
        assert res.x[-1] == 0.0


def test_objective_never_increases():
    F, y = _data(seed=1)
    op = DenseSquaredHinge(F * 30.0, y, C=10.0)  # far-reaching steps across many kinks of the loss
    res = trust_region_newton(op, F.shape[1] + 1, tol=1e-8, max_iter=300)
    assert res.converged
    objectives = [h["objective"] for h in res.history]
    assert all(b <= a for a, b in zip(objectives, objectives[1:]))


class _FirstTrialFails(DenseSquaredHinge):
    """The first trial point looks much worse than it is: TRON must reject it and shrink its region."""

    lied = False

    def evaluate(self, x0, x1, t_grid=(), hessian="none"):
        res = super().evaluate(x0, x1, t_grid, hessian)
        if not self.lied and not np.array_equal(x0, x1):
            self.lied = True
            res.loss += 1e6
        return res


def test_a_rejected_step_keeps_the_point_and_shrinks_the_radius():
    F, y = _data(seed=3)
    op = _FirstTrialFails(F, y, C=1.0)
    res = trust_region_newton(op, F.shape[1] + 1, tol=1e-8, max_iter=100)
    first, second = res.history[0], res.history[1]
    assert first["step"] == 0.0 and second["step"] == 1.0
    assert first["objective"] == op.objective(np.zeros(F.shape[1] + 1))  # still at the start
    assert second["radius"] > 0 and first["radius"] < np.linalg.norm(op.evaluate(np.zeros(9), np.zeros(9)).grad)
    assert res.converged
    np.testing.assert_allclose(op.objective(res.x), lbfgs_sqhinge_optimum(F, y, op.c), rtol=1e-8)


def test_starting_at_the_optimum_stops_at_once_and_passes_are_counted():
    F, y = _data(seed=2)
    op = DenseSquaredHinge(F, y, C=1.0)
    first = trust_region_newton(op, F.shape[1] + 1, tol=1e-9, max_iter=200)
    assert first.n_passes == op.n_passes  # every evaluate and hess_vec call is one pass
    again = trust_region_newton(op, F.shape[1] + 1, x0=first.x, tol=1e-6, max_iter=200)
    assert again.n_iter == 0 and again.converged and again.n_passes == 2  # the point and the reference at 0
