"""Model files: round trip, no pickle, corrupted and foreign files."""

import json
import zipfile

import numpy as np
import pytest

from dsvm import NystroemSVC
from dsvm.model_io import ModelFileError, load_model, save_model

from conftest import make_circles_problem


@pytest.fixture(scope="module")
def fitted():
    X, y = make_circles_problem(n=300, seed=5)
    y = np.where(y > 0, "out", "in").astype(object)
    return NystroemSVC(n_components=40, gamma=0.3, C=5.0, random_state=0).fit(X, y), X


@pytest.fixture(scope="module")
def fitted_multiclass():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(300, 3))
    y = np.digitize(X[:, 0], [-0.5, 0.5])
    return NystroemSVC(n_components=30, random_state=0, class_weight={0: 2.0, 1: 1.0, 2: 1.0}).fit(X, y), X


def test_round_trip_binary_string_labels(tmp_path, fitted):
    model, X = fitted
    path = save_model(model, tmp_path / "m.npz")
    loaded = load_model(path)
    np.testing.assert_array_equal(loaded.predict(X), model.predict(X))
    np.testing.assert_allclose(loaded.decision_function(X), model.decision_function(X))
    assert loaded.classes_.dtype == object and list(loaded.classes_) == ["in", "out"]
    assert loaded.get_params() == model.get_params()
    assert loaded.objective_ == pytest.approx(model.objective_)


def test_round_trip_multiclass(tmp_path, fitted_multiclass):
    model, X = fitted_multiclass
    loaded = load_model(save_model(model, tmp_path / "m.npz"))
    np.testing.assert_array_equal(loaded.predict(X), model.predict(X))
    assert loaded.get_params()["class_weight"] == {0: 2.0, 1: 1.0, 2: 1.0}


def test_file_holds_no_pickle(tmp_path, fitted):
    path = save_model(fitted[0], tmp_path / "m.npz")
    with zipfile.ZipFile(path) as z:
        for name in z.namelist():
            header = z.read(name)[:128]
            assert b"'descr': '|O'" not in header and b"'descr': 'O'" not in header, name
    np.load(path, allow_pickle=False)  # must not need pickle


def test_missing_truncated_and_foreign_files(tmp_path, fitted):
    with pytest.raises(ModelFileError, match="no such file"):
        load_model(tmp_path / "nope.npz")
    path = save_model(fitted[0], tmp_path / "m.npz")
    data = path.read_bytes()
    (tmp_path / "trunc.npz").write_bytes(data[: len(data) // 2])
    with pytest.raises(ModelFileError, match="corrupted|not a dsvm"):
        load_model(tmp_path / "trunc.npz")
    (tmp_path / "text.npz").write_text("hello")
    with pytest.raises(ModelFileError):
        load_model(tmp_path / "text.npz")
    np.savez(tmp_path / "foreign.npz", a=np.ones(3))
    with pytest.raises(ModelFileError, match="no __meta__"):
        load_model(tmp_path / "foreign.npz")


def _rewrite(path, out, **changes):
    with np.load(path, allow_pickle=False) as z:
        arrays = {k: z[k] for k in z.files}
    for key, value in changes.items():
        if key == "meta":
            meta = json.loads(bytes(arrays["__meta__"]).decode())
            value(meta)
            arrays["__meta__"] = np.frombuffer(json.dumps(meta).encode(), dtype=np.uint8)
        else:
            arrays[key] = value
    np.savez(out, **arrays)
    return out


def test_hand_edited_file_with_inconsistent_shapes(tmp_path, fitted):
    model = fitted[0]
    path = save_model(model, tmp_path / "m.npz")
    bad = _rewrite(path, tmp_path / "b1.npz", coef=model.coef_[:, :-1])
    with pytest.raises(ModelFileError, match="coef has shape"):
        load_model(bad)
    bad = _rewrite(path, tmp_path / "b2.npz", normalization=model.normalization_[:, :-2])
    with pytest.raises(ModelFileError, match="normalization"):
        load_model(bad)
    bad = _rewrite(path, tmp_path / "b3.npz", intercept=np.array([np.nan]))
    with pytest.raises(ModelFileError, match="NaN"):
        load_model(bad)
    bad = _rewrite(path, tmp_path / "b4.npz", meta=lambda m: m.update(format_version=99))
    with pytest.raises(ModelFileError, match="format version 99"):
        load_model(bad)
    bad = _rewrite(path, tmp_path / "b5.npz", meta=lambda m: m["fitted"].update(n_features_in_=7))
    with pytest.raises(ModelFileError, match="columns but n_features_in_ is 7"):
        load_model(bad)
    bad = _rewrite(path, tmp_path / "b6.npz", meta=lambda m: m.pop("kernel"))
    with pytest.raises(ModelFileError, match="metadata"):
        load_model(bad)


def test_object_array_in_file_is_refused_without_unpickling(tmp_path, fitted):
    path = save_model(fitted[0], tmp_path / "m.npz")
    evil = _rewrite(path, tmp_path / "evil.npz", classes=np.array([object(), object()], dtype=object))
    with pytest.raises(ModelFileError, match="refused|pickle"):
        load_model(evil)


def test_atomic_save_leaves_no_temporary_file(tmp_path, fitted):
    save_model(fitted[0], tmp_path / "m.npz")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m.npz"]


def test_round_trip_keeps_platt_sigmoids(tmp_path):
    X, y = make_circles_problem(n=300, seed=6)
    model = NystroemSVC(n_components=30, gamma=0.3, probability=True, random_state=0).fit(X, y)
    loaded = load_model(save_model(model, tmp_path / "p.npz"))
    np.testing.assert_allclose(loaded.predict_proba(X), model.predict_proba(X))
    bad = _rewrite(tmp_path / "p.npz", tmp_path / "bad.npz", probA=np.ones(3))
    with pytest.raises(ModelFileError, match="probA"):
        load_model(bad)


@pytest.mark.parametrize("name, change, message", [
    ("dtype", dict(meta=lambda m: m.update(dtype="int8")), "not float32 or float64"),
    ("classes 2-d", dict(classes=np.array([["in", "out"]])), "1-d array of at least two"),
    ("one class", dict(classes=np.array(["in"])), "1-d array of at least two"),
    ("unsorted", dict(classes=np.array(["out", "in"])), "sorted and distinct"),
    ("repeated", dict(classes=np.array(["in", "in"])), "sorted and distinct"),
    ("classes_kind", dict(meta=lambda m: m.update(classes_kind="pickle")), "classes_kind"),
    ("kind mismatch", dict(classes=np.array([0, 1])), "does not match classes_kind"),
    ("C", dict(meta=lambda m: m["params"].update(C="x")), "C must be a finite number"),
    ("eigenvalues", dict(eigenvalues=None), "eigenvalues must be positive"),
    ("bool coef", dict(coef=None), "expected floating point"),
])
def test_hand_edited_metadata_and_labels_are_refused(tmp_path, fitted, name, change, message):
    """Edits that would load and then predict wrongly (swapped labels) or fail later are caught on load."""
    model = fitted[0]
    path = save_model(model, tmp_path / "m.npz")
    if "eigenvalues" in change:
        change = {"eigenvalues": -model.feature_map_.eigenvalues}
    if "coef" in change:
        change = {"coef": model.coef_ > 0}
    with pytest.raises(ModelFileError, match=message):
        load_model(_rewrite(path, tmp_path / "bad.npz", **change))


def test_regression_model_round_trip(tmp_path):
    from dsvm import NystroemSVR
    from dsvm.predict_io import write_predictions

    rng = np.random.default_rng(3)
    X = rng.normal(size=(200, 3))
    t = np.sin(X[:, 0]) + 0.1 * rng.normal(size=200)
    model = NystroemSVR(n_components=30, C=10.0, epsilon=0.05, random_state=np.int64(2)).fit(X, t)
    loaded = load_model(save_model(model, tmp_path / "r.npz"))
    assert type(loaded) is NystroemSVR
    np.testing.assert_array_equal(loaded.predict(X), model.predict(X))
    assert loaded.get_params() == model.get_params() and loaded.random_state == 2
    assert not hasattr(loaded, "classes_")
    write_predictions(loaded, X, tmp_path / "p.npy")
    np.testing.assert_array_equal(np.load(tmp_path / "p.npy"), model.predict(X))


def test_save_model_names_what_it_cannot_save(tmp_path):
    from sklearn.svm import LinearSVC

    X, y = make_circles_problem(n=60, seed=1)
    with pytest.raises(TypeError, match="saves NystroemSVC and NystroemSVR models, got LinearSVC"):
        save_model(LinearSVC().fit(X, y), tmp_path / "x.npz")
    assert not (tmp_path / "x.npz").exists()


@pytest.mark.parametrize("suffix", [".npy", ".zarr", ".csv"])
def test_prediction_files_keep_long_string_labels_whole(tmp_path, suffix):
    """Object-dtype labels: the file's string width comes from every class, not from the first block."""
    import dask.array as da
    import zarr

    from dsvm.predict_io import write_predictions

    rng = np.random.RandomState(0)
    X = np.r_[np.full((100, 2), -3.0), np.full((100, 2), 3.0)] + 0.1 * rng.randn(200, 2)
    y = np.array(["no"] * 100 + ["positive"] * 100, dtype=object)
    model = load_model(save_model(NystroemSVC(n_components=20, random_state=0).fit(X, y), tmp_path / "m.npz"))
    out = tmp_path / f"p{suffix}"
    write_predictions(model, da.from_array(X, chunks=(100, 2)), out)  # first block: only "no"
    if suffix == ".npy":
        got = np.load(out)
    elif suffix == ".zarr":
        got = zarr.open_array(str(out), mode="r")[...]
    else:
        got = np.array(out.read_text().splitlines()[1:])
    np.testing.assert_array_equal(got.astype(str), y.astype(str))


def test_round_trip_pivoted_landmarks_keeps_the_triangular_map(tmp_path):
    X, y = make_circles_problem(n=400, seed=6)
    model = NystroemSVC(n_components=50, gamma=0.3, C=5.0, landmarks="pivoted", random_state=0).fit(X, y)
    assert not np.triu(model.normalization_, 1).any()
    loaded = load_model(save_model(model, tmp_path / "m.npz"))
    np.testing.assert_array_equal(loaded.normalization_, model.normalization_)
    np.testing.assert_allclose(loaded.decision_function(X), model.decision_function(X))
    assert loaded.get_params()["landmarks"] == "pivoted"
