"""dsvm train / evaluate / predict against the Python API: --solver, --probability and predict --proba,
--class-weight, regression, --cv alone, raw input files read like the model, one overwrite rule.

The commands run in-process (dsvm.app.cli.main) and attach to one in-process cluster per module
(the ``scheduler_address`` fixture)."""

import bz2
import csv
import gzip
import json
import lzma

import numpy as np
import pytest
import zarr
from helpers import make_circles_problem, zero_based_libsvm_files
from sklearn.metrics import mean_absolute_error, mean_squared_error, r2_score

import dsvm
from dsvm.app.cli import main

PARAMS = {"n_components": 40, "gamma": 0.3, "C": 10.0, "random_state": 0}
FIT = ("-k", 40, "--gamma", 0.3, "-C", 10, "--random-state", 0)
# A command reads its data on the cluster and a Python fit in this process: their row blocks differ, and BLAS
# may round a float32 product by the row's place in a block (OpenBLAS's Haswell kernels do, its SkylakeX ones
# do not). The two fits then solve problems whose features differ by float32 rounding (eps32 = 1.2e-7), and
# their solutions differ by that rounding times the problem's conditioning: compared norm-wise (a coefficient
# the data hardly determine may move far more relative to itself), at 2^-13 ~ 1e3 eps32 (conditioning up to
# 1e3), well below what a wrong option changes here (C 10 -> 11: 4e-2; balanced class weights: 6e-3).
FIT_RTOL = 2.0**-13


def _assert_close_normwise(actual, desired, rtol=FIT_RTOL):
    actual, desired = np.asarray(actual, dtype=np.float64), np.asarray(desired, dtype=np.float64)
    assert actual.shape == desired.shape
    error = np.linalg.norm(actual - desired) / np.linalg.norm(desired)
    assert error <= rtol, f"relative difference {error:.3g} > {rtol:.3g}"


def _assert_same_fit(cli, ref, X_test):
    """``cli`` and ``ref`` are fits of one problem: the solutions ``[coef_, intercept_]`` and the decision
    values (predictions) agree norm-wise."""
    _assert_close_normwise(np.c_[cli.coef_, cli.intercept_], np.c_[ref.coef_, ref.intercept_])
    predict = "decision_function" if hasattr(ref, "classes_") else "predict"
    _assert_close_normwise(getattr(cli, predict)(X_test), getattr(ref, predict)(X_test))


def _libsvm_lines(X, y) -> str:
    return "".join(f"{yi:g} " + " ".join(f"{j + 1}:{v:.17g}" for j, v in enumerate(xi)) + "\n" for xi, yi in zip(X, y))


def _csv_text(X, y, header=True) -> str:
    head = "label," + ",".join(f"x{j}" for j in range(X.shape[1])) + "\n" if header else ""
    return head + "".join(f"{yi:g}," + ",".join(f"{v:.17g}" for v in xi) + "\n" for xi, yi in zip(X, y))


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    """Train / test files of one binary problem in every raw form the commands read."""
    tmp = tmp_path_factory.mktemp("data")
    X, y = make_circles_problem(n=700, seed=8)
    Xtr, ytr, Xte, yte = X[:500], y[:500], X[500:], y[500:]
    (tmp / "train.libsvm").write_text(_libsvm_lines(Xtr, ytr))
    (tmp / "test.libsvm").write_text(_libsvm_lines(Xte, yte))
    (tmp / "test.libsvm.xz").write_bytes(lzma.compress((tmp / "test.libsvm").read_bytes()))
    (tmp / "test.csv").write_text(_csv_text(Xte, yte))
    (tmp / "test.csv.gz").write_bytes(gzip.compress((tmp / "test.csv").read_bytes()))
    (tmp / "test.csv.bz2").write_bytes(bz2.compress((tmp / "test.csv").read_bytes()))
    np.save(tmp / "test_X.npy", Xte)
    np.save(tmp / "test_y.npy", yte)
    train = dsvm.ingest(tmp / "train.libsvm", tmp / "train.zarr")
    test = dsvm.ingest(tmp / "test.libsvm", tmp / "test.zarr", like=train)
    return {"dir": tmp, "train": train, "test": test, "X_test": Xte, "y_test": yte}


@pytest.fixture
def run(scheduler_address):
    def run(*argv, attach=True):
        extra = ("--scheduler-address", scheduler_address) if attach else ()
        return main(["-q", *map(str, argv), *extra])

    return run


def _error_line(capsys, command) -> str:
    err = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
    assert len(err) == 1 and err[0].startswith(f"dsvm {command}: error: "), err
    return err[0]


def _read_csv(path):
    with open(path, newline="") as f:
        rows = list(csv.reader(f))
    return rows[0], np.array(rows[1:], dtype=np.float64)


# --------------------------------------------------------------------------- train options
def test_probability_and_class_weights_match_the_python_api(tmp_path, files, run):
    """--probability, --class-weight CLASS:W (a negative label too) and predict --proba: the same model and
    the same probabilities as NystroemSVC(probability=True, class_weight={...}) from Python."""
    model = tmp_path / "m.npz"
    assert run("train", files["train"].path, "--model", model, *FIT, "--probability",
               "--class-weight=-1:2.5", "--class-weight", "1:1") == 0
    cli = dsvm.load_model(model)
    ref = dsvm.NystroemSVC(probability=True, class_weight={-1.0: 2.5, 1.0: 1.0}, **PARAMS).fit(files["train"])
    assert cli.class_weight == {-1.0: 2.5, 1.0: 1.0} and cli.probability
    X_test, _ = files["test"].load()
    _assert_same_fit(cli, ref, X_test)
    _assert_close_normwise(np.r_[cli.probA_, cli.probB_], np.r_[ref.probA_, ref.probB_])
    assert run("predict", model, files["test"].path, "--out", tmp_path / "p.csv", "--proba") == 0
    header, proba = _read_csv(tmp_path / "p.csv")
    assert header == ["proba_-1", "proba_1"]
    _assert_close_normwise(proba, ref.predict_proba(X_test))
    assert run("predict", model, files["test"].path, "--out", tmp_path / "p.zarr", "--proba") == 0
    stored = zarr.open_array(str(tmp_path / "p.zarr"), mode="r")
    assert stored.attrs["kind"] == "proba" and stored.attrs["classes"] == [-1, 1]
    np.testing.assert_allclose(stored[:], proba, rtol=1e-12)
    # the weight moved the boundary: more rows predicted -1 than without it
    plain = dsvm.NystroemSVC(**PARAMS).fit(files["train"])
    assert (cli.predict(X_test) == -1).sum() > (plain.predict(X_test) == -1).sum()


def test_balanced_class_weight_and_class_weight_errors(tmp_path, files, run, capsys):
    model = tmp_path / "m.npz"
    assert run("train", files["train"].path, "--model", model, *FIT, "--class-weight", "balanced") == 0
    ref = dsvm.NystroemSVC(class_weight="balanced", **PARAMS).fit(files["train"])
    _assert_same_fit(dsvm.load_model(model), ref, files["test"].load()[0])
    capsys.readouterr()
    for weights, expected in [
        (("--class-weight", "3:2"), "has no class '3' (classes: -1.0, 1.0)"),
        (("--class-weight", "balanced", "--class-weight", "1:2"), "balanced cannot be combined"),
        (("--class-weight", "1:x"), "the weight 'x' is not a number"),
        (("--class-weight", "1"), "expected CLASS:W"),
        (("--class-weight", "1:2", "--class-weight", "1:3"), "names class '1' twice"),
    ]:
        assert run("train", files["train"].path, "--model", tmp_path / "bad.npz", *FIT, *weights) == 1
        assert expected in _error_line(capsys, "train")
    assert not (tmp_path / "bad.npz").exists()


@pytest.mark.parametrize("solver", ["tron", "dcd", "pegasos"])
def test_solver_option_fits_what_the_python_api_fits(tmp_path, files, run, solver):
    model = tmp_path / "m.npz"
    assert run("train", files["train"].path, "--model", model, *FIT, "--solver", solver) == 0
    cli = dsvm.load_model(model)
    ref = dsvm.NystroemSVC(solver=solver, **PARAMS).fit(files["train"])
    assert cli.solver == solver
    _assert_same_fit(cli, ref, files["test"].load()[0])


def test_predict_proba_needs_platt_sigmoids(tmp_path, files, run, capsys):
    X, y = files["train"].load()
    dsvm.save_model(dsvm.NystroemSVC(**PARAMS).fit(X, y), tmp_path / "plain.npz")
    dsvm.save_model(dsvm.NystroemSVR(n_components=20).fit(X, y.astype(float)), tmp_path / "svr.npz")
    capsys.readouterr()
    assert run("predict", tmp_path / "plain.npz", files["test"].path, "--out", tmp_path / "p.csv", "--proba") == 1
    assert "plain.npz has no Platt sigmoids; train it with --probability" in _error_line(capsys, "predict")
    assert run("predict", tmp_path / "svr.npz", files["test"].path, "--out", tmp_path / "p.csv", "--proba") == 1
    assert "regression model" in _error_line(capsys, "predict")
    assert not (tmp_path / "p.csv").exists()


# --------------------------------------------------------------------------- regression
@pytest.fixture(scope="module")
def regression_files(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("regression")
    rng = np.random.default_rng(4)
    X = rng.normal(size=(600, 4))
    t = np.sin(X[:, 0]) + 0.5 * X[:, 1] ** 2 + 0.05 * rng.normal(size=600)
    (tmp / "train.libsvm").write_text(_libsvm_lines(X[:450], t[:450]))
    (tmp / "test.libsvm").write_text(_libsvm_lines(X[450:], t[450:]))
    return tmp, X[450:], t[450:]


def test_regression_train_predict_evaluate(tmp_path, regression_files, run, capsys):
    data, X_test, t_test = regression_files
    model = tmp_path / "r.npz"
    # TRON's truncated CG steps follow the rounding: two fits stopped at the default tol (1e-4 of the first
    # gradient) may differ by that tolerance; at 1e-6 both are that close to their problems' minimisers, and
    # what is left is the float32 rounding FIT_RTOL covers
    assert run("train", data / "train.libsvm", "--model", model, "--task", "regression", "--epsilon", 0.05,
               "-k", 60, "--gamma", 0.5, "-C", 10, "--solver", "tron", "--tol", 1e-6) == 0
    svr = dsvm.load_model(model)
    assert isinstance(svr, dsvm.NystroemSVR) and svr.epsilon == 0.05 and svr.solver == "tron" and svr.tol == 1e-6
    ref = dsvm.NystroemSVR(epsilon=0.05, n_components=60, gamma=0.5, C=10, solver="tron", tol=1e-6, random_state=0)
    ref.fit(dsvm.ingest(data / "train.libsvm", tmp_path / "train.zarr"))
    _assert_same_fit(svr, ref, X_test)
    assert run("predict", model, data / "test.libsvm", "--out", tmp_path / "v.npy") == 0
    values = np.load(tmp_path / "v.npy")
    _assert_close_normwise(values, ref.predict(X_test))
    capsys.readouterr()
    assert run("evaluate", model, data / "test.libsvm", "--json") == 0
    result = json.loads(capsys.readouterr().out)
    assert result["n_test"] == 150 and result["r2"] > 0.6
    assert result["r2"] == pytest.approx(r2_score(t_test, values), rel=1e-5)
    assert result["rmse"] == pytest.approx(mean_squared_error(t_test, values) ** 0.5, rel=1e-5)
    assert result["mae"] == pytest.approx(mean_absolute_error(t_test, values), rel=1e-5)
    assert run("evaluate", model, data / "test.libsvm") == 0
    assert capsys.readouterr().out.startswith(f"R² {result['r2']:.4f}, RMSE ")


def test_options_that_do_not_fit_the_task_are_one_line_errors(tmp_path, files, run, capsys):
    data = files["train"].path
    for argv, expected in [
        (("--task", "regression", "--probability"), "--probability is for classification"),
        (("--task", "regression", "--class-weight", "balanced"), "--class-weight is for classification"),
        (("--task", "regression", "--solver", "dcd"), "--solver dcd is not available for --task regression"),
        (("--task", "regression", "--cv", 3), "--cv is for classification"),
        (("--epsilon", 0.1), "--epsilon is for --task regression"),
        (("--cv", 1), "at least 2 folds"),
        (("--cv-report", tmp_path / "r"), "give --search too"),
    ]:
        assert run("train", data, "--model", tmp_path / "m.npz", *argv, attach=False) == 1
        assert expected in _error_line(capsys, "train")
    assert run("train", data, attach=False) == 1
    assert "--model FILE.npz is required" in _error_line(capsys, "train")
    assert not (tmp_path / "m.npz").exists()


# --------------------------------------------------------------------------- --cv alone
def test_cv_alone_prints_the_cross_validation_accuracy(tmp_path, files, run, capsys):
    capsys.readouterr()
    assert run("train", files["train"].path, *FIT, "--cv", 4) == 0
    out = capsys.readouterr().out.strip().splitlines()
    ref = dsvm.NystroemSVCCV({"C": [10.0]}, cv=4, refit=False, n_components=40, gamma=0.3, random_state=0)
    ref.fit(files["train"])
    mean, std = ref.cv_results_["mean_test_score"][0], ref.cv_results_["std_test_score"][0]
    assert out == [f"cross-validation accuracy: {100 * mean:.2f} % ± {100 * std:.2f} (4 folds, "
                   "mean ± standard deviation)"]
    assert 0.8 < mean <= 1.0 and std > 0
    assert list(tmp_path.iterdir()) == []
    # with --model the model is also fitted on all rows and saved: the model a plain fit gives
    assert run("train", files["train"].path, *FIT, "--cv", 4, "--model", tmp_path / "m.npz",
               "--scoring", "balanced_accuracy") == 0
    assert capsys.readouterr().out.startswith("cross-validation balanced_accuracy: ")
    plain = dsvm.NystroemSVC(**PARAMS).fit(files["train"])
    X_test, _ = files["test"].load()
    np.testing.assert_allclose(dsvm.load_model(tmp_path / "m.npz").decision_function(X_test),
                               plain.decision_function(X_test), rtol=1e-3, atol=1e-3)


# --------------------------------------------------------------------------- raw DATA files
@pytest.mark.parametrize("name", ["test.libsvm.xz", "test.csv", "test.csv.gz", "test.csv.bz2", "test_X.npy"])
def test_predict_reads_raw_files_like_the_dataset(tmp_path, files, run, name):
    model = tmp_path / "m.npz"
    X, y = files["train"].load()
    dsvm.save_model(dsvm.NystroemSVC(**PARAMS).fit(X, y), model)
    assert run("predict", model, files["dir"] / name, "--out", tmp_path / "p.npy") == 0
    assert run("predict", model, files["test"].path, "--out", tmp_path / "q.npy") == 0
    np.testing.assert_array_equal(np.load(tmp_path / "p.npy"), np.load(tmp_path / "q.npy"))


def test_evaluate_reads_raw_files_with_the_models_width_and_base(tmp_path, files, run, capsys):
    X, y = files["train"].load()
    model = tmp_path / "m.npz"
    dsvm.save_model(dsvm.NystroemSVC(**PARAMS).fit(X, y), model)
    capsys.readouterr()
    for data in (files["dir"] / "test.libsvm.xz", files["test"].path):
        assert run("evaluate", model, data, "--json") == 0
    raw, stored = (json.loads(line) for line in capsys.readouterr().out.splitlines())
    assert raw["accuracy"] == stored["accuracy"] and raw["n_test"] == 200
    assert run("evaluate", model, files["dir"] / "test_X.npy", "--labels", files["dir"] / "test_y.npy",
               "--json") == 0
    assert json.loads(capsys.readouterr().out)["accuracy"] == stored["accuracy"]
    # a zero-based test file that never uses feature 0 is read zero-based, like the model's training file
    zb = zero_based_libsvm_files(tmp_path)
    assert run("train", zb["train"], "--model", tmp_path / "zb.npz", "-k", 50, "--random-state", 0) == 0
    capsys.readouterr()
    assert run("evaluate", tmp_path / "zb.npz", zb["test"], "--json") == 0
    assert json.loads(capsys.readouterr().out)["accuracy"] > 0.9


def test_a_test_file_wider_than_the_model_names_both_widths(tmp_path, files, run, capsys):
    model = tmp_path / "m.npz"
    dsvm.save_model(dsvm.NystroemSVC(**PARAMS).fit(files["train"]), model)
    wide = np.hstack([files["X_test"], np.ones((200, 1))])
    (tmp_path / "wide.libsvm").write_text(_libsvm_lines(wide, files["y_test"]))
    (tmp_path / "wide.csv").write_text(_csv_text(wide, files["y_test"]))
    capsys.readouterr()
    assert run("evaluate", model, tmp_path / "wide.libsvm") == 1
    line = _error_line(capsys, "evaluate")
    assert "feature index 6 is out of range for n_features=5" in line and "(5 features, one-based LIBSVM indices)" in line
    assert run("predict", model, tmp_path / "wide.csv", "--out", tmp_path / "p.csv") == 1
    line = _error_line(capsys, "predict")
    assert "the file has 6 feature columns" in line and f"the model {model} (5 features" in line
    assert not (tmp_path / "p.csv").exists()
    assert run("evaluate", model, files["test"].path, "--format", "csv") == 1
    assert "--format is for raw DATA files" in _error_line(capsys, "evaluate")


# --------------------------------------------------------------------------- export
@pytest.mark.parametrize("classes", [(-1, 1), ("x", "y", "z")])
def test_export_in_float64_computes_what_the_model_computes(tmp_path, run, classes):
    """export --dtype float64 of a probability=True classifier (two classes and three): label, decision and
    probabilities as predict, decision_function and predict_proba give them, to float64 round-off."""
    ort = pytest.importorskip("onnxruntime")
    pytest.importorskip("skl2onnx")
    X, y = make_circles_problem(n=300, seed=3)
    if len(classes) == 3:
        y = np.asarray(classes)[np.digitize(X[:, 0], [-0.5, 0.5])]
    model = dsvm.NystroemSVC(probability=True, dtype="float64", **PARAMS).fit(X, y)
    dsvm.save_model(model, tmp_path / "m.npz")
    assert run("export", tmp_path / "m.npz", tmp_path / "m.onnx", "--dtype", "float64", attach=False) == 0
    session = ort.InferenceSession(str(tmp_path / "m.onnx"), providers=["CPUExecutionProvider"])
    out = dict(zip([o.name for o in session.get_outputs()], session.run(None, {"X": X})))
    assert list(out) == ["label", "decision", "probabilities"]
    assert out["label"].tolist() == model.predict(X).tolist()
    np.testing.assert_allclose(out["decision"], model.decision_function(X).reshape(len(X), -1), rtol=1e-9,
                               atol=1e-9)
    np.testing.assert_allclose(out["probabilities"], model.predict_proba(X), rtol=1e-9, atol=1e-12)


# --------------------------------------------------------------------------- one overwrite rule
def test_every_output_is_replaced_only_with_overwrite(tmp_path, files, run, capsys):
    """--model, --out, the ingest target, a --search report folder and a pipeline's output folder: an
    earlier output of dsvm is replaced only with --overwrite."""
    data = files["train"].path
    outputs = [
        (("train", data, "--model", tmp_path / "m.npz", *FIT), "train"),
        (("predict", tmp_path / "m.npz", files["test"].path, "--out", tmp_path / "p.csv"), "predict"),
        (("ingest", files["dir"] / "test.libsvm", tmp_path / "t.zarr", "--no-progress"), "ingest"),
        (("train", data, "--model", tmp_path / "s.npz", "--search", "C=1,10", "--cv", 2, *FIT[:4]), "train"),
    ]
    for argv, command in outputs:
        assert run(*argv, attach=command != "ingest") == 0
    pipeline = tmp_path / "p.yaml"
    pipeline.write_text(f"name: tiny\noutput: {tmp_path / 'out'}\ndata:\n  train: {{zarr: {data}}}\n"
                        f"  test: {{zarr: {files['test'].path}}}\nmodel:\n  params: {{n_components: 20}}\n"
                        "report: {plots: false}\n")
    assert run("run", pipeline) == 0
    outputs.append((("run", pipeline), "run"))
    (tmp_path / "s.npz").unlink()  # the search report folder alone is the earlier output now
    capsys.readouterr()
    for argv, command in outputs:
        before = {p: p.stat().st_mtime_ns for p in tmp_path.rglob("*") if p.is_file()}
        assert run(*argv, attach=command != "ingest") == 1, argv
        assert "--overwrite" in _error_line(capsys, command)
        assert before == {p: p.stat().st_mtime_ns for p in tmp_path.rglob("*") if p.is_file()}
    for argv, command in outputs:
        assert run(*argv, "--overwrite", attach=command != "ingest") == 0, argv


# --------------------------------------------------------------------------- CSV files without labels
@pytest.fixture(scope="module")
def iris_like(tmp_path_factory):
    """A model trained on a CSV with a header and its label last (as pandas writes iris), and the same rows
    written with the label, without it, and without it or a header."""
    tmp = tmp_path_factory.mktemp("iris")
    rng = np.random.default_rng(3)
    X = rng.normal(size=(150, 4))
    y = np.array(["setosa", "versicolor", "virginica"])[np.digitize(X[:, 0] + X[:, 1], [-0.5, 0.5])]
    names = ["sepal_length", "sepal_width", "petal_length", "petal_width"]
    rows = [[f"{v:.17g}" for v in x] for x in X]
    for name, head, labels in (("labelled.csv", names + ["species"], y), ("new.csv", names, None),
                               ("bare.csv", None, None)):
        with open(tmp / name, "w", newline="") as f:
            w = csv.writer(f)
            w.writerows(([head] if head else []) + [r + ([lab] if labels is not None else [])
                                                     for r, lab in zip(rows, y)])
    dsvm.ingest(tmp / "labelled.csv", tmp / "labelled.zarr", label_column="species")
    model = dsvm.NystroemSVC(n_components=30, random_state=0).fit(dsvm.open_dataset(tmp / "labelled.zarr"))
    dsvm.save_model(model, tmp / "m.npz")
    return tmp


def test_predict_scores_a_csv_without_a_label_column(tmp_path, iris_like, run, capsys):
    """predict failed on a CSV holding only the model's features ("n_features=4 given but the file has 3
    feature columns"), and on one with the label last unless --label-column was repeated."""
    model, data = iris_like / "m.npz", iris_like
    assert run("predict", model, data / "labelled.zarr", "--out", tmp_path / "expected.npy") == 0
    expected = np.load(tmp_path / "expected.npy")
    for k, (name, extra) in enumerate([("labelled.csv", ()), ("new.csv", ()), ("bare.csv", ()),
                                       ("bare.csv", ("--no-label",)), ("new.csv", ("--no-label",))]):
        assert run("predict", model, data / name, "--out", tmp_path / f"p{k}.npy", *extra) == 0, (name, extra)
        assert np.load(tmp_path / f"p{k}.npy").tolist() == expected.tolist(), (name, extra)
    capsys.readouterr()
    assert run("evaluate", model, data / "labelled.csv", "--json") == 0
    assert json.loads(capsys.readouterr().out)["n_test"] == 150


def test_evaluate_needs_the_label_column_and_says_so(tmp_path, iris_like, run, capsys):
    model = iris_like / "m.npz"
    capsys.readouterr()
    for name in ("new.csv", "bare.csv"):
        assert run("evaluate", model, iris_like / name) == 1
        assert _error_line(capsys, "evaluate") == (
            f"dsvm evaluate: error: {iris_like / name} has 4 columns, as many as the model's features, so no label "
            "column: evaluate needs labels (dsvm predict scores data without labels)")
    assert run("predict", model, iris_like / "bare.csv", "--out", tmp_path / "p.npy", "--no-label",
               "--label-column", "0") == 1
    assert "give --label-column or --no-label, not both" in _error_line(capsys, "predict")
    assert run("predict", model, iris_like / "labelled.zarr", "--out", tmp_path / "p.npy", "--no-label") == 1
    assert "--no-label is for raw DATA files" in _error_line(capsys, "predict")


def test_a_dataset_read_without_labels_is_for_predicting_only(tmp_path, iris_like):
    ds = dsvm.ingest(iris_like / "bare.csv", tmp_path / "u.zarr", label_column=False)
    assert ds.attrs["unlabelled"] is True and ds.n_features == 4
    model = dsvm.load_model(iris_like / "m.npz")
    labelled = dsvm.open_dataset(iris_like / "labelled.zarr")
    assert model.predict(ds).compute().tolist() == model.predict(labelled).compute().tolist()
    with pytest.raises(ValueError, match=r"u\.zarr has no labels \(it was read without a label column"):
        dsvm.evaluate(model, ds)
    with pytest.raises(ValueError, match="has no labels"):
        dsvm.NystroemSVC(n_components=5).fit(ds)
    with pytest.raises(ValueError, match="label_column=False \\(no label column\\) is for CSV files"):
        dsvm.ingest(iris_like / "labelled.zarr", tmp_path / "v.zarr", format="libsvm", label_column=False)
    with pytest.raises(dsvm.InputFileError, match=r"new\.csv: its columns are the 4 features of the reference and "
                                                  r"no label column; pass label_column=False"):
        dsvm.ingest(iris_like / "new.csv", tmp_path / "w.zarr", like=model)


def test_a_fifo_as_data_is_one_line_at_once(tmp_path, iris_like, run, capsys, monkeypatch):
    """Opening a FIFO waits for a writer: predict and evaluate blocked for ever on one.  The refusal comes
    before a cluster is started."""
    import os

    from helpers import call_near_fifos

    from dsvm.app import _model_commands as model_commands

    monkeypatch.setattr(model_commands, "connect_from_args", lambda args: pytest.fail("a cluster was started"))
    fifo = tmp_path / "new.csv"
    os.mkfifo(fifo)
    for command in (("predict", iris_like / "m.npz", fifo, "--out", tmp_path / "p.npy"),
                    ("evaluate", iris_like / "m.npz", fifo), ("train", fifo, "--model", tmp_path / "t.npz")):
        capsys.readouterr()
        assert call_near_fifos(lambda c=command: run(*c) == 1 or pytest.fail("exit status 0"), fifo) is None
        assert _error_line(capsys, command[0]) == (
            f"dsvm {command[0]}: error: {fifo}: it is a FIFO (named pipe), not a regular file or a folder; a DATA "
            "file or dataset must be a regular file or a folder")


# --------------------------------------------------------------------------- train: refused before the work
@pytest.mark.parametrize("spelling", ["same", "dotted", "symlink"])
def test_model_and_checkpoint_on_one_file_are_refused_before_the_work(tmp_path, files, run, capsys, monkeypatch,
                                                                     spelling):
    """`--model c.npz --checkpoint c.npz` ran the whole fit, then refused to save ("not a model written by
    dsvm (format='dsvm-checkpoint')") and said to rerun the same command, which was refused again."""
    from dsvm.app import _model_commands as model_commands

    monkeypatch.setattr(model_commands, "connect_from_args", lambda args: pytest.fail("a cluster was started"))
    model = tmp_path / "c.npz"
    (tmp_path / "sub").mkdir()
    checkpoint = {"same": model, "dotted": tmp_path / "sub" / ".." / "c.npz", "symlink": tmp_path / "link.npz"}[spelling]
    if spelling == "symlink":
        checkpoint.symlink_to(model)
    assert run("train", files["train"].path, "--model", model, "--checkpoint", checkpoint, *FIT) == 1
    assert _error_line(capsys, "train") == (
        f"dsvm train: error: --checkpoint {checkpoint} is the --model file ({model}); the checkpoint is kept until "
        "the model is saved, so it needs a path of its own")
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted({"sub", checkpoint.name} - {"c.npz"})


@pytest.mark.parametrize("item, message", [
    ("C=1,nan", "--search C: C must be a finite number, got nan"),
    ("C=1,1e300", "--search C: C=1e+300 is too large"),
    ("gamma=0.1,-1", "--search gamma: gamma"),
    ("landmarks=uniform,bogus", "--search landmarks: landmarks='bogus' is not supported"),
    ("tol=1e-3,inf", "--search tol: tol must be a finite number"),
])
def test_every_searched_value_is_checked_as_its_parameter_before_the_work(tmp_path, files, run, capsys, monkeypatch,
                                                                         item, message):
    """`-C nan` was refused at once, `--search C=1,nan` only when fold 0 met it ("the objective is not finite")."""
    from dsvm.app import _model_commands as model_commands

    monkeypatch.setattr(model_commands, "connect_from_args", lambda args: pytest.fail("a cluster was started"))
    assert run("train", files["train"].path, "--model", tmp_path / "m.npz", "--search", item, "--cv", 2, *FIT) == 1
    line = _error_line(capsys, "train")
    assert line.startswith(f"dsvm train: error: {message}"), line
    assert list(tmp_path.iterdir()) == []


def test_errors_about_a_raw_file_name_the_file_not_its_temporary_dataset(tmp_path, iris_like, run, capsys):
    """Columns reordered against the model's: "the feature names of /tmp/dsvm-input-26150-.../data.zarr differ"."""
    model = iris_like / "m.npz"
    with open(iris_like / "labelled.csv") as f:
        rows = list(csv.reader(f))
    reordered = tmp_path / "reord.csv"
    with open(reordered, "w", newline="") as f:
        csv.writer(f).writerows([[r[1], r[0], *r[2:]] for r in rows])
    for command, extra in (("predict", ("--out", tmp_path / "p.npy")), ("evaluate", ())):
        capsys.readouterr()
        assert run(command, model, reordered, *extra) == 1
        line = _error_line(capsys, command)
        assert f"the feature names of {reordered} differ from those NystroemSVC was fitted with" in line, line
        assert "dsvm-input-" not in line
