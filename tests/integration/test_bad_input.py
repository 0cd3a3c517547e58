"""Bad input never becomes a silently wrong model (the README's bad-input table).

Rows of that table not tested here are tested next to their code; the README
names the test of each row.
"""


import numpy as np
import pytest
import zarr
from helpers import make_circles_problem, zero_based_libsvm_files

import dsvm
from dsvm import evaluate


@pytest.fixture
def dataset(tmp_path):
    X, y = make_circles_problem(n=400, seed=4)
    return dsvm.write_dataset(tmp_path / "d.zarr", X, y, chunk_rows=100)


def test_labels_not_among_the_declared_classes(dataset):
    group = zarr.open_group(str(dataset.path), mode="r+")
    group.attrs["classes"] = [-1, 2]  # hand-edited: y really holds -1 and 1
    with pytest.raises(dsvm.InvalidDatasetError, match="attributes were changed after it was written"):
        dsvm.open_dataset(dataset.path)
    # a version-1 dataset has no seal: the labels are checked against the classes when read
    for key in ("seal", "checksums"):
        del group.attrs[key]
    group.attrs["format_version"] = 1
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


# The indexing base of LIBSVM files ------------------------------------------------------------
def test_test_set_read_with_another_index_base_is_refused(tmp_path):
    from sklearn.datasets import load_svmlight_file

    files = zero_based_libsvm_files(tmp_path)
    train = dsvm.ingest(files["train"], tmp_path / "train.zarr")
    assert train.attrs["zero_based"] is True and train.attrs["zero_based_from"] == "index 0"
    model = dsvm.NystroemSVC(n_components=100, C=10, gamma=2.0, random_state=0).fit(train)
    assert model.zero_based_ is True
    # "auto" cannot tell that this file is zero-based: it has no index 0
    test = dsvm.ingest(files["test"], tmp_path / "test.zarr", n_features=4)
    assert test.attrs["zero_based"] is False and test.attrs["zero_based_from"] == "no index 0"
    dsvm.save_model(model, tmp_path / "m.npz")
    loaded = dsvm.load_model(tmp_path / "m.npz")
    assert loaded.zero_based_ is True
    for m in (model, loaded):
        for use in (evaluate, lambda mdl, ds: mdl.predict(ds), lambda mdl, ds: mdl.score(ds)):
            with pytest.raises(ValueError, match=r"read as one-based \(guessed: the file has no feature index 0\), "
                                                 r"but the model was trained on a file with zero-based"):
                use(m, test)
    # read like the training data, the test set gives the accuracy of the correctly read arrays
    good = dsvm.ingest(files["test"], tmp_path / "good.zarr", like=train)
    assert good.attrs["zero_based"] is True and good.attrs["zero_based_from"] == "reference"
    X_ref, y_ref = load_svmlight_file(str(files["test"]), n_features=4, zero_based=True)
    expected = model.score(X_ref.toarray(), y_ref)
    assert expected > 0.95
    assert evaluate(loaded, good)["accuracy"] == pytest.approx(expected)
    same = dsvm.ingest(files["test"], tmp_path / "same.zarr", like=loaded)
    assert same.attrs["zero_based"] is True and same.n_features == 4
    with pytest.raises(ValueError, match="zero_based=False contradicts"):
        dsvm.ingest(files["test"], tmp_path / "x.zarr", like=train, zero_based=False)
