"""What every Nyström estimator shares (:mod:`dsvm.svm.base`): the checks of its input."""

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
