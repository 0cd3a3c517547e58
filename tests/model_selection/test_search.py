"""NystroemSVCCV: the cross-validated search that reuses landmarks, kernel columns, features and solutions."""

import pickle
import warnings

import dask.array as da
import numpy as np
import pytest
from helpers import make_circles_problem, make_mixed_scales_problem
from sklearn.base import clone
from sklearn.model_selection import GridSearchCV, KFold, ShuffleSplit, StratifiedKFold
from sklearn.utils.estimator_checks import parametrize_with_checks

from dsvm import NystroemSVC
from dsvm.approx import (
    KernelColumnsMap,
    ProjectedMap,
    fit_feature_map,
    kernel_matrix,
    make_kernel_spec,
    nystroem_normalization,
    prepare_landmarks,
)
from dsvm.blocks import aligned_vector, as_row_blocks
from dsvm.model_selection import NystroemSVCCV
from dsvm.model_selection._cpath import map_to_larger_k
from dsvm.model_selection._folds import SearchContext
from dsvm.problems import SquaredHingeOperator
from dsvm.solvers import semismooth_newton
from dsvm.svm import score_from_confusion


def _linear_problem(n=400, classes=2, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 5))
    score = X @ rng.normal(size=(5, classes)) + 0.8 * rng.normal(size=(n, classes))
    y = np.argmax(score, axis=1) if classes > 2 else np.where(score[:, 0] > 0, 1, -1)
    return X, y


EXACT = dict(kernel="linear", dtype="float64", tol=1e-10, random_state=0)


# ---------------------------------------------------------------- the same answers as GridSearchCV
@pytest.mark.parametrize("classes, scoring", [(2, "accuracy"), (2, "f1"), (3, "accuracy"), (3, "balanced_accuracy")])
def test_equals_grid_search_when_the_feature_space_does_not_depend_on_the_landmarks(classes, scoring):
    """Linear kernel with k >= p landmarks: every landmark set spans the same feature space, so
    fold models on full-data landmarks are exactly GridSearchCV's models on fold landmarks."""
    X, y = _linear_problem(classes=classes)
    grid = {"C": [0.003, 0.03, 1.0], "n_components": [10, 20]}
    cv = StratifiedKFold(4, shuffle=True, random_state=0)
    gs = GridSearchCV(NystroemSVC(**EXACT), grid, cv=cv, scoring=scoring).fit(X, y)
    search = NystroemSVCCV(grid, cv=cv, scoring=scoring, **EXACT).fit(X, y)
    for s in range(4):
        np.testing.assert_allclose(search.cv_results_[f"split{s}_test_score"], gs.cv_results_[f"split{s}_test_score"],
                                   atol=1e-12)
    np.testing.assert_array_equal(search.cv_results_["rank_test_score"], gs.cv_results_["rank_test_score"])
    assert search.best_params_ == gs.best_params_
    assert search.cv_results_["params"] == gs.cv_results_["params"]
    assert sorted(search.cv_results_) == sorted(gs.cv_results_)
    np.testing.assert_allclose(search.best_estimator_.coef_, gs.best_estimator_.coef_)
    np.testing.assert_array_equal(search.predict(X), gs.predict(X))


def test_rbf_search_is_close_to_grid_search(circles):
    X, y = circles
    grid = {"C": [1.0, 100.0], "gamma": [0.05, 0.5], "n_components": [40, 120]}
    cv = StratifiedKFold(3, shuffle=True, random_state=1)
    gs = GridSearchCV(NystroemSVC(random_state=0), grid, cv=cv).fit(X, y)
    search = NystroemSVCCV(grid, cv=cv, random_state=0, return_train_score=True).fit(X, y)
    np.testing.assert_allclose(search.cv_results_["mean_test_score"], gs.cv_results_["mean_test_score"], atol=0.03)
    assert gs.cv_results_["mean_test_score"][search.best_index_] >= gs.best_score_ - 0.01
    assert np.all(search.cv_results_["mean_train_score"] >= search.cv_results_["mean_test_score"] - 0.02)
    best = search.best_estimator_
    assert isinstance(best, NystroemSVC)
    assert {k: best.get_params()[k] for k in search.best_params_} == search.best_params_
    np.testing.assert_array_equal(search.predict(X), best.predict(X))
    np.testing.assert_array_equal(search.decision_function(X), best.decision_function(X))
    assert search.score(X, y) == best.score(X, y)


# ---------------------------------------------------------------- what is reused
def test_kernel_columns_once_per_gamma_and_features_per_gamma_and_k(circles):
    X, y = circles
    grid = {"C": [1.0, 10.0, 100.0], "gamma": [0.1, 0.3], "n_components": [30, 60, 90]}
    search = NystroemSVCCV(grid, cv=3, random_state=0, refit=False).fit(X, y)
    st = search.search_stats_
    assert st["kernel_stores"] == 2 and st["feature_stores"] == 6
    assert st["n_solves"] == 3 * 2 * 3 * 3
    # warm starts: cold fits of these 18 grid points need 5-11 Newton iterations (7.2 on average)
    assert st["newton_iter"] < 5.0 * st["n_solves"]
    assert not hasattr(search, "best_estimator_")
    with pytest.raises(AttributeError, match="refit=False"):
        search.predict(X)


def test_nested_landmarks_project_the_first_k_kernel_columns():
    rng = np.random.default_rng(0)
    X, L = rng.normal(size=(300, 4)), rng.normal(size=(50, 4))
    spec = make_kernel_spec("rbf", 0.4)
    K = KernelColumnsMap(prepare_landmarks(L, spec, np.float64)).transform_block(X)
    for k in (10, 30, 50):
        norm, _ = nystroem_normalization(kernel_matrix(L, L, spec)[:k, :k], 1e-10)
        F = ProjectedMap(norm, np.float64).transform_block(K)
        np.testing.assert_allclose(F, fit_feature_map(L[:k], spec, np.float64).transform_block(X), rtol=1e-9, atol=1e-10)


def test_solutions_map_to_a_larger_nested_k_with_the_same_decision_function():

    rng = np.random.default_rng(1)
    X, L = rng.normal(size=(200, 3)), rng.normal(size=(40, 3))
    spec = make_kernel_spec("rbf", 0.3)
    K_LL = kernel_matrix(L, L, spec)
    small, _ = nystroem_normalization(K_LL[:15, :15], 1e-12)
    big, lam = nystroem_normalization(K_LL, 1e-12)
    w = np.r_[rng.normal(size=small.shape[0]), 0.7]
    W = w[None, None, None, :]  # (fold, C, problem, r + 1)
    w_big = map_to_larger_k((small, W, [1.0]), big, lam, [(1.0, 0)])[0, 0]
    f_small = fit_feature_map(L[:15], spec, np.float64).transform_block(X) @ w[:-1] + w[-1]
    f_big = fit_feature_map(L, spec, np.float64).transform_block(X) @ w_big[:-1] + w_big[-1]
    np.testing.assert_allclose(f_big, f_small, rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(w_big[:-1] @ w_big[:-1], w[:-1] @ w[:-1], rtol=1e-6)


def test_zero_cost_rows_give_exactly_the_model_of_the_other_rows():
    X, y = make_circles_problem(n=400, seed=4)
    clf = NystroemSVC(n_components=40, gamma=0.3, dtype="float64", random_state=0).fit(X, y)
    F = clf.feature_map_.transform_block(X)
    keep = np.arange(len(y)) % 5 != 2
    rb_all, rb_keep = as_row_blocks(F, 90), as_row_blocks(F[keep], 90)
    masked = SquaredHingeOperator(rb_all, aligned_vector((y > 0).astype(np.int32), rb_all), 1, np.array([5.0, 5.0]),
                                  aligned_vector(keep.astype(float), rb_all))
    subset = SquaredHingeOperator(rb_keep, aligned_vector((y[keep] > 0).astype(np.int32), rb_keep), 1,
                                  np.array([5.0, 5.0]))
    a = semismooth_newton(masked, F.shape[1] + 1, tol=1e-11)
    b = semismooth_newton(subset, F.shape[1] + 1, tol=1e-11)
    np.testing.assert_allclose(a.x, b.x, rtol=1e-8, atol=1e-10)


@pytest.mark.parametrize("splitter", [KFold(4, shuffle=True, random_state=0), ShuffleSplit(3, test_size=0.3, random_state=0)])
def test_dask_numpy_and_fold_layouts_agree(circles, splitter):
    """numpy k-fold data is reordered into fold blocks; dask data and ShuffleSplit use zero-cost masks."""
    X, y = circles
    grid = {"C": [1.0, 30.0], "n_components": [30, 60]}
    kw = dict(gamma=0.3, dtype="float64", tol=1e-9, random_state=0, refit=False)
    a = NystroemSVCCV(grid, cv=splitter, **kw).fit(X, y)
    b = NystroemSVCCV(grid, cv=splitter, **kw).fit(da.from_array(X, chunks=(128, -1)), da.from_array(y, chunks=128))
    np.testing.assert_allclose(a.cv_results_["mean_test_score"], b.cv_results_["mean_test_score"], atol=1e-12)


def test_concurrent_folds_give_the_same_results(circles):
    X, y = circles
    grid = {"C": [1.0, 10.0], "n_components": [40]}
    kw = dict(gamma=0.3, dtype="float64", tol=1e-9, random_state=0, refit=False, cv=4)
    a = NystroemSVCCV(grid, **kw).fit(X, y)
    b = NystroemSVCCV(grid, n_jobs=3, **kw).fit(X, y)
    np.testing.assert_allclose(a.cv_results_["mean_test_score"], b.cv_results_["mean_test_score"])


# ---------------------------------------------------------------- other parameters and options
def test_other_parameters_in_the_grid_and_sample_weight():
    rng = np.random.default_rng(0)
    X, y = make_circles_problem(n=500, seed=5)
    y = np.where((y > 0) & (rng.random(500) < 0.3), 1, -1)  # imbalanced
    grid = [{"C": [1.0, 10.0], "class_weight": [None, "balanced"]}, {"C": [3.0], "landmarks": ["kmeans"]}]
    search = NystroemSVCCV(grid, cv=3, scoring="balanced_accuracy", n_components=40, gamma=0.3, random_state=0)
    search.fit(X, y, sample_weight=rng.uniform(0.5, 1.5, size=500))
    assert len(search.cv_results_["params"]) == 5
    assert search.cv_results_["param_class_weight"].mask[-1]  # not set for the kmeans candidate
    scores = dict(zip(map(str, search.cv_results_["params"]), search.cv_results_["mean_test_score"]))
    assert scores[str({"C": 1.0, "class_weight": "balanced"})] > scores[str({"C": 1.0, "class_weight": None})]
    assert search.best_params_.get("class_weight") == "balanced"


@pytest.mark.parametrize("landmarks", ["uniform", "kmeans"])
def test_refit_starts_from_the_fold_models_and_equals_a_plain_fit(circles, landmarks):
    X, y = circles
    grid = {"C": [1.0, 30.0], "gamma": [0.2], "n_components": [25, 60]}
    search = NystroemSVCCV(grid, cv=3, landmarks=landmarks, dtype="float64", tol=1e-8, random_state=0).fit(X, y)
    plain = NystroemSVC(landmarks=landmarks, dtype="float64", tol=1e-8, random_state=0, **search.best_params_).fit(X, y)
    best = search.best_estimator_
    # the search's landmarks for this k are the ones the plain fit draws, so its fold models
    # give the refit a starting point: same model, fewer Newton iterations than from zero
    np.testing.assert_array_equal(best.components_, plain.components_)
    assert best.objective_ == pytest.approx(plain.objective_, rel=1e-8)
    np.testing.assert_allclose(best.decision_function(X), plain.decision_function(X), rtol=1e-5, atol=1e-5)
    assert best.n_iter_ < plain.n_iter_


def test_refit_without_a_fixed_seed_still_fits(circles):
    X, y = circles
    search = NystroemSVCCV({"C": [1.0, 10.0]}, cv=3, n_components=30, random_state=None).fit(X, y)
    assert search.best_estimator_.score(X, y) > 0.8


def test_gamma_scale_and_probability_refit(circles):
    X, y = circles
    search = NystroemSVCCV({"C": [1.0, 10.0], "gamma": ["scale", 0.3]}, cv=3, n_components=40, random_state=0,
                           probability=True).fit(X, y)
    assert search.predict_proba(X).shape == (len(y), 2)
    assert hasattr(search, "predict_log_proba")
    assert not hasattr(NystroemSVCCV(), "predict_proba")


def test_bad_parameters_are_reported(circles):
    X, y = circles
    with pytest.raises(ValueError, match="not NystroemSVC parameters"):
        NystroemSVCCV({"k": [10]}).fit(X, y)
    with pytest.raises(ValueError, match="scoring"):
        NystroemSVCCV({"C": [1.0]}, scoring="roc_auc").fit(X, y)
    with pytest.raises(ValueError, match="gamma"):
        NystroemSVCCV({"gamma": [-1.0]}, n_components=20).fit(X, y)
    # labels are checked as NystroemSVC checks them, before any fold is solved
    with pytest.raises(ValueError, match="continuous"):
        NystroemSVCCV({"C": [1.0]}, n_components=20).fit(X, X[:, 0])
    with pytest.raises(ValueError, match="at least 2"):
        NystroemSVCCV({"C": [1.0]}, n_components=20).fit(X, np.ones(len(y)))


@pytest.mark.parametrize(("landmarks", "grid"), [
    ("pivoted", {"C": [1.0]}),  # depends on gamma
    ("uniform", {"C": [1.0], "landmarks": ["uniform", "active"]}),  # a first model on every row's label
])
def test_landmarks_the_search_cannot_share_are_refused_before_any_work(circles, monkeypatch, landmarks, grid):
    X, y = circles

    def boom(*args, **kwargs):
        raise AssertionError("folds were built")

    monkeypatch.setattr(SearchContext, "build", boom)
    bad = grid.get("landmarks", [landmarks])[-1]
    with pytest.raises(ValueError, match=rf"landmarks='{bad}' is not supported by NystroemSVCCV .*"
                                         r"choose one of \('uniform', 'kmeans'\)"):
        NystroemSVCCV(grid, landmarks=landmarks, n_components=20).fit(X, y)


@pytest.mark.parametrize("grid, message", [({"C": [1.0, np.nan]}, "C must be a finite number, got nan"),
                                           ({"C": [1.0, 1e300]}, r"C=1e\+300 is too large"),
                                           ({"C": [1.0], "n_components": [20, 0]}, "n_components")])
def test_every_grid_value_is_checked_before_any_work(circles, monkeypatch, grid, message):
    """C is a cheap axis of the search, never checked: `C=[1, nan]` failed in fold 0 ("objective not finite")."""
    X, y = circles

    def boom(*args, **kwargs):
        raise AssertionError("folds were built")

    monkeypatch.setattr(SearchContext, "build", boom)
    with pytest.raises(ValueError, match=message):
        NystroemSVCCV(grid, n_components=20).fit(X, y)


def test_score_from_confusion():
    cm = np.array([[50, 10], [5, 35]])
    assert score_from_confusion(cm, "accuracy") == 0.85
    np.testing.assert_allclose(score_from_confusion(cm, "balanced_accuracy"), (50 / 60 + 35 / 40) / 2)
    np.testing.assert_allclose(score_from_confusion(cm, "precision"), 35 / 45)
    np.testing.assert_allclose(score_from_confusion(cm, "f1"), 2 * 35 / (2 * 35 + 10 + 5))


# ---------------------------------------------------------------- scikit-learn / dask-ml integration
def test_clone_and_pickle(circles):
    X, y = circles
    search = NystroemSVCCV({"C": [1.0, 10.0]}, cv=3, n_components=30, gamma=0.3, random_state=0)
    assert clone(search).get_params() == search.get_params()
    pickle.loads(pickle.dumps(search))
    search.fit(X, y)
    again = pickle.loads(pickle.dumps(search))
    np.testing.assert_array_equal(again.predict(X), search.predict(X))
    assert again.best_params_ == search.best_params_


def test_nystroem_svc_inside_grid_search_clones_and_pickles(circles):
    X, y = circles
    gs = GridSearchCV(NystroemSVC(n_components=30, random_state=0), {"C": [1.0, 10.0], "gamma": [0.1, 0.3]}, cv=3)
    gs.fit(X, y)
    again = pickle.loads(pickle.dumps(gs))
    np.testing.assert_array_equal(again.predict(X), gs.predict(X))


def test_dask_ml_search_estimators(circles):
    """dask-ml's searches clone NystroemSVC and call fit on numpy and dask slices (skipped without dask-ml)."""
    dcv = pytest.importorskip("dask_ml.model_selection")
    X, y = circles
    gs = dcv.GridSearchCV(NystroemSVC(n_components=30, random_state=0), {"C": [1.0, 10.0]}, cv=3)
    gs.fit(da.from_array(X, chunks=(150, -1)), da.from_array(y, chunks=150))
    assert gs.best_score_ > 0.8
    rs = dcv.RandomizedSearchCV(NystroemSVC(n_components=30, random_state=0), {"C": [0.1, 1.0, 10.0], "gamma": [0.1, 0.3]},
                                n_iter=3, cv=3, random_state=0).fit(X, y)
    assert rs.best_score_ > 0.8


@parametrize_with_checks([NystroemSVCCV({"C": [1.0, 10.0]}, n_components=30, cv=3, random_state=0)],
                         expected_failed_checks=lambda est: {
                             "check_sample_weight_equivalence_on_dense_data": "landmarks are sampled from rows",
                             "check_sample_weight_equivalence_on_sparse_data": "landmarks are sampled from rows",
                         })
def test_sklearn_compatible(estimator, check):
    check(estimator)


def test_search_on_a_zarr_dataset(tmp_path, circles):
    """What `dsvm train DATA.zarr --search ...` passes: a Dataset of lazy dask arrays (masked folds)."""
    from dsvm import open_dataset, write_dataset

    X, y = circles
    write_dataset(tmp_path / "d.zarr", X, y, chunk_rows=128, dtype="float64")
    ds = open_dataset(tmp_path / "d.zarr")
    grid = {"C": [1.0, 10.0], "n_components": [20, 40]}
    kw = dict(gamma=0.3, dtype="float64", tol=1e-9, random_state=0, cv=3)
    a = NystroemSVCCV(grid, **kw).fit(ds)
    b = NystroemSVCCV(grid, **kw).fit(X, y)
    np.testing.assert_allclose(a.cv_results_["mean_test_score"], b.cv_results_["mean_test_score"], atol=1e-12)
    assert a.score(ds) == a.best_estimator_.score(X, y)


def test_search_and_probabilities_on_a_local_cluster(local_cluster_client, circles):
    """Fold solves, scoring passes and the Platt folds run on a real two-process cluster."""
    X, y = circles
    Xd, yd = da.from_array(X, chunks=(150, -1)), da.from_array(y, chunks=150)
    grid = {"C": [1.0, 10.0], "n_components": [20, 40]}
    kw = dict(gamma=0.3, dtype="float64", tol=1e-9, random_state=0, cv=3, probability=True)
    local = NystroemSVCCV(grid, **kw).fit(X, y)
    with local_cluster_client.as_current():
        remote = NystroemSVCCV(grid, **kw).fit(Xd, yd)
        P = remote.predict_proba(Xd)
        assert isinstance(P, da.Array)
        P = P.compute()
    np.testing.assert_allclose(remote.cv_results_["mean_test_score"], local.cv_results_["mean_test_score"], atol=1e-12)
    np.testing.assert_allclose(P, local.predict_proba(X), rtol=1e-5, atol=1e-7)


def test_the_search_warns_on_mixed_column_scales_unless_it_scales():
    from dsvm.exceptions import MixedScalesWarning

    X, y = make_mixed_scales_problem(n=600)
    grid = {"C": [1.0], "n_components": [30]}
    with pytest.warns(MixedScalesWarning, match="orders of magnitude apart") as caught:
        NystroemSVCCV(param_grid=grid, cv=2, random_state=0, refit=False).fit(X, y)
    assert {w.filename for w in caught if w.category is MixedScalesWarning} == {__file__}  # the caller's line
    with pytest.warns(UserWarning, match="n_components") as caught:
        NystroemSVCCV(param_grid={"C": [1.0], "n_components": [900]}, cv=2, random_state=0, refit=False,
                      scale="standard").fit(X, y)
    assert {w.filename for w in caught if "n_components" in str(w.message)} == {__file__}
    with warnings.catch_warnings():
        warnings.simplefilter("error", MixedScalesWarning)
        NystroemSVCCV(param_grid=grid, cv=2, random_state=0, scale="standard").fit(X, y)


def test_the_search_refuses_dense_landmarks_beyond_memory_before_drawing_them():
    """The search's nested uniform landmarks skipped the check a fit makes (train --search on a file with one
    huge feature index)."""
    import scipy.sparse as sp

    from dsvm.exceptions import DenseLandmarksError

    rows, cols = [0, 1, 2, 3, 4, 5, 3], [0, 1, 0, 10**12 - 1, 2, 1, 2]
    X = sp.csr_matrix((np.ones(7), (rows, cols)), shape=(6, 10**12))
    with pytest.raises(DenseLandmarksError, match="n_features=1000000000000"):
        NystroemSVCCV(param_grid={"C": [1.0], "n_components": [4]}, cv=2, gamma=1.0, random_state=0).fit(
            X, np.array([0, 1, 0, 1, 0, 1]))
