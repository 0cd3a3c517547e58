"""class_weight and sample_weight: per-row costs of the L2-loss objective (LIBSVM's -wi, scikit-learn's semantics).

NystroemSVC minimises ½‖w‖² + Σ_i c_i max(0, 1 − y_i (f_iᵀw + b))² with
c_i = C · class_weight[class of row i] · sample_weight_i (in every one-vs-rest
problem the row keeps the weight of its own class).
"""

import warnings

import dask.array as da
import numpy as np
import pytest
from helpers import lbfgs_sqhinge_optimum, load_libsvm, make_circles_problem, sqhinge_objective_dense
from sklearn.base import clone
from sklearn.metrics import balanced_accuracy_score
from sklearn.utils.class_weight import compute_class_weight

from dsvm import NystroemSVC


def _imbalanced(n=700, seed=0):
    X, y = make_circles_problem(n=n, p=4, seed=seed)
    rng = np.random.default_rng(seed)
    keep = (y == -1) | (rng.random(n) < 0.25)  # ~1 positive for 4 negatives
    return X[keep], y[keep]


def _params(**kw):
    p = dict(C=3.0, gamma=0.3, n_components=60, dtype="float64", tol=1e-10, random_state=0)
    p.update(kw)
    return p


@pytest.mark.parametrize("hessian", ["gram", "cg"])
def test_weighted_objective_equals_dense_reference(hessian):
    """class_weight and sample_weight together: objective_ is the dense weighted objective at the
    solution (1e-10) and its minimum (L-BFGS on the same float64 features, 1e-6 relative)."""
    X, y = _imbalanced()
    rng = np.random.default_rng(1)
    sw = rng.uniform(0.2, 3.0, size=len(y))
    sw[::13] = 0.0
    cw = {-1: 0.6, 1: 2.5}
    clf = NystroemSVC(**_params(class_weight=cw, hessian=hessian)).fit(X, y, sample_weight=sw)
    F = clf.feature_map_.transform_block(X)
    y_pm = np.where(y == clf.classes_[1], 1.0, -1.0)
    c = 3.0 * np.where(y == 1, cw[1], cw[-1]) * sw
    at_solution = sqhinge_objective_dense(F, y_pm, c, clf.coef_[0], clf.intercept_[0])
    np.testing.assert_allclose(clf.objective_, at_solution, rtol=1e-10)
    reference = lbfgs_sqhinge_optimum(F, y_pm, c)
    assert abs(clf.objective_ - reference) <= 1e-6 * reference
    assert clf.objective_ <= reference * (1 + 1e-9)
    # the weights matter: the unweighted objective at this solution is a different number
    assert not np.isclose(at_solution, sqhinge_objective_dense(F, y_pm, np.full(len(y), 3.0), clf.coef_[0],
                                                               clf.intercept_[0]), rtol=1e-3)


def test_multiclass_rows_keep_the_weight_of_their_class():
    rng = np.random.default_rng(3)
    X = rng.normal(size=(450, 2))
    y = np.digitize(np.arctan2(X[:, 1], X[:, 0]), [-1.0, 1.2])  # three unequal sectors
    sw = rng.uniform(0.5, 2.0, size=len(y))
    cw = {0: 1.5, 1: 0.5, 2: 3.0}
    clf = NystroemSVC(**_params(class_weight=cw, gamma=1.0, C=2.0)).fit(X, y, sample_weight=sw)
    F = clf.feature_map_.transform_block(X)
    c = 2.0 * np.array([cw[v] for v in y]) * sw
    for j, label in enumerate(clf.classes_):
        y_pm = np.where(y == label, 1.0, -1.0)
        reference = lbfgs_sqhinge_optimum(F, y_pm, c)
        assert abs(clf.objective_[j] - reference) <= 1e-6 * reference


def test_balanced_is_n_over_classes_times_counts_and_equals_per_row_weights():
    X, y = _imbalanced(seed=4)
    balanced = NystroemSVC(**_params(class_weight="balanced")).fit(X, y)
    weights = compute_class_weight("balanced", classes=np.unique(y), y=y)
    np.testing.assert_allclose(weights, len(y) / (2 * np.bincount((y == 1).astype(int))))
    as_dict = NystroemSVC(**_params(class_weight=dict(zip(np.unique(y), weights)))).fit(X, y)
    as_rows = NystroemSVC(**_params()).fit(X, y, sample_weight=np.where(y == 1, weights[1], weights[0]))
    np.testing.assert_allclose(balanced.coef_, as_dict.coef_, rtol=1e-8, atol=1e-10)
    np.testing.assert_allclose(balanced.coef_, as_rows.coef_, rtol=1e-6, atol=1e-8)
    np.testing.assert_allclose(balanced.objective_, as_rows.objective_, rtol=1e-8)


def test_integer_multiples_of_weights_scale_like_c():
    """Doubling every weight is doubling C (same features: same landmarks)."""
    X, y = _imbalanced(seed=5)
    sw = np.random.default_rng(0).uniform(0.5, 1.5, size=len(y))
    a = NystroemSVC(**_params(C=2.0)).fit(X, y, sample_weight=2 * sw)
    b = NystroemSVC(**_params(C=4.0)).fit(X, y, sample_weight=sw)
    np.testing.assert_allclose(a.coef_, b.coef_, rtol=1e-7, atol=1e-9)


def test_dask_input_gives_the_same_weighted_model():
    X, y = _imbalanced(seed=6)
    sw = np.random.default_rng(2).uniform(0.1, 2.0, size=len(y))
    est = NystroemSVC(**_params(class_weight="balanced"))
    a = clone(est).fit(X, y, sample_weight=sw)
    b = clone(est).fit(da.from_array(X, chunks=(97, -1)), da.from_array(y, chunks=97),
                       sample_weight=da.from_array(sw, chunks=61))
    np.testing.assert_allclose(a.coef_, b.coef_, rtol=1e-6, atol=1e-8)
    np.testing.assert_allclose(a.objective_, b.objective_, rtol=1e-9)


def test_bad_weights_are_reported():
    X, y = _imbalanced(seed=7)
    with pytest.raises(ValueError, match="not in y"):
        NystroemSVC(**_params(class_weight={5: 2.0})).fit(X, y)
    with pytest.raises(ValueError, match="class_weight"):
        NystroemSVC(**_params(class_weight="heavy")).fit(X, y)
    with pytest.raises(ValueError):
        NystroemSVC(**_params()).fit(X, y, sample_weight=np.ones(len(y) + 1))


@pytest.mark.parametrize("solver", ["newton", "tron", "dcd", "pegasos"])
def test_weights_that_make_no_sense_are_refused_by_every_solver(solver):
    """Negative, NaN (numpy or dask) or class-emptying weights are errors, not a silently wrong model."""
    X, y = _imbalanced(seed=8)
    est = NystroemSVC(**_params(solver=solver, tol=1e-4))
    sw = np.ones(len(y))
    sw[5] = -1.0
    with pytest.raises(ValueError, match="non-negative; row 5 has a negative weight"):
        clone(est).fit(X, y, sample_weight=sw)
    sw[5], sw[9] = 1.0, np.nan
    with pytest.raises(ValueError, match="NaN or infinity at row 9"):
        clone(est).fit(da.from_array(X, chunks=(50, -1)), y, sample_weight=da.from_array(sw, chunks=50))
    sw = np.where(y == y.max(), 0.0, 1.0)
    with pytest.raises(ValueError, match=f"class {int(y.max())} has zero total weight"):
        clone(est).fit(X, y, sample_weight=sw)
    for bad in (-1.0, np.nan):
        with pytest.raises(ValueError, match="class_weight must be finite and non-negative"):
            clone(est).set_params(class_weight={y.min(): bad}).fit(X, y)
    with pytest.raises(ValueError, match="zero total weight"):
        clone(est).set_params(class_weight={y.min(): 0.0}).fit(X, y)


def test_svr_refuses_negative_or_all_zero_weights():
    from dsvm import NystroemSVR

    rng = np.random.default_rng(4)
    X = rng.normal(size=(120, 3))
    t = X[:, 0] ** 2
    with pytest.raises(ValueError, match="row 3 has a negative weight"):
        NystroemSVR(n_components=20, random_state=0).fit(X, t, sample_weight=np.where(np.arange(120) == 3, -2.0, 1.0))
    with pytest.raises(ValueError, match="zero for every row|non-zero"):
        NystroemSVR(n_components=20, random_state=0).fit(da.from_array(X, chunks=(40, -1)), t,
                                                          sample_weight=da.zeros(120, chunks=40))


@pytest.mark.data
def test_balanced_class_weight_improves_balanced_accuracy_on_w8a():
    """w8a is 97 % negative: the unweighted model under-predicts the positives."""
    Xtr, ytr = load_libsvm("w8a.train", 300)
    Xte, yte = load_libsvm("w8a.test", 300)
    params = dict(C=10.0, gamma=0.05, n_components=300, random_state=0)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # both fits converge
        plain = NystroemSVC(**params).fit(Xtr, ytr)
        balanced = NystroemSVC(class_weight="balanced", **params).fit(Xtr, ytr)
    ba_plain = balanced_accuracy_score(yte, plain.predict(Xte))
    ba_balanced = balanced_accuracy_score(yte, balanced.predict(Xte))
    # measured: 0.703 -> 0.899
    assert ba_balanced > ba_plain + 0.1, (ba_plain, ba_balanced)
    assert ba_balanced > 0.85
