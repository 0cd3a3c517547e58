"""The subsample opening on Dask input: the model of the in-memory fit, with no pass over F for the opening."""

from __future__ import annotations

import logging

import dask
import dask.array as da
import numpy as np
import pytest
from helpers import interrupt_fit, make_circles_problem

from dsvm import NystroemSVC, NystroemSVR
from dsvm.svm._opening import opening_size

N, CHUNK = 6000, 1100
PARAMS = dict(C=3.0, gamma=0.4, n_components=60, random_state=0, tol=1e-7, dtype="float64",
              solver_options={"warm_rows": 600})


def _dask(X, y, sw=None):
    out = [da.from_array(X, chunks=(CHUNK, -1)), da.from_array(y, chunks=CHUNK)]
    return out + ([da.from_array(sw, chunks=CHUNK)] if sw is not None else [])


def _solve_passes_are_the_iterations(stats):
    """Every pass the solve counted belongs to an iteration: none was made for the opening."""
    return stats["n_passes"] == sum(h["passes"] for h in stats["history"])


@pytest.mark.parametrize("store", ["memory", "disk", "recompute", "implicit"])
def test_dask_input_opens_from_the_subsample_and_gives_the_in_memory_model(tmp_path, store):
    X, y = make_circles_problem(n=N, seed=3)
    sw = np.random.default_rng(0).uniform(0.5, 2.0, size=N)
    ref = NystroemSVC(**PARAMS).fit(X, y, sample_weight=sw)
    Xd, yd, swd = _dask(X, y, sw)
    with dask.config.set({"dsvm.scratch-directory": str(tmp_path)}):
        model = NystroemSVC(**PARAMS, feature_store=store).fit(Xd, yd, sample_weight=swd)
    opening = model.solver_stats_["opening"]
    assert 450 < opening["rows"] < 750  # about warm_rows, drawn by the row hash
    # the first Gram matrix covers the rows active at the subsample's solution, not all rows
    assert 0 < opening["first_gram_rows"][0] < 0.5 * N
    stats = model.solver_stats_["problems"][0]
    assert _solve_passes_are_the_iterations(stats) and stats["converged"]
    # the same optimum as the in-memory fit (which opens from the same rows), within the solver tolerance
    np.testing.assert_allclose(model.objective_, ref.objective_, rtol=1e-9)
    np.testing.assert_allclose(model.coef_, ref.coef_, rtol=0, atol=1e-5 * np.abs(ref.coef_).max())
    np.testing.assert_allclose(model.intercept_, ref.intercept_, rtol=0, atol=1e-5)
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("store", ["disk", "implicit"])
def test_multiclass_with_probabilities_on_disk(tmp_path, store):
    rng = np.random.default_rng(4)
    X, y01 = make_circles_problem(n=N, seed=5)
    y = np.where(y01 > 0, "out", np.where(X[:, 0] > 0, "east", "west"))
    params = {**PARAMS, "probability": True}
    ref = NystroemSVC(**params).fit(X, y)
    Xd, yd = _dask(X, y)
    with dask.config.set({"dsvm.scratch-directory": str(tmp_path)}):
        model = NystroemSVC(**params, feature_store=store).fit(Xd, yd)
    assert model.solver_stats_["feature_store"] == store
    assert len(model.solver_stats_["opening"]["first_gram_rows"]) == 3  # one opening per class
    assert all(_solve_passes_are_the_iterations(p) for p in model.solver_stats_["problems"])
    np.testing.assert_allclose(model.objective_, ref.objective_, rtol=1e-9)
    np.testing.assert_allclose(model.coef_, ref.coef_, rtol=0, atol=1e-5 * np.abs(ref.coef_).max())
    np.testing.assert_allclose(model.probA_, ref.probA_, rtol=1e-4)
    Xt = rng.normal(size=(200, X.shape[1]))
    np.testing.assert_allclose(model.predict_proba(Xt), ref.predict_proba(Xt), atol=1e-5)


def test_regression_on_dask_input_opens_from_the_subsample(tmp_path):
    rng = np.random.default_rng(6)
    X = rng.normal(size=(N, 4))
    y = np.sin(X[:, 0]) + 0.5 * X[:, 1] ** 2 + 0.1 * rng.normal(size=N)
    params = dict(C=2.0, epsilon=0.1, gamma=0.3, n_components=50, random_state=0, tol=1e-7, dtype="float64",
                  solver_options={"warm_rows": 600})
    ref = NystroemSVR(**params).fit(X, y)
    with dask.config.set({"dsvm.scratch-directory": str(tmp_path)}):
        model = NystroemSVR(**params, feature_store="disk").fit(*_dask(X, y))
    assert model.solver_stats_["opening"]["first_gram_rows"][0] < N
    np.testing.assert_allclose(model.objective_, ref.objective_, rtol=1e-9)
    np.testing.assert_allclose(model.coef_, ref.coef_, rtol=0, atol=1e-5 * np.abs(ref.coef_).max())


def test_no_opening_where_the_warm_start_would_not_run():
    X, y = make_circles_problem(n=N, seed=3)
    Xd, yd = _dask(X, y)
    for options, extra in [({"warm_start": "none", "warm_rows": 600}, {}), ({}, {"solver": "tron"})]:
        model = NystroemSVC(**{**PARAMS, "solver_options": options, **extra}).fit(Xd, yd)
        assert "opening" not in model.solver_stats_


def test_opening_size_grows_with_the_time_a_read_of_f_takes():
    n, p, k = 10_000_000, 28, 1000
    assert opening_size(n, p, k, k, {}) == 10_000  # F not on disk: the warm start's size
    sizes = [opening_size(n, p, k, k, {}, read) for read in (1.0, 100.0, 1000.0, 1e6)]
    assert sizes[0] == 10_000 and sizes == sorted(sizes) and sizes[-1] <= n // 8
    assert all(m in (10_000 * 4**j for j in range(8)) for m in sizes)
    assert opening_size(n, p, k, k, {"warm_rows": 5000}, 1e6) == 5000  # asked for: kept
    assert opening_size(n, p, k, k, {"warm_start": "none"}, 1e6) is None
    assert opening_size(30_000, p, k, k, {}, 1e6) is None  # too few rows for a subsample of 10000


def test_the_cg_variants_subsample_grows_to_sixteen_rows_per_feature_within_its_bounds():
    n, p, pass_s = 1_000_000, 20, 5.0
    gram = opening_size(n, p, 4000, 4000, {}, pass_s, "gram")
    cg = opening_size(n, p, 4000, 4000, {}, pass_s, "cg")
    assert gram == 16_000 and cg == n // 16  # 16 r would be 64,000: n / 16 bounds it
    assert opening_size(n, p, 1000, 1000, {}, 1.0, "cg") == 16_000
    # passes that cost little (F in memory, k = 4000): the Gram variant's size, not more
    assert opening_size(n, p, 4000, 4000, {}, 0.0, "cg") == opening_size(n, p, 4000, 4000, {}, 0.0, "gram") == 16_000
    assert opening_size(n, p, 1000, 1000, {"warm_rows": 5000}, pass_s, "cg") == 5000  # asked for: kept
    assert opening_size(n, p, 1000, 1000, {"warm_start": "none"}, pass_s, "cg") is None
    assert opening_size(30_000, p, 1000, 1000, {}, pass_s, "cg") is None
    # asked for a subsample where "auto" would take none (n < 4 m): the least size, not an error
    assert opening_size(20_000, p, 100, 100, {"warm_start": "subsample"}, 0.0, "cg") == 10_000


def test_before_a_cg_solve_the_subsample_grows_while_four_times_it_costs_a_pass(monkeypatch):
    """10M rows, k = 1000 (bench_scale): a CG solve from 40,000 rows took 4 Newton iterations and 10 passes;
    four times the subsample costs less than a pass, and starts it closer."""
    import dsvm.svm._opening as opening

    monkeypatch.setattr(opening.psutil, "virtual_memory", lambda: type("Memory", (), {"total": 16 * 2**30}))
    monkeypatch.setattr(opening.os, "cpu_count", lambda: 2)
    n, p, k, read_s = 10_000_000, 28, 1000, 20.0
    assert opening_size(n, p, k, k, {}, read_s, "gram") == 40_000  # at most half a read per four times
    assert opening_size(n, p, k, k, {}, read_s, "cg") == 160_000
    assert opening_size(n, p, k, k, {}, 2.0, "cg") == 16_000  # cheap passes: sixteen rows per feature
    # the memory bound holds the growth: 1/8 of 2 GiB is 33,554 rows of 1000 float64 features
    monkeypatch.setattr(opening.psutil, "virtual_memory", lambda: type("Memory", (), {"total": 2 * 2**30}))
    assert opening_size(n, p, k, k, {}, read_s, "cg") == 16_000


@pytest.mark.parametrize("store", ["memory", "implicit"])
def test_cg_opens_from_the_subsample_whose_gram_matrix_preconditions_it(store):
    X, y = make_circles_problem(n=N, seed=4)
    y = np.where(np.random.default_rng(1).random(N) < 0.15, 1 - y, y)  # label noise: most rows active
    ref = NystroemSVC(**PARAMS, hessian="gram").fit(X, y)
    plain = NystroemSVC(**{**PARAMS, "solver_options": {"warm_start": "none"}}, hessian="cg").fit(X, y)
    model = NystroemSVC(**PARAMS, hessian="cg", feature_store=store).fit(X, y)
    assert 450 < model.solver_stats_["opening"]["rows"] < 750
    stats = model.solver_stats_["problems"][0]
    assert stats["converged"] and _solve_passes_are_the_iterations(stats)
    np.testing.assert_allclose(model.objective_, ref.objective_, rtol=1e-9)
    steps = [sum(h["cg_steps"] for h in m.solver_stats_["problems"][0]["history"]) for m in (plain, model)]
    assert steps[1] < steps[0] / 2, steps


def test_auto_runs_preconditioned_cg_over_implicit_features_that_open_from_a_subsample(monkeypatch):
    import dsvm.svm._fitting as fitting

    X, y = make_circles_problem(n=N, seed=5)
    below = NystroemSVC(**PARAMS, feature_store="implicit").fit(X, y)
    assert below.solver_stats_["hessian"] == "gram"  # k = 60: below CG_MIN_ORDER
    monkeypatch.setattr(fitting, "CG_MIN_ORDER", 60)  # as at k >= 1000, on a small problem
    opened = NystroemSVC(**PARAMS, feature_store="implicit").fit(X, y)
    assert opened.solver_stats_["hessian"] == "cg" and "opening" in opened.solver_stats_
    stored = NystroemSVC(**PARAMS, feature_store="memory").fit(X, y)
    assert stored.solver_stats_["hessian"] == "gram"
    np.testing.assert_allclose(opened.objective_, stored.objective_, rtol=1e-9)
    alone = NystroemSVC(**{**PARAMS, "solver_options": {"warm_start": "none"}}, feature_store="implicit").fit(X, y)
    assert alone.solver_stats_["hessian"] == "gram"  # no subsample, no preconditioner: CG would take many passes


class _InterruptFullSolve(logging.Handler):
    """KeyboardInterrupt when the full solve (not the subsample's) logs its first iteration."""

    def emit(self, record):
        message = record.getMessage()
        if "newton it=1 " in message and "[subsample]" not in message:
            raise KeyboardInterrupt


def test_a_resumed_one_vs_rest_fit_solves_its_other_problems_by_the_gram_matrix(tmp_path, monkeypatch):
    import dsvm.svm._fitting as fitting

    monkeypatch.setattr(fitting, "CG_MIN_ORDER", 10)  # CG over implicit features at this small k
    rng = np.random.default_rng(8)
    X = rng.normal(size=(N, 4))
    y = np.digitize(X[:, 0] + 0.5 * np.sin(3 * X[:, 1]), [-0.5, 0.5])  # three classes
    params = {**PARAMS, "feature_store": "implicit"}
    fresh = NystroemSVC(**params).fit(X, y)
    assert {p["method"] for p in fresh.solver_stats_["problems"]} == {"newton-cg"}
    ckpt = tmp_path / "fit.ckpt.npz"
    interrupt_fit(lambda: NystroemSVC(**params, checkpoint=str(ckpt)).fit(X, y), _InterruptFullSolve())
    resumed = NystroemSVC(**params, checkpoint=str(ckpt)).fit(X, y)
    # the interrupted problem resumes as it began (preconditioned CG, its estimate from the checkpoint); the
    # others have no subsample solve to precondition CG, so they take the Gram matrix
    assert [p["method"] for p in resumed.solver_stats_["problems"]] == ["newton-cg", "newton-gram", "newton-gram"]
    np.testing.assert_allclose(resumed.objective_, fresh.objective_, rtol=1e-9)
    np.testing.assert_allclose(resumed.objective_[0], fresh.objective_[0], rtol=1e-12)


@pytest.mark.parametrize("rows", [0, -5, 2.5, True, "400", float("nan")])
def test_a_bad_warm_rows_is_named_in_one_line(rows):
    from dsvm.svm._opening import subsample_size

    with pytest.raises(ValueError, match=r"warm_rows must be a whole number of rows, at least 1, got") as err:
        subsample_size(10_000, 50, "auto", rows)
    assert "\n" not in str(err.value)
    assert subsample_size(10_000, 50, "subsample", 400.0) == 400 == subsample_size(10_000, 50, "subsample", np.int64(400))
