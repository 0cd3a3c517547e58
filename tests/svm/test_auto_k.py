"""``n_components="auto"`` and ``time_budget``: the path of fits on held-out rows, and the fit that follows it."""

import warnings

import dask.array as da
import numpy as np
import pytest
from sklearn.datasets import make_classification, make_regression

from dsvm import NystroemSVC, NystroemSVR, load_model, save_model
from dsvm.svm import _auto_k


@pytest.fixture(autouse=True)
def small_path(monkeypatch):
    """A short path (k = 8, 16, 32, 64) keeps these fits quick; the rules are the same."""
    monkeypatch.setattr(_auto_k, "K_START", 8)
    monkeypatch.setattr(_auto_k, "K_MAX", 64)


def _data(n=1500, seed=0):
    return make_classification(n, 6, n_informative=4, random_state=seed)


def test_auto_chooses_the_best_held_out_k_and_records_the_path():
    X, y = _data()
    model = NystroemSVC(n_components="auto", C=10.0, k_tol=0.0, random_state=0).fit(X, y)
    path = model.k_path_
    ks = [p["k"] for p in path]
    assert ks == [8, 16, 32, 64][: len(ks)] and len(ks) >= 2
    best = max(path, key=lambda p: (p["score"], -p["k"]))
    assert model.n_components_ == best["k"] == model.components_.shape[0]
    assert all(0.5 < p["score"] <= 1.0 and p["seconds"] > 0 for p in path)
    # the path stops at the first doubling that gains less than k_tol (0 here: one that does not gain)
    gains = np.diff([p["score"] for p in path])
    assert np.all(gains[:-1] >= 0.0) and (len(ks) == 4 or gains[-1] < 0.0)
    # the chosen model is fitted on every row: a fit at that k from scratch reaches the same optimum
    fixed = NystroemSVC(n_components=model.n_components_, C=10.0, random_state=0).fit(X, y)
    np.testing.assert_allclose(model.objective_, fixed.objective_, rtol=1e-4)


def test_the_last_path_fit_chosen_is_finished_on_its_own_features():
    X, y = _data()
    model = NystroemSVC(n_components="auto", C=10.0, k_tol=1.0, random_state=0).fit(X, y)
    stats = model.solver_stats_
    assert model.n_components_ == model.k_path_[-1]["k"] == 16
    assert stats["landmark_seconds"] == 0.0 and stats["feature_seconds"] == 0.0  # no second feature stage
    assert 0.0 < stats["auto_k_seconds"] < stats["fit_seconds"]


def test_an_earlier_k_than_the_last_is_refitted_on_its_landmarks(monkeypatch):
    from dsvm.svm import _classifier

    scores = iter([0.90, 0.95, 0.80])
    monkeypatch.setattr(_classifier, "held_accuracy", lambda X_rb, codes: lambda result, held: next(scores))
    X, y = _data()
    model = NystroemSVC(n_components="auto", C=10.0, k_tol=0.0, random_state=0).fit(X, y)
    assert [p["k"] for p in model.k_path_] == [8, 16, 32] and model.n_components_ == 16
    fixed = NystroemSVC(n_components=16, C=10.0, random_state=0).fit(X, y)
    np.testing.assert_array_equal(model.components_, fixed.components_)
    np.testing.assert_allclose(model.objective_, fixed.objective_, rtol=1e-4)


@pytest.mark.parametrize("n_rows, ks", [(1000, [8, 16, 32, 64]), (64, [8, 16, 32, 64]), (40, [8, 16, 32, 40]),
                                        (5, [5])])
def test_the_k_path_doubles_and_ends_at_every_row_when_the_rows_run_out_first(n_rows, ks):
    assert _auto_k.k_schedule(n_rows) == ks


def test_a_large_k_tol_stops_after_the_first_doubling():
    X, y = _data()
    model = NystroemSVC(n_components="auto", k_tol=1.0, random_state=0).fit(X, y)
    assert [p["k"] for p in model.k_path_] == [8, 16]


def test_the_held_out_rows_and_the_choice_do_not_depend_on_the_chunking():
    X, y = _data(n=1200, seed=1)
    common = dict(n_components="auto", C=5.0, k_tol=0.0, random_state=0)
    in_memory = NystroemSVC(**common).fit(X, y)
    chunked = NystroemSVC(**common).fit(da.from_array(X, chunks=(250, -1)), da.from_array(y, chunks=250))
    assert [p["k"] for p in chunked.k_path_] == [p["k"] for p in in_memory.k_path_]
    np.testing.assert_allclose([p["score"] for p in chunked.k_path_], [p["score"] for p in in_memory.k_path_])
    assert chunked.n_components_ == in_memory.n_components_
    np.testing.assert_allclose(chunked.decision_function(X), in_memory.decision_function(X), rtol=1e-3, atol=1e-4)


def test_regression_and_multiclass_choose_k_too():
    X, y = make_regression(800, 5, noise=2.0, random_state=0)
    reg = NystroemSVR(n_components="auto", C=10.0, random_state=0).fit(X, y)
    assert reg.n_components_ in [p["k"] for p in reg.k_path_] and all(p["score"] < 1.0 for p in reg.k_path_)
    X3, y3 = make_classification(900, 6, n_informative=4, n_classes=3, random_state=0)
    clf = NystroemSVC(n_components="auto", random_state=0).fit(X3, y3)
    assert clf.coef_.shape == (3, clf.n_components_)


def test_time_budget_ends_the_path_and_the_newton_iterations(caplog):
    X, y = _data(n=4000)
    model = NystroemSVC(n_components="auto", k_tol=0.0, time_budget=1e-3, random_state=0).fit(X, y)
    assert len(model.k_path_) == 1  # the first fit always runs; the next would pass the budget
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fixed = NystroemSVC(n_components=64, tol=1e-12, max_iter=100, time_budget=1e-3, random_state=0).fit(X, y)
    stats = fixed.solver_stats_["problems"][0]
    assert stats["stop_reason"] == "time_budget" and not stats["converged"] and stats["n_iter"] == 0
    # the stages before the solve spent the budget: said once, naming them
    assert any("time_budget=0.001s was spent before the solve began" in r.getMessage() for r in caplog.records)
    free = NystroemSVC(n_components=64, tol=1e-12, max_iter=100, random_state=0).fit(X, y)
    assert fixed.n_iter_ < free.n_iter_


def test_a_fixed_k_fit_records_its_k_and_no_path():
    X, y = _data(n=300)
    model = NystroemSVC(n_components=20, random_state=0).fit(X, y)
    assert model.n_components_ == 20 and model.k_path_ is None


def test_an_auto_model_file_round_trips(tmp_path):
    X, y = _data(n=600)
    model = NystroemSVC(n_components="auto", random_state=0).fit(X, y)
    loaded = load_model(save_model(model, tmp_path / "m.npz"))
    assert loaded.get_params()["n_components"] == "auto" and loaded.n_components_ == model.n_components_
    assert loaded.k_path_ == model.k_path_
    np.testing.assert_array_equal(loaded.predict(X), model.predict(X))


@pytest.mark.parametrize("params, message", [
    ({"n_components": "many"}, "n_components must be a positive integer"),
    ({"time_budget": 0}, "time_budget must be positive"),
    ({"k_tol": -0.1}, "k_tol must be non-negative"),
    ({"n_components": "auto", "checkpoint": "fit.ckpt"}, "checkpoint cannot be used with n_components='auto'"),
])
def test_bad_auto_parameters_are_refused(params, message):
    X, y = _data(n=100)
    with pytest.raises(ValueError, match=message):
        NystroemSVC(**params).fit(X, y)


def test_the_cv_search_grows_k_per_point_until_a_doubling_gains_less_than_k_tol():
    from dsvm import NystroemSVCCV

    X, y = _data(n=900, seed=2)
    search = NystroemSVCCV({"C": [0.01, 10.0]}, n_components="auto", k_tol=0.005, cv=3, random_state=0).fit(X, y)
    rows = list(zip(search.cv_results_["params"], search.cv_results_["mean_test_score"]))
    for C in (0.01, 10.0):
        path = [(p["n_components"], score) for p, score in rows if p["C"] == C]
        ks = [k for k, _ in path]
        assert ks == [8, 16, 32, 64][: len(ks)] and len(ks) >= 2
        gains = np.diff([score for _, score in path])
        # a point keeps growing while a doubling gains at least k_tol, and stops at the first that does not
        assert np.all(gains[:-1] >= 0.005) and (len(ks) == 4 or gains[-1] < 0.005)
    assert search.best_params_["n_components"] in (8, 16, 32, 64)
    assert search.best_estimator_.components_.shape[0] == search.best_params_["n_components"]
    # each scored point is the grid search's point at that k
    grid = NystroemSVCCV({"C": [10.0], "n_components": [16]}, cv=3, random_state=0).fit(X, y)
    at16 = [score for p, score in rows if p["C"] == 10.0 and p["n_components"] == 16]
    np.testing.assert_allclose(at16, grid.cv_results_["mean_test_score"])


def test_the_cv_search_refuses_auto_mixed_with_given_k():
    from dsvm import NystroemSVCCV

    X, y = _data(n=200)
    with pytest.raises(ValueError, match="n_components='auto' cannot be mixed with given k values"):
        NystroemSVCCV({"n_components": [16, "auto"]}, cv=2).fit(X, y)


@pytest.mark.parametrize("values, auto", [
    (["auto", "auto"], True), ([16, 32], False), (["auto", 16], None), ([16, "auto"], None), (["auto", "many"], None),
])
def test_check_auto_k_is_all_or_nothing(values, auto):
    from dsvm.model_selection import check_auto_k

    if auto is None:
        with pytest.raises(ValueError, match="cannot be mixed"):
            check_auto_k(values)
    else:
        assert check_auto_k(values) is auto


def test_cross_validation_of_an_auto_model_reports_its_chosen_k(tmp_path, capsys):
    """``dsvm train --cv`` with ``-k auto`` prints the score of the k the search chose, not of the path's first."""
    from dsvm import NystroemSVCCV, open_dataset, write_dataset
    from dsvm.app._model_commands import cross_validate

    X, y = _data(n=900, seed=2)
    write_dataset(tmp_path / "d.zarr", X, y)
    ds = open_dataset(tmp_path / "d.zarr")
    model = NystroemSVC(n_components="auto", C=10.0, k_tol=0.0, random_state=0)
    fitted = cross_validate(model, ds, folds=3, scoring="accuracy", refit=True)
    printed = capsys.readouterr().out
    search = NystroemSVCCV({"C": [10.0]}, n_components="auto", k_tol=0.0, cv=3, random_state=0).fit(ds)
    scores = search.cv_results_["mean_test_score"]
    assert len(scores) >= 2 and scores[search.best_index_] != scores[0]  # the first k is not the best here
    assert printed.startswith(f"cross-validation accuracy: {100 * scores[search.best_index_]:.2f} %")
    assert fitted.n_components_ == search.best_params_["n_components"]


def test_path_fits_keep_to_what_is_left_of_the_time_budget(monkeypatch):
    budgets = []
    original = _auto_k._path_estimator

    def recording(est, k, t_start):
        sub = original(est, k, t_start)
        budgets.append(sub.time_budget)
        return sub

    monkeypatch.setattr(_auto_k, "_path_estimator", recording)
    X, y = _data()
    NystroemSVC(n_components="auto", k_tol=0.0, time_budget=600.0, random_state=0).fit(X, y)
    assert len(budgets) >= 2 and all(b is not None for b in budgets)
    assert 600.0 > budgets[0] > budgets[1] > 0.0


def test_one_vs_rest_problems_share_the_time_left(monkeypatch):
    """Each problem's deadline is an equal share of the time left, so a later class is not left with none."""
    import time

    from dsvm.svm import _fitting

    seen = []
    original = _fitting.solve_with

    def recording(est, op, dim, hessian, start, label):
        seen.append((time.perf_counter(), start.deadline))
        return original(est, op, dim, hessian, start=start, label=label)

    monkeypatch.setattr(_fitting, "solve_with", recording)
    X3, y3 = make_classification(900, 6, n_informative=4, n_classes=3, random_state=0)
    t0 = time.perf_counter()
    NystroemSVC(n_components=30, time_budget=300.0, random_state=0).fit(X3, y3)
    assert len(seen) == 3
    for j, (now, deadline) in enumerate(seen):
        left = 300.0 - (now - t0)  # the budget counts from the fit's start, a little before t0's reading here
        np.testing.assert_allclose(deadline - now, left / (3 - j), rtol=0.01)


def test_model_files_name_time_budget_and_k_tol_only_when_set(tmp_path):
    """A model that does not use them stays readable by versions without these parameters."""
    import json

    X, y = _data(n=300)

    def saved_params(model, name):
        with np.load(save_model(model, tmp_path / name), allow_pickle=False) as z:
            return json.loads(z["__meta__"].tobytes())["params"]

    plain = saved_params(NystroemSVC(n_components=20, random_state=0).fit(X, y), "a.npz")
    assert "time_budget" not in plain and "k_tol" not in plain
    used = NystroemSVC(n_components=20, time_budget=60.0, k_tol=0.01, random_state=0).fit(X, y)
    params = saved_params(used, "b.npz")
    assert params["time_budget"] == 60.0 and params["k_tol"] == 0.01
    assert load_model(tmp_path / "b.npz").get_params()["k_tol"] == 0.01
