"""PegasosSVC: the paper's kernelized Pegasos, vectorised; accuracy; sklearn API; bad input."""

import numpy as np
import pytest
from helpers import load_libsvm, make_circles_problem
from sklearn.datasets import load_iris
from sklearn.utils import check_random_state
from sklearn.utils.estimator_checks import parametrize_with_checks

from dsvm import PegasosSVC
from dsvm.approx import kernel_matrix, make_kernel_spec


def naive_pegasos(X, y_pm, lam, T, spec, seed, c2=1.0, batch_size=1):
    """Kernelized Pegasos (Fig. 3 of the paper) with plain loops, on the kernel K + c²."""
    n = len(y_pm)
    K = kernel_matrix(X, X, spec) + c2
    draws = check_random_state(seed).randint(n, size=(T, batch_size))
    alpha = np.zeros(n, dtype=np.int64)
    for t in range(1, T + 1):
        violators = []
        for i in draws[t - 1]:
            score = 0.0
            for j in range(n):
                score += alpha[j] * y_pm[j] * K[j, i]
            if y_pm[i] * score / (lam * t * batch_size) < 1:
                violators.append(i)
        for i in violators:
            alpha[i] += 1
    return alpha


def naive_decision(X_train, y_pm, alpha, lam, T, spec, X, c2=1.0, batch_size=1):
    K = kernel_matrix(X, X_train, spec) + c2
    out = np.zeros(len(X))
    for m in range(len(X)):
        for j in range(len(y_pm)):
            out[m] += alpha[j] * y_pm[j] * K[m, j]
    return out / (lam * T * batch_size)


@pytest.mark.parametrize(
    "kernel, params",
    [
        ("linear", dict(lam=1e-2, max_iter=2000)),
        ("rbf", dict(lam=1e-2, max_iter=2000)),
        ("rbf", dict(lam=1e-3, max_iter=5000)),
    ],
)
def test_iris_setosa_versicolor_perfect_on_training_data(kernel, params):
    X, y = load_iris(return_X_y=True)
    X, y = X[y < 2], y[y < 2]
    clf = PegasosSVC(kernel=kernel, random_state=0, **params).fit(X, y)
    assert clf.score(X, y) == 1.0
    np.testing.assert_array_equal(clf.classes_, [0, 1])
    assert clf.n_iter_ == params["max_iter"]


def test_iris_three_classes_one_vs_rest():
    X, y = load_iris(return_X_y=True)
    clf = PegasosSVC(lam=1e-3, max_iter=20000, random_state=0).fit(X, y)
    assert clf.decision_function(X).shape == (150, 3)
    assert clf.dual_coef_.shape == (3, clf.support_.size) and clf.intercept_.shape == (3,)
    assert clf.alpha_.shape == (3, 150)
    assert clf.score(X, y) >= 0.95


@pytest.mark.data
def test_splice_accuracy():
    Xtr, ytr = load_libsvm("splice.train", 60)
    Xte, yte = load_libsvm("splice.test", 60)
    # λ = 1/(C n) with C = 1; T = 100 · n steps; SVC(C=1, gamma=0.02) reaches 0.90 here
    clf = PegasosSVC(gamma=0.02, lam=1e-3, max_iter=100_000, random_state=0).fit(Xtr, ytr)
    acc = clf.score(Xte, yte)
    assert acc >= 0.87, acc
    assert clf.fit_stats_["kernel_matrix_cached"]


@pytest.mark.parametrize("batch_size", [1, 3])
@pytest.mark.parametrize("kernel", ["rbf", "poly", "linear"])
def test_vectorised_equals_naive_loops(kernel, batch_size):
    X, y = make_circles_problem(n=40, p=3, seed=1)
    lam, T, seed = 0.05, 300, 7
    spec = make_kernel_spec(kernel, 0.5, 2, 1.0)
    clf = PegasosSVC(kernel=kernel, gamma=0.5, degree=2, coef0=1.0, lam=lam, max_iter=T,
                     batch_size=batch_size, random_state=seed).fit(X, y)
    alpha = naive_pegasos(X, y.astype(float), lam, T, spec, seed, batch_size=batch_size)
    np.testing.assert_array_equal(clf.alpha_, alpha)
    np.testing.assert_array_equal(clf.support_, np.flatnonzero(alpha))
    X_new = np.random.default_rng(3).normal(size=(25, 3))
    dec = naive_decision(X, y.astype(float), alpha, lam, T, spec, X_new, batch_size=batch_size)
    np.testing.assert_allclose(clf.decision_function(X_new), dec, rtol=1e-10, atol=1e-10)
    np.testing.assert_array_equal(clf.predict(X_new), np.where(dec > 0, 1, -1))


def test_without_intercept_is_figure_3_exactly():
    X, y = make_circles_problem(n=40, p=3, seed=2)
    spec = make_kernel_spec("rbf", 0.5)
    clf = PegasosSVC(gamma=0.5, lam=0.05, max_iter=300, fit_intercept=False, random_state=0).fit(X, y)
    alpha = naive_pegasos(X, y.astype(float), 0.05, 300, spec, 0, c2=0.0)
    np.testing.assert_array_equal(clf.alpha_, alpha)
    assert clf.intercept_[0] == 0.0


def test_uncached_kernel_rows_give_the_same_model():
    X, y = make_circles_problem(n=60, p=3, seed=0)
    params = dict(gamma=0.5, lam=0.01, max_iter=2000, random_state=0)
    cached = PegasosSVC(**params).fit(X, y)
    rowwise = PegasosSVC(cache_size=0.01, **params).fit(X, y)  # 10 kB: no matrix, ~20 rows kept
    assert cached.fit_stats_["kernel_matrix_cached"] and not rowwise.fit_stats_["kernel_matrix_cached"]
    np.testing.assert_array_equal(cached.alpha_, rowwise.alpha_)
    np.testing.assert_allclose(cached.decision_function(X), rowwise.decision_function(X), atol=1e-12)


def test_multiclass_equals_separate_binary_problems():
    X, y = load_iris(return_X_y=True)
    params = dict(lam=1e-2, max_iter=1000, random_state=5)
    multi = PegasosSVC(**params).fit(X, y)
    for c in range(3):
        binary = PegasosSVC(**params).fit(X, y == c)  # classes [False, True]: True is +1
        np.testing.assert_array_equal(multi.alpha_[c], binary.alpha_)
        np.testing.assert_allclose(multi.decision_function(X)[:, c], binary.decision_function(X), atol=1e-12)


def test_decision_function_on_training_rows_is_the_pegasos_score():
    X, y = make_circles_problem(n=80, p=3, seed=0)
    clf = PegasosSVC(gamma=0.5, lam=0.01, max_iter=3000, random_state=0).fit(X, y)
    K = kernel_matrix(X, X, clf.kernel_spec_) + 1.0
    score = K @ (clf.alpha_ * y) / (0.01 * 3000)
    np.testing.assert_allclose(clf.decision_function(X), score, atol=1e-10)
    np.testing.assert_allclose(clf.intercept_, (clf.alpha_ * y).sum() / (0.01 * 3000))
    np.testing.assert_array_equal(clf.support_vectors_, X[clf.support_])


@pytest.mark.parametrize("labels", [(0, 1), (1, 2), ("no", "yes")])
def test_any_two_labels(labels):
    X, y = make_circles_problem(n=100, p=3, seed=0)
    ref = PegasosSVC(gamma=0.5, lam=0.01, max_iter=3000, random_state=0).fit(X, y)
    y_lab = np.where(y > 0, labels[1], labels[0])
    clf = PegasosSVC(gamma=0.5, lam=0.01, max_iter=3000, random_state=0).fit(X, y_lab)
    np.testing.assert_array_equal(clf.classes_, np.array(labels))
    np.testing.assert_array_equal(clf.alpha_, ref.alpha_)
    np.testing.assert_array_equal(clf.predict(X), np.where(ref.predict(X) > 0, labels[1], labels[0]))


def test_deterministic_given_random_state():
    X, y = make_circles_problem(n=100, p=3, seed=0)
    a = PegasosSVC(lam=0.01, max_iter=3000, random_state=42).fit(X, y)
    b = PegasosSVC(lam=0.01, max_iter=3000, random_state=42).fit(X, y)
    c = PegasosSVC(lam=0.01, max_iter=3000, random_state=43).fit(X, y)
    np.testing.assert_array_equal(a.alpha_, b.alpha_)
    np.testing.assert_array_equal(a.decision_function(X), b.decision_function(X))
    assert not np.array_equal(a.alpha_, c.alpha_)


def test_gamma_scale_and_sparse_input():
    import scipy.sparse as sp

    X, y = make_circles_problem(n=100, p=3, seed=0)
    dense = PegasosSVC(lam=0.01, max_iter=2000, random_state=0).fit(X, y)
    assert dense.kernel_spec_.gamma == pytest.approx(1 / (3 * X.var()))
    sparse = PegasosSVC(lam=0.01, max_iter=2000, random_state=0).fit(sp.csr_matrix(X), y)
    assert sparse.kernel_spec_.gamma == pytest.approx(dense.kernel_spec_.gamma)
    np.testing.assert_allclose(sparse.decision_function(sp.csr_matrix(X)), dense.decision_function(X), atol=1e-9)


def test_bad_input():
    X, y = make_circles_problem(n=30, p=3, seed=0)
    X_nan = X.copy()
    X_nan[4, 0] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        PegasosSVC().fit(X_nan, y)
    with pytest.raises(ValueError, match="only one class"):
        PegasosSVC().fit(X, np.ones(30))
    for lam in (0.0, -1.0, np.nan):
        with pytest.raises(ValueError, match="lam must be"):
            PegasosSVC(lam=lam).fit(X, y)
    with pytest.raises(ValueError, match="max_iter"):
        PegasosSVC(max_iter=0).fit(X, y)
    with pytest.raises(ValueError, match="batch_size"):
        PegasosSVC(batch_size=0).fit(X, y)
    with pytest.raises(ValueError, match="gamma"):
        PegasosSVC(gamma="wide").fit(X, y)
    with pytest.raises(ValueError, match="kernel"):
        PegasosSVC(kernel="laplacian").fit(X, y)
    with pytest.raises(ValueError, match="X has 30 rows|inconsistent numbers of samples"):
        PegasosSVC().fit(X, y[:-1])
    clf = PegasosSVC(max_iter=100, random_state=0).fit(X, y)
    with pytest.raises(ValueError, match="features"):
        clf.predict(X[:, :2])


@parametrize_with_checks([PegasosSVC(max_iter=2000, random_state=0)])
def test_sklearn_compatible(estimator, check):
    check(estimator)
