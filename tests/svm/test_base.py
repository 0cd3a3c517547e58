"""What every Nyström estimator shares (:mod:`dsvm.svm._base`): the checks of its input."""

from __future__ import annotations

import numpy as np
import pytest

import dsvm

pd = pytest.importorskip("pandas")


def test_a_frame_with_a_text_column_names_the_column_in_fit_and_predict(tmp_path):
    """fit gave numpy's "could not convert string to float: 'red'" where dsvm.ingest(df) names the column."""
    rng = np.random.default_rng(0)
    X = pd.DataFrame({"size": rng.normal(size=40), "colour": rng.choice(["red", "blue"], 40),
                      "weight": rng.normal(size=40)})
    y = (X["size"] > 0).astype(int)
    message = (r"^the DataFrame: column 'colour' holds (object|str|string) values; dsvm's features are numbers "
               r"\(bool, integer, float\): encode it first \(e\.g\. one-hot\) or drop it$")
    with pytest.raises(ValueError, match=message):
        dsvm.NystroemSVC(n_components=5).fit(X, y)
    with pytest.raises(ValueError, match=message):
        dsvm.ingest(X.assign(label=y), tmp_path / "d.zarr", label_column="label")
    model = dsvm.NystroemSVC(n_components=5).fit(X[["size", "weight"]], y)
    with pytest.raises(ValueError, match=message):
        model.predict(X[["size", "colour"]])


@pytest.mark.parametrize("params, message", [
    ({"class_weight": [1]}, r"class_weight must be None, 'balanced' or a dict, got \[1\]"),
    ({"class_weight": "balance"}, r"class_weight must be None, 'balanced' or a dict, got 'balance'"),
    ({"class_weight": {1: float("nan")}}, r"class_weight must be finite and non-negative; label 1 has nan"),
    ({"class_weight": {1: -2}}, r"class_weight must be finite and non-negative; label 1 has -2"),
    ({"class_weight": {1: "x"}}, r"class_weight must be finite and non-negative; label 1 has 'x'"),
    ({"random_state": "x"}, r"random_state must be None, an integer from 0 to 2\*\*32 - 1 or a numpy RandomState, "
                            r"got 'x'"),
    ({"random_state": 1.5}, r"random_state must be None, .*, got 1\.5"),
    ({"random_state": True}, r"random_state must be None, .*, got True"),
    ({"random_state": -1}, r"random_state must be None, .*, got -1"),
    ({"random_state": 2**32}, r"random_state must be None, .*, got 4294967296"),
])
def test_class_weight_and_random_state_are_checked_with_the_other_parameters(params, message, monkeypatch):
    """`class_weight: [1]` or `random_state: x` passed check_params: a pipeline created its folder and ingested
    its data before the fit refused them."""
    from dsvm.svm import check_params

    with pytest.raises(ValueError, match=message):
        check_params(dsvm.NystroemSVC(**params))
    X = np.random.default_rng(0).normal(size=(40, 3))
    y = (X[:, 0] > 0).astype(int)
    with pytest.raises(ValueError, match=message):
        dsvm.NystroemSVC(n_components=5, **params).fit(X, y)


@pytest.mark.parametrize("params", [{"class_weight": None}, {"class_weight": "balanced"},
                                    {"class_weight": {0: 1, 1: 2.5}}, {"random_state": None},
                                    {"random_state": np.int64(3)}, {"random_state": np.random.RandomState(0)},
                                    {"random_state": 2**32 - 1}])
def test_the_accepted_forms_still_pass(params):
    from dsvm.svm import check_params

    check_params(dsvm.NystroemSVC(**params))


# ---------------------------------------------------------------- prediction through the landmarks
def _explicit(model, X):
    """The model's ``F(scale(X)) coefᵀ + intercept`` the long way (float64), its scale and the tolerance of its
    dtype."""
    from helpers import FLOAT32_DECISION_TOL, FLOAT64_DECISION_TOL, explicit_decisions

    expected, scale = explicit_decisions(X, model.feature_map_, model.coef_, model.intercept_,
                                         getattr(model, "scaling_", None))
    tol = FLOAT32_DECISION_TOL if np.dtype(model.dtype) == np.float32 else FLOAT64_DECISION_TOL
    return expected, scale, tol


def _check_classifier(model, X, rows):
    """decision_function, predict and (with probability=True) predict_proba on ``rows`` (X as given to the model)
    against the explicit ``F coefᵀ`` of ``X``."""
    from helpers import assert_same_decisions, assert_same_labels

    from dsvm.svm._block_tasks import proba_block

    expected, scale, tol = _explicit(model, X)
    assert_same_decisions(np.asarray(model.decision_function(rows)), expected, scale, tol)
    assert_same_labels(np.searchsorted(model.classes_, np.asarray(model.predict(rows))), expected, scale, tol)
    if model.probability:
        want = proba_block(expected, model.probA_, model.probB_, False)
        # the sigmoid's slope is at most |A| / 4 per unit of decision value
        bound = np.abs(model.probA_).max() / 4 * tol * scale.max() + 1e-12
        np.testing.assert_allclose(np.asarray(model.predict_proba(rows)), want, rtol=0, atol=bound)


@pytest.mark.filterwarnings("ignore:only .* sampled rows are not already spanned")  # the linear kernel's rank
@pytest.mark.parametrize("kernel", ["rbf", "poly", "sigmoid", "linear"])
@pytest.mark.parametrize("landmarks", ["uniform", "kmeans", "pivoted", "active"])
def test_a_classifier_predicts_the_explicit_f_coef_for_every_kernel_and_landmark_method(kernel, landmarks):
    """Prediction folds the map into the coefficients (``K(X, L) M coefᵀ``); it is ``F coefᵀ`` to float32 rounding,
    dense and sparse input, the triangular map of pivoted landmarks included."""
    import scipy.sparse as sp
    from helpers import make_circles_problem

    X, y = make_circles_problem(n=300, p=4, seed=7)
    model = dsvm.NystroemSVC(kernel=kernel, n_components=25, landmarks=landmarks, random_state=0).fit(X, y)
    for rows in (X, sp.csr_matrix(X)):
        _check_classifier(model, X, rows)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_multiclass_probabilities_and_scaling_predict_the_explicit_f_coef(dtype):
    """Multiclass one-vs-rest with Platt sigmoids and a scale step: every column of decision values, the labels and
    the probabilities, numpy and Dask input."""
    import dask.array as da

    rng = np.random.default_rng(8)
    X = rng.normal(size=(360, 4)) * [1.0, 5.0, 0.5, 2.0]
    y = np.digitize(X[:, 0] + 0.3 * X[:, 1], [-1.0, 1.0])
    model = dsvm.NystroemSVC(n_components=30, probability=True, scale="standard", dtype=dtype,
                             random_state=0).fit(X, y)
    assert model.coef_.shape[0] == 3
    _check_classifier(model, X, X)
    _check_classifier(model, X, da.from_array(X, chunks=(100, 4)))


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_a_regressor_predicts_the_explicit_f_coef(dtype):
    import dask.array as da
    import scipy.sparse as sp
    from helpers import assert_same_decisions

    rng = np.random.default_rng(9)
    X = rng.normal(size=(300, 3))
    y = np.sin(X[:, 0]) + 0.1 * rng.normal(size=300)
    model = dsvm.NystroemSVR(n_components=30, dtype=dtype, random_state=0).fit(X, y)
    expected, scale, tol = _explicit(model, X)
    for rows in (X, sp.csr_matrix(X), da.from_array(X, chunks=(70, 3))):
        assert_same_decisions(np.asarray(model.predict(rows)), expected, scale, tol)
