"""Prediction files: written with the csv module, labels exactly as the dataset stores them."""

from __future__ import annotations

import csv

import numpy as np
import pytest

import dsvm
from dsvm.app._predictions import write_predictions


def _separable(labels):
    rng = np.random.default_rng(0)
    X = np.r_[rng.normal(-3, 0.3, size=(60, 2)), rng.normal(3, 0.3, size=(60, 2))]
    y = np.array([labels[0]] * 60 + [labels[1]] * 60, dtype=object if isinstance(labels[0], str) else None)
    return X, y


def _read_csv(path):
    with open(path, newline="") as f:
        return list(csv.reader(f))


@pytest.mark.parametrize("labels", [("no, never", 'yes "really"'), (98765432109, -3)],
                         ids=["comma-and-quote", "large-integer"])
def test_csv_labels_survive_the_round_trip(tmp_path, labels):
    """`"no, never"` split into two fields and 98765432109 became 9.876543211e+10 (%.10g, no quoting)."""
    X, y = _separable(labels)
    model = dsvm.NystroemSVC(n_components=10, gamma=0.5, random_state=0).fit(X, y)
    out = tmp_path / "p.csv"
    write_predictions(model, X, out)
    rows = _read_csv(out)
    assert rows[0] == ["prediction"] and all(len(r) == 1 for r in rows)
    expected = [str(v) for v in model.predict(X)]
    assert [r[0] for r in rows[1:]] == expected
    assert {r[0] for r in rows[1:]} == {str(v) for v in labels}


def test_csv_labels_from_a_libsvm_dataset_are_written_as_stored(tmp_path):
    """LIBSVM labels are stored as float64: integral ones are written as the dataset's classes, 98765432109."""
    path = tmp_path / "a.libsvm"
    lines = [f"98765432109 1:{-3 + 0.01 * i}" for i in range(30)] + [f"-1 1:{3 + 0.01 * i}" for i in range(30)]
    path.write_text("\n".join(lines) + "\n")
    ds = dsvm.ingest(path, tmp_path / "a.zarr")
    model = dsvm.NystroemSVC(n_components=10, gamma=0.5, random_state=0).fit(ds)
    write_predictions(model, ds, tmp_path / "p.csv")
    values = [r[0] for r in _read_csv(tmp_path / "p.csv")[1:]]
    assert values == ["98765432109"] * 30 + ["-1"] * 30
    assert sorted(set(values)) == sorted(str(c) for c in ds.attrs["classes"])  # the dataset's own record


def test_csv_decision_values_read_back_exactly(tmp_path):
    X, y = _separable(("a", "b"))
    y3 = np.where(X[:, 0] > 3, "c", y)
    model = dsvm.NystroemSVC(n_components=10, gamma=0.5, random_state=0).fit(X, y3)
    write_predictions(model, X, tmp_path / "d.csv", decision=True)
    rows = _read_csv(tmp_path / "d.csv")
    assert rows[0] == ["decision_a", "decision_b", "decision_c"]
    np.testing.assert_array_equal(np.array(rows[1:], dtype=np.float64), model.decision_function(X))


@pytest.mark.parametrize("suffix", [".npy", ".zarr", ".csv"])
def test_prediction_files_keep_long_string_labels_whole(tmp_path, suffix):
    """Object-dtype labels: the file's string width comes from every class, not from the first block."""
    import dask.array as da
    import zarr

    rng = np.random.RandomState(0)
    X = np.r_[np.full((100, 2), -3.0), np.full((100, 2), 3.0)] + 0.1 * rng.randn(200, 2)
    y = np.array(["no"] * 100 + ["positive"] * 100, dtype=object)
    model = dsvm.load_model(dsvm.save_model(dsvm.NystroemSVC(n_components=20, random_state=0).fit(X, y), tmp_path / "m.npz"))
    out = tmp_path / f"p{suffix}"
    write_predictions(model, da.from_array(X, chunks=(100, 2)), out)  # first block: only "no"
    if suffix == ".npy":
        got = np.load(out)
    elif suffix == ".zarr":
        got = zarr.open_array(str(out), mode="r")[...]
    else:
        got = np.array(out.read_text().splitlines()[1:])
    np.testing.assert_array_equal(got.astype(str), y.astype(str))
