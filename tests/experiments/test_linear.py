"""The linear problem of Table 3: every solver at equal objective (dsvm.experiments._linear)."""

from __future__ import annotations

import numpy as np
import pytest

from dsvm import experiments as ex
from dsvm.experiments._linear import (
    NEWTON_LADDER,
    REACH_RTOL,
    TOL_LADDER,
    LinearProblem,
    optimum,
    run_solver,
    time_to_objective,
)


@pytest.fixture(scope="module")
def tiny_problem():
    rng = np.random.default_rng(0)
    F = rng.normal(size=(300, 20)).astype(np.float32)
    y = np.where(F[:, :3].sum(axis=1) + 0.5 * rng.normal(size=300) > 0, 1.0, -1.0)
    return LinearProblem(F, y, C=10.0)


def test_objective_is_dsvms_objective(tiny_problem):
    from dsvm.solvers import semismooth_newton

    res = semismooth_newton(tiny_problem.operator(), tiny_problem.dim, tol=1e-8, hessian="gram")
    assert tiny_problem.objective(res.x[:-1], res.x[-1]) == pytest.approx(res.objective, rel=1e-6)
    # the optimum is a minimum: any other point is worse
    assert optimum(tiny_problem) <= tiny_problem.objective(res.x[:-1] * 1.01, res.x[-1]) + 1e-9


@pytest.mark.parametrize("solver", ex.SOLVERS)
def test_every_solver_reaches_the_optimum_within_1e_4(tiny_problem, solver):
    phi = optimum(tiny_problem)
    ladder = NEWTON_LADDER if solver == "LA-SN" else TOL_LADDER
    res = time_to_objective(tiny_problem, solver, phi, ladder=ladder, budget_s=30.0)
    assert res["reached"] and res["rel_gap"] <= REACH_RTOL
    assert res["rel_gap"] >= -1e-6  # nobody beats the tight float64 Newton solve
    assert res["tried"][-1]["tol"] == res["tol"] and res["seconds"] > 0
    # the loosest tolerance that reaches Φ*: the one before it (if any) did not
    for run in res["tried"][:-1]:
        assert run["rel_gap"] > REACH_RTOL


def test_la_sn_solves_as_the_estimator_does_in_one_block():
    """Single core means one block; at n >= 4 * 10000 rows LA-SN opens with the subsample warm start."""
    rng = np.random.default_rng(2)
    F = rng.normal(size=(40_000, 8)).astype(np.float32)
    y = np.where(F[:, :2].sum(axis=1) + 0.7 * rng.normal(size=40_000) > 0, 1.0, -1.0)
    problem = LinearProblem(F, y, C=1.0)
    assert problem.features.chunks == (40_000,)
    sub = problem.subsample_operator()
    assert sub is not None and 8_000 < sub.features.n_rows < 12_000 and sub.features.n_blocks == 1
    assert LinearProblem(F[:30_000], y[:30_000], C=1.0).subsample_operator() is None
    res = run_solver(problem, "LA-SN", 1e-8)
    assert res["objective"] == pytest.approx(optimum(problem), rel=1e-7)


def test_liblinear_regularises_the_bias_so_newton_is_not_worse(tiny_problem):
    newton = run_solver(tiny_problem, "LA-SN", 1e-8)
    for solver in ("LA-DCD", "LA-TRON"):
        lib = run_solver(tiny_problem, solver, 1e-6)
        assert newton["objective"] <= lib["objective"] * (1 + 1e-6)


def test_ladder_respects_the_budget(tiny_problem):
    res = time_to_objective(tiny_problem, "LA-TRON", optimum(tiny_problem) * 0.5, budget_s=0.0)
    assert not res["reached"] and len(res["tried"]) == 1
