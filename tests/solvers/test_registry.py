"""The one solver dispatch: solve() runs each solver exactly as a direct call does."""

import numpy as np
import pytest
from helpers import DenseSquaredHinge

from dsvm.options import SOLVERS
from dsvm.solvers import (
    REGISTRY,
    Start,
    choose_hessian,
    resolve_hessian,
    semismooth_newton,
    solve,
)
from dsvm.solvers._dcd import dual_coordinate_descent
from dsvm.solvers._minibatch_pegasos import default_epochs, minibatch_pegasos
from dsvm.solvers._tron import trust_region_newton


def _op(seed=0, **kw):
    rng = np.random.default_rng(seed)
    F = rng.normal(size=(240, 6))
    y = np.where(F[:, 0] - F[:, 1] + 0.3 * rng.normal(size=240) > 0, 1.0, -1.0)
    return DenseSquaredHinge(F, y, C=3.0, **kw)


DIM = 7


def test_every_solver_is_registered_once():
    assert tuple(REGISTRY) == SOLVERS
    assert REGISTRY["newton"].resumable and not REGISTRY["tron"].resumable
    assert REGISTRY["dcd"].seeded and REGISTRY["pegasos"].seeded and not REGISTRY["newton"].seeded
    assert REGISTRY["pegasos"].loss == "hinge"


@pytest.mark.parametrize(("name", "direct"), [
    ("newton", lambda op: semismooth_newton(op, DIM, tol=1e-6, max_iter=50, hessian="gram")),
    ("tron", lambda op: trust_region_newton(op, DIM, tol=1e-6, max_iter=50, cg_rtol=0.05)),
    ("dcd", lambda op: dual_coordinate_descent(op, DIM, tol=1e-6, max_iter=1000, random_state=4,
                                               intercept_scaling=2.0)),
    ("pegasos", lambda op: minibatch_pegasos(op, DIM, C=3.0, epochs=3, batch_size=16, random_state=4)),
])
def test_solve_gives_the_direct_call_bit_for_bit(name, direct):
    options = {"tron": {"cg_rtol": 0.05}, "dcd": {"intercept_scaling": 2.0},
               "pegasos": {"epochs": 3, "batch_size": 16}}.get(name, {})
    via = solve(name, _op(), DIM, tol=1e-6, max_iter=50, hessian="gram", C=3.0, random_state=4, options=options)
    ref = direct(_op())
    np.testing.assert_array_equal(via.x, ref.x)
    assert via.n_passes == ref.n_passes and via.method == ref.method


def test_pegasos_budget_defaults_to_C_times_the_batch_size_in_epochs():
    # a progress test that never fires: the whole default budget runs, and the result says it did not converge
    res = solve("pegasos", _op(), DIM, tol=1e-4, max_iter=100, C=3.0, random_state=0, options={"progress_tol": 1e-300})
    assert len(res.history) == default_epochs(3.0, 64) == 192
    assert not res.converged and res.stop_reason == "epochs"


def test_newton_auto_resolves_the_hessian_as_choose_hessian():
    op = _op()
    res = solve("newton", op, DIM, tol=1e-6, max_iter=50)
    assert res.method == f"newton-{choose_hessian(op.n_rows, DIM, False)}"
    for n, dim, dist in ((1000, 11, False), (10**7, 2001, True), (500, 9000, False)):
        assert resolve_hessian("auto", n, dim, dist) == choose_hessian(n, dim, dist)
    assert resolve_hessian("cg", 10, 5, False) == "cg" and resolve_hessian("gram", 10**9, 5, True) == "gram"
    with pytest.raises(ValueError, match="hessian='lu' is not supported"):
        resolve_hessian("lu", 10, 5, False)


def test_newton_through_solve_is_semismooth_newton_with_the_start_s_hooks():
    x0 = np.full(DIM, 0.01)
    res = solve("newton", _op(), DIM, tol=1e-6, max_iter=50, hessian="gram", start=Start(x0=x0))
    ref = semismooth_newton(_op(), DIM, x0=x0, tol=1e-6, max_iter=50, hessian="gram")
    np.testing.assert_array_equal(res.x, ref.x)
    assert res.n_passes == ref.n_passes


def test_unknown_solvers_and_options_name_what_is_allowed():
    with pytest.raises(ValueError, match=r"solver='sgd' is not supported; choose one of \('newton', 'tron', 'dcd'"):
        solve("sgd", _op(), DIM, tol=1e-4, max_iter=10)
    with pytest.raises(ValueError, match=r"solver_options \['epochs'\] do not apply to solver='newton'; it takes "
                                         r"\['cg_max_iter', 'gap_tol', 'refresh_every'\]"):
        solve("newton", _op(), DIM, tol=1e-4, max_iter=10, options={"epochs": 3})


def test_every_solver_is_run_with_one_signature():
    """Each registered solver takes (op, dim, request): nothing is swallowed by a catch-all ``**kwargs``, and
    Newton's hooks travel in the request's Start."""
    import inspect

    for name, spec in REGISTRY.items():
        params = list(inspect.signature(spec.run).parameters.values())
        assert [p.name for p in params] == ["op", "dim", "req"], name
        assert all(p.kind is p.POSITIONAL_OR_KEYWORD for p in params), name
    seen = {}
    x0 = np.full(DIM, 0.01)
    res = solve("newton", _op(), DIM, tol=1e-6, max_iter=50, hessian="gram",
                start=Start(x0=x0, on_state=lambda st: seen.setdefault("states", []).append(st)))
    assert len(seen["states"]) == res.n_iter >= 1
