"""NystroemSVC: API, label handling, input types, bad input."""

import pickle
import warnings

import dask.array as da
import numpy as np
import pytest
import scipy.sparse as sp
from helpers import make_circles_problem, make_mixed_scales_problem, sqhinge_objective_dense
from sklearn.exceptions import ConvergenceWarning, NotFittedError
from sklearn.svm import LinearSVC

from dsvm import NystroemSVC
from dsvm.svm._base import prepare_fit_input


def _fit(X, y, **kw):
    params = dict(C=10.0, gamma=0.3, n_components=80, random_state=0)
    params.update(kw)
    return NystroemSVC(**params).fit(X, y)


def test_kernel_beats_linear_on_a_nonlinear_problem(circles):
    X, y = circles
    clf = _fit(X, y)
    lin = LinearSVC().fit(X, y)
    assert clf.score(X, y) > 0.9 > lin.score(X, y) + 0.15


@pytest.mark.parametrize("labels", [(-1, 1), (0, 1), (1, 2), ("no", "yes"), (-1.0, 1.0)])
def test_binary_label_sets(circles, labels):
    X, y = circles
    y_mapped = np.where(y > 0, labels[1], labels[0])
    clf = _fit(X, y_mapped)
    np.testing.assert_array_equal(clf.classes_, np.array(labels))
    assert clf.coef_.shape == (1, clf.normalization_.shape[0])
    pred = clf.predict(X)
    assert pred.dtype == np.asarray(labels).dtype
    # decision > 0 means classes_[1], as in scikit-learn
    np.testing.assert_array_equal(pred == labels[1], clf.decision_function(X) > 0)
    assert clf.score(X, y_mapped) > 0.9


def test_multiclass_one_vs_rest_with_string_labels():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(600, 2))
    angle = np.arctan2(X[:, 1], X[:, 0])
    y = np.array(["red", "green", "blue"])[((angle + np.pi) / (2 * np.pi / 3)).astype(int) % 3]
    clf = _fit(X, y, gamma=1.0)
    assert list(clf.classes_) == ["blue", "green", "red"]
    assert clf.coef_.shape[0] == 3 and clf.intercept_.shape == (3,)
    assert clf.decision_function(X).shape == (600, 3)
    assert np.asarray(clf.objective_).shape == (3,)
    assert clf.score(X, y) > 0.95
    assert len(clf.solver_stats_["problems"]) == 3


def test_objective_attribute_is_the_primal_objective(circles):
    X, y = circles
    clf = _fit(X, y, dtype="float64", tol=1e-10)
    F = clf.feature_map_.transform_block(X)
    y_pm = np.where(y == clf.classes_[1], 1.0, -1.0)
    dense = sqhinge_objective_dense(F, y_pm, np.full(len(y), 10.0), clf.coef_[0], clf.intercept_[0])
    np.testing.assert_allclose(clf.objective_, dense, rtol=1e-10)
    np.testing.assert_allclose(F, clf.feature_map_.transform_block(X))
    assert clf.n_iter_ >= 1 and clf.n_features_in_ == X.shape[1]


@pytest.mark.parametrize("kernel", ["rbf", "poly", "sigmoid", "linear"])
def test_all_kernels_fit_and_predict(circles, kernel):
    X, y = circles
    clf = _fit(X, y, kernel=kernel, gamma=0.1, coef0=1.0 if kernel != "sigmoid" else -1.0, degree=2)
    assert np.all(np.isfinite(clf.decision_function(X)))
    if kernel in ("rbf", "poly"):
        assert clf.score(X, y) > 0.9


def test_sparse_and_dense_input_give_the_same_model(circles):
    X, y = circles
    X = np.where(np.abs(X) < 0.3, 0.0, X)
    a = _fit(X, y, dtype="float64", tol=1e-8)
    b = _fit(sp.csr_matrix(X), y, dtype="float64", tol=1e-8)
    np.testing.assert_allclose(a.coef_, b.coef_, rtol=1e-6, atol=1e-8)
    np.testing.assert_allclose(a.decision_function(X), b.decision_function(sp.csr_matrix(X)), atol=1e-7)


@pytest.mark.parametrize("chunks", [50, 137, 600])
def test_dask_input_gives_numpy_predictions(circles, chunks):
    X, y = circles
    a = _fit(X, y, tol=1e-6)
    Xd = da.from_array(X, chunks=(chunks, -1))
    yd = da.from_array(y, chunks=chunks)
    b = _fit(Xd, yd, tol=1e-6)
    np.testing.assert_allclose(a.components_, b.components_)
    dec = b.decision_function(Xd)
    pred = b.predict(Xd)
    assert isinstance(dec, da.Array) and isinstance(pred, da.Array)
    dec_np = a.decision_function(X)
    np.testing.assert_allclose(dec.compute(), dec_np, atol=1e-4)
    clear = np.abs(dec_np) > 1e-3
    np.testing.assert_array_equal(pred.compute()[clear], a.predict(X)[clear])
    assert abs(b.score(Xd, yd) - a.score(X, y)) <= 1 / len(y) + 1e-12
    # predictions from a numpy-fitted model on dask data, and vice versa
    np.testing.assert_allclose(a.decision_function(Xd).compute(), b.decision_function(X), atol=1e-4)


def test_fitted_model_pickles_and_holds_no_dask_objects(circles):
    X, y = circles
    clf = _fit(da.from_array(X, chunks=(100, -1)), da.from_array(y, chunks=100))
    for name, value in vars(clf).items():
        assert "dask" not in type(value).__module__, name
    clone = pickle.loads(pickle.dumps(clf))
    np.testing.assert_array_equal(clone.predict(X), clf.predict(X))


def test_n_components_larger_than_n_is_clipped_with_a_warning():
    X, y = make_circles_problem(n=40)
    with pytest.warns(UserWarning, match="n_components=500 is larger than the number of rows"):
        clf = NystroemSVC(random_state=0).fit(X, y)
    assert clf.components_.shape[0] <= 40


def test_convergence_warning_when_max_iter_is_too_small(circles):
    X, y = circles
    with pytest.warns(ConvergenceWarning, match="max_iter"):
        _fit(X, y, max_iter=1, tol=1e-12)


def test_gamma_scale_matches_sklearn_definition(circles):
    X, y = circles
    clf = NystroemSVC(n_components=20, random_state=0).fit(X, y)
    np.testing.assert_allclose(clf.gamma_, 1.0 / (X.shape[1] * X.var()))
    Xd = da.from_array(X, chunks=(77, -1))
    clf_d = NystroemSVC(n_components=20, random_state=0).fit(Xd, da.from_array(y, chunks=77))
    np.testing.assert_allclose(clf_d.gamma_, clf.gamma_)
    Xs = sp.csr_matrix(np.where(np.abs(X) < 0.5, 0, X))
    clf_s = NystroemSVC(n_components=20, random_state=0).fit(Xs, y)
    np.testing.assert_allclose(clf_s.gamma_, 1.0 / (X.shape[1] * Xs.toarray().var()))


def test_class_weight_balanced_changes_the_model(circles):
    X, y = circles
    a = _fit(X, y)
    b = _fit(X, y, class_weight="balanced")
    c = _fit(X, y, class_weight={-1: 1.0, 1: 1.0})
    assert not np.allclose(a.coef_, b.coef_)
    np.testing.assert_allclose(a.coef_, c.coef_)


def test_sample_weight_zero_equals_dropping_rows():
    X, y = make_circles_problem(n=300, seed=3)
    sw = np.ones(len(y))
    sw[::3] = 0.0
    # identical landmarks: pick them from the kept rows via a fixed random_state on the kept set
    keep = sw > 0
    a = NystroemSVC(n_components=30, gamma=0.3, dtype="float64", tol=1e-10, random_state=0).fit(X[keep], y[keep])
    b = NystroemSVC(n_components=30, gamma=0.3, dtype="float64", tol=1e-10, random_state=0)
    b.fit(X[keep], y[keep])  # landmarks from the kept rows
    from helpers import feature_blocks

    from dsvm.blocks import aligned_vector, as_row_blocks
    from dsvm.problems import SquaredHingeOperator
    from dsvm.solvers import semismooth_newton
    from dsvm.svm import encode_labels

    rb = as_row_blocks(X, 64)
    classes, codes = encode_labels(y, rb)
    op = SquaredHingeOperator(feature_blocks(rb, b.feature_map_), codes, 1, np.array([1.0, 1.0]), aligned_vector(sw, rb))
    res = semismooth_newton(op, b.coef_.shape[1] + 1, tol=1e-10)
    np.testing.assert_allclose(res.x[:-1], a.coef_[0], rtol=1e-6, atol=1e-8)


# ---------------------------------------------------------------- bad input
def test_not_fitted():
    with pytest.raises(NotFittedError):
        NystroemSVC().predict(np.zeros((2, 2)))


@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
def test_non_finite_x_numpy(circles, bad):
    X, y = circles
    X = X.copy()
    X[5, 1] = bad
    with pytest.raises(ValueError, match="NaN|infinity"):
        _fit(X, y)


def test_non_finite_x_dask_names_the_row(circles):
    X, y = circles
    X = X.copy()
    X[217, 0] = np.inf
    with pytest.raises(ValueError, match="row 217"):
        _fit(da.from_array(X, chunks=(100, -1)), da.from_array(y, chunks=100))


def test_non_finite_at_predict_dask(circles):
    X, y = circles
    clf = _fit(X, y)
    X = X.copy()
    X[3, 0] = np.nan
    with pytest.raises(ValueError, match="row 3"):
        clf.predict(da.from_array(X, chunks=(100, -1))).compute()


def test_single_class(circles):
    X, _ = circles
    with pytest.raises(ValueError, match="1 class"):
        _fit(X, np.ones(len(X)))
    with pytest.raises(ValueError, match="1 class"):
        _fit(da.from_array(X, chunks=(100, -1)), da.ones(len(X), chunks=100))


def test_length_mismatch(circles):
    X, y = circles
    with pytest.raises(ValueError, match="inconsistent numbers of samples|rows"):
        _fit(X, y[:-1])
    with pytest.raises(ValueError, match="X has 600 rows but y has 599"):
        _fit(da.from_array(X, chunks=(100, -1)), da.from_array(y[:-1], chunks=100))


def test_wrong_number_of_features_at_predict(circles):
    X, y = circles
    clf = _fit(X, y)
    with pytest.raises(ValueError, match="X has 4 features, but NystroemSVC is expecting 5"):
        clf.predict(X[:, :4])
    with pytest.raises(ValueError, match="X has 4 features, but NystroemSVC is expecting 5"):
        clf.predict(da.from_array(X[:, :4], chunks=(100, -1)))


def test_dask_unknown_chunks_and_column_blocks(circles):
    X, y = circles
    Xd = da.from_array(X, chunks=(100, -1))
    unknown = Xd[Xd[:, 0] > -100]
    with pytest.raises(ValueError, match="unknown chunk sizes"):
        _fit(unknown, y)
    with pytest.raises(ValueError, match="chunks along the feature axis"):
        _fit(da.from_array(X, chunks=(100, 2)), y)


def test_continuous_targets_are_rejected(circles):
    X, _ = circles
    with pytest.raises(ValueError, match="Unknown label type"):
        _fit(X, np.linspace(0, 1, len(X)))


@pytest.mark.parametrize(
    "param,value,match",
    [
        ("C", 0.0, "C must be positive"),
        ("C", -1.0, "C must be positive"),
        ("gamma", 0.0, "gamma must be positive"),
        ("gamma", -0.5, "gamma must be positive"),
        ("gamma", "large", "gamma must be 'scale', 'auto' or a positive number"),
        ("n_components", 0, "n_components must be a positive integer"),
        ("n_components", 2.5, "n_components must be a positive integer"),
        ("kernel", "laplacian", "kernel="),
        ("landmarks", "random", "landmarks="),
        ("solver", "smo", "solver="),
        ("hessian", "bfgs", "hessian="),
        ("dtype", "float16", "dtype must be"),
        ("tol", 0, "tol must be positive"),
        ("max_iter", 0, "max_iter must be a positive integer"),
    ],
)
def test_bad_parameters(circles, param, value, match):
    X, y = circles
    with pytest.raises(ValueError, match=match):
        NystroemSVC(**{param: value}).fit(X, y)


# ---------------------------------------------------------------- subsample warm start of the Newton solve


def _warm_fit(X, y, caplog, **options):
    with caplog.at_level("INFO", logger="dsvm.svm._opening"):
        clf = _fit(X, y, dtype="float64", tol=1e-9, solver_options=options or None)
    used = any("opening:" in r.getMessage() for r in caplog.records)
    assert used == ("opening" in clf.solver_stats_)
    caplog.clear()
    return clf, used


def test_subsample_warm_start_reaches_the_same_optimum(caplog):
    X, y = make_circles_problem(n=3000, seed=3)
    cold, used_cold = _warm_fit(X, y, caplog, warm_start="none")
    warm, used_warm = _warm_fit(X, y, caplog, warm_start="subsample", warm_rows=400)
    assert used_warm and not used_cold
    assert warm.objective_ == pytest.approx(cold.objective_, rel=1e-9)
    np.testing.assert_allclose(warm.decision_function(X), cold.decision_function(X), rtol=1e-6, atol=1e-6)
    # "auto" (the default) takes the subsample when there are at least four times its rows
    _, used_auto = _warm_fit(X, y, caplog, warm_rows=400)
    _, used_small = _warm_fit(X, y, caplog, warm_rows=1000)
    assert used_auto and not used_small


def test_dask_input_opens_from_the_subsample_as_in_memory_input_does(caplog):
    """Dask and in-memory input open from the same subsample, by the same function (dsvm.svm._opening): by
    default when there are at least four times its rows, and to the same model."""
    X, y = make_circles_problem(n=3000, seed=3)
    Xd = da.from_array(X, chunks=1000)
    auto, _ = _warm_fit(Xd, y, caplog, warm_rows=400)
    forced, _ = _warm_fit(Xd, y, caplog, warm_start="subsample", warm_rows=1000)
    small, _ = _warm_fit(Xd, y, caplog, warm_rows=1000)
    cold, _ = _warm_fit(Xd, y, caplog, warm_start="none")
    assert "opening" in auto.solver_stats_ and "opening" in forced.solver_stats_
    assert "opening" not in small.solver_stats_ and "opening" not in cold.solver_stats_
    assert auto.objective_ == pytest.approx(cold.objective_, rel=1e-9)
    in_memory, _ = _warm_fit(X, y, caplog, warm_rows=400)
    assert in_memory.solver_stats_["opening"]["rows"] == auto.solver_stats_["opening"]["rows"]
    assert in_memory.solver_stats_["opening"]["n_iter"] == auto.solver_stats_["opening"]["n_iter"]
    assert in_memory.objective_ == pytest.approx(auto.objective_, rel=1e-9)


def test_explicit_block_rows_is_kept():
    X, y = make_circles_problem(n=20_000, seed=3)
    X_rb = prepare_fit_input(NystroemSVC(block_rows=20_000), X, y, None, lambda v: v).X
    assert X_rb.chunks == (20_000,)  # one block: the fit runs on one thread
    X_rb = prepare_fit_input(NystroemSVC(), X, y, None, lambda v: v).X
    assert X_rb.n_blocks > 1  # the default size is split so that every core gets blocks


# ---------------------------------------------------------------- non-finite problems and useless fits (issue 25)
@pytest.mark.parametrize("params, match", [
    ({"C": 1e300}, r"C=1e\+300 is too large"),
    ({"C": 1e31}, r"C=1e\+31 is too large: beyond C=1e\+30 .* float32 features \(dtype='float64' allows"),
    ({"C": 1e160, "dtype": "float64"}, r"C=1e\+160 is too large"),
    ({"gamma": 1e300}, r"gamma=1e\+300 is beyond the largest float32 number"),
    ({"kernel": "poly", "coef0": -1e39}, r"coef0=-1e\+39 is beyond the largest float32 number"),
])
def test_parameters_that_cannot_give_a_finite_problem_are_refused(circles, params, match):
    """Before: accepted; the solver stopped "after 0 iterations with |g|/|g0| = nan" and the model was kept."""
    X, y = circles
    with pytest.raises(ValueError, match=match):
        NystroemSVC(n_components=20, **params).fit(X, y)


def test_costs_whose_loss_cannot_be_squared_are_refused_with_the_weights_named(circles):
    from dsvm import NystroemSVR

    X, y = circles
    w = np.full(len(y), 1e130)
    with pytest.raises(ValueError, match=r"rows' total weight \(6e\+132, the sum of sample_weight\)"):
        NystroemSVC(n_components=20, C=1e20, dtype="float64").fit(X, y, sample_weight=w)
    with pytest.raises(ValueError, match=r"class weight \(1e\+149\) times the rows' total weight \(600, its number"):
        NystroemSVC(n_components=20, C=1e19, dtype="float64", class_weight={1: 1e130}).fit(X, y)
    with pytest.raises(ValueError, match=r"C times the class weight \(1e\+149\).*\(600, its number of rows\)"):
        NystroemSVR(n_components=20, C=1e149, dtype="float64").fit(X, y.astype(float))


@pytest.mark.parametrize("dask_input", [False, True])
def test_a_kernel_that_overflows_is_an_error_not_a_model(circles, dask_input):
    """A poly kernel on |x| ~ 1e13 overflows float32: the fit "converged" on NaN and kept a model."""
    from dsvm.exceptions import NonFiniteError

    X, y = circles
    X = X * 1e13
    X_in = da.from_array(X, chunks=150) if dask_input else X
    with pytest.raises(NonFiniteError, match=r"the features of row \d+ hold NaN or infinity .* poly kernel "
                                             r"\(gamma=1, coef0=0, degree=3\) overflows float32 .*dtype='float64'"):
        NystroemSVC(kernel="poly", gamma=1.0, n_components=30, random_state=0).fit(X_in, y)
    # what the message suggests works
    assert NystroemSVC(kernel="poly", gamma=1.0, n_components=30, random_state=0, dtype="float64").fit(X, y)


@pytest.mark.parametrize("dask_input", [False, True])
def test_decision_values_that_overflow_at_predict_are_an_error_not_a_class(circles, dask_input):
    """Before: NaN decisions were labelled as the first class."""
    from dsvm.exceptions import NonFiniteError

    X, y = circles
    clf = NystroemSVC(kernel="poly", gamma=1.0, n_components=30, random_state=0).fit(X, y)
    far = X[:20].copy()
    far[13] *= 1e13
    far_in = da.from_array(far, chunks=7) if dask_input else far
    for method in (clf.predict, clf.decision_function):
        with pytest.raises(NonFiniteError, match="the kernel values of row 13 hold NaN or infinity"):
            np.asarray(method(far_in))


def test_a_fit_on_mixed_scale_columns_warns_unless_scale_is_chosen():
    from dsvm.exceptions import MixedScalesWarning

    X, y = make_mixed_scales_problem()
    with pytest.warns(MixedScalesWarning, match=r"orders of magnitude apart.*scale='standard'"):
        NystroemSVC(n_components=50, random_state=0).fit(X, y)
    with warnings.catch_warnings():
        warnings.simplefilter("error", MixedScalesWarning)
        scaled = NystroemSVC(n_components=50, random_state=0, scale="standard").fit(X, y)
        NystroemSVC(n_components=50, random_state=0, gamma=0.1).fit(X[:300], y[:300])  # no gamma pass, no check
    assert scaled.score(X, y) > 0.85


def test_a_fit_predicting_one_class_for_every_training_row_warns():
    """Issue 25 item 5: a model predicting the majority class for every row, silently."""
    from dsvm.exceptions import OneClassFitWarning

    X, y = make_mixed_scales_problem()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        with pytest.warns(OneClassFitWarning, match=r"predicts class 0 for all 1500 training rows.*C=1e-06"):
            clf = NystroemSVC(n_components=50, random_state=0, C=1e-6, scale="standard").fit(X, y)
        assert np.all(clf.predict(X) == 0) and clf.solver_stats_["problems"][0]["train_positive"] == [1500, 0]
        for solver in ("newton", "tron"):
            with warnings.catch_warnings():
                warnings.simplefilter("error", OneClassFitWarning)
                clf = NystroemSVC(n_components=50, random_state=0, scale="standard", solver=solver).fit(X, y)
            n, positive = clf.solver_stats_["problems"][0]["train_positive"]
            assert n == 1500 and positive == int(np.sum(clf.predict(X) == 1))
