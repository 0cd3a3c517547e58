"""``open_dataset``: lazy row-chunked arrays, validation, corrupted stores."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp
import zarr

from dsvm.io import Dataset, InvalidDatasetError, open_dataset, write_dataset
from dsvm.io.dataset import ChunkReader


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
    assert ds.attrs["format"] == "dsvm-dataset" and ds.attrs["format_version"] == 1


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

    reader = ChunkReader(sparse_ds.path, "X", sparse_ds.attrs, np.asarray([1, 2, 3, 4]))
    reader._array("X/data")
    clone = pickle.loads(pickle.dumps(reader))
    assert clone._arrays == {} and clone.path == sparse_ds.path


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
    with pytest.raises(InvalidDatasetError, match="n_chunks=4 does not match|has shape"):
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
