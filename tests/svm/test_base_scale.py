"""The ``scale=`` step of the estimators and the feature names they keep: fit, predict, model files.

Oracles: the same estimator fitted without ``scale`` on the rows scikit-learn's scaler produced
(identical landmark rows, so identical models up to round-off); scikit-learn's feature-name rules.
"""

from __future__ import annotations

import json
from pathlib import Path

import dask.array as da
import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.preprocessing import MaxAbsScaler, MinMaxScaler, StandardScaler

import dsvm
from dsvm import ModelFileError, NystroemSVC, NystroemSVCCV, NystroemSVR, load_model, save_model

FIXTURES = Path(__file__).resolve().parents[1] / "data" / "models-0.1"
SCALERS = {"standard": StandardScaler, "minmax": MinMaxScaler, "maxabs": MaxAbsScaler}


def _problem(n=800, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 4)) * [1.0, 300.0, 0.01, 2.0] + [0.0, 5e3, 1.0, -4.0]
    y = np.where(np.sin(3 * X[:, 0]) + (X[:, 1] - 5e3) / 300 > 0, "up", "down")
    return X, y


@pytest.mark.parametrize("kind", ["standard", "minmax", "maxabs"])
def test_scaled_fit_equals_a_fit_on_scikit_learns_scaled_rows(kind):
    X, y = _problem()
    params = dict(n_components=60, gamma=0.5, C=10.0, random_state=0, dtype="float64", tol=1e-10)
    model = NystroemSVC(scale=kind, **params).fit(X, y)
    scaler = SCALERS[kind]().fit(X)
    reference = NystroemSVC(**params).fit(scaler.transform(X), y)
    np.testing.assert_allclose(model.decision_function(X), reference.decision_function(scaler.transform(X)),
                               rtol=1e-8, atol=1e-9)
    # features on scales 0.01 to 300: without scaling the RBF kernel sees one feature and guesses
    X_test, y_test = _problem(seed=1)
    unscaled = NystroemSVC(**params).fit(X, y)
    assert model.scaling_.kind == kind and model.score(X_test, y_test) > unscaled.score(X_test, y_test) + 0.2
    svr = NystroemSVR(scale=kind, **params).fit(X, X[:, 0] ** 2)
    svr_ref = NystroemSVR(**params).fit(scaler.transform(X), X[:, 0] ** 2)
    np.testing.assert_allclose(svr.predict(X), svr_ref.predict(scaler.transform(X)), rtol=1e-8, atol=1e-9)


def test_sparse_input_and_dask_input():
    X = sp.random(600, 30, density=0.2, format="csr", random_state=0) * 50
    y = (np.median(X[:, :5].sum(axis=1).A1) < X[:, :5].sum(axis=1).A1).astype(int)
    params = dict(n_components=40, gamma=0.5, random_state=0, dtype="float64", tol=1e-10)
    model = NystroemSVC(scale="maxabs", **params).fit(X, y)
    reference = NystroemSVC(**params).fit(MaxAbsScaler().fit_transform(X), y)
    np.testing.assert_allclose(model.decision_function(X), reference.decision_function(MaxAbsScaler().fit_transform(X)),
                               rtol=1e-8, atol=1e-9)
    # the same rows as Dask chunks: the same statistics, and predict stays lazy (the scaling runs in the block)
    Xd, yd = da.from_array(X, chunks=(150, -1)), da.from_array(y, chunks=150)
    lazy = NystroemSVC(scale="maxabs", **params).fit(Xd, yd)
    np.testing.assert_allclose(lazy.scaling_.stats["max_abs_"], model.scaling_.stats["max_abs_"], rtol=1e-12)
    dec = lazy.decision_function(Xd)
    assert isinstance(dec, da.Array)
    np.testing.assert_allclose(dec.compute(), model.decision_function(X), rtol=1e-7, atol=1e-9)


def test_search_scales_once_and_refuses_to_search_the_scaling():
    X, y = _problem(600)
    search = NystroemSVCCV({"C": [1.0, 10.0]}, scale="standard", n_components=40, gamma=0.5, cv=3,
                           random_state=0).fit(X, y)
    assert search.best_estimator_.scaling_.kind == "standard" and search.best_score_ > 0.8
    with pytest.raises(ValueError, match="param_grid cannot search 'scale'"):
        NystroemSVCCV({"scale": [None, "standard"]}, n_components=40, cv=3).fit(X, y)


def test_scaling_and_feature_names_survive_the_model_file(tmp_path):
    pd = pytest.importorskip("pandas")
    X, y = _problem()
    frame = pd.DataFrame(X, columns=["a", "b", "c", "d"])
    model = NystroemSVC(scale="standard", n_components=50, random_state=0).fit(frame, y)
    path = save_model(model, tmp_path / "m.npz")
    loaded = load_model(path)
    assert loaded.feature_names_in_.tolist() == ["a", "b", "c", "d"]
    assert loaded.scaling_.kind == "standard" and loaded.scaling_.center
    np.testing.assert_array_equal(loaded.decision_function(frame), model.decision_function(frame))
    with pytest.raises(ValueError, match="feature names"):
        loaded.predict(frame[["b", "a", "c", "d"]])


def _rewrite(path, out, meta=None, **arrays):
    with np.load(path, allow_pickle=False) as z:
        members = {k: z[k] for k in z.files}
    if meta is not None:
        doc = json.loads(bytes(members["__meta__"]).decode())
        meta(doc)
        members["__meta__"] = np.frombuffer(json.dumps(doc).encode(), dtype=np.uint8)
    for name, value in arrays.items():
        if value is None:
            members.pop(name)
        else:
            members[name] = value
    np.savez(out, **members)
    return out


def test_only_a_scaled_model_names_scale_in_its_file(tmp_path):
    """Versions without scaling refuse a parameter they do not know: a scaled model must be refused by them,
    an unscaled one should still load there."""
    X, y = _problem(300)
    for scale in (None, "maxabs"):
        path = save_model(NystroemSVC(scale=scale, n_components=20, random_state=0).fit(X, y), tmp_path / "m.npz",
                          overwrite=True)
        with np.load(path, allow_pickle=False) as z:
            params = json.loads(bytes(z["__meta__"]).decode())["params"]
        assert ("scale" in params) == (scale is not None)
        assert load_model(path).scale == scale


def test_hand_edited_scaling_is_refused(tmp_path):
    X, y = _problem(300)
    path = save_model(NystroemSVC(scale="minmax", n_components=20, random_state=0).fit(X, y), tmp_path / "m.npz")
    cases = [
        ({"scaling_data_min": None}, "missing array 'scaling_data_min'"),
        ({"scaling_data_max": np.full(4, np.nan)}, "'scaling_data_max' holds NaN"),
        ({"scaling_data_max": np.ones(3)}, "scaling_data_max has shape"),
        ({"meta": lambda m: m["fitted"]["scaling"].update(kind="standard")}, "fitted.scaling"),
        ({"meta": lambda m: m["fitted"].pop("scaling")}, "scales its input .* holds no scaling statistics"),
        ({"meta": lambda m: m["params"].update(scale="zscore")}, "scale='zscore' is not supported"),
    ]
    for k, (change, message) in enumerate(cases):
        with pytest.raises(ModelFileError, match=message):
            load_model(_rewrite(path, tmp_path / f"bad{k}.npz", **change))


@pytest.mark.parametrize("name", ["svc_binary_proba", "svc_multiclass", "svr"])
def test_files_from_before_scaling_load_without_it(name):
    model = load_model(FIXTURES / f"{name}.npz")
    assert model.scale is None and model.scaling_ is None and not hasattr(model, "feature_names_in_")


def test_dataset_feature_names_reach_the_model(tmp_path):
    X, y = _problem(300)
    header = "label,a,b,c,d\n"
    (tmp_path / "t.csv").write_text(header + "".join(f"{lab}," + ",".join(map(str, row)) + "\n"
                                                     for lab, row in zip(y, X)))
    ds = dsvm.ingest(tmp_path / "t.csv", tmp_path / "t.zarr", label_column="label")
    model = NystroemSVC(n_components=30, random_state=0, scale="standard").fit(ds)
    assert model.feature_names_in_.tolist() == ["a", "b", "c", "d"] and model.classes_.tolist() == ["down", "up"]
    (tmp_path / "o.csv").write_text("label,b,a,c,d\n" + "".join(f"{lab}," + ",".join(map(str, row)) + "\n"
                                                            for lab, row in zip(y, X)))
    other = dsvm.ingest(tmp_path / "o.csv", tmp_path / "o.zarr", label_column="label")
    for method in (model.predict, model.score, model.decision_function):
        with pytest.raises(ValueError, match=r"o\.zarr differ from those NystroemSVC was fitted with"):
            method(other)
    with pytest.warns(UserWarning, match="X does not have valid feature names"):  # accepted, as scikit-learn does
        np.testing.assert_array_equal(model.predict(ds).compute(), model.predict(X))
