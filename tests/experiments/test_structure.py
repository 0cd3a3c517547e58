"""The structure benchmark (SLSQP, LIBSVM and dsvm on the same problems) and its SLSQP time cap (dsvm.experiments._structure)."""

from __future__ import annotations

import pytest
from helpers import make_circles_problem, make_xor_problem

from dsvm import experiments as ex
from dsvm.experiments._structure import slsqp_dual


@pytest.fixture(scope="module")
def tiny_split():
    X, y = make_xor_problem(500, seed=1)
    return ex.Split("xor", X[:300], y[:300], X[300:], y[300:], {"n_train": 300, "n_test": 200})


def test_structure_benchmark(tiny_split):
    X, y = make_xor_problem(400, seed=2)
    st = ex.structure_benchmark(tiny_split.X_train, tiny_split.y_train, X, y, gamma=0.2, sizes=[30, 60, 90], k=50,
                                slsqp_cap_s=30.0)
    assert [r["N"] for r in st["rows"]] == [30, 60, 90]
    for r in st["rows"]:
        assert abs(r["slsqp_rel_gap"]) < 1e-4  # SLSQP converges on these sizes
        assert abs(r["libsvm_rel_gap"]) < 1e-3  # LIBSVM stops at tol=1e-3 on its KKT gap
        assert r["generic_over_libsvm"] == pytest.approx(r["slsqp_seconds"] / r["libsvm_seconds"])
        assert r["libsvm_over_dsvm"] == pytest.approx(r["libsvm_seconds"] / r["dsvm_seconds"])
        assert r["dsvm_k"] <= min(50, r["N"]) and 0.5 < r["dsvm_accuracy"] <= 1


def test_slsqp_cap_is_reported():
    X, y = make_circles_problem(n=60, p=3, seed=3)
    from dsvm.approx import kernel_matrix, make_kernel_spec

    K = kernel_matrix(X, X, make_kernel_spec("rbf", 0.5))
    res = slsqp_dual(K, y.astype(float), 10.0, cap_s=0.0)
    assert res["capped"] and not res["success"]
