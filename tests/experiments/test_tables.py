"""Tables 3 and 4 of the paper and the claims checked on them (dsvm.experiments._tables, .claims)."""

from __future__ import annotations

import pytest
from helpers import make_xor_problem

from dsvm import experiments as ex
from dsvm.experiments._linear import REACH_RTOL


@pytest.fixture(scope="module")
def tiny_split():
    X, y = make_xor_problem(500, seed=1)
    return ex.Split("xor", X[:300], y[:300], X[300:], y[300:], {"n_train": 300, "n_test": 200})


def test_tables_3_and_4(tiny_split):
    fits = ex.lasn_fits(tiny_split, gamma=0.2, k=40, repeats=2)
    assert [row["seed"] for _, row in fits] == [0, 1]
    t3 = ex.table3(tiny_split, fits, budget_s=20.0)
    assert t3["repeats"] == 2 and len(t3["runs"]) == 2 and t3["k"] == 40
    assert set(t3["summary"]) == set(ex.SOLVERS)
    assert t3["summary"]["LA-SN"]["ratio_to_sn"] == pytest.approx(1.0)
    for solver, s in t3["summary"].items():
        assert s["reached_all"], solver
        assert s["rel_gap_max"] <= REACH_RTOL
        assert 0.5 < s["accuracy"]["mean"] <= 1.0
        assert set(s["seconds"]) == {"mean", "std", "median", "min", "max"}
    for run in t3["runs"]:
        assert run["phi_star"] <= min(e["objective"] for e in run["solvers"].values()) + 1e-9
    lib = ex.libsvm_fit(tiny_split, gamma=0.2)
    t4 = ex.table4("xor", fits, lib, accuracy_tolerance=0.01)
    assert t4["speedup"] == pytest.approx(lib["fit_seconds"] / t4["lasn_fit_seconds"]["mean"])
    assert t4["accuracy_difference"] == pytest.approx(t4["lasn_accuracy"]["mean"] - lib["accuracy"])
    assert t4["faster"] == (t4["speedup"] > 1)
    report = {"table3": [t3], "table4": [t4]}
    c = ex.claims(report)
    ratios = c["newton_10x_vs_liblinear"]["per_dataset"][0]
    assert ratios["LA-DCD"]["ratio"] == pytest.approx(t3["summary"]["LA-DCD"]["ratio_to_sn"])
    assert c["newton_10x_vs_liblinear"]["holds_on_all"] == ratios["holds"]
    assert c["lasn_faster_than_libsvm"]["per_dataset"][0]["speedup"] == t4["speedup"]
