"""Labels a dataset stores: numbers as numbers, anything else as class names (codes + ``class_names``).

Oracle: the labels as given, compared as Python strings / numbers; datasets of the previous format
(``tests/data/datasets-v2``, written by the code before class names) still open and train.
"""

from __future__ import annotations

import shutil
import warnings
from pathlib import Path

import dask.array as da
import numpy as np
import pytest

import dsvm
from dsvm.exceptions import InputFileError, InvalidDatasetError
from dsvm.io import ingest, open_dataset, write_dataset

V2 = Path(__file__).resolve().parents[1] / "data" / "datasets-v2"


def _csv(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


def test_string_labels_are_class_names(tmp_path):
    """Iris as pandas writes it: header, string label last; the model's classes are the strings."""
    src = _csv(tmp_path / "iris.csv", "sepal,petal,species\n5.1,1.4,setosa\n7.0,4.7,versicolor\n6.3,6.0,virginica\n"
                                      "4.9,1.4,setosa\n6.4,4.5,versicolor\n5.8,5.1,virginica\n")
    ds = ingest(src, tmp_path / "d.zarr", label_column="species")
    assert ds.classes.tolist() == ["setosa", "versicolor", "virginica"]
    assert ds.y.compute().tolist() == ["setosa", "versicolor", "virginica"] * 2
    assert ds.attrs["class_names"] == ["setosa", "versicolor", "virginica"] and ds.attrs["classes"] == [0, 1, 2]
    assert ds.attrs["y_dtype"] == "int64" and ds.feature_names.tolist() == ["sepal", "petal"]
    assert ds.attrs["format_version"] == 3  # older dsvm versions refuse it rather than read codes as labels
    np.testing.assert_array_equal(ds.load()[0], np.float32([[5.1, 1.4], [7.0, 4.7], [6.3, 6.0], [4.9, 1.4],
                                                            [6.4, 4.5], [5.8, 5.1]]))
    model = dsvm.NystroemSVC(n_components=6, gamma=1.0, C=100.0, random_state=0).fit(ds)
    assert model.classes_.tolist() == ["setosa", "versicolor", "virginica"]
    assert set(model.predict(ds).compute().tolist()) <= {"setosa", "versicolor", "virginica"}
    assert model.score(ds) == 1.0


def test_numbers_among_class_names_are_written_shortest(tmp_path):
    """1, 1.0 and +1 are one class "1"; a text anywhere (here only in the last block) makes all labels texts."""
    rows = "".join(f"{lab},{k}\n" for k, lab in enumerate(["1", "1.0", "+1", "2.5", "-0", "other"] * 3))
    src = _csv(tmp_path / "m.csv", rows)
    ds = ingest(src, tmp_path / "d.zarr", block_bytes=16, header=False)  # many blocks: most of them numbers only
    assert ds.classes.tolist() == ["0", "1", "2.5", "other"]
    assert ds.y.compute().tolist() == ["1", "1", "1", "2.5", "0", "other"] * 3
    np.testing.assert_array_equal(ds.class_counts, [3, 9, 3, 3])


def test_numeric_labels_are_stored_as_before(tmp_path):
    ds = ingest(_csv(tmp_path / "n.csv", "1,0.5\n-1,1.5\n1,2\n"), tmp_path / "d.zarr")
    assert "class_names" not in ds.attrs and ds.y.dtype == np.float64 and ds.classes.tolist() == [-1.0, 1.0]
    assert ds.attrs["format_version"] == 2  # what older dsvm versions read


@pytest.mark.parametrize("labels", [np.array(["b", "a", "b", "c"]), np.array(["b", "a", "b", "c"], dtype=object)])
def test_arrays_and_dask_arrays_with_string_labels(tmp_path, labels):
    X = np.arange(8.0).reshape(4, 2)
    a = write_dataset(tmp_path / "a.zarr", X, labels)
    b = ingest((da.from_array(X, chunks=(2, 2)), da.from_array(labels, chunks=2)), tmp_path / "b.zarr")
    for ds in (a, b):
        assert ds.classes.tolist() == ["a", "b", "c"] and ds.y.compute().tolist() == ["b", "a", "b", "c"]
    np.save(tmp_path / "X.npy", X)
    np.save(tmp_path / "y.npy", labels.astype(str))
    assert ingest((tmp_path / "X.npy", tmp_path / "y.npy"), tmp_path / "c.zarr").y.compute().tolist() == [
        "b", "a", "b", "c"]


@pytest.mark.parametrize("text, message", [
    ("a,1\nNA,2\nb,3\n", "missing label 'NA'"),
    ("a,1\n,2\nb,3\n", "missing label ''"),
    ("a,1\nb,x\n", "cannot parse 'x' (field 2)"),
])
def test_missing_labels_and_text_features_are_refused(tmp_path, text, message):
    src = _csv(tmp_path / "bad.csv", text)
    with pytest.raises(InputFileError, match=r"^bad\.csv:2: .*" + message.replace("(", r"\(").replace(")", r"\)")):
        ingest(src, tmp_path / "d.zarr", header=False)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bad.csv"]
    with pytest.raises(ValueError, match="the label of row 1 is missing"):
        write_dataset(tmp_path / "e.zarr", np.ones((2, 1)), np.array(["a", None], dtype=object))


def test_a_header_read_as_data_is_not_a_class(tmp_path):
    """``y,1,2`` (numbers as column names) would be a data row whose label is the only text: refused."""
    src = _csv(tmp_path / "h.csv", "y,1,2\n1,0.5,2\n-1,1.5,3\n")
    with pytest.raises(InputFileError, match=r"h\.csv:1: the label 'y' of this line is the only label that is not"):
        ingest(src, tmp_path / "a.zarr")
    assert ingest(src, tmp_path / "b.zarr", header=True).classes.tolist() == [-1.0, 1.0]
    assert ingest(src, tmp_path / "c.zarr", header=False).classes.tolist() == ["-1", "1", "y"]


def test_too_many_distinct_texts_is_the_wrong_column(tmp_path, monkeypatch):
    import dsvm.io._labels as labels

    monkeypatch.setattr(labels, "MAX_CLASS_NAMES", 5)
    src = _csv(tmp_path / "ids.csv", "".join(f"id{k},{k}\n" for k in range(20)))
    with pytest.raises(InputFileError, match=r"ids\.csv: label column 0 holds labels that are not numbers and more "
                                             r"than 5 distinct values.*label_column"):
        ingest(src, tmp_path / "d.zarr", block_bytes=32)


def test_a_continuous_label_column_draws_a_warning(tmp_path):
    """The pandas iris CSV with a numeric target last, read with the default label column 0 (sepal length)."""
    rng = np.random.default_rng(0)
    lines = "".join(f"{x:.1f},{w:.1f},{t}\n" for x, w, t in zip(rng.uniform(4, 8, 60), rng.uniform(0, 3, 60),
                                                                rng.integers(0, 3, 60)))
    src = _csv(tmp_path / "iris.csv", "sepal_length,petal_width,target\n" + lines)
    with pytest.warns(UserWarning, match=r"iris\.csv: label column 0 holds \d+ distinct labels, \d+ of them not "
                                         r"integers .*look continuous.*label_column"):
        ingest(src, tmp_path / "a.zarr")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert ingest(src, tmp_path / "b.zarr", label_column="target").classes.tolist() == [0.0, 1.0, 2.0]


def test_hand_edited_class_names_are_refused(tmp_path):
    ds = write_dataset(tmp_path / "a.zarr", np.ones((3, 1)), np.array(["x", "y", "x"]))
    import zarr

    group = zarr.open_group(ds.path, mode="r+")
    group.attrs["class_names"] = ["y", "x"]
    with pytest.raises(InvalidDatasetError, match="class_names' must be sorted distinct strings"):
        open_dataset(ds.path)
    group.attrs["class_names"] = ["u", "x"]
    with pytest.raises(InvalidDatasetError, match="changed after it was written"):
        open_dataset(ds.path)
    group.attrs["format_version"] = 2
    with pytest.raises(InvalidDatasetError, match="'class_names' in a version-2 dataset"):
        open_dataset(ds.path)


@pytest.mark.parametrize("name", ["csv_header.zarr", "libsvm_sparse.zarr"])
def test_datasets_of_the_previous_format_still_open_and_train(tmp_path, name):
    shutil.copytree(V2 / name, tmp_path / name)
    ds = open_dataset(tmp_path / name)
    assert ds.attrs["format_version"] == 2 and ds.classes.tolist() == [-1, 1]
    expected = ingest(V2 / ("csv_header.csv" if name.startswith("csv") else "libsvm_sparse.libsvm"),
                      tmp_path / "new.zarr", label_column="label" if name.startswith("csv") else None)
    assert expected.attrs["format_version"] == 2
    X_old, y_old = ds.load()
    X_new, y_new = expected.load()
    np.testing.assert_array_equal(np.asarray(X_old.todense() if ds.sparse else X_old),
                                  np.asarray(X_new.todense() if expected.sparse else X_new))
    np.testing.assert_array_equal(y_old, y_new)
    if name.startswith("csv"):
        assert ds.feature_names.tolist() == ["alpha", "bravo"]
    model = dsvm.NystroemSVC(n_components=4, random_state=0).fit(ds)
    assert model.classes_.tolist() == [-1, 1]
    if name.startswith("csv"):
        assert model.feature_names_in_.tolist() == ["alpha", "bravo"]


# labels that cannot be held exactly, or that mark a missing value, are refused by every source --------
BIG = 2**53  # the largest integer up to which a float64 holds every integer exactly


@pytest.mark.parametrize("fmt, text", [
    ("csv", "label,a\n1,0.5\n{big},1.5\n{big1},2.5\n"),
    ("csv", "label,a\nsetosa,0.5\n{big},1.5\n{big1},2.5\n"),  # class names: the texts of numbers
    ("csv", 'label,a\n1,0.5\n{big},"1.5"\n{big1},2.5\n'),  # quoted: read field by field
    ("libsvm", "# labels\n1 1:0.5\n{big} 1:1.5\n{big1} 1:2.5\n"),
])
def test_integer_labels_beyond_2_53_are_refused_naming_the_line(tmp_path, fmt, text):
    """2**53 + 1 reads as the float 2**53: two classes would merge into one without a word."""
    src = _csv(tmp_path / f"merge.{fmt}", text.format(big=BIG, big1=BIG + 1))
    with pytest.raises(InputFileError, match=rf"^merge\.{fmt}:4: label '{BIG + 1}'.*beyond 2\*\*53"):
        ingest(src, tmp_path / "d.zarr", format=fmt)
    assert not (tmp_path / "d.zarr").exists()
    # 2**53 itself is held exactly, and reads back as the integer it is; float notation stays a float
    ok = _csv(tmp_path / f"ok.{fmt}", text.format(big=BIG, big1="1e300").replace("setosa", "1"))
    ds = ingest(ok, tmp_path / "e.zarr", format=fmt)
    assert ds.classes.tolist() == [1.0, float(BIG), 1e300]
    from dsvm.io._label_text import number_text

    assert number_text(float(BIG)) == str(BIG)


def _uint_labels(n: int) -> np.ndarray:
    return np.where(np.arange(n) % 2 == 0, np.uint64(2**64 - 1), np.uint64(10**19))


def test_uint64_labels_beyond_int64_are_refused_not_wrapped(tmp_path):
    """dsvm stores integer labels as int64; 2**64 - 1 became -1 and 10**19 a negative number."""
    X = np.arange(8.0).reshape(4, 2)
    y = _uint_labels(4)
    np.save(tmp_path / "X.npy", X)
    np.save(tmp_path / "yu.npy", y)
    message = r"the label of row 0 \(18446744073709551615\) is beyond 2\*\*63 - 1"
    with pytest.raises(InputFileError, match=r"yu\.npy: " + message):
        ingest(tmp_path / "X.npy", tmp_path / "a.zarr", y=tmp_path / "yu.npy")
    with pytest.raises(ValueError, match=message):
        write_dataset(tmp_path / "b.zarr", X, y)
    with pytest.raises(ValueError, match=message):
        ingest((da.from_array(X, chunks=(2, 2)), da.from_array(y, chunks=2)), tmp_path / "c.zarr")
    import pandas as pd

    frame = pd.DataFrame({"a": X[:, 0], "b": X[:, 1], "label": y})
    with pytest.raises(ValueError, match=message):
        ingest(frame, tmp_path / "d.zarr", label_column="label")
    pytest.importorskip("pyarrow")
    frame.to_parquet(tmp_path / "u.parquet")
    with pytest.raises(ValueError, match=r"u\.parquet.*" + message):
        ingest(tmp_path / "u.parquet", tmp_path / "e.zarr", label_column="label")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["X.npy", "u.parquet", "yu.npy"]
    # uint64 labels within int64 are kept as they are
    small = np.array([2**63 - 1, 3, 2**63 - 1, 3], dtype=np.uint64)
    assert write_dataset(tmp_path / "f.zarr", X, small).classes.tolist() == [3, 2**63 - 1]


@pytest.mark.parametrize("marker", ["nan", "NA", "null", " N/A "])
def test_missing_value_markers_are_missing_labels_in_every_source(tmp_path, marker):
    """The CSV reader's rule ('nan' is a missing label, not a class) holds for .npy, arrays and tables."""
    X = np.arange(8.0).reshape(4, 2)
    y = np.array(["a", "b", marker, "a"])
    np.save(tmp_path / "X.npy", X)
    np.save(tmp_path / "ys.npy", y)
    message = rf"the label of row 2 is missing \({marker!r}\)"
    with pytest.raises(InputFileError, match=r"ys\.npy: " + message):
        ingest(tmp_path / "X.npy", tmp_path / "a.zarr", y=tmp_path / "ys.npy")
    for labels in (y, y.astype(object)):
        with pytest.raises(ValueError, match=message):
            write_dataset(tmp_path / "b.zarr", X, labels)
    import pandas as pd

    frame = pd.DataFrame({"a": X[:, 0], "b": X[:, 1], "label": y})
    with pytest.raises(ValueError, match=message):
        ingest(frame, tmp_path / "d.zarr", label_column="label")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["X.npy", "ys.npy"]


def test_labels_with_control_characters_are_refused_in_every_source(tmp_path):
    X = np.arange(4.0).reshape(2, 2)
    with pytest.raises(ValueError, match=r"the label of row 1 \('b\\nc'\) holds control characters"):
        write_dataset(tmp_path / "b.zarr", X, np.array(["a", "b\nc"]))


def test_large_integers_among_class_names_stay_distinct(tmp_path):
    """Python ints among text labels are written exactly (2**53 + 1 read as a float was 2**53)."""
    X = np.arange(8.0).reshape(4, 2)
    labels = np.array(["a", BIG, BIG + 1, 2**64 - 1], dtype=object)
    ds = write_dataset(tmp_path / "a.zarr", X, labels)
    assert ds.classes.tolist() == sorted(["a", str(BIG), str(BIG + 1), str(2**64 - 1)])
