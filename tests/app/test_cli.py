"""The dsvm command end to end in-process (dsvm.app.cli.main): ingest, train (with --search),
evaluate, predict, info, run, demo."""

import json
import logging
import os
import re

import numpy as np
import pytest
from helpers import FLOAT32_DECISION_TOL, assert_same_decisions, explicit_decisions, make_circles_problem

import dsvm
from dsvm.app.cli import main


@pytest.fixture
def libsvm_files(tmp_path):
    X, y = make_circles_problem(n=900, seed=8)
    paths = []
    for name, sl in (("train", slice(0, 700)), ("test", slice(700, 900))):
        path = tmp_path / f"{name}.libsvm"
        with open(path, "w") as f:
            for xi, yi in zip(X[sl], y[sl]):
                f.write(f"{yi:+d} " + " ".join(f"{j + 1}:{v:.6g}" for j, v in enumerate(xi)) + "\n")
        paths.append(path)
    return paths


def _run(*argv):
    return main(["-q", *map(str, argv)])


def test_ingest_train_evaluate_predict_info(tmp_path, libsvm_files, capsys):
    train, test = libsvm_files
    assert _run("ingest", train, tmp_path / "tr.zarr", "--no-progress") == 0
    assert _run("ingest", test, tmp_path / "te.zarr", "--n-features", 5, "--no-progress") == 0
    assert _run("train", tmp_path / "tr.zarr", "--model", tmp_path / "m.npz", "-C", 10, "--gamma", 0.3, "-k", 60,
                "--workers", 1, "--threads-per-worker", 1) == 0
    capsys.readouterr()
    assert _run("evaluate", tmp_path / "m.npz", tmp_path / "te.zarr", "--json", "--workers", 1) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["accuracy"] > 0.85 and result["n_test"] == 200 and result["k"] == 60
    assert _run("predict", tmp_path / "m.npz", tmp_path / "te.zarr", "--out", tmp_path / "p.csv", "--workers", 1) == 0
    lines = (tmp_path / "p.csv").read_text().splitlines()
    assert lines[0] == "prediction" and len(lines) == 201
    assert _run("predict", tmp_path / "m.npz", tmp_path / "te.zarr", "--out", tmp_path / "p.npy", "--workers", 1) == 0
    pred = np.load(tmp_path / "p.npy")
    model = dsvm.load_model(tmp_path / "m.npz")
    X, _ = dsvm.open_dataset(tmp_path / "te.zarr").load()
    np.testing.assert_array_equal(pred, model.predict(X))
    assert _run("info", tmp_path / "m.npz") == 0
    info = json.loads(capsys.readouterr().out)
    assert info["n_components"] == 60
    assert info["duality_gap"] == pytest.approx(float(model.duality_gap_)) and 0.0 <= info["duality_gap"] < 1e-3


def test_train_k_auto_out_of_core_chooses_the_k_and_model_of_the_in_memory_fit(tmp_path, libsvm_files, capsys,
                                                                               monkeypatch):
    from dsvm.svm import _auto_k

    monkeypatch.setattr(_auto_k, "K_START", 10)
    monkeypatch.setattr(_auto_k, "K_MAX", 160)
    train, _ = libsvm_files
    assert _run("ingest", train, tmp_path / "tr.zarr", "--chunk-rows", 96, "--no-progress") == 0
    assert _run("train", tmp_path / "tr.zarr", "--model", tmp_path / "m.npz", "-C", 10, "--gamma", 0.3, "-k", "auto",
                "--random-state", 3, "--time-budget", 600, "--k-tol", 0.001, "--workers", 2,
                "--threads-per-worker", 1) == 0
    model = dsvm.load_model(tmp_path / "m.npz")
    assert model.get_params()["k_tol"] == 0.001
    X, y = dsvm.open_dataset(tmp_path / "tr.zarr").load()
    in_memory = dsvm.NystroemSVC(n_components="auto", C=10, gamma=0.3, k_tol=0.001, random_state=3).fit(X, y)
    assert model.n_components_ == in_memory.n_components_ and len(model.k_path_) >= 2
    assert [p["k"] for p in model.k_path_] == [p["k"] for p in in_memory.k_path_]
    np.testing.assert_allclose([p["score"] for p in model.k_path_], [p["score"] for p in in_memory.k_path_])
    np.testing.assert_allclose(model.decision_function(X), in_memory.decision_function(X), rtol=1e-3, atol=1e-3)
    capsys.readouterr()
    assert _run("info", tmp_path / "m.npz") == 0
    info = json.loads(capsys.readouterr().out)
    assert info["k_path"] == model.k_path_ and info["n_components"] == model.n_components_
    assert 0.0 <= info["duality_gap"] < 1e-2


def test_train_with_search_writes_the_cv_table(tmp_path, libsvm_files):
    train, _ = libsvm_files
    assert _run("train", train, "--model", tmp_path / "best.npz", "--search", "C=1,10", "gamma=0.1,0.3", "k=40",
                "--cv", 3, "--workers", 1) == 0
    assert (tmp_path / "best_cv" / "cv_results.md").exists()
    assert (tmp_path / "best_cv" / "cv_heatmap.png").exists()
    model = dsvm.load_model(tmp_path / "best.npz")
    assert model.C in (1.0, 10.0) and model.components_.shape[0] == 40


def test_user_errors_are_one_line(tmp_path, capsys):
    assert _run("train", tmp_path / "missing.zarr", "--model", tmp_path / "m.npz") == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "no such file" in err[0]
    assert _run("evaluate", tmp_path / "nomodel.npz", tmp_path) == 1
    assert _run("train", tmp_path, "--model", "m.npz", "--search", "bogus=1") == 1
    assert "--search" in capsys.readouterr().err


def test_npy_ingest_active_landmarks_and_early_errors(tmp_path, libsvm_files, capsys):
    X, y = make_circles_problem(n=300, seed=9)
    np.save(tmp_path / "X.npy", X)
    np.save(tmp_path / "y.npy", y)
    assert _run("ingest", tmp_path / "X.npy", tmp_path / "x.zarr", "--labels", tmp_path / "y.npy", "--no-progress") == 0
    assert _run("ingest", tmp_path / "X.npy", tmp_path / "x.zarr", "--labels", tmp_path / "y.npy") == 1
    assert "--overwrite" in capsys.readouterr().err
    # a bad output folder is an error before any training, naming the folder
    assert _run("train", tmp_path / "x.zarr", "--model", tmp_path / "no" / "m.npz") == 1
    assert f"folder {tmp_path / 'no'} does not exist" in capsys.readouterr().err
    assert _run("train", tmp_path / "x.zarr", "--model", tmp_path / "m.npz", "-k", 40, "--gamma", 0.3,
                "--landmarks", "active", "--workers", 1) == 0
    assert dsvm.load_model(tmp_path / "m.npz").landmarks == "active"
    # a LIBSVM test file read alone is one feature short: the error says how to ingest it
    train, test = libsvm_files
    with open(test) as f:
        lines = [" ".join(t for t in line.split() if not t.startswith("5:")) for line in f]
    (tmp_path / "short.libsvm").write_text("\n".join(lines) + "\n")
    assert _run("ingest", tmp_path / "short.libsvm", tmp_path / "short.zarr", "--no-progress") == 0
    assert _run("ingest", train, tmp_path / "tr.zarr", "--no-progress") == 0
    assert _run("train", tmp_path / "tr.zarr", "--model", tmp_path / "m5.npz", "-k", 30, "--workers", 1) == 0
    capsys.readouterr()
    assert _run("evaluate", tmp_path / "m5.npz", tmp_path / "short.zarr", "--workers", 1) == 1
    assert "--n-features 5" in capsys.readouterr().err
    # a text file is not a model, and the message does not suggest unpickling it
    (tmp_path / "x.csv").write_text("a,b\n1,2\n")
    assert _run("info", tmp_path / "x.csv") == 1
    err = capsys.readouterr().err
    assert "not an .npz archive" in err and "pickle" not in err


def test_regression_model_from_python_predicts_from_the_cli(tmp_path, capsys):
    X, y = make_circles_problem(n=200, seed=10)
    t = X[:, 0] + X[:, 1] ** 2
    svr = dsvm.NystroemSVR(n_components=30, C=10.0, random_state=0).fit(X, t)
    dsvm.save_model(svr, tmp_path / "r.npz")
    np.save(tmp_path / "X.npy", X)
    np.save(tmp_path / "t.npy", t)
    assert _run("ingest", tmp_path / "X.npy", tmp_path / "x.zarr", "--labels", tmp_path / "t.npy", "--no-progress") == 0
    assert _run("predict", tmp_path / "r.npz", tmp_path / "x.zarr", "--out", tmp_path / "p.npy", "--workers", 1) == 0
    # both to float32 rounding of the sum's terms (the documented contract; a value near 0 may differ in
    # its last float32 bits between the two paths' GEMM blockings)
    expected, scale = explicit_decisions(X, svr.feature_map_, svr.coef_, svr.intercept_, getattr(svr, "scaling_", None))
    assert_same_decisions(np.load(tmp_path / "p.npy"), expected, scale, FLOAT32_DECISION_TOL)
    assert_same_decisions(svr.predict(X), expected, scale, FLOAT32_DECISION_TOL)
    capsys.readouterr()
    assert _run("evaluate", tmp_path / "r.npz", tmp_path / "x.zarr", "--json", "--workers", 1) == 0
    assert json.loads(capsys.readouterr().out)["r2"] == pytest.approx(svr.score(X, t), rel=1e-5)
    assert _run("info", tmp_path / "r.npz") == 0
    info = json.loads(capsys.readouterr().out)
    assert info["estimator"] == "NystroemSVR" and info["duality_gap"] == pytest.approx(svr.duality_gap_)


def test_pipeline_with_a_search_step(tmp_path):
    spec = tmp_path / "p.yaml"
    spec.write_text(f"""
name: tiny
output: {tmp_path / 'out'}
data:
  train: {{generate: {{n_samples: 1500, n_features: 5, random_state: 0}}}}
  test: {{generate: {{n_samples: 500, n_features: 5, random_state: 1}}}}
model:
  params: {{n_components: 50, random_state: 0}}
  search: {{grid: {{C: [1, 10], gamma: [0.1, 0.5]}}, cv: 3}}
report: {{plots: true}}
""")
    assert _run("run", spec, "--workers", 1) == 0
    report = json.loads((tmp_path / "out" / "report.json").read_text())
    assert len(report["cv_results"]) == 4
    assert "cv_heatmap.png" in report["plots"]
    assert "Cross-validated search" in (tmp_path / "out" / "report.md").read_text()


def test_pipeline_reads_the_test_file_like_the_training_file(tmp_path):
    """A zero-based test file without feature 0 is read zero-based, like the training file."""
    from helpers import zero_based_libsvm_files

    files = zero_based_libsvm_files(tmp_path)
    spec = tmp_path / "p.yaml"
    spec.write_text(f"""
name: base
output: {tmp_path / 'out'}
data:
  train: {{source: {files['train']}, format: libsvm}}
  test: {{source: {files['test']}, format: libsvm, n_features: 4}}
model:
  params: {{n_components: 100, C: 10, gamma: 2.0, random_state: 0}}
""")
    assert _run("run", spec, "--workers", 1) == 0
    report = json.loads((tmp_path / "out" / "report.json").read_text())
    assert report["evaluation"]["accuracy"] > 0.95
    test = dsvm.open_dataset(tmp_path / "out" / "data" / "test.zarr")
    assert test.attrs["zero_based"] is True and test.attrs["zero_based_from"] == "reference"


def test_ingest_like_a_model(tmp_path, capsys):
    from helpers import zero_based_libsvm_files

    files = zero_based_libsvm_files(tmp_path)
    assert _run("train", files["train"], "--model", tmp_path / "m.npz", "-k", 50, "--workers", 1) == 0
    assert _run("ingest", files["test"], tmp_path / "auto.zarr", "--n-features", 4, "--no-progress") == 0
    capsys.readouterr()
    assert _run("evaluate", tmp_path / "m.npz", tmp_path / "auto.zarr", "--workers", 1) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "read as one-based" in err[0] and "--like MODEL" in err[0]
    assert _run("ingest", files["test"], tmp_path / "t.zarr", "--like", tmp_path / "m.npz", "--no-progress") == 0
    test = dsvm.open_dataset(tmp_path / "t.zarr")
    assert test.attrs["zero_based"] is True and test.n_features == 4
    assert _run("evaluate", tmp_path / "m.npz", tmp_path / "t.zarr", "--json", "--workers", 1) == 0
    assert json.loads(capsys.readouterr().out)["accuracy"] > 0.9


def test_damaged_input_files_are_one_line_errors(tmp_path, libsvm_files, capsys):
    import lzma

    train, _ = libsvm_files
    broken = tmp_path / "train.libsvm.xz"
    broken.write_bytes(lzma.compress(train.read_bytes())[:-100])
    spec = tmp_path / "p.yaml"
    spec.write_text(f"""
name: broken
output: {tmp_path / 'out'}
data:
  train: {{source: {broken}, format: libsvm}}
model:
  params: {{n_components: 20}}
""")
    np.save(tmp_path / "X.npy", np.ones((3, 2)))
    np.save(tmp_path / "y.npy", np.array(["a", "", "a"]))  # string labels are class names; an empty one is not
    np.save(tmp_path / "c.npy", np.ones((3, 2)) * 1j)
    for argv, expected in [
        (("ingest", broken, tmp_path / "d.zarr"), f"{broken}: the xz data is truncated"),
        (("run", spec, "--workers", 1), f"{broken}: the xz data is truncated"),
        (("ingest", tmp_path / "X.npy", tmp_path / "e.zarr", "--labels", tmp_path / "y.npy"), "the label of row 1 is empty"),
        (("ingest", tmp_path / "c.npy", tmp_path / "f.zarr", "--labels", tmp_path / "y.npy"), "complex numbers"),
    ]:
        capsys.readouterr()
        assert _run(*argv) == 1
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and expected in err[0], err
    assert not (tmp_path / "d.zarr").exists()


# --------------------------------------------------------------------------- outputs and checkpoints of train

@pytest.fixture
def small_dataset(tmp_path):
    return dsvm.make_classification_zarr(tmp_path / "d.zarr", n_samples=400, n_features=6, random_state=0)


@pytest.fixture
def fit_calls(monkeypatch):
    """Records every NystroemSVC.fit (to show that an error came before the work)."""
    calls = []
    real = dsvm.NystroemSVC.fit

    def fit(self, *args, **kwargs):
        calls.append(self)
        return real(self, *args, **kwargs)

    monkeypatch.setattr(dsvm.NystroemSVC, "fit", fit)
    return calls


def _error_line(capsys, command="train") -> str:
    err = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
    assert len(err) == 1 and err[0].startswith(f"dsvm {command}: error: "), err
    return err[0]


TRAIN = ("-k", 20, "--gamma", 0.5, "--random-state", 0, "--workers", 1, "--threads-per-worker", 1)


def test_a_directory_as_model_fails_before_fitting(tmp_path, small_dataset, fit_calls, capsys):
    """`mkdir out.npz; dsvm train d.zarr --model out.npz -k 50 --checkpoint ck.npz` fitted, removed the
    checkpoint, then ended in IsADirectoryError."""
    (tmp_path / "out.npz").mkdir()
    assert _run("train", small_dataset.path, "--model", tmp_path / "out.npz", "--checkpoint", tmp_path / "ck.npz",
                *TRAIN) == 1
    line = _error_line(capsys)
    assert "out.npz" in line and "it is a directory" in line
    assert fit_calls == [] and not (tmp_path / "ck.npz").exists()


def test_an_existing_model_needs_overwrite_and_other_files_are_never_replaced(tmp_path, small_dataset, fit_calls,
                                                                              capsys):
    model = tmp_path / "m.npz"
    assert _run("train", small_dataset.path, "--model", model, *TRAIN) == 0
    capsys.readouterr()
    before = model.read_bytes()
    assert _run("train", small_dataset.path, "--model", model, *TRAIN) == 1
    assert "--overwrite" in _error_line(capsys) and model.read_bytes() == before and len(fit_calls) == 1
    assert _run("train", small_dataset.path, "--model", model, "--overwrite", "-C", 3, *TRAIN) == 0
    assert dsvm.load_model(model).C == 3.0
    notes = tmp_path / "notes.txt"
    notes.write_text("precious\n")
    assert _run("train", small_dataset.path, "--model", notes, "--overwrite", *TRAIN) == 1
    assert "not a model written by dsvm" in _error_line(capsys) and notes.read_text() == "precious\n"
    assert len(fit_calls) == 2


@pytest.mark.parametrize("where", ["missing-folder", "directory", "text-file"])
def test_the_checkpoint_path_is_checked_before_the_work(tmp_path, small_dataset, fit_calls, capsys, where):
    path = {"missing-folder": tmp_path / "no" / "ck.npz", "directory": tmp_path / "ck",
            "text-file": tmp_path / "ck.txt"}[where]
    if where == "directory":
        path.mkdir()
    elif where == "text-file":
        path.write_text("precious\n")
    assert _run("train", small_dataset.path, "--model", tmp_path / "m.npz", "--checkpoint", path, *TRAIN) == 1
    assert str(path) in _error_line(capsys)
    assert fit_calls == [] and not (tmp_path / "m.npz").exists()
    if where == "text-file":
        assert path.read_text() == "precious\n"


def test_a_failed_save_keeps_the_checkpoint_and_the_rerun_saves_without_refitting(tmp_path, small_dataset, monkeypatch,
                                                                                 capsys, caplog):
    """Disk full on the model's file system lost the finished fit: the checkpoint was already removed."""
    import errno

    reference = tmp_path / "reference.npz"
    assert _run("train", small_dataset.path, "--model", reference, *TRAIN) == 0
    real_savez = np.savez

    def savez_disk_full(f, **arrays):
        if "coef" in arrays:  # the model file, not a checkpoint
            raise OSError(errno.ENOSPC, "No space left on device")
        return real_savez(f, **arrays)

    monkeypatch.setattr(np, "savez", savez_disk_full)
    model, ckpt = tmp_path / "m.npz", tmp_path / "ck.npz"
    capsys.readouterr()
    assert _run("train", small_dataset.path, "--model", model, "--checkpoint", ckpt, *TRAIN) == 1
    line = _error_line(capsys)
    assert f"{model}: no space left on the device" in line and f"kept in checkpoint {ckpt}" in line
    assert ckpt.exists() and not model.exists()
    assert not [p for p in tmp_path.iterdir() if ".tmp" in p.name]
    monkeypatch.setattr(np, "savez", real_savez)
    caplog.set_level(logging.INFO, logger="dsvm")
    assert main(["train", str(small_dataset.path), "--model", str(model), "--checkpoint", str(ckpt),
                 *map(str, TRAIN)]) == 0
    assert "newton it=" not in caplog.text  # every problem came from the checkpoint
    assert not ckpt.exists()
    a, b = dsvm.load_model(reference), dsvm.load_model(model)
    np.testing.assert_allclose(b.coef_, a.coef_, rtol=1e-6, atol=1e-8)


def test_os_errors_a_user_causes_are_one_line(tmp_path, libsvm_files, capsys):
    train, _ = libsvm_files
    (tmp_path / "afile").write_text("x")
    assert _run("ingest", train, tmp_path / "afile" / "x.zarr", "--no-progress") == 1
    line = _error_line(capsys, "ingest")
    assert line.endswith(f"{tmp_path / 'afile' / 'x.zarr'}: {tmp_path / 'afile'} is not a folder")


def test_no_workers_during_predict_names_the_prediction(tmp_path, small_dataset, capsys):
    import dask
    from procs import start_scheduler, stop

    X, y = small_dataset.load()
    dsvm.save_model(dsvm.NystroemSVC(n_components=10, random_state=0).fit(X, y), tmp_path / "m.npz")
    sched, _, address = start_scheduler(tmp_path)
    try:
        with dask.config.set({"dsvm.no-worker-timeout": 1}):
            assert _run("predict", tmp_path / "m.npz", small_dataset.path, "--out", tmp_path / "p.csv",
                        "--scheduler-address", address) == 1
    finally:
        stop([sched])
    line = _error_line(capsys, "predict")
    assert "no Dask workers left" in line and "the prediction cannot continue" in line and "fit" not in line
    assert not (tmp_path / "p.csv").exists()


# --------------------------------------------------------------------------- help texts

VERBS = ("demo", "ingest", "train", "evaluate", "predict", "run", "info", "clean")


def _entries_without_help(text: str) -> list[str]:
    """The options and arguments of an argparse help text that have no help of their own.

    In argparse's layout an entry is a line indented by two spaces under a section title ("options:");
    its help follows on the same line after a gap of two or more spaces, or on the next line, indented
    further.
    """
    lines = text.splitlines()
    missing, in_section = [], False
    for i, line in enumerate(lines):
        if line and not line.startswith(" "):
            in_section = line.endswith(":") and not line.startswith("usage:")
            continue
        if not in_section or not line.startswith("  ") or line.startswith("   "):
            continue
        entry, _, help_text = line.strip().partition("  ")
        following = lines[i + 1] if i + 1 < len(lines) else ""
        if not help_text.strip() and not (following.startswith("    ") and not following.strip().startswith("-")):
            missing.append(entry)
    return missing


@pytest.mark.parametrize("verb", [None, *VERBS])
def test_every_option_of_every_command_has_help(verb, capsys):
    argv = ["--help"] if verb is None else [verb, "--help"]
    with pytest.raises(SystemExit) as stop:
        main(argv)
    assert stop.value.code == 0
    text = capsys.readouterr().out
    assert "options:" in text and _entries_without_help(text) == []


def test_the_help_parser_finds_an_option_without_help():
    text = "usage: x\n\noptions:\n  -h, --help   show this\n  --kernel {rbf,poly}\n  --degree DEGREE\n" \
           "  --long-one {aaaaaaaaaaaaaaaaaaaaaaa}\n                        its help\n"
    assert _entries_without_help(text) == ["--kernel {rbf,poly}", "--degree DEGREE"]


# --------------------------------------------------------------------------- the whole workflow

def _iris_csv(path, X, y, names):
    """A CSV as pandas writes iris: a header, the features, the species (text) last."""
    with open(path, "w") as f:
        f.write(",".join(names) + ",species\n")
        for xi, yi in zip(X, y):
            f.write(",".join(f"{v:g}" for v in xi) + f",{yi}\n")


def test_command_line_walkthrough(tmp_path, scheduler_address, capsys):
    """Ingest a CSV with a header and text labels in its last column, train with --probability
    --class-weight balanced, predict probabilities for a raw CSV; evaluate a model on a raw LIBSVM
    file; train and predict a regression model; --cv 5 alone prints the CV accuracy."""
    from sklearn.datasets import load_iris

    iris = load_iris()
    X, y = iris.data, iris.target_names[iris.target]
    order = np.random.default_rng(0).permutation(len(y))
    train, test = order[:110], order[110:]
    names = [n.replace(" (cm)", "").replace(" ", "_") for n in iris.feature_names]
    _iris_csv(tmp_path / "iris_train.csv", X[train], y[train], names)
    _iris_csv(tmp_path / "iris_test.csv", X[test], y[test], names)
    attach = ("--scheduler-address", scheduler_address)
    tabular = ("--label-column", "species", "--header")

    assert _run("ingest", tmp_path / "iris_train.csv", tmp_path / "iris.zarr", *tabular, "--no-progress") == 0
    ds = dsvm.open_dataset(tmp_path / "iris.zarr")
    assert ds.n_features == 4 and sorted(ds.classes.tolist()) == ["setosa", "versicolor", "virginica"]
    assert _run("train", tmp_path / "iris.zarr", "--model", tmp_path / "iris.npz", "--probability",
                "--class-weight", "balanced", "-k", 50, "--gamma", 0.5, "-C", 10, *attach) == 0
    assert _run("predict", tmp_path / "iris.npz", tmp_path / "iris_test.csv", *tabular, "--proba",
                "--out", tmp_path / "proba.csv", *attach) == 0
    lines = (tmp_path / "proba.csv").read_text().splitlines()
    assert lines[0] == "proba_setosa,proba_versicolor,proba_virginica" and len(lines) == 1 + len(test)
    proba = np.array([line.split(",") for line in lines[1:]], dtype=np.float64)
    model = dsvm.load_model(tmp_path / "iris.npz")
    ref = dsvm.NystroemSVC(probability=True, class_weight="balanced", n_components=50, gamma=0.5, C=10,
                           random_state=0).fit(ds)
    np.testing.assert_allclose(model.coef_, ref.coef_, rtol=1e-6, atol=1e-8)
    # float32 features computed in other blocks (a raw file read on the cluster, numpy here): rounding level
    np.testing.assert_allclose(proba, ref.predict_proba(X[test]), rtol=1e-5, atol=1e-5)
    assert (model.classes_[proba.argmax(axis=1)] == y[test]).mean() > 0.85

    Xb, yb = make_circles_problem(n=600, seed=8)
    for name, rows in (("b_train.libsvm", slice(0, 450)), ("b_test.libsvm", slice(450, 600))):
        (tmp_path / name).write_text("".join(f"{t:+d} " + " ".join(f"{j + 1}:{v:.9g}" for j, v in enumerate(x))
                                             + "\n" for x, t in zip(Xb[rows], yb[rows])))
    assert _run("train", tmp_path / "b_train.libsvm", "--model", tmp_path / "b.npz", "-k", 40, "--gamma", 0.3,
                "-C", 10, *attach) == 0
    capsys.readouterr()
    assert _run("evaluate", tmp_path / "b.npz", tmp_path / "b_test.libsvm", "--json", *attach) == 0
    evaluation = json.loads(capsys.readouterr().out)
    assert evaluation["n_test"] == 150 and evaluation["accuracy"] > 0.85

    target = Xb[:, 0] + Xb[:, 1] ** 2
    np.save(tmp_path / "r_X.npy", Xb)
    np.save(tmp_path / "r_t.npy", target)
    assert _run("train", tmp_path / "r_X.npy", "--labels", tmp_path / "r_t.npy", "--task", "regression",
                "--epsilon", 0.1, "--model", tmp_path / "r.npz", "-k", 60, "--gamma", 0.3, "-C", 10, *attach) == 0
    assert _run("predict", tmp_path / "r.npz", tmp_path / "r_X.npy", "--out", tmp_path / "r.csv", *attach) == 0
    values = np.loadtxt(tmp_path / "r.csv", skiprows=1)
    assert values.shape == (600,) and np.corrcoef(values, target)[0, 1] > 0.8

    capsys.readouterr()
    assert _run("train", tmp_path / "b_train.libsvm", "--cv", 5, "-k", 40, "--gamma", 0.3, "-C", 10, *attach) == 0
    out = capsys.readouterr().out
    assert out.startswith("cross-validation accuracy: ") and "(5 folds, mean ± standard deviation)" in out


@pytest.mark.slow
def test_train_on_workers_too_small_for_the_fit_exits_with_one_line(tmp_path):
    """The issue's ``dsvm train demo/train.zarr -k 300 --memory-limit 380MB``, where the worker paused
    before any work and the fit waited silently until killed.  A worker of this size now holds little
    enough to run that fit, so the job here is made too large for it (k = 3000: the Gram matrices of a
    pass alone need more than the worker has): the command must exit within a bounded time with one line
    naming the memory the fit needs and the memory there is."""
    import subprocess
    import sys
    import time

    dsvm.make_classification_zarr(tmp_path / "train.zarr", n_samples=200_000, n_features=20, random_state=0)
    t0 = time.monotonic()
    # a bounded wait is the point: before the fix the command never returned
    env = {**os.environ, "DASK_DSVM__PAUSED_TIMEOUT": "20"}
    done = subprocess.run([sys.executable, "-m", "dsvm", "-q", "train", str(tmp_path / "train.zarr"), "--model",
                           str(tmp_path / "m.npz"), "-k", "3000", "--memory-limit", "380MB"],
                          capture_output=True, text=True, timeout=150, env=env)
    assert time.monotonic() - t0 < 150
    assert done.returncode == 1, done.stderr[-2000:]
    lines = [line for line in done.stderr.splitlines() if line.startswith("dsvm train: error:")]
    assert len(lines) == 1, done.stderr[-2000:]
    # What the fit needs and what the worker has.  Which of three errors says it depends on how much an idle
    # worker of this environment holds: the check before the work refuses the fit (the worker holds too much
    # with dsvm loaded); a worker a little smaller passes the check and is then paused by Dask, which stops
    # the fit after dsvm.paused-timeout; one that grows past 95 % is restarted by its nanny until Dask gives
    # the task up.
    line = lines[0]
    assert re.search(r"too little memory .* 362.4 MiB memory limit, .* holds [\d.]+ MiB with dsvm loaded, leaving "
                     r"[\d.]+ MiB; the computation needs [\d.]+ MiB there", line) or \
        re.search(r"has been paused by Dask for lack of memory for 20 s: .* holds [\d.]+ MiB of its 362.4 MiB limit", line) \
        or re.search(r"Dask workers died \d+ times running the same task .* Each worker has 362.4 MiB of memory", line)
    assert not (tmp_path / "m.npz").exists()


def _run_piped_to_a_closed_reader(tmp_path, body: str):
    """Run ``dsvm info`` with ``body`` as the command (returning its status) and its output read for ten
    bytes only, then closed (as `| head -c 10` does): (exit status, stderr)."""
    import subprocess
    import sys

    script = tmp_path / "long_output.py"
    script.write_text(
        "import sys, time\n"
        "from dsvm.app import cli\n"
        "def command(args):\n" + "".join(f"    {line}\n" for line in body.splitlines()) +
        "cli.COMMANDS['info'] = command\n"
        "sys.exit(cli.main(['info', 'anything']))\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"}  # block-buffered, as a user's shell has it
    proc = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    assert len(proc.stdout.read(10)) == 10
    proc.stdout.close()
    err = proc.stderr.read().decode()
    return proc.wait(timeout=60), err


def test_output_into_a_closed_pipe_ends_without_a_traceback(tmp_path):
    """`dsvm info X | head`: the reader leaves before the output ends.  No traceback (BrokenPipeError is an
    OSError, which the one-line error handling used to re-raise), status 1 (the output is incomplete),
    also when the last of the output is only written at the final flush."""
    status, err = _run_piped_to_a_closed_reader(tmp_path, "for _ in range(200_000):\n    print('x' * 50)\nreturn 0")
    assert (status, err) == (1, "")
    # one long line, then time for the reader to leave: the rest is written by the flush after the command
    status, err = _run_piped_to_a_closed_reader(tmp_path, "print('x' * 20_000)\ntime.sleep(1.0)\nreturn 0")
    assert (status, err) == (1, "")


def test_a_broken_pipe_that_is_not_the_output_is_still_an_error(tmp_path):
    """A command failing on some other pipe while its own output is read to the end: a real failure."""
    import subprocess
    import sys

    script = tmp_path / "other_pipe.py"
    script.write_text(
        "import sys\n"
        "from dsvm.app import cli\n"
        "def command(args):\n"
        "    raise BrokenPipeError(32, 'Broken pipe (a worker connection)')\n"
        "cli.COMMANDS['info'] = command\n"
        "sys.exit(cli.main(['info', 'anything']))\n"
    )
    proc = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=60)
    assert proc.returncode != 0 and "BrokenPipeError" in proc.stderr


# ---------------------------------------------------------------- numerics (issue 25, items 3, 5 and 10)
def _write_libsvm(path, X, y):
    with open(path, "w") as f:
        for xi, yi in zip(X, y):
            f.write(f"{yi:+d} " + " ".join(f"{j + 1}:{v:.6g}" for j, v in enumerate(xi)) + "\n")
    return path


def test_problems_that_cannot_be_finite_are_one_line_errors_and_write_nothing(tmp_path, capsys):
    """`-C 1e300` / `--gamma 1e300` were accepted and a model of NaN decisions saved, exit 0; a poly kernel
    overflowing float32 at predict wrote `nan` decisions and labels, exit 0."""
    X, y = make_circles_problem(n=300, seed=11)
    train = _write_libsvm(tmp_path / "train.libsvm", X, y)
    far = _write_libsvm(tmp_path / "far.libsvm", np.vstack([X[:25], X[25:30] * 1e13]), y[:30])
    model = tmp_path / "m.npz"
    poly = ("--kernel", "poly", "--gamma", 1, "-k", 20, "--workers", 1, "--threads-per-worker", 1)
    for option, match in ((("-C", "1e300"), "C=1e+300 is too large"),
                          (("--gamma", "1e300"), "gamma=1e+300 is beyond the largest float32 number")):
        assert _run("train", train, "--model", model, *option, "-k", 20, "--workers", 1) == 1
        assert match in _error_line(capsys) and not model.exists()
    assert _run("train", far, "--model", model, *poly) == 1
    line = _error_line(capsys)  # landmarks among the far rows make every row's kernel values overflow
    assert re.search(r"the features of row \d+ hold NaN or infinity .* of the landmarks \d\.\d+e\+13\): the poly "
                     r"kernel .* overflows float32", line), line
    assert not model.exists()
    assert _run("train", train, "--model", model, *poly) == 0
    capsys.readouterr()
    for out in ("dec.csv", "pred.npy"):
        extra = ("--decision",) if out == "dec.csv" else ()
        assert _run("predict", model, far, "--out", tmp_path / out, *extra, "--workers", 1) == 1
        assert "the kernel values of row 25 hold NaN or infinity" in _error_line(capsys, "predict")
        assert not (tmp_path / out).exists()


def test_a_huge_sparse_feature_index_is_refused_before_anything_is_allocated(tmp_path, capsys):
    """One token `100000000:1` in a 6-row file made `train -k 5` allocate gigabytes, 10**12 failed with
    "Unable to allocate 21.8 TiB" and 2**31 made the worker restart in a loop."""
    rows = "1 1:1 3:2\n-1 2:1\n1 1:0.5 {index}:1\n-1 3:1\n1 1:1 2:1\n-1 2:2 3:1\n"
    (tmp_path / "huge.libsvm").write_text(rows.format(index=10**12))
    assert _run("train", tmp_path / "huge.libsvm", "--model", tmp_path / "m.npz", "-k", 5, "--workers", 1) == 1
    assert "huge.libsvm:3: feature index 1000000000000 is too large" in _error_line(capsys)
    (tmp_path / "wide.libsvm").write_text(rows.format(index=2**31 - 2))
    assert _run("train", tmp_path / "wide.libsvm", "--model", tmp_path / "m.npz", "-k", 5, "--workers", 1) == 1
    line = _error_line(capsys)
    assert "k=5 landmarks are dense rows of all n_features=2147483646 columns" in line and "fewer landmarks" in line
    assert not (tmp_path / "m.npz").exists()


def test_warnings_are_one_line_each_on_stderr(tmp_path):
    """Python printed a warning as two lines (the file and line of dsvm's code, then that source line); the
    mixed-scale and one-class warnings of a fit are one line each, named by their category."""
    from helpers import run_dsvm

    rng = np.random.default_rng(0)
    X = np.hstack([rng.normal(size=(600, 3)), 1000 + 250 * rng.normal(size=(600, 3)), rng.uniform(size=(600, 3))])
    y = (X[:, 0] + X[:, 1] > 0).astype(int)
    np.savetxt(tmp_path / "mixed.csv", np.column_stack([y, X]), delimiter=",", fmt="%.6g")
    proc = run_dsvm("train", "mixed.csv", "--model", "m.npz", "-k", "30", "-C", "1e-6", "--workers", "1",
                    "--threads-per-worker", "1", cwd=tmp_path, check=True)
    lines = proc.stderr.splitlines()
    assert lines and all(re.match(r"\d\d:\d\d:\d\d WARNING ", line) for line in lines), lines
    mixed = [line for line in lines if "MixedScalesWarning: the columns of X have standard deviations" in line]
    one_class = [line for line in lines if "OneClassFitWarning: the fitted model predicts class 0" in line]
    assert len(mixed) == 1 and len(one_class) == 1 and "--scale standard" in mixed[0]


# --------------------------------------------------------------------------- run and demo: one line, before the work
@pytest.mark.parametrize("override", ["output=", "output=5", "output=[a]", "output={a: 1}"])
def test_an_output_that_is_not_a_path_is_one_line(tmp_path, capsys, override):
    """`dsvm run base.yaml --set output=` was a TypeError traceback ("expected str ... not NoneType")."""
    spec = tmp_path / "base.yaml"
    spec.write_text("name: base\noutput: out\ndata: {train: {zarr: d.zarr}}\n")
    assert _run("run", spec, "--set", override, "--workers", 1) == 1
    assert "output must be a path (a non-empty text), got" in _error_line(capsys, "run")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["base.yaml"]


def test_a_failed_demo_leaves_a_folder_the_next_demo_may_use(tmp_path, capsys):
    """`dsvm demo --n-train 1 --n-test 1 --output dd` failed (one class), and `dsvm demo --output dd --overwrite`
    then refused dd for ever: "not a dsvm pipeline output folder (... no .dsvm-output marker)"."""
    out = tmp_path / "dd"
    small = ("--workers", 1, "--threads-per-worker", 1)
    assert _run("demo", "--n-train", 1, "--n-test", 1, "--output", out, *small) == 1
    assert "1 class" in _error_line(capsys, "demo")
    assert (out / ".dsvm-output").is_file()
    assert _run("demo", "--n-train", 1, "--n-test", 1, "--output", out, *small) == 1
    assert "already holds the files of an earlier run (a dsvm pipeline output folder); pass --overwrite" in \
        _error_line(capsys, "demo")
    assert _run("demo", "--n-train", 400, "--n-test", 100, "--output", out, "--overwrite", *small) == 0
    assert json.loads((out / "report.json").read_text())["data"]["n_train"] == 400


def test_an_n_features_beyond_the_index_bound_is_one_line(tmp_path, capsys):
    """`dsvm ingest d.libsvm o.zarr --n-features 99999999999999999999` was an OverflowError traceback."""
    (tmp_path / "d.libsvm").write_text("1 1:1 2:3\n-1 1:2 2:1\n")
    assert _run("ingest", tmp_path / "d.libsvm", tmp_path / "o.zarr", "--n-features", 99999999999999999999) == 1
    assert _error_line(capsys, "ingest") == ("dsvm ingest: error: n_features must be an integer from 1 to 2147483647 "
                                             "(2**31 - 1), got 99999999999999999999")
    assert not (tmp_path / "o.zarr").exists()


def test_clean_dry_run_says_what_it_would_remove(tmp_path, capsys):
    from dsvm.app.cli import main

    assert main(["clean", str(tmp_path), "--dry-run"]) == 0
    err = capsys.readouterr().err
    assert "0 stale item(s) would be removed (--dry-run: nothing removed)" in err, err
    assert main(["clean", str(tmp_path)]) == 0
    assert "0 item(s) removed" in capsys.readouterr().err
