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
