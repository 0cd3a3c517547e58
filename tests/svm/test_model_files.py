"""Model files: round trip, no pickle, corrupted and foreign files."""

import json
import os
import zipfile
from pathlib import Path

import numpy as np
import pytest
from helpers import make_circles_problem

from dsvm import ModelFileError, NystroemSVC, load_model, save_model


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
    assert loaded.duality_gap_ == model.duality_gap_ and model.duality_gap_ >= 0.0


def test_round_trip_multiclass(tmp_path, fitted_multiclass):
    model, X = fitted_multiclass
    loaded = load_model(save_model(model, tmp_path / "m.npz"))
    np.testing.assert_array_equal(loaded.predict(X), model.predict(X))
    assert loaded.get_params()["class_weight"] == {0: 2.0, 1: 1.0, 2: 1.0}
    np.testing.assert_array_equal(loaded.duality_gap_, model.duality_gap_)


def test_a_file_without_a_gap_loads_with_nan(tmp_path, fitted):
    path = save_model(fitted[0], tmp_path / "m.npz")
    older = load_model(_rewrite(path, tmp_path / "old.npz", meta=lambda m: m["fitted"].pop("duality_gap_")))
    assert np.isnan(older.duality_gap_)


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
    with pytest.raises(ModelFileError, match=r"components has shape \(40, \d+\).*metadata.*expected \(40, 7\)"):
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
    from dsvm.app._predictions import write_predictions

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


def test_round_trip_pivoted_landmarks_keeps_the_triangular_map(tmp_path):
    X, y = make_circles_problem(n=400, seed=6)
    model = NystroemSVC(n_components=50, gamma=0.3, C=5.0, landmarks="pivoted", random_state=0).fit(X, y)
    assert not np.triu(model.normalization_, 1).any()
    loaded = load_model(save_model(model, tmp_path / "m.npz"))
    np.testing.assert_array_equal(loaded.normalization_, model.normalization_)
    np.testing.assert_allclose(loaded.decision_function(X), model.decision_function(X))
    assert loaded.get_params()["landmarks"] == "pivoted"


def test_save_model_names_what_it_cannot_save(tmp_path):
    from sklearn.svm import LinearSVC

    X, y = make_circles_problem(n=60, seed=1)
    with pytest.raises(TypeError, match="saves NystroemSVC and NystroemSVR models, got LinearSVC"):
        save_model(LinearSVC().fit(X, y), tmp_path / "x.npz")
    assert not (tmp_path / "x.npz").exists()


# --------------------------------------------------------------------------- bounded reading


HUGE = 3 * 2**27  # float64 values: 3.2 GB declared


def _npy_header(shape, dtype="<f8") -> bytes:
    import io

    buf = io.BytesIO()
    np.lib.format.write_array_header_1_0(buf, {"descr": dtype, "fortran_order": False, "shape": shape})
    return buf.getvalue()


def _crafted(base, out, name, shape=(HUGE,)):
    """``base`` with member ``name`` replaced by a deflated one whose header and zip64 entry declare
    ``shape`` of float64, while the file holds 1 MB of it (what a zip bomb looks like to a reader)."""
    with zipfile.ZipFile(base) as z:
        members = {n: z.read(n) for n in z.namelist() if n != f"{name}.npy"}
    header = _npy_header(shape)
    with zipfile.ZipFile(out, "w") as z:
        for n, data in members.items():
            z.writestr(n, data)
        info = zipfile.ZipInfo(f"{name}.npy")
        info.compress_type = zipfile.ZIP_DEFLATED
        with z.open(info, "w", force_zip64=True) as w:
            w.write(header + bytes(2**20))
        z.getinfo(f"{name}.npy").file_size = len(header) + HUGE * 8  # the central directory declares 3.2 GB
    return out


def _peak_bytes(fn):
    import tracemalloc

    tracemalloc.start()
    try:
        try:
            fn()
        except Exception as exc:
            result = exc
        else:
            result = None
        return tracemalloc.get_traced_memory()[1], result
    finally:
        tracemalloc.stop()


def test_zip64_member_declaring_gigabytes_is_refused_without_allocating(tmp_path, fitted):
    path = save_model(fitted[0], tmp_path / "m.npz")
    bomb = _crafted(path, tmp_path / "bomb.npz", "coef")
    assert bomb.stat().st_size < 2 * 2**20
    peak, exc = _peak_bytes(lambda: load_model(bomb))
    assert isinstance(exc, ModelFileError) and "coef" in str(exc) and "declares" in str(exc), exc
    assert peak < 64 * 2**20, f"peak {peak / 2**20:.0f} MiB"


def test_members_the_format_does_not_name_are_never_read(tmp_path, fitted):
    model, X = fitted
    path = save_model(model, tmp_path / "m.npz")
    extra = _crafted(path, tmp_path / "extra.npz", "junk")
    peak, exc = _peak_bytes(lambda: load_model(extra))
    assert exc is None and peak < 64 * 2**20, (exc, peak)
    np.testing.assert_array_equal(load_model(extra).predict(X), model.predict(X))


def test_crafted_checkpoint_member_is_refused_without_allocating(tmp_path, fitted):
    from dsvm import CheckpointMismatchError
    from dsvm.svm._checkpoint import Checkpoint

    model = fitted[0]
    ck = Checkpoint(tmp_path / "ck.npz", {"n_components": 40}, np.zeros(3))
    solver = {"x": np.zeros(41), "g": np.zeros(41), "H_loss": np.zeros(0), "dim": 41, "it": 1}
    ck.save(model.feature_map_, None, model.gamma_, [], 0, solver)
    bomb = _crafted(ck.path, tmp_path / "bomb.npz", "solver_x")
    peak, exc = _peak_bytes(lambda: Checkpoint(bomb, {"n_components": 40}, np.zeros(3)).load())
    assert isinstance(exc, CheckpointMismatchError) and "solver_x" in str(exc), exc
    assert peak < 64 * 2**20, f"peak {peak / 2**20:.0f} MiB"


_LOAD_IN_CHILD = """
import resource, sys
resource.setrlimit(resource.RLIMIT_AS, (3 * 2**30, 3 * 2**30))
from dsvm import ModelFileError, load_model
try:
    load_model(sys.argv[1])
except ModelFileError as exc:
    print("ModelFileError:", exc)
"""


@pytest.mark.parametrize("kind", ["dev-zero-link", "fifo", "directory"])
def test_non_regular_files_are_refused_before_any_read(tmp_path, kind):
    """`ln -s /dev/zero z.npz; dsvm info z.npz` grew to 19 GB; a FIFO blocked forever."""
    import subprocess
    import sys

    path = tmp_path / "z.npz"
    if kind == "dev-zero-link":
        path.symlink_to("/dev/zero")
    elif kind == "fifo":
        os.mkfifo(path)
    else:
        path.mkdir()
    proc = subprocess.run([sys.executable, "-c", _LOAD_IN_CHILD, str(path)], capture_output=True, text=True,
                          timeout=60)
    assert proc.returncode == 0, proc.stderr[-2000:]
    expected = {"dev-zero-link": "a device", "fifo": "a FIFO (named pipe)", "directory": "a folder"}[kind]
    assert proc.stdout.startswith(f"ModelFileError: {path}: it is {expected}, not a regular file"), proc.stdout


# --------------------------------------------------------------------------- metadata and weights

def _rewrite_meta_text(path, out, edit):
    with np.load(path, allow_pickle=False) as z:
        arrays = {k: z[k] for k in z.files}
    arrays["__meta__"] = np.frombuffer(edit(bytes(arrays["__meta__"]).decode()).encode(), dtype=np.uint8)
    np.savez(out, **arrays)
    return out


@pytest.mark.parametrize("name, edit, message", [
    ("objective-dict", lambda m: m["fitted"].update(objective_={}), "fitted.objective_"),
    ("solver-stats-list", lambda m: m["fitted"].update(solver_stats=[1, 2]), "fitted.solver_stats"),
    ("problems-string", lambda m: m["fitted"].update(problems="x"), "fitted.problems"),
    ("n-iter-float", lambda m: m["fitted"].update(n_iter_=1.5), "fitted.n_iter_"),
    ("gamma-negative", lambda m: m["fitted"].update(gamma_=-1), "fitted.gamma_"),
    ("gap-negative", lambda m: m["fitted"].update(duality_gap_=-0.5), "fitted.duality_gap_"),
    ("gap-string", lambda m: m["fitted"].update(duality_gap_="small"), "fitted.duality_gap_"),
    ("params-list", lambda m: m.update(params=[1]), "params"),
])
def test_metadata_of_the_wrong_type_is_a_model_file_error(tmp_path, fitted, name, edit, message):
    path = save_model(fitted[0], tmp_path / "m.npz")
    with pytest.raises(ModelFileError, match=f"metadata field {message} is"):
        load_model(_rewrite(path, tmp_path / "bad.npz", meta=edit))


def test_deeply_nested_metadata_is_a_model_file_error(tmp_path, fitted):
    path = save_model(fitted[0], tmp_path / "m.npz")
    deep = 200_000
    bad = _rewrite_meta_text(path, tmp_path / "deep.npz", lambda t: t[:-1] + ', "x": ' + "[" * deep + "]" * deep + "}")
    with pytest.raises(ModelFileError, match="nests too deeply"):
        load_model(bad)


@pytest.mark.parametrize("coef", [1e308, 1e200])
def test_weights_that_make_decision_values_overflow_are_refused(tmp_path, fitted, coef):
    """coef = 1e308 loaded and predicted NaN -> one class for every row."""
    model = fitted[0]
    path = save_model(model, tmp_path / "m.npz")
    with pytest.raises(ModelFileError, match="decision values overflow"):
        load_model(_rewrite(path, tmp_path / "bad.npz", coef=np.full_like(model.coef_, coef)))


def test_a_loaded_model_predicts_what_it_predicted_before_saving(tmp_path, fitted, fitted_multiclass):
    """Prediction folds the coefficients into the landmarks when it runs: the file keeps the model as it was (no
    folded coefficients in it) and the loaded model predicts the same values, which are ``F coefᵀ``."""
    from helpers import FLOAT32_DECISION_TOL, assert_same_decisions, explicit_decisions

    for name, (model, X) in (("binary", fitted), ("multiclass", fitted_multiclass)):
        model.predict(X)  # the original has folded its coefficients before it is saved
        path = save_model(model, tmp_path / f"{name}.npz")
        with np.load(path, allow_pickle=False) as z:
            assert not any("alpha" in member or "expansion" in member for member in z.files)
        loaded = load_model(path)
        np.testing.assert_array_equal(loaded.decision_function(X), model.decision_function(X))
        np.testing.assert_array_equal(loaded.predict(X), model.predict(X))
        expected, scale = explicit_decisions(X, loaded.feature_map_, loaded.coef_, loaded.intercept_)
        assert_same_decisions(loaded.decision_function(X), expected, scale, FLOAT32_DECISION_TOL)


# --------------------------------------------------------------------------- files of earlier versions
FIXTURES = Path(__file__).resolve().parents[1] / "data" / "models-0.1"


@pytest.mark.parametrize("name", ["svc_binary_proba", "svc_multiclass", "svr"])
def test_files_written_before_the_restructure_load(name):
    """Model files record the estimator's class name, not a module path: files of dsvm 0.1 written before the
    package was laid out by layer still load and predict what they predicted then."""
    model = load_model(FIXTURES / f"{name}.npz")
    X = np.load(FIXTURES / "X_test.npy")
    decision = model.predict(X) if name == "svr" else model.decision_function(X)
    # float32 features of another block split may round differently in the last bits
    np.testing.assert_allclose(decision, np.load(FIXTURES / f"{name}.decision.npy"), rtol=1e-5, atol=1e-6)
    if name != "svr":  # labels: equal (none of these 50 rows lies within 1e-5 of a boundary)
        expected = np.load(FIXTURES / f"{name}.predict.npy")
        np.testing.assert_array_equal(np.asarray(model.predict(X)).astype(expected.dtype), expected)
    if name == "svc_binary_proba":
        np.testing.assert_allclose(model.predict_proba(X), np.load(FIXTURES / f"{name}.proba.npy"),
                                   rtol=1e-5, atol=1e-7)


def test_the_checkpoint_path_is_not_part_of_the_model(tmp_path, caplog):
    """A model trained with --checkpoint stored the path; its refit (or a clone's) wrote, resumed from and
    deleted a checkpoint there. A crafted file could name any path."""
    X, y = make_circles_problem(n=200, seed=6)
    checkpoint = tmp_path / "fit.ckpt.npz"
    model = NystroemSVC(n_components=20, gamma=0.3, checkpoint=str(checkpoint), random_state=0).fit(X, y)
    path = save_model(model, tmp_path / "m.npz")
    with np.load(path, allow_pickle=False) as z:
        assert "checkpoint" not in json.loads(bytes(z["__meta__"]).decode())["params"]
    assert load_model(path).checkpoint is None

    victim = tmp_path / "victim.npz"
    crafted = _rewrite(path, tmp_path / "crafted.npz", meta=lambda m: m["params"].update(checkpoint=str(victim)))
    with caplog.at_level("WARNING", logger="dsvm.svm._model_files"):
        loaded = load_model(crafted)
    assert loaded.checkpoint is None and "names a checkpoint path" in caplog.text
    loaded.fit(X, y)
    assert not victim.exists() and not checkpoint.exists()
