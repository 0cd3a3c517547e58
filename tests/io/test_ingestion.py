"""``dsvm.io.ingest``: benchmark files, formats, compression, atomicity."""

from __future__ import annotations

import bz2
import errno
import gzip
import lzma
import os
import re
import shutil

import dask.array as da
import numpy as np
import pytest
import scipy.sparse as sp
from helpers import data_file

import dsvm.io
from dsvm.exceptions import DiskFullError, InputFileError
from dsvm.io import ingest, open_dataset, write_dataset

# rows, documented features, class counts (SOURCES.md); max index where smaller
BENCHMARK_SETS = {
    "a9a.train": (32561, 123, {-1: 24720, 1: 7841}),
    "a9a.test": (16281, 123, {-1: 12435, 1: 3846}),
    "w8a.train": (49749, 300, {-1: 48270, 1: 1479}),
    "w8a.test": (14951, 300, {-1: 14497, 1: 454}),
    "ijcnn1.train": (49990, 22, {-1: 45137, 1: 4853}),
    "ijcnn1.test": (91701, 22, {-1: 82989, 1: 8712}),
    "mushrooms.all": (8124, 112, {1: 3916, 2: 4208}),
    "splice.train": (1000, 60, {-1: 483, 1: 517}),
    "splice.test": (2175, 60, {-1: 1044, 1: 1131}),
}


def _dense(X):
    return X.toarray() if sp.issparse(X) else np.asarray(X)


@pytest.mark.data
@pytest.mark.parametrize("name", sorted(BENCHMARK_SETS))
def test_benchmark_set_round_trip(name, tmp_path):
    from sklearn.datasets import load_svmlight_file

    rows, features, counts = BENCHMARK_SETS[name]
    path = data_file(name)
    ds = ingest(path, tmp_path / "d.zarr", format="libsvm", n_features=features, chunk_rows=10000)
    assert (ds.n_samples, ds.n_features) == (rows, features)
    assert dict(zip(ds.classes.tolist(), ds.class_counts.tolist())) == counts
    assert ds.attrs["source"] == f"{name}.xz" and ds.attrs["source_format"] == "libsvm"
    assert ds.attrs["zero_based"] is False
    assert ds.X.chunks[0] == ds.y.chunks[0] and ds.X.numblocks[1] == 1
    assert all(c == 10000 for c in ds.X.chunks[0][:-1])

    with lzma.open(path) as f:
        X_ref, y_ref = load_svmlight_file(f, n_features=features)
    X, y = ds.load()
    np.testing.assert_array_equal(y, y_ref)
    assert X.dtype == np.float32
    if ds.sparse:
        assert abs(X - X_ref.astype(np.float32)).max() == 0
    else:
        np.testing.assert_array_equal(X, X_ref.toarray().astype(np.float32))


@pytest.mark.data
def test_storage_rule_and_inferred_features(tmp_path):
    a9a = ingest(data_file("a9a.test"), tmp_path / "a.zarr")  # feature 123 never occurs here
    assert a9a.n_features == 122 and a9a.sparse  # density 0.11 < 0.25
    ijcnn = ingest(data_file("ijcnn1.train"), tmp_path / "i.zarr")
    assert not ijcnn.sparse and ijcnn.X.dtype == np.float32  # density 0.59
    assert isinstance(ijcnn.X.blocks[0].compute(), np.ndarray)
    sparse = ingest(data_file("splice.train"), tmp_path / "s.zarr", dense=False)
    assert sparse.sparse and isinstance(sparse.X.blocks[0].compute(), sp.csr_matrix)


@pytest.mark.data
def test_index_beyond_n_features_names_line(tmp_path):
    with pytest.raises(ValueError, match=r"^a9a\.train\.xz:\d+: feature index 123 is out of range for n_features=100"):
        ingest(data_file("a9a.train"), tmp_path / "a.zarr", n_features=100)
    assert not (tmp_path / "a.zarr").exists()


# Small synthetic files -------------------------------------------------------------------
TEXT = b"+1 1:0.5 3:2\n-1 2:1.5\n\n-1\n+1 3:-1 4:0.25\n"
DENSE = np.array([[0.5, 0, 2, 0], [0, 1.5, 0, 0], [0, 0, 0, 0], [0, 0, -1, 0.25]], dtype=np.float32)


@pytest.mark.parametrize("opener", [open, gzip.open, bz2.open, lzma.open])
def test_compressed_files_by_content(tmp_path, opener):
    src = tmp_path / "train"  # no extension: format and compression found from the content
    with opener(src, "wb") as f:
        f.write(TEXT)
    ds = ingest(src, tmp_path / "d.zarr")
    X, y = ds.load()
    np.testing.assert_array_equal(_dense(X), DENSE)
    np.testing.assert_array_equal(y, [1, -1, -1, 1])


def test_zero_based(tmp_path):
    src = tmp_path / "z.svm"
    src.write_bytes(b"1 0:1 2:2\n-1 1:3\n")
    auto = ingest(src, tmp_path / "a.zarr")
    assert auto.attrs["zero_based"] is True and auto.n_features == 3
    np.testing.assert_array_equal(_dense(auto.load()[0]), [[1, 0, 2], [0, 3, 0]])
    with pytest.raises(ValueError, match=r"z\.svm:1: feature index 0 with one-based"):
        ingest(src, tmp_path / "b.zarr", zero_based=False)
    one = tmp_path / "one.svm"
    one.write_bytes(b"1 1:1 2:2\n-1 3:3\n")
    forced = ingest(one, tmp_path / "c.zarr", zero_based=True)
    np.testing.assert_array_equal(_dense(forced.load()[0]), [[0, 1, 2, 0], [0, 0, 0, 3]])
    with pytest.raises(ValueError, match="zero_based"):
        ingest(one, tmp_path / "d.zarr", zero_based="yes")


def test_float64_and_chunking(tmp_path):
    src = tmp_path / "t.libsvm"
    src.write_bytes(TEXT)
    ds = ingest(src, tmp_path / "d.zarr", dtype="float64", chunk_rows=3, dense=True)
    assert ds.X.dtype == np.float64 and ds.X.chunks == ((3, 1), (4,)) and ds.y.chunks == ((3, 1),)
    np.testing.assert_array_equal(ds.load()[0], DENSE)


def test_progress_bar(tmp_path, capsys):
    src = tmp_path / "t.libsvm"
    src.write_bytes(TEXT * 200)
    ingest(src, tmp_path / "d.zarr", progress=True, block_bytes=500)
    err = capsys.readouterr().err
    assert "parse t.libsvm" in err and "100%" in err and "write" in err


# Atomicity -----------------------------------------------------------------------------------
def test_failed_ingest_leaves_nothing(tmp_path):
    src = tmp_path / "bad.svm"
    lines = [b"1 1:1 2:1"] * 500 + [b"1 2:x"] + [b"-1 3:1"] * 500
    src.write_bytes(b"\n".join(lines) + b"\n")
    with pytest.raises(ValueError, match=r"^bad\.svm:501: cannot parse '2:x' in line '1 2:x'$"):
        ingest(src, tmp_path / "out.zarr", block_bytes=1000)
    assert sorted(os.listdir(tmp_path)) == ["bad.svm"]


def test_interrupted_ingest_cleans_up(tmp_path, monkeypatch):
    import dsvm.io._ingestion as ingest_module

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    src = tmp_path / "t.svm"
    src.write_bytes(TEXT)
    monkeypatch.setattr(ingest_module, "write_source", interrupted)
    with pytest.raises(KeyboardInterrupt):
        ingest(src, tmp_path / "out.zarr")
    assert sorted(os.listdir(tmp_path)) == ["t.svm"]


def test_existing_target_needs_overwrite(tmp_path):
    src = tmp_path / "t.svm"
    src.write_bytes(TEXT)
    target = tmp_path / "out.zarr"
    first = ingest(src, target)
    with pytest.raises(FileExistsError, match="overwrite=True"):
        ingest(src, target)
    with pytest.raises(FileExistsError):
        write_dataset(target, np.ones((2, 2)), np.array([0, 1]))
    assert open_dataset(target).attrs["uuid"] == first.attrs["uuid"]
    bad = tmp_path / "bad.svm"
    bad.write_bytes(b"1 1:1\n1 1:y\n")
    with pytest.raises(ValueError, match="bad.svm:2"):
        ingest(bad, target, overwrite=True)  # a failed overwrite keeps the old dataset
    assert open_dataset(target).attrs["uuid"] == first.attrs["uuid"]
    second = write_dataset(target, np.ones((2, 2)), np.array([0, 1]), overwrite=True)
    assert second.n_samples == 2 and open_dataset(target).attrs["uuid"] == second.attrs["uuid"]
    assert sorted(os.listdir(tmp_path)) == ["bad.svm", "out.zarr", "t.svm"]


# Other formats ---------------------------------------------------------------------------------
def test_csv_with_header_and_named_label(tmp_path):
    src = tmp_path / "data.csv"
    src.write_bytes(b"f1,label,f2\r\n1.5,1,2\r\n\r\n0,0,-3\r\n2,1,0.25")
    ds = ingest(src, tmp_path / "d.zarr", label_column="label")
    assert not ds.sparse and ds.attrs["feature_names"] == ["f1", "f2"]
    X, y = ds.load()
    np.testing.assert_array_equal(X, [[1.5, 2], [0, -3], [2, 0.25]])
    np.testing.assert_array_equal(y, [1, 0, 1])


def test_csv_without_header_blocks_and_gzip(tmp_path):
    rng = np.random.default_rng(1)
    data = np.round(rng.normal(size=(400, 5)), 3)
    data[:, -1] = rng.integers(0, 3, size=400)
    text = "\n".join(",".join(f"{v:g}" for v in row) for row in data).encode() + b"\n"
    plain = tmp_path / "plain.csv"
    plain.write_bytes(text)
    with gzip.open(tmp_path / "z.csv.gz", "wb") as f:
        f.write(text)
    for src in (plain, tmp_path / "z.csv.gz"):
        ds = ingest(src, tmp_path / f"{src.name}.zarr", label_column=-1, block_bytes=700, chunk_rows=64)
        X, y = ds.load()
        np.testing.assert_array_equal(X, data[:, :-1].astype(np.float32))
        np.testing.assert_array_equal(y, data[:, -1])
        assert ds.X.chunks[0][0] == 64


def test_csv_errors(tmp_path):
    src = tmp_path / "bad.csv"
    src.write_bytes(b"a,b,y\n1,2,0\n1,x,1\n")
    with pytest.raises(ValueError, match=r"^bad\.csv:3: cannot parse 'x' \(field 2\)"):
        ingest(src, tmp_path / "d.zarr", label_column="y")
    src.write_bytes(b"1,2,0\n1,2\n")
    with pytest.raises(ValueError, match=r"bad\.csv:2: expected 3 fields, found 2"):
        ingest(src, tmp_path / "d.zarr")
    for bad in (b"nan", b"inf", b"-Infinity"):
        src.write_bytes(b"1,2,0\n3,4,1\n# note\n5," + bad + b",0\n")
        with pytest.raises(ValueError, match=r"^bad\.csv:4: '" + bad.decode() + r"' \(field 2\) is not a finite number"):
            ingest(src, tmp_path / "d.zarr")
    assert sorted(os.listdir(tmp_path)) == ["bad.csv"]


# The first CSV row is data unless it cannot be -----------------------------------------------
CSV_ROWS = b"-1,1.5,0.1\n1,2.5,0.3\n-1,0.5,0.2\n"


@pytest.mark.parametrize("first, expected", [
    (b"\xef\xbb\xbf1,0.5,2.0", [1.0, 0.5, 2.0]),  # UTF-8 byte order mark
    (b'"1",0.5,2.0', [1.0, 0.5, 2.0]),  # a quoted number
    (b'"1","0.5","2e0"', [1.0, 0.5, 2.0]),
    (b"1,,2.0", "an empty field (field 2)"),
    (b"1,NA,2.0", "cannot parse 'NA' (field 2)"),
    (b"0x10,0.5,2.0", "the label '0x10' of this line is the only label that is not a number"),
    (b"1,0.5,nan", "'nan' (field 3) is not a finite number"),
    (b"label,NA,2", "cannot parse 'NA' (field 2)"),
])
@pytest.mark.parametrize("compress", [False, True])
def test_csv_first_row_is_data_unless_it_cannot_be(tmp_path, first, expected, compress):
    text = first + b"\n" + CSV_ROWS
    src = tmp_path / ("b.csv.gz" if compress else "b.csv")
    src.write_bytes(gzip.compress(text) if compress else text)
    if isinstance(expected, str):  # not data and not a header: an error naming the file and line 1
        with pytest.raises(InputFileError, match=rf"^{src.name}:1: {re.escape(expected)}"):
            ingest(src, tmp_path / "d.zarr")
        assert sorted(os.listdir(tmp_path)) == [src.name]
        return
    ds = ingest(src, tmp_path / "d.zarr")
    X, y = ds.load()
    assert ds.n_samples == 4 and "feature_names" not in ds.attrs
    np.testing.assert_array_equal(y, [expected[0], -1, 1, -1])
    np.testing.assert_array_equal(X[0], np.float32(expected[1:]))


def test_csv_header_only_when_every_field_is_a_name(tmp_path):
    src = tmp_path / "h.csv"
    src.write_bytes(b'\xef\xbb\xbf"label",f1,"f 2"\n' + CSV_ROWS)
    ds = ingest(src, tmp_path / "a.zarr", label_column="label")
    assert ds.n_samples == 3 and ds.attrs["feature_names"] == ["f1", "f 2"]
    src.write_bytes(b"y,1,2\n" + CSV_ROWS)  # numbers as column names: say it is a header
    with pytest.raises(InputFileError, match=r"h\.csv:1: the label 'y' of this line .*pass header=True"):
        ingest(src, tmp_path / "b.zarr")
    assert ingest(src, tmp_path / "c.zarr", header=True).n_samples == 3


# Damaged compressed files, odd .npy files, a full disk: one clear error ---------------------------
@pytest.mark.parametrize("kind, module", [("gz", gzip), ("xz", lzma), ("bz2", bz2)])
@pytest.mark.parametrize("damage", ["truncated", "corrupted"])
def test_damaged_compressed_file_is_named(tmp_path, kind, module, damage):
    raw = module.compress(TEXT * 2000)
    if damage == "truncated":
        raw = raw[: len(raw) // 2]
    else:
        mid = len(raw) // 2
        raw = raw[:mid] + bytes([raw[mid] ^ 0x55]) + raw[mid + 1:]
    src = tmp_path / f"train.libsvm.{kind}"
    src.write_bytes(raw)
    with pytest.raises(InputFileError, match=rf"^{re.escape(str(src))}: the \w+ data is (truncated|corrupted)"):
        ingest(src, tmp_path / "d.zarr")
    assert sorted(os.listdir(tmp_path)) == [src.name]
    csv = tmp_path / f"t.csv.{kind}"
    csv.write_bytes(module.compress(b"y,a\n" + b"1,2\n" * 30000)[:-40])
    with pytest.raises(InputFileError, match=rf"{re.escape(str(csv))}: the \w+ data is"):
        ingest(csv, tmp_path / "c.zarr")


def test_npy_that_holds_no_real_numbers(tmp_path):
    X = np.ones((4, 2))
    np.save(tmp_path / "X.npy", X)
    np.save(tmp_path / "complex.npy", X + 1j)
    np.save(tmp_path / "names.npy", np.array(["cat", "dog", "cat", "dog"]))
    np.save(tmp_path / "objects.npy", np.array([{}, 1, 2, 3], dtype=object), allow_pickle=True)
    (tmp_path / "junk.npy").write_bytes(b"not an array")
    with pytest.raises(InputFileError, match=r"complex\.npy: X holds complex numbers; dsvm needs real numbers"):
        ingest(tmp_path / "complex.npy", tmp_path / "a.zarr", y=np.zeros(4))
    # strings are class names (see test_string_labels_are_class_names); pickled objects are refused
    assert ingest((tmp_path / "X.npy", tmp_path / "names.npy"), tmp_path / "names.zarr").classes.tolist() == [
        "cat", "dog"]
    shutil.rmtree(tmp_path / "names.zarr")
    for bad in ("objects.npy", "junk.npy"):
        with pytest.raises(InputFileError, match=rf"{bad}: not a readable \.npy array of numbers"):
            ingest((tmp_path / "X.npy", tmp_path / bad), tmp_path / "c.zarr")
    assert not any(name.endswith(".zarr") or "dsvm-tmp" in name for name in os.listdir(tmp_path))


@pytest.mark.parametrize("stage", ["staging", "store"])
def test_disk_full_during_ingest_names_the_target(tmp_path, monkeypatch, stage):
    import zarr.storage

    import dsvm.io._sources as sources

    src = tmp_path / "t.libsvm"
    src.write_bytes(TEXT * 500)
    full = OSError(errno.ENOSPC, "No space left on device")
    if stage == "staging":
        def save(*args, **kwargs):
            raise full
        monkeypatch.setattr(sources.np, "save", save)
    else:
        real_set = zarr.storage.LocalStore.set

        async def set_fills_up(self, key, value, *args, **kwargs):
            if key.startswith("X/") and "/c/" in key:
                raise full
            return await real_set(self, key, value, *args, **kwargs)
        monkeypatch.setattr(zarr.storage.LocalStore, "set", set_fills_up)
    target = tmp_path / "out" / "d.zarr"
    with pytest.raises(DiskFullError) as err:
        ingest(src, target, block_bytes=1000, dense=True)
    message = str(err.value)
    assert message.startswith(f"{target}: no space left on the device while writing the dataset (")
    assert "free" in message and "nothing was written" in message
    if stage == "store":
        assert "the dataset needs about" in message
    assert err.value.errno == errno.ENOSPC
    assert os.listdir(tmp_path / "out") == []


def test_npy_sources(tmp_path):
    rng = np.random.default_rng(0)
    X = rng.normal(size=(300, 4))
    X[X < 0.5] = 0
    y = rng.integers(0, 2, size=300)
    np.save(tmp_path / "X.npy", X)
    np.save(tmp_path / "y.npy", y)
    a = ingest((tmp_path / "X.npy", tmp_path / "y.npy"), tmp_path / "a.zarr", chunk_rows=100)
    assert a.attrs["source_format"] == "npy" and not a.sparse and a.y.dtype == np.int64
    np.testing.assert_array_equal(a.load()[0], X.astype(np.float32))
    b = ingest(tmp_path / "X.npy", tmp_path / "b.zarr", y=y, dense=False)
    Xb, yb = b.load()
    assert b.sparse and b.nnz == np.count_nonzero(X)
    np.testing.assert_array_equal(Xb.toarray(), X.astype(np.float32))
    np.testing.assert_array_equal(yb, y)
    with pytest.raises(ValueError, match="labels are missing"):
        ingest(tmp_path / "X.npy", tmp_path / "c.zarr")


def test_in_memory_inputs(tmp_path):
    rng = np.random.default_rng(0)
    X = rng.normal(size=(250, 6))
    X[np.abs(X) < 1.2] = 0
    y = rng.choice([3, 5, 9], size=250)
    Xs = sp.csr_matrix(X)

    dense = ingest((X, y), tmp_path / "dense.zarr", chunk_rows=64)
    assert not dense.sparse and dense.attrs["source_format"] == "array"
    np.testing.assert_array_equal(dense.classes, [3, 5, 9])
    np.testing.assert_array_equal(dense.load()[0], X.astype(np.float32))

    sparse = ingest((Xs, y), tmp_path / "sparse.zarr", chunk_rows=64)
    assert sparse.sparse  # density about 0.23
    np.testing.assert_array_equal(sparse.load()[0].toarray(), X.astype(np.float32))

    dX = da.from_array(X, chunks=(70, 3))
    lazy = ingest((dX, da.from_array(y, chunks=50)), tmp_path / "dask.zarr", chunk_rows=100)
    assert lazy.X.chunks[0] == (100, 100, 50)
    np.testing.assert_array_equal(lazy.load()[0], X.astype(np.float32))
    np.testing.assert_array_equal(lazy.load()[1], y)

    dXs = da.from_array(X, chunks=(80, 6)).map_blocks(sp.csr_matrix, meta=sp.csr_matrix((0, 0)))
    lazy_sparse = write_dataset(tmp_path / "dask_sparse.zarr", dXs, y, dense=False)
    np.testing.assert_array_equal(lazy_sparse.load()[0].toarray(), X.astype(np.float32))


def test_in_memory_input_errors(tmp_path):
    X = np.ones((4, 2))
    with pytest.raises(ValueError, match="the label of row 2 is missing"):
        ingest((X, np.array(["a", "b", None, "b"], dtype=object)), tmp_path / "a.zarr")
    with pytest.raises(ValueError, match="4 entries"):
        ingest((X, np.array([0, 1])), tmp_path / "b.zarr")
    X[2, 1] = np.nan
    with pytest.raises(ValueError, match="row 2 of X"):
        ingest((X, np.array([0, 1, 0, 1])), tmp_path / "c.zarr")
    with pytest.raises(ValueError, match="dtype"):
        ingest((X, np.array([0, 1, 0, 1])), tmp_path / "d.zarr", dtype="int32")
    assert os.listdir(tmp_path) == []


def test_public_names():
    for name in ("ingest", "open_dataset", "make_classification_zarr", "Dataset", "write_dataset"):
        assert hasattr(dsvm.io, name)


# --------------------------------------------------------------------------- only regular files are read
@pytest.mark.parametrize("name, fmt", [("x.csv", None), ("x.libsvm", None), ("x", None), ("x.csv.gz", None),
                                       ("x.parquet", None), ("x.npy", None), ("x", "csv"), ("x", "libsvm")])
def test_a_fifo_source_is_refused_at_once(tmp_path, name, fmt):
    """A FIFO blocked the ingest for ever (the first read waits for a writer)."""
    from helpers import call_near_fifos

    fifo = tmp_path / name
    os.mkfifo(fifo)
    y = tmp_path / "y.npy"
    np.save(y, np.zeros(3))
    exc = call_near_fifos(lambda: ingest(fifo, tmp_path / "t.zarr", format=fmt,
                                         y=y if name.endswith(".npy") else None), fifo)
    assert isinstance(exc, InputFileError), exc
    assert str(exc).startswith(f"{fifo}: it is a FIFO (named pipe), not a regular file")
    assert not (tmp_path / "t.zarr").exists()


def test_a_fifo_label_file_is_refused_at_once(tmp_path):
    from helpers import call_near_fifos

    np.save(tmp_path / "X.npy", np.eye(3))
    fifo = tmp_path / "y.npy"
    os.mkfifo(fifo)
    exc = call_near_fifos(lambda: ingest(tmp_path / "X.npy", tmp_path / "t.zarr", y=fifo), fifo)
    assert isinstance(exc, InputFileError), exc
    assert str(exc) == f"{fifo}: it is a FIFO (named pipe), not a regular file; a label file must be a regular file"


def test_a_device_is_refused_not_read(tmp_path):
    with pytest.raises(InputFileError, match="/dev/zero: it is a device, not a regular file"):
        ingest("/dev/zero", tmp_path / "t.zarr", format="libsvm")


# --------------------------------------------------------------------------- n_features is bounded like an index
@pytest.mark.parametrize("n_features", [99999999999999999999, 2**31, 0, -3, 2.5, "7", True])
def test_n_features_is_bounded_like_the_feature_indices(tmp_path, n_features):
    """`ingest --n-features 99999999999999999999` was an OverflowError traceback ("Python int too large to convert
    to C long"); a feature index is at most 2**31 - 2, so n_features is at most 2**31 - 1."""
    path = tmp_path / "d.libsvm"
    path.write_text("1 1:1 2:3\n-1 1:2 2:1\n")
    with pytest.raises(ValueError, match=rf"^n_features must be an integer from 1 to 2147483647 \(2\*\*31 - 1\), "
                                         rf"got {re.escape(repr(n_features))}$"):
        ingest(path, tmp_path / "d.zarr", n_features=n_features)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["d.libsvm"]
    assert ingest(path, tmp_path / "d.zarr", n_features=np.int64(4)).n_features == 4
