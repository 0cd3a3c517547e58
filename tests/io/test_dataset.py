"""``open_dataset``: lazy row-chunked arrays, validation, corrupted stores."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp
import zarr

from dsvm.exceptions import InvalidDatasetError
from dsvm.io import Dataset, open_dataset, write_dataset
from dsvm.io._dataset import ChunkReader


@pytest.fixture
def problem():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(1000, 8))
    X[np.abs(X) < 1.0] = 0  # density about 0.32
    y = np.where(rng.random(1000) < 0.3, 1.0, -1.0)
    return X, y


@pytest.fixture
def dense_ds(tmp_path, problem):
    X, y = problem
    return write_dataset(tmp_path / "dense.zarr", X, y, dense=True, chunk_rows=300)


@pytest.fixture
def sparse_ds(tmp_path, problem):
    X, y = problem
    return write_dataset(tmp_path / "sparse.zarr", sp.csr_matrix(X), y, dense=False, chunk_rows=300)


def test_dense_dataset(dense_ds, problem):
    X, y = problem
    ds = open_dataset(dense_ds.path)
    assert isinstance(ds, Dataset)
    assert (ds.n_samples, ds.n_features, ds.sparse, ds.chunk_rows, ds.n_chunks) == (1000, 8, False, 300, 4)
    assert ds.X.chunks == ((300, 300, 300, 100), (8,))
    assert ds.y.chunks == ((300, 300, 300, 100),)
    assert ds.X.dtype == np.float32 and ds.y.dtype == np.float64
    block = ds.X.blocks[2].compute()
    assert isinstance(block, np.ndarray) and block.dtype == np.float32
    np.testing.assert_array_equal(block, X[600:900].astype(np.float32))
    np.testing.assert_array_equal(ds.y.compute(), y)
    np.testing.assert_array_equal(ds.classes, [-1.0, 1.0])
    np.testing.assert_array_equal(ds.class_counts, [np.sum(y == -1), np.sum(y == 1)])
    np.testing.assert_array_equal(ds.X[250:650, 2:5].compute(), X[250:650, 2:5].astype(np.float32))
    assert ds.attrs["format"] == "dsvm-dataset" and ds.attrs["format_version"] == 2


def test_sparse_dataset(sparse_ds, problem):
    X, y = problem
    ds = open_dataset(sparse_ds.path)
    assert ds.sparse and ds.nnz == np.count_nonzero(X)
    assert ds.X.chunks == ((300, 300, 300, 100), (8,))
    assert isinstance(ds.X._meta, sp.csr_matrix) and ds.X._meta.dtype == np.float32
    blocks = [ds.X.blocks[i].compute() for i in range(ds.n_chunks)]
    assert all(isinstance(b, sp.csr_matrix) and b.dtype == np.float32 for b in blocks)
    assert [b.shape[0] for b in blocks] == [300, 300, 300, 100]
    np.testing.assert_array_equal(sp.vstack(blocks).toarray(), X.astype(np.float32))
    Xr, yr = ds.load()
    assert isinstance(Xr, sp.csr_matrix)
    np.testing.assert_array_equal(Xr.toarray(), X.astype(np.float32))
    np.testing.assert_array_equal(yr, y)
    # the zarr layout
    group = zarr.open_group(ds.path, mode="r")
    assert group["X/indptr"].shape == (4, 301) and group["X/data"].shape[0] == 4
    assert group["X/indices"].dtype == np.int32


def test_opening_reads_no_data(dense_ds, sparse_ds, monkeypatch):
    def fail(self, i):
        raise AssertionError("data read while opening")

    monkeypatch.setattr(ChunkReader, "read_chunk", fail)
    for ds in (dense_ds, sparse_ds):
        opened = open_dataset(ds.path)
        assert len(opened.X.__dask_graph__()) == opened.n_chunks + 1  # one task per chunk + the reader
        with pytest.raises(AssertionError, match="data read"):
            opened.X.blocks[0].compute()


def test_reader_pickles_without_zarr_handles(sparse_ds):
    import pickle

    import zarr

    nnz = np.asarray(zarr.open_array(str(sparse_ds.path), path="X/chunk_nnz", mode="r")[:], dtype=np.int64)
    reader = ChunkReader(sparse_ds.path, "X", sparse_ds.attrs, nnz)
    size = len(pickle.dumps(reader))
    first = reader.read_chunk(0)  # opens the zarr arrays in this process
    assert len(pickle.dumps(reader)) == size  # which are not shipped with the reader
    clone = pickle.loads(pickle.dumps(reader))
    np.testing.assert_array_equal(clone.read_chunk(0).toarray(), first.toarray())


def test_integer_labels_stay_integers(tmp_path):
    ds = write_dataset(tmp_path / "d.zarr", np.eye(4), np.array([0, 1, 2, 1]))
    assert ds.y.dtype == np.int64 and ds.classes.dtype == np.int64
    np.testing.assert_array_equal(ds.class_counts, [1, 2, 1])


# Validation when opening ------------------------------------------------------------------
def test_open_errors(tmp_path, dense_ds):
    with pytest.raises(FileNotFoundError, match="no dataset"):
        open_dataset(tmp_path / "missing.zarr")
    (tmp_path / "plain").mkdir()
    with pytest.raises(InvalidDatasetError, match="not a dsvm dataset"):
        open_dataset(tmp_path / "plain")
    zarr.open_group(str(tmp_path / "other.zarr"), mode="w").attrs["x"] = 1
    with pytest.raises(InvalidDatasetError, match="zarr group but not a dsvm dataset"):
        open_dataset(tmp_path / "other.zarr")


def _edit_attrs(path, **changes):
    meta = Path(path) / "zarr.json"
    doc = json.loads(meta.read_text())
    doc["attributes"].update(changes)
    meta.write_text(json.dumps(doc))


def test_open_detects_damaged_layout(tmp_path, dense_ds, sparse_ds):
    copy = Path(shutil.copytree(dense_ds.path, tmp_path / "a.zarr"))
    shutil.rmtree(copy / "y")
    with pytest.raises(InvalidDatasetError, match="'y' is missing"):
        open_dataset(copy)

    copy = Path(shutil.copytree(dense_ds.path, tmp_path / "b.zarr"))
    _edit_attrs(copy, n_samples=999)
    with pytest.raises(InvalidDatasetError, match="n_chunks=4 does not match|has shape|class counts add up to 1000"):
        open_dataset(copy)

    copy = Path(shutil.copytree(dense_ds.path, tmp_path / "c.zarr"))
    _edit_attrs(copy, n_features=9)
    with pytest.raises(InvalidDatasetError, match=r"array 'X' has shape \(1000, 8\), expected \(1000, 9\)"):
        open_dataset(copy)

    copy = Path(shutil.copytree(dense_ds.path, tmp_path / "d.zarr"))
    _edit_attrs(copy, format_version=99)
    with pytest.raises(InvalidDatasetError, match="upgrade dsvm"):
        open_dataset(copy)

    copy = Path(shutil.copytree(sparse_ds.path, tmp_path / "e.zarr"))
    shutil.rmtree(copy / "X" / "indices")
    with pytest.raises(InvalidDatasetError, match="'indices' is missing"):
        open_dataset(copy)

    copy = Path(shutil.copytree(sparse_ds.path, tmp_path / "f.zarr"))
    _edit_attrs(copy, nnz=5)
    with pytest.raises(InvalidDatasetError, match="does not add up"):
        open_dataset(copy)


# Damaged chunks are found when read --------------------------------------------------------
def _chunk_file(root, array, *index):
    return Path(root, *array.split("/"), "c", *map(str, index))


@pytest.mark.parametrize("damage", ["truncate", "flip", "delete"])
def test_damaged_dense_chunk(tmp_path, dense_ds, damage):
    root = Path(shutil.copytree(dense_ds.path, tmp_path / "copy.zarr"))
    target = _chunk_file(root, "X", 2, 0)
    raw = target.read_bytes()
    if damage == "truncate":
        target.write_bytes(raw[: len(raw) // 2])
    elif damage == "flip":
        target.write_bytes(raw[:20] + bytes([raw[20] ^ 0xFF]) + raw[21:])
    else:
        target.unlink()
    ds = open_dataset(root)
    np.testing.assert_array_equal(ds.X.blocks[1].compute(), dense_ds.X.blocks[1].compute())
    with pytest.raises(InvalidDatasetError, match=r"chunk 2 of X \(rows 600-899\)"):
        ds.X.compute()


@pytest.mark.parametrize("array", ["X/data", "X/indices", "X/indptr"])
def test_damaged_sparse_chunk(tmp_path, sparse_ds, array):
    root = Path(shutil.copytree(sparse_ds.path, tmp_path / "copy.zarr"))
    target = _chunk_file(root, array, 3, 0)
    target.write_bytes(target.read_bytes()[:-7])
    ds = open_dataset(root)
    ds.X.blocks[:3].compute()
    with pytest.raises(InvalidDatasetError, match=r"chunk 3 of X \(rows 900-999\)"):
        ds.X.blocks[3].compute()
    target.unlink()
    with pytest.raises(InvalidDatasetError, match=r"chunk 3 of X \(rows 900-999\) is corrupted"):
        ds.X.blocks[3].compute()


def test_damaged_label_chunk(tmp_path, dense_ds):
    root = Path(shutil.copytree(dense_ds.path, tmp_path / "copy.zarr"))
    _chunk_file(root, "y", 0).unlink()
    with pytest.raises(InvalidDatasetError, match=r"chunk 0 of y \(rows 0-299\) is corrupted: missing labels"):
        open_dataset(root).y.compute()


# A chunk must hold what was written at its position ------------------------------------------
@pytest.mark.parametrize("which, array", [("dense", "X"), ("dense", "y"), ("sparse", "X/indices"),
                                          ("sparse", "X/data"), ("sparse", "X/indptr")])
def test_swapped_chunk_files_are_detected(tmp_path, dense_ds, sparse_ds, which, array):
    source = dense_ds if which == "dense" else sparse_ds
    root = Path(shutil.copytree(source.path, tmp_path / "copy.zarr"))
    index = (0,) if array == "y" else (0, 0)
    first, second = _chunk_file(root, array, *index), _chunk_file(root, array, 1, *index[1:])
    a, b = first.read_bytes(), second.read_bytes()
    first.write_bytes(b)
    second.write_bytes(a)
    ds = open_dataset(root)
    np.testing.assert_array_equal(ds.y.blocks[2].compute(), source.y.blocks[2].compute())
    name = "y" if array == "y" else "X"
    # swapped row pointers may already disagree with the chunk's entry count
    what = "(does not hold what was written|is corrupted: invalid row pointers)" if array == "X/indptr" else \
        "does not hold what was written"
    with pytest.raises(InvalidDatasetError, match=rf"chunk 0 of {name} \(rows 0-299\) {what}"):
        getattr(ds, name).blocks[0].compute()


def test_version1_datasets_are_still_read(tmp_path, sparse_ds, problem):
    X, y = problem
    root = Path(shutil.copytree(sparse_ds.path, tmp_path / "v1.zarr"))
    doc = json.loads((root / "zarr.json").read_text())
    for key in ("checksums", "seal"):
        del doc["attributes"][key]
    doc["attributes"]["format_version"] = 1
    (root / "zarr.json").write_text(json.dumps(doc))
    Xr, yr = open_dataset(root).load()
    np.testing.assert_array_equal(Xr.toarray(), X.astype(np.float32))
    np.testing.assert_array_equal(yr, y)


def test_edited_classes_are_refused(tmp_path, dense_ds):
    import dsvm

    root = Path(shutil.copytree(dense_ds.path, tmp_path / "copy.zarr"))
    _edit_attrs(root, classes=[-1, 1, 2])
    with pytest.raises(InvalidDatasetError, match="'classes' lists 3 labels but 'class_counts' has 2"):
        dsvm.NystroemSVC(n_components=20).fit(open_dataset(root))
    counts = dense_ds.attrs["class_counts"]
    _edit_attrs(root, classes=[-1, 1, 2], class_counts=[counts[0] - 1, counts[1], 1])
    with pytest.raises(InvalidDatasetError, match="attributes were changed after it was written"):
        open_dataset(root)


def test_raised_sparse_width_is_refused(tmp_path):
    rng = np.random.default_rng(1)
    X = sp.random(200, 50, density=0.05, random_state=2, format="csr")
    ds = write_dataset(tmp_path / "s.zarr", X, rng.integers(0, 2, 200), dense=False)
    _edit_attrs(ds.path, n_features=60)
    with pytest.raises(InvalidDatasetError, match="attributes were changed after it was written"):
        open_dataset(ds.path)


def test_dataset_replaced_during_a_fit_is_detected(tmp_path, monkeypatch):
    """``ingest(..., overwrite=True)`` onto the dataset a fit reads, at Newton iteration 2."""
    from helpers import make_circles_problem

    import dsvm
    from dsvm.problems import SquaredHingeOperator

    X, y = make_circles_problem(n=2000, seed=1)
    X2, y2 = make_circles_problem(n=2000, seed=2)
    path = tmp_path / "d.zarr"
    ds = write_dataset(path, X, y, chunk_rows=500)
    passes = []
    evaluate = SquaredHingeOperator.evaluate

    def replace_at_second_pass(self, *args, **kwargs):
        passes.append(1)
        if len(passes) == 2:
            write_dataset(path, X2, -y2, chunk_rows=500, overwrite=True)
        return evaluate(self, *args, **kwargs)

    monkeypatch.setattr(SquaredHingeOperator, "evaluate", replace_at_second_pass)
    clf = dsvm.NystroemSVC(n_components=30, feature_store="recompute", random_state=0,
                           solver_options={"warm_start": "none"})
    with pytest.raises(InvalidDatasetError, match=rf"{path}: chunk \d of y .* does not hold what was written"):
        clf.fit(ds)
    assert len(passes) == 2


# Workers of a distributed cluster read the chunks themselves ---------------------------------
def test_ingest_and_read_on_local_cluster(tmp_path, local_cluster_client, problem):
    X, y = problem
    text = "".join(
        f"{int(lab)} " + " ".join(f"{j + 1}:{v:.17g}" for j, v in enumerate(row) if v) + "\n"
        for lab, row in zip(y, X)
    )
    src = tmp_path / "train.svm"
    src.write_text(text)
    from dsvm.io import ingest

    with local_cluster_client.as_current():
        ds = ingest(src, tmp_path / "d.zarr", block_bytes=20_000, chunk_rows=256)
        total = ds.X.sum(axis=0).compute()
        labels = ds.y.compute()
    np.testing.assert_allclose(np.asarray(total).ravel(), X.sum(axis=0), rtol=1e-4, atol=1e-3)
    np.testing.assert_array_equal(labels, y)


@pytest.mark.parametrize("node", ["", "y", "X", "X/indptr"])
def test_a_metadata_fifo_is_refused_at_once(sparse_ds, node):
    """zarr reads every node's zarr.json whole: a FIFO there blocked open_dataset for ever."""
    import os

    from helpers import call_near_fifos

    meta = Path(sparse_ds.path, node, "zarr.json")
    meta.unlink()
    os.mkfifo(meta)
    exc = call_near_fifos(lambda: open_dataset(sparse_ds.path), meta)
    assert isinstance(exc, InvalidDatasetError), exc
    assert str(exc) == (f"{meta}: it is a FIFO (named pipe), not a regular file; a dataset's metadata file must be "
                        "a regular file")


def test_metadata_is_read_with_a_bound(dense_ds):
    import os

    from dsvm.io._dataset_target import MAX_ZARR_JSON

    meta = Path(dense_ds.path, "y", "zarr.json")
    os.truncate(meta, MAX_ZARR_JSON + 1)  # sparse: no disk space used
    with pytest.raises(InvalidDatasetError, match=rf"y/zarr\.json: {MAX_ZARR_JSON + 1} bytes; a dataset's metadata"):
        open_dataset(dense_ds.path)


@pytest.mark.parametrize("kind, chunk", [("dense", "X/c/1/0"), ("dense", "y/c/1"), ("sparse", "X/indices/c/1/0"),
                                         ("dense", "/dev/zero")])
def test_a_chunk_file_that_is_not_a_regular_file_is_refused_when_read(dense_ds, sparse_ds, kind, chunk):
    """A crafted dataset: a FIFO in place of a chunk file blocked the reading worker for ever (a link to a
    device such as /dev/zero never ends)."""
    import os

    from helpers import call_near_fifos

    ds = dense_ds if kind == "dense" else sparse_ds
    target = Path(ds.path, "X/c/1/0" if chunk == "/dev/zero" else chunk)
    target.unlink()
    if chunk == "/dev/zero":
        target.symlink_to("/dev/zero")
    else:
        os.mkfifo(target)
    opened = open_dataset(ds.path)  # nothing is read yet
    exc = call_near_fifos(lambda: opened.X[300:600].compute(scheduler="sync") if chunk != "y/c/1"
                          else opened.y[300:600].compute(scheduler="sync"), target)
    assert isinstance(exc, InvalidDatasetError), exc
    assert f"{target}: it is a " in str(exc) and "a chunk file of a dataset must be a regular file" in str(exc)
