"""NaN or infinity inside a solve is an error naming where it arose, never "convergence" or a model.

Issue 25 item 3: with ``C = 1e300`` the Newton solver stopped "after 0 iterations with |g|/|g0| = nan"
and the fit saved the model.  The solvers are fed here an operator written from the formulas
(``helpers.DenseSquaredHinge``) whose passes are poisoned on purpose.
"""

from dataclasses import replace

import numpy as np
import pytest
from helpers import DenseSquaredHinge

from dsvm.exceptions import NonFiniteError
from dsvm.solvers import semismooth_newton, solve
from dsvm.solvers._tron import trust_region_newton


class _Poisoned(DenseSquaredHinge):
    """The dense oracle, whose passes after the first ``clean`` ones give a NaN loss and gradient, or whose
    Gram matrices are infinite (``inf_gram``)."""

    def __init__(self, F, y, clean=None, inf_gram=False, overflow_passes=(), **kw):
        super().__init__(F, y, **kw)
        self.clean, self.inf_gram, self.overflow_passes = clean, inf_gram, set(overflow_passes)

    def evaluate(self, x0, x1, t_grid=(), hessian="none"):
        res = super().evaluate(x0, x1, t_grid, hessian)
        if self.clean is not None and self.n_passes > self.clean:
            res = replace(res, loss=np.nan, grad=np.full_like(res.grad, np.nan),
                          loss_grid=np.full_like(res.loss_grid, np.nan))
        if self.n_passes in self.overflow_passes:  # the loss of a long trial step overflowed
            res = replace(res, loss=np.inf, grad=np.full_like(res.grad, np.inf),
                          loss_grid=np.full_like(res.loss_grid, np.inf))
        if self.inf_gram and res.hess is not None:
            res = replace(res, hess=np.full_like(res.hess, np.inf))
        return res


def _data(n=200, r=6, seed=0):
    rng = np.random.default_rng(seed)
    F = rng.normal(size=(n, r))
    return F, np.where(F @ rng.normal(size=r) + 0.3 * rng.normal(size=n) > 0, 1.0, -1.0)


@pytest.mark.parametrize("hessian", ["gram", "cg"])
def test_newton_refuses_a_nan_objective_at_its_start(hessian):
    F, y = _data()
    with pytest.raises(NonFiniteError, match="newton: the objective is not finite at its starting point"):
        semismooth_newton(_Poisoned(F, y, clean=0), F.shape[1] + 1, hessian=hessian)


@pytest.mark.parametrize("hessian", ["gram", "cg"])
def test_newton_does_not_stop_for_precision_on_a_nan_trial_point(hessian):
    """Before: the line search found no decrease on NaN and the solve stopped with ``stop_reason="precision"``
    (a ConvergenceWarning blaming float32), returning a model."""
    F, y = _data()
    with pytest.raises(NonFiniteError, match="the objective is not finite at the trial point of iteration 1"):
        semismooth_newton(_Poisoned(F, y, clean=1), F.shape[1] + 1, hessian=hessian)


def test_an_overflowing_trial_step_is_only_a_rejected_step():
    """Every trial step of iteration 1 overflowing (+inf, not NaN: passes 2 and 3 are its line search and the
    finer one) is no decrease, not a NonFiniteError."""
    F, y = _data()
    res = semismooth_newton(_Poisoned(F, y, overflow_passes=(2, 3)), F.shape[1] + 1, hessian="gram")
    assert res.stop_reason == "precision" and np.isfinite(res.x).all() and np.isfinite(res.objective)


def test_newton_refuses_an_infinite_gram_matrix():
    F, y = _data()
    with pytest.raises(NonFiniteError, match="Gram matrix of the Newton system holds NaN or infinity at iteration 0"):
        semismooth_newton(_Poisoned(F, y, inf_gram=True), F.shape[1] + 1, hessian="gram")


def test_tron_refuses_nan_instead_of_running_out_its_iterations():
    F, y = _data()
    with pytest.raises(NonFiniteError, match="tron: the objective is not finite at its starting point"):
        trust_region_newton(_Poisoned(F, y, clean=0), F.shape[1] + 1, max_iter=20)
    with pytest.raises(NonFiniteError, match="tron: the objective is not finite at the trial point of iteration 1"):
        trust_region_newton(_Poisoned(F, y, clean=1), F.shape[1] + 1, max_iter=20)


def test_an_unpoisoned_solve_is_untouched():
    F, y = _data()
    for run in (lambda op: semismooth_newton(op, F.shape[1] + 1), lambda op: trust_region_newton(op, F.shape[1] + 1)):
        res = run(_Poisoned(F, y))
        assert res.converged and np.isfinite(res.x).all()


def test_solve_never_returns_a_non_finite_objective():
    """The one dispatch is the last guard, for every solver: Pegasos at C = 1e300 overflowed its objective and
    returned it."""
    F, y = _data()
    op = DenseSquaredHinge(F, y, C=1e300)
    with np.errstate(all="ignore"), pytest.raises(NonFiniteError, match="pegasos: the objective is not finite"):
        solve("pegasos", op, F.shape[1] + 1, tol=1e-4, max_iter=10, C=1e300, random_state=0, options={"epochs": 3})
