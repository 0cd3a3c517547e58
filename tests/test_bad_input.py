"""Bad input never becomes a silently wrong model (the README's bad-input table).

Rows of that table not tested here are tested next to their code; the README
names the test of each row.
"""

import json

import numpy as np
import pytest
import zarr

import dsvm
from dsvm.metrics import evaluate

from conftest import make_circles_problem


@pytest.fixture
def dataset(tmp_path):
    X, y = make_circles_problem(n=400, seed=4)
    return dsvm.write_dataset(tmp_path / "d.zarr", X, y, chunk_rows=100)


def test_labels_not_among_the_declared_classes(dataset):
    group = zarr.open_group(str(dataset.path), mode="r+")
    group.attrs["classes"] = [-1, 2]  # hand-edited: y really holds -1 and 1
    ds = dsvm.open_dataset(dataset.path)
    with pytest.raises(ValueError, match="not among the classes"):
        dsvm.NystroemSVC(n_components=20).fit(ds)


def test_test_labels_the_model_never_saw(dataset):
    model = dsvm.NystroemSVC(n_components=20, random_state=0).fit(dataset)
    X, y = dataset.load()
    y = y.copy()
    y[7] = 5
    with pytest.raises(ValueError, match=r"labels \[5\] that the model was not trained on"):
        evaluate(model, X, y)


def test_dataset_with_more_features_than_the_model(dataset, tmp_path):
    model = dsvm.NystroemSVC(n_components=20, random_state=0).fit(dataset)
    X, y = dataset.load()
    wide = dsvm.write_dataset(tmp_path / "wide.zarr", np.hstack([X, X[:, :1]]), y)
    with pytest.raises(ValueError, match="X has 6 features, but NystroemSVC is expecting 5"):
        model.predict(wide)


def test_empty_inputs(tmp_path):
    (tmp_path / "empty.libsvm").write_text("")
    with pytest.raises(ValueError, match="no rows"):
        dsvm.ingest(tmp_path / "empty.libsvm", tmp_path / "e.zarr")
    assert not (tmp_path / "e.zarr").exists()
    with pytest.raises(ValueError, match="0 sample"):
        dsvm.NystroemSVC().fit(np.zeros((0, 3)), np.zeros(0))


def test_hand_edited_dataset_shape_is_detected(dataset):
    group = zarr.open_group(str(dataset.path), mode="r+")
    group.attrs["n_samples"] = 399
    with pytest.raises(dsvm.InvalidDatasetError):
        dsvm.open_dataset(dataset.path)
