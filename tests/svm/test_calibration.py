"""Platt scaling: the sigmoid fit, NystroemSVC(probability=True), predict_proba / predict_log_proba."""

import pickle
import warnings

import dask.array as da
import numpy as np
import pytest
from scipy.optimize import minimize
from sklearn.base import clone
from sklearn.exceptions import NotFittedError
from sklearn.metrics import brier_score_loss, log_loss
from sklearn.model_selection import GridSearchCV, StratifiedKFold
from sklearn.utils.estimator_checks import parametrize_with_checks

from dsvm import NystroemSVC
from dsvm.svm import platt_log_proba
from dsvm.svm._calibration import MAX_PLATT_ROWS, fit_platt


def _platt_reference(f, pos):
    """Platt's smoothed-target log-likelihood minimised by a generic optimiser."""
    n1, n0 = pos.sum(), (~pos).sum()
    t = np.where(pos, (n1 + 1) / (n1 + 2), 1 / (n0 + 2))

    def nll(ab):
        z = ab[0] * f + ab[1]
        return np.sum(t * z + np.logaddexp(0, -z))

    return minimize(nll, [0.0, 0.0], method="BFGS", options={"gtol": 1e-10}).x


def _params(**kw):
    p = dict(C=10.0, gamma=0.3, n_components=80, random_state=0, probability=True)
    p.update(kw)
    return p


# ---------------------------------------------------------------- the sigmoid
def test_fit_platt_matches_a_generic_optimiser():
    rng = np.random.default_rng(0)
    f = rng.normal(size=2000)
    pos = rng.random(2000) < 1 / (1 + np.exp(-2.5 * f + 0.3))
    A, B = fit_platt(f, pos)
    np.testing.assert_allclose([A, B], _platt_reference(f, pos), rtol=1e-4, atol=1e-5)
    assert A < 0  # larger decision values -> more likely positive


def test_fit_platt_is_robust_to_separable_and_extreme_values():
    f = np.r_[np.linspace(-50, -1, 100), np.linspace(1, 800, 100)]
    pos = f > 0
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no overflow in exp
        A, B = fit_platt(f, pos)
        lp = platt_log_proba(f, np.array([A]), np.array([B]))
    assert np.isfinite([A, B]).all() and A < 0
    assert np.isfinite(lp).all()
    # one class only: the smoothed targets keep the fit finite
    A1, B1 = fit_platt(np.linspace(-1, 1, 50), np.ones(50, dtype=bool))
    assert np.isfinite([A1, B1]).all()


def test_log_proba_sums_to_one_in_the_log_domain():
    rng = np.random.default_rng(1)
    dec = rng.normal(scale=30, size=(500, 4))
    A, B = -rng.uniform(0.5, 3, 4), rng.normal(size=4)
    lp = platt_log_proba(dec, A, B)
    np.testing.assert_allclose(np.exp(lp).sum(axis=1), 1.0, rtol=1e-12)
    assert np.isfinite(lp).all() and (lp <= 0).all()
    lp2 = platt_log_proba(dec[:, 0], A[:1], B[:1])
    np.testing.assert_allclose(np.exp(lp2).sum(axis=1), 1.0, rtol=1e-12)


# ---------------------------------------------------------------- the estimator
def test_binary_probabilities(circles):
    X, y = circles
    clf = NystroemSVC(**_params()).fit(X, y)
    P = clf.predict_proba(X)
    assert P.shape == (len(y), 2)
    np.testing.assert_allclose(P.sum(axis=1), 1.0, rtol=1e-12)
    np.testing.assert_allclose(clf.predict_log_proba(X), np.log(P), rtol=1e-10, atol=1e-12)
    dec = clf.decision_function(X)
    order = np.argsort(dec)
    assert np.all(np.diff(P[order, 1]) >= -1e-12)  # monotone in the decision value, column 1 = classes_[1]
    assert clf.probA_.shape == (1,) and clf.probA_[0] < 0
    # calibrated on held-out folds: no better than the training accuracy suggests
    assert log_loss(y, P) < 0.35
    assert np.mean((P[:, 1] > 0.5) == (dec > 0)) > 0.97
    stats = clf.solver_stats_["calibration"]
    assert stats[0]["n_rows"] == len(y)


def test_multiclass_probabilities_sum_to_one():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(600, 2))
    y = np.array(["red", "green", "blue", "grey"])[np.digitize(np.arctan2(X[:, 1], X[:, 0]), [-2, -0.5, 1.0])]
    clf = NystroemSVC(**_params(gamma=1.0)).fit(X, y)
    P = clf.predict_proba(X)
    assert P.shape == (600, 4)
    np.testing.assert_allclose(P.sum(axis=1), 1.0, rtol=1e-12)
    assert np.all(P >= 0)
    assert np.mean(clf.classes_[P.argmax(axis=1)] == clf.predict(X)) > 0.95
    assert clf.probA_.shape == (4,)
    assert log_loss(y, P, labels=clf.classes_) < 0.4


def test_probability_false_hides_predict_proba(circles):
    X, y = circles
    clf = NystroemSVC(**_params(probability=False)).fit(X, y)
    assert not hasattr(clf, "predict_proba") and not hasattr(clf, "predict_log_proba")
    with pytest.raises(AttributeError, match="predict_proba") as info:
        clf.predict_proba(X)
    assert "probability=False" in str(info.value.__cause__)
    clf.set_params(probability=True)  # fitted without the sigmoids
    with pytest.raises(NotFittedError, match="probability=False"):
        clf.predict_proba(X)
    # refitting without probability removes stale sigmoids
    clf2 = NystroemSVC(**_params()).fit(X, y)
    clf2.set_params(probability=False).fit(X, y)
    assert not hasattr(clf2, "probA_")
    with pytest.raises(ValueError, match="probability"):
        NystroemSVC(**_params(probability="yes")).fit(X, y)


def test_seeded_fits_repeat_and_dask_gives_the_same_probabilities(circles):
    X, y = circles
    params = _params(dtype="float64", tol=1e-10)
    a = NystroemSVC(**params).fit(X, y)
    b = NystroemSVC(**params).fit(X, y)
    np.testing.assert_array_equal(a.probA_, b.probA_)
    c = NystroemSVC(**params).fit(da.from_array(X, chunks=(77, -1)), da.from_array(y, chunks=77))
    # folds are hashed from row numbers, so the blocking does not change them
    np.testing.assert_allclose(c.probA_, a.probA_, rtol=1e-6)
    np.testing.assert_allclose(c.probB_, a.probB_, rtol=1e-6, atol=1e-8)
    Xd = da.from_array(X, chunks=(100, -1))
    P = a.predict_proba(Xd)
    assert isinstance(P, da.Array)
    np.testing.assert_allclose(P.compute(), a.predict_proba(X), rtol=1e-12)
    assert isinstance(a.predict_log_proba(Xd), da.Array)


def test_zero_weight_rows_are_not_used_for_the_sigmoid(circles):
    X, y = circles
    sw = np.ones(len(y))
    sw[:100] = 0
    clf = NystroemSVC(**_params()).fit(X, y, sample_weight=sw)
    assert clf.solver_stats_["calibration"][0]["n_rows"] == len(y) - 100


def test_large_data_subsamples_the_sigmoid_fit(circles, monkeypatch):
    import dsvm.svm._calibration

    X, y = circles
    monkeypatch.setattr(dsvm.svm._calibration, "MAX_PLATT_ROWS", 200)
    clf = NystroemSVC(**_params()).fit(X, y)
    n_rows = clf.solver_stats_["calibration"][0]["n_rows"]
    assert 120 < n_rows < 280 and MAX_PLATT_ROWS > 10_000
    assert np.isfinite(clf.probA_).all()


def test_clone_pickle_and_grid_search_on_log_loss(circles):
    X, y = circles
    clf = NystroemSVC(**_params(n_components=40))
    assert clone(clf).get_params() == clf.get_params()
    clf.fit(X, y)
    again = pickle.loads(pickle.dumps(clf))
    np.testing.assert_array_equal(again.predict_proba(X), clf.predict_proba(X))
    gs = GridSearchCV(NystroemSVC(**_params(n_components=40)), {"C": [1.0, 10.0]}, scoring="neg_log_loss",
                      cv=StratifiedKFold(3, shuffle=True, random_state=0)).fit(X, y)
    assert np.isfinite(gs.cv_results_["mean_test_score"]).all()
    assert gs.predict_proba(X).shape == (len(y), 2)


@pytest.mark.data
def test_calibration_close_to_libsvm_on_a9a_subsample(a9a):
    """Log-loss and Brier score on a9a.test vs SVC(probability=True) trained on the same 5000 rows.

    Measured: dsvm log-loss 0.357 / Brier 0.114, SVC 0.370 / 0.117 (5000 training rows, 5000 test rows).
    """
    from sklearn.svm import SVC

    Xtr, ytr, Xte, yte = a9a
    rng = np.random.RandomState(0)
    tr = rng.choice(Xtr.shape[0], 5000, replace=False)
    te = rng.choice(Xte.shape[0], 5000, replace=False)
    X, y, Xt, yt = Xtr[tr], ytr[tr], Xte[te], yte[te]
    clf = NystroemSVC(C=10.0, gamma=0.05, n_components=500, random_state=0, probability=True).fit(X, y)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)  # SVC's probability= is deprecated in scikit-learn 1.9
        svc = SVC(C=10.0, gamma=0.05, probability=True, random_state=0).fit(X, y)
    P, Q = clf.predict_proba(Xt), svc.predict_proba(Xt)
    ours, theirs = log_loss(yt, P), log_loss(yt, Q)
    assert ours <= theirs + 0.02, (ours, theirs)
    assert brier_score_loss(yt == 1, P[:, 1]) <= brier_score_loss(yt == 1, Q[:, 1]) + 0.01
    # reliability: the mean predicted probability matches the positive rate
    assert abs(P[:, 1].mean() - np.mean(yt == 1)) < 0.02


@parametrize_with_checks(
    [NystroemSVC(n_components=50, random_state=0, probability=True)],
    expected_failed_checks=lambda est: {
        "check_sample_weight_equivalence_on_dense_data": "landmarks are sampled from rows (see test_base_sklearn_checks.py)",
        "check_sample_weight_equivalence_on_sparse_data": "landmarks are sampled from rows (see test_base_sklearn_checks.py)",
        "check_classifiers_train": (
            "argmax of predict_proba may differ from predict near the boundary: the sigmoids are fitted on "
            "held-out folds and, for multiclass, normalised one-vs-rest (as LIBSVM/SVC(probability=True) warn)"
        ),
    },
)
def test_sklearn_compatible_with_probability(estimator, check):
    check(estimator)
