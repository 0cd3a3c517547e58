"""Export: the scikit-learn pipeline a model is (``to_sklearn``) and its ONNX graph (skl2onnx, onnxruntime).

Oracles: the dsvm model's own decision values, labels and probabilities; scikit-learn's ``Nystroem`` /
``LinearSVC`` compute the exported pipeline with their own code, onnxruntime the ONNX graph.
"""

from __future__ import annotations

import pickle
import re
import tomllib
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.pipeline import Pipeline

import dsvm
from dsvm import NystroemSVC, NystroemSVR


def _problem(n=500, seed=0, classes=("a", "b", "c")):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 5)) * [1, 20, 1, 0.1, 1]
    bins = [-0.5, 0.5] if len(classes) == 3 else [0.0]
    y = np.asarray(classes)[(np.digitize(X[:, 0] + X[:, 1] / 20, bins))]
    return X, y


@pytest.fixture(scope="module")
def a9a_models(a9a):
    Xtr, ytr, Xte, yte = a9a
    params = dict(C=10.0, gamma=0.05, n_components=500, random_state=0)
    return {dtype: NystroemSVC(dtype=dtype, **params).fit(Xtr, ytr) for dtype in ("float32", "float64")}, Xte


@pytest.mark.data
def test_to_sklearn_on_a9a(a9a_models):
    """The fitted model is exactly Pipeline(Nystroem, LinearSVC): float64 models agree to round-off; float32
    models differ by their own float32 feature rounding (4e-5 on a9a), not by the export."""
    models, Xte = a9a_models
    for dtype, bound in (("float64", 1e-5), ("float32", 1e-4)):
        model = models[dtype]
        pipe = model.to_sklearn()
        assert isinstance(pipe, Pipeline) and [name for name, _ in pipe.steps] == ["nystroem", "svm"]
        dec = model.decision_function(Xte)
        assert np.max(np.abs(pipe.decision_function(Xte) - dec)) < bound
        keep = np.abs(dec) > bound  # labels: equal wherever the sign is not within round-off of 0
        np.testing.assert_array_equal(pipe.predict(Xte)[keep], model.predict(Xte)[keep])
    assert np.max(np.abs(models["float64"].to_sklearn().decision_function(Xte)
                         - models["float64"].decision_function(Xte))) < 1e-9


@pytest.mark.parametrize("kernel, extra", [("rbf", {}), ("poly", {"degree": 2, "coef0": 1.0}),
                                           ("sigmoid", {"coef0": -0.5}), ("linear", {})])
@pytest.mark.parametrize("scale", [None, "standard", "minmax", "maxabs"])
def test_to_sklearn_kernels_scalings_and_string_classes(kernel, extra, scale):
    X, y = _problem()
    model = NystroemSVC(kernel=kernel, gamma=0.1, n_components=60, scale=scale, dtype="float64", random_state=0,
                        **extra).fit(X, y)
    pipe = model.to_sklearn()
    np.testing.assert_allclose(pipe.decision_function(X), model.decision_function(X), rtol=1e-9, atol=1e-9)
    assert pipe.predict(X).tolist() == model.predict(X).tolist()
    assert [name for name, _ in pipe.steps] == (["scale"] if scale else []) + ["nystroem", "svm"]
    # scikit-learn alone unpickles it: no dsvm class inside
    assert b"dsvm" not in pickle.dumps(pipe)


def test_to_sklearn_regression_sparse_input_and_feature_names():
    pd = pytest.importorskip("pandas")
    X, _ = _problem()
    target = np.sin(X[:, 0]) + X[:, 1] / 20
    svr = NystroemSVR(n_components=50, gamma=0.2, epsilon=0.05, scale="maxabs", dtype="float64",
                      random_state=0).fit(sp.csr_matrix(X), target)
    np.testing.assert_allclose(svr.to_sklearn().predict(sp.csr_matrix(X)), svr.predict(X), rtol=1e-9, atol=1e-9)
    frame = pd.DataFrame(X, columns=list("vwxyz"))
    model = NystroemSVC(n_components=40, random_state=0).fit(frame, _problem()[1])
    assert model.to_sklearn().feature_names_in_.tolist() == list("vwxyz")


# ONNX -----------------------------------------------------------------------------------------------
def test_the_onnx_extra_installs_what_runs_the_exported_file():
    """pip install 'dsvm[onnx]' brings skl2onnx (the export) and onnxruntime (what runs the file, and the
    README's check of it)."""
    project = tomllib.loads((Path(__file__).parents[2] / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    names = {re.match(r"[A-Za-z0-9_.-]+", req).group(0).lower() for req in project["optional-dependencies"]["onnx"]}
    assert {"skl2onnx", "onnxruntime"} <= names


def _session(onx):
    ort = pytest.importorskip("onnxruntime")
    return ort.InferenceSession(onx.SerializeToString(), providers=["CPUExecutionProvider"])


def _outputs(onx, X) -> dict:
    """The graph's outputs on ``X``, by name."""
    session = _session(onx)
    return dict(zip([o.name for o in session.get_outputs()], session.run(None, {"X": X})))


@pytest.mark.data
def test_onnx_on_a9a(a9a_models, tmp_path):
    pytest.importorskip("skl2onnx")
    models, Xte = a9a_models
    model = models["float32"]
    path = dsvm.export_onnx(model, tmp_path / "a9a.onnx")
    out = _outputs(__import__("onnx").load(str(path)), Xte.toarray().astype(np.float32))
    dec = model.decision_function(Xte)
    assert list(out) == ["label", "decision"] and out["decision"].shape == (Xte.shape[0], 1)
    np.testing.assert_allclose(out["decision"][:, 0], dec, atol=1e-4)  # float32 arithmetic on both sides
    keep = np.abs(dec) > 1e-4
    assert keep.mean() > 0.999
    np.testing.assert_array_equal(out["label"][keep], model.predict(Xte)[keep])


@pytest.mark.parametrize("kernel, extra", [("rbf", {}), ("poly", {"degree": 3, "coef0": 1.0}),
                                           ("sigmoid", {"coef0": -0.5}), ("linear", {})])
def test_onnx_kernels_string_classes_and_scaling(kernel, extra):
    pytest.importorskip("skl2onnx")
    X, y = _problem()
    model = NystroemSVC(kernel=kernel, gamma=0.05, n_components=60, scale="standard", random_state=0,
                        **extra).fit(X, y)
    out = _outputs(model.to_onnx(), X.astype(np.float32))
    dec = model.decision_function(X)
    np.testing.assert_allclose(out["decision"], dec, rtol=1e-4, atol=1e-4)
    keep = np.sort(dec, axis=1)[:, -1] - np.sort(dec, axis=1)[:, -2] > 1e-3  # no near-tie between classes
    assert out["label"][keep].tolist() == model.predict(X)[keep].tolist()


@pytest.mark.parametrize("classes", [("a", "b", "c"), (-1.0, 1.0), (0, 3)])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_onnx_outputs_are_named_for_what_they_hold(classes, dtype):
    """``label`` holds predict's labels (in classes_' own type), ``decision`` decision_function's values
    (one column for two classes) and, for a probability=True model, ``probabilities`` predict_proba's.
    float64 is the model's own arithmetic (to round-off); float32 differs by float32 feature rounding."""
    pytest.importorskip("skl2onnx")
    X, y = _problem(300, classes=classes)
    bound = 1e-9 if dtype == "float64" else 1e-4
    for probability in (False, True):
        model = NystroemSVC(gamma=0.1, n_components=40, scale="standard", dtype=dtype, probability=probability,
                            random_state=0).fit(X, y)
        out = _outputs(model.to_onnx(dtype=dtype), X.astype(dtype))
        assert list(out) == ["label", "decision"] + (["probabilities"] if probability else [])
        dec = model.decision_function(X).reshape(len(X), -1)
        assert out["decision"].shape == dec.shape == (len(X), 1 if len(model.classes_) == 2 else 3)
        np.testing.assert_allclose(out["decision"], dec, rtol=bound, atol=bound)
        predicted = model.predict(X)
        assert out["label"].dtype.kind == (predicted.dtype.kind if predicted.dtype.kind in "if" else "O")
        keep = np.abs(dec[:, 0]) > bound if dec.shape[1] == 1 else np.ones(len(X), bool)
        assert out["label"][keep].tolist() == predicted[keep].tolist() and keep.mean() > 0.95
        if probability:
            np.testing.assert_allclose(out["probabilities"], model.predict_proba(X), rtol=bound, atol=bound)


def test_onnx_probabilities_stay_finite_when_every_sigmoid_underflows():
    """Platt sigmoids steep enough that every class's sigmoid underflows float32: the graph works in the
    log domain like predict_proba, so rows still sum to one (a plain normalisation would give 0/0)."""
    pytest.importorskip("skl2onnx")
    X, y = _problem(300)
    model = NystroemSVC(gamma=0.1, n_components=40, probability=True, random_state=0).fit(X, y)
    model.probA_, model.probB_ = np.full(3, -400.0), np.full(3, 300.0)
    proba = _outputs(model.to_onnx(), X.astype(np.float32))["probabilities"]
    expected = model.predict_proba(X)
    assert np.isfinite(proba).all() and np.max(np.abs(proba.sum(axis=1) - 1)) < 1e-5
    np.testing.assert_allclose(proba, expected, atol=1e-3)


def test_onnx_refuses_a_dtype_it_cannot_compute_in():
    pytest.importorskip("skl2onnx")
    X, y = _problem(100)
    model = NystroemSVC(n_components=10, random_state=0).fit(X, y)
    for dtype in ("float16", "int64", "floot"):
        with pytest.raises(ValueError, match="dtype must be 'float32' or 'float64', got"):
            model.to_onnx(dtype=dtype)


def test_onnx_regression_in_float64():
    pytest.importorskip("skl2onnx")
    X, _ = _problem()
    target = np.sin(X[:, 0]) + X[:, 1] / 20
    svr = NystroemSVR(n_components=50, gamma=0.2, scale="minmax", dtype="float64", random_state=0).fit(X, target)
    out = _outputs(svr.to_onnx(dtype="float64"), X)
    assert list(out) == ["variable"] and out["variable"].shape == (len(X), 1)
    np.testing.assert_allclose(out["variable"][:, 0], svr.predict(X), rtol=1e-9, atol=1e-9)


def test_onnx_refuses_a_kernel_it_cannot_write():
    pytest.importorskip("skl2onnx")
    from skl2onnx import convert_sklearn
    from skl2onnx.common.data_types import FloatTensorType
    from sklearn.kernel_approximation import Nystroem

    from dsvm.svm._onnx_export import to_onnx

    X, y = _problem(100)
    to_onnx(NystroemSVC(n_components=10, random_state=0).fit(X, y))  # registers the converter
    with pytest.raises(ValueError, match="supports the kernels rbf, poly, sigmoid and linear; this Nystroem uses "
                                         "'laplacian'"):
        convert_sklearn(Nystroem(kernel="laplacian", n_components=10).fit(X),
                        initial_types=[("X", FloatTensorType([None, 5]))])


def test_export_onnx_replaces_only_its_own_files(tmp_path):
    pytest.importorskip("skl2onnx")
    X, y = _problem(100)
    model = NystroemSVC(n_components=10, random_state=0).fit(X, y)
    path = dsvm.export_onnx(model, tmp_path / "m.onnx")
    with pytest.raises(FileExistsError, match="already exists; pass overwrite=True"):
        dsvm.export_onnx(model, path)
    dsvm.export_onnx(model, path, overwrite=True)
    (tmp_path / "other.onnx").write_bytes(b"not mine")
    with pytest.raises(FileExistsError, match="not a model file in ONNX format written by dsvm"):
        dsvm.export_onnx(model, tmp_path / "other.onnx", overwrite=True)
    assert (tmp_path / "other.onnx").read_bytes() == b"not mine"
