"""The command line's tabular ingest options, ``train --scale``, ``export`` and the pipeline's ``preprocess:`` step.

Oracles: the same steps through the Python API (a model trained with scaling predicts the same from Python
and from the CLI), onnxruntime for the exported file.
"""

from __future__ import annotations

import csv

import numpy as np
import pytest

import dsvm
from dsvm.app._pipeline import run_pipeline
from dsvm.app._pipeline_spec import PipelineError, load_pipeline
from dsvm.app.cli import main


def _run(*argv):
    return main(["-q", *map(str, argv)])


def _iris_like(path, n=240, delimiter=",", header=True, seed=0):
    """Features on very different scales, a string label last (as pandas writes iris)."""
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 3)) * [1.0, 400.0, 0.02] + [5.0, 2000.0, 0.0]
    y = np.array(["setosa", "versicolor", "virginica"])[np.digitize((X[:, 1] - 2000) / 400 + X[:, 0] - 5, [-0.6, 0.6])]
    with open(path, "w", newline="") as f:
        w = csv.writer(f, delimiter=delimiter)
        if header:
            w.writerow(["sepal", "petal", "width", "species"])
        w.writerows([[*row, lab] for row, lab in zip(X.tolist(), y)])
    return X, y


def test_ingest_options_train_scaled_predict_same_as_python(tmp_path, capsys):
    X, y = _iris_like(tmp_path / "iris.csv")
    assert _run("ingest", tmp_path / "iris.csv", tmp_path / "iris.zarr", "--label-column", "species",
                "--no-progress") == 0
    ds = dsvm.open_dataset(tmp_path / "iris.zarr")
    assert ds.classes.tolist() == ["setosa", "versicolor", "virginica"] and ds.feature_names.tolist() == [
        "sepal", "petal", "width"]
    _iris_like(tmp_path / "semi.txt", delimiter=";", header=False)
    assert _run("ingest", tmp_path / "semi.txt", tmp_path / "semi.zarr", "--format", "csv", "--delimiter", ";",
                "--no-header", "--label-column", -1, "--no-progress") == 0
    np.testing.assert_array_equal(dsvm.open_dataset(tmp_path / "semi.zarr").load()[0], ds.load()[0])

    assert _run("train", tmp_path / "iris.zarr", "--model", tmp_path / "m.npz", "--scale", "standard", "-C", 10,
                "--gamma", 0.5, "-k", 60, "--workers", 1, "--threads-per-worker", 1) == 0
    assert _run("predict", tmp_path / "m.npz", tmp_path / "iris.zarr", "--out", tmp_path / "p.csv",
                "--workers", 1) == 0
    cli = (tmp_path / "p.csv").read_text().splitlines()
    model = dsvm.load_model(tmp_path / "m.npz")
    params = dict(C=10, gamma=0.5, n_components=60, random_state=0)
    python = dsvm.NystroemSVC(scale="standard", **params).fit(ds)
    assert model.scaling_.kind == "standard"
    assert cli == ["prediction", *python.predict(ds).compute().tolist()]
    scaled = dsvm.NystroemSVC(scale="standard", **params).fit(X, y)  # the point of scaling these features:
    assert scaled.score(X, y) > dsvm.NystroemSVC(**params).fit(X, y).score(X, y) + 0.2
    capsys.readouterr()
    assert _run("info", tmp_path / "m.npz") == 0
    assert '"scale": "standard"' in capsys.readouterr().out


def test_export_writes_an_onnx_file(tmp_path):
    ort = pytest.importorskip("onnxruntime")
    pytest.importorskip("skl2onnx")
    X, y = _iris_like(tmp_path / "iris.csv", n=120)
    model = dsvm.NystroemSVC(scale="minmax", n_components=30, random_state=0).fit(X, y)
    dsvm.save_model(model, tmp_path / "m.npz")
    assert _run("export", tmp_path / "m.npz", tmp_path / "m.onnx") == 0
    labels, _ = ort.InferenceSession(str(tmp_path / "m.onnx"), providers=["CPUExecutionProvider"]).run(
        None, {"X": X.astype(np.float32)})
    assert (labels == model.predict(X)).mean() > 0.99
    assert _run("export", tmp_path / "m.npz", tmp_path / "m.onnx") == 1  # exists: --overwrite needed
    assert _run("export", tmp_path / "m.npz", tmp_path / "m.onnx", "--overwrite") == 0


def test_one_line_errors(tmp_path, capsys):
    _iris_like(tmp_path / "iris.csv", n=20)
    for argv, expected in [
        (("ingest", tmp_path / "iris.csv", "memory://iris.zarr"), "memory://iris.zarr: dsvm writes outputs to local"),
        (("ingest", tmp_path / "iris.csv", tmp_path / "a.zarr"), "pass label_column='species' (CLI: --label-column"),
        (("ingest", tmp_path / "iris.csv", tmp_path / "a.zarr", "--label-column", "kind"), "no column named 'kind'"),
        (("ingest", tmp_path / "iris.csv", tmp_path / "a.zarr", "--delimiter", "::"), "delimiter must be one"),
    ]:
        capsys.readouterr()
        assert _run(*argv) == 1
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and expected in err[0], err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["iris.csv"]


def _spec(tmp_path, **changes):
    spec = {"name": "scaled", "output": str(tmp_path / "out"),
            "data": {"train": {"source": str(tmp_path / "iris.csv"), "label_column": "species"}, "split":
                     {"test_fraction": 0.25, "random_state": 0}},
            "model": {"params": {"C": 10, "gamma": 0.5, "n_components": 40, "random_state": 0}},
            "report": {"plots": False}}
    spec.update(changes)
    return spec


def test_pipeline_preprocess_scale(tmp_path):
    X, y = _iris_like(tmp_path / "iris.csv")
    spec = load_pipeline(_spec(tmp_path, preprocess={"scale": "standard"}))
    report = run_pipeline(spec)
    assert report["model"]["params"]["scale"] == "standard" and report["evaluation"]["accuracy"] > 0.85
    assert dsvm.load_model(tmp_path / "out" / "model.npz").scaling_.kind == "standard"
    with pytest.raises(PipelineError, match="unknown key preprocess.center"):
        load_pipeline(_spec(tmp_path, preprocess={"center": True}))
    with pytest.raises(PipelineError, match="scale='zscore' is not supported"):
        load_pipeline(_spec(tmp_path, preprocess={"scale": "zscore"}))
    both = _spec(tmp_path, preprocess={"scale": "standard"})
    both["model"]["params"]["scale"] = "minmax"
    with pytest.raises(PipelineError, match="preprocess.scale is 'standard' but model.params.scale is 'minmax'"):
        load_pipeline(both)
