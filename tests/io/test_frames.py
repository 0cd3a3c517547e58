"""Tables: pandas and Dask DataFrames and Parquet files into datasets, and Dask DataFrames into the estimators.

Oracles: the frame's own values (``to_numpy``) and names.  "Never collected on the client" is checked by
construction: the partitions come from a function that raises when it runs in the test's own process, and
run on the worker processes of a real ``LocalCluster``.
"""

from __future__ import annotations

import os

import dask.array as da
import numpy as np
import pytest

import dsvm
from dsvm.io import ingest

pd = pytest.importorskip("pandas")
dd = pytest.importorskip("dask.dataframe")

CLIENT_PID = os.getpid()
N_PARTS, ROWS = 6, 150


def _frame(n: int = 300, seed: int = 0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 3))
    return pd.DataFrame({"alpha": X[:, 0], "bravo": X[:, 1].astype(np.float32), "count": rng.integers(0, 5, n),
                         "flag": X[:, 2] > 0, "species": np.where(X[:, 0] * X[:, 1] > 0, "same", "other")})


def _partition(k: int, client_pid: int):
    """Partition k of a generated frame; refuses to run in the client process."""
    if os.getpid() == client_pid:
        raise AssertionError(f"partition {k} was computed in the client process")
    return _frame(ROWS, seed=k).set_axis(range(k * ROWS, (k + 1) * ROWS))


def _dask_frame():
    return dd.from_map(_partition, range(N_PARTS), client_pid=CLIENT_PID, meta=_frame(0))


def _expected(frames):
    whole = pd.concat(frames)
    return whole[["alpha", "bravo", "count", "flag"]].to_numpy(dtype=np.float64), whole["species"].to_numpy()


def test_pandas_frame_by_label_column_or_with_y(tmp_path):
    frame = _frame()
    X, y = _expected([frame])
    for k, ds in enumerate([ingest(frame, tmp_path / "a.zarr", label_column="species", dtype="float64"),
                            ingest(frame, tmp_path / "b.zarr", label_column=-1, dtype="float64"),
                            ingest((frame.drop(columns="species"), frame["species"]), tmp_path / "c.zarr",
                                   dtype="float64")]):
        got_X, got_y = ds.load()
        np.testing.assert_array_equal(got_X, X)
        assert got_y.tolist() == y.tolist(), k
        assert ds.feature_names.tolist() == ["alpha", "bravo", "count", "flag"] and ds.classes.tolist() == [
            "other", "same"]


def test_frame_errors_name_the_column_and_row(tmp_path):
    frame = _frame(20)
    with pytest.raises(ValueError, match=r"name the label column"):
        ingest(frame, tmp_path / "a.zarr")
    with pytest.raises(ValueError, match=r"no column named 'label'"):
        ingest(frame, tmp_path / "a.zarr", label_column="label")
    with pytest.raises(ValueError, match=r"column 'species' holds (object|str|string)"):
        ingest(frame, tmp_path / "a.zarr", label_column="alpha")
    holed = frame.copy()
    holed.loc[7, "bravo"] = np.nan
    with pytest.raises(ValueError, match=r"column 'bravo' has a missing or infinite value in the row with index 7"):
        ingest(holed, tmp_path / "a.zarr", label_column="species")
    unlabelled = frame.copy()
    unlabelled.loc[3, "species"] = None
    with pytest.raises(ValueError, match="the label of row 3 is missing"):
        ingest(unlabelled, tmp_path / "a.zarr", label_column="species")
    assert list(tmp_path.iterdir()) == []


def test_pandas_frame_into_the_estimator_keeps_feature_names():
    frame = _frame()
    X, y = frame.drop(columns="species"), frame["species"]
    model = dsvm.NystroemSVC(n_components=40, random_state=0).fit(X, y)
    assert model.feature_names_in_.tolist() == ["alpha", "bravo", "count", "flag"]
    with pytest.raises(ValueError, match="feature names"):
        model.predict(X[["bravo", "alpha", "count", "flag"]])


def test_dask_frame_ingests_partition_by_partition_on_the_workers(tmp_path, local_cluster_client):
    frames = [_partition(k, -1) for k in range(N_PARTS)]
    X, y = _expected(frames)
    with local_cluster_client.as_current():
        ds = ingest(_dask_frame(), tmp_path / "d.zarr", label_column="species", dtype="float64", chunk_rows=200)
    got_X, got_y = ds.load()
    np.testing.assert_array_equal(got_X, X)
    assert got_y.tolist() == y.tolist()
    assert ds.feature_names.tolist() == ["alpha", "bravo", "count", "flag"] and ds.attrs["label_column"] == "species"


def test_dask_frame_fits_and_predicts_without_leaving_the_cluster(local_cluster_client):
    """The issue: a Dask DataFrame was pulled into the client through ``__array__``, without its names."""
    frames = [_partition(k, -1) for k in range(N_PARTS)]
    X, y = _expected(frames)
    reference = dsvm.NystroemSVC(n_components=50, gamma=0.3, random_state=0, dtype="float64").fit(X, y)
    with local_cluster_client.as_current():
        ddf = _dask_frame()
        model = dsvm.NystroemSVC(n_components=50, gamma=0.3, random_state=0, dtype="float64").fit(
            ddf.drop(columns="species"), ddf["species"])
        assert model.feature_names_in_.tolist() == ["alpha", "bravo", "count", "flag"]
        pred = model.predict(ddf.drop(columns="species"))
        assert isinstance(pred, da.Array)
        pred = pred.compute()
        with pytest.raises(ValueError, match="feature names of the DataFrame differ"):
            model.predict(ddf[["bravo", "alpha", "count", "flag"]])
    np.testing.assert_allclose(model.coef_, reference.coef_, rtol=1e-7, atol=1e-9)
    assert pred.tolist() == reference.predict(X).tolist()


# Parquet ------------------------------------------------------------------------------------------
def test_parquet_row_groups(tmp_path):
    pytest.importorskip("pyarrow")
    frame = _frame()
    frame.to_parquet(tmp_path / "t.parquet", row_group_size=70)
    X, y = _expected([frame])
    ds = ingest(tmp_path / "t.parquet", tmp_path / "d.zarr", label_column="species", dtype="float64")
    got_X, got_y = ds.load()
    np.testing.assert_array_equal(got_X, X)
    assert got_y.tolist() == y.tolist() and ds.feature_names.tolist() == ["alpha", "bravo", "count", "flag"]
    # a folder of files, read in name order
    (tmp_path / "parts").mkdir()
    frame.iloc[:100].to_parquet(tmp_path / "parts" / "a.parquet")
    frame.iloc[100:].to_parquet(tmp_path / "parts" / "b.parquet")
    np.testing.assert_array_equal(ingest(tmp_path / "parts", tmp_path / "e.zarr", label_column="species",
                                         dtype="float64").load()[0], X)


def test_parquet_errors(tmp_path):
    pytest.importorskip("pyarrow")
    frame = _frame(10)
    frame.to_parquet(tmp_path / "t.parquet")
    with pytest.raises(ValueError, match="name the label column"):
        ingest(tmp_path / "t.parquet", tmp_path / "a.zarr")
    with pytest.raises(ValueError, match=r"t\.parquet: column 'species' holds (large_)?string values"):
        ingest(tmp_path / "t.parquet", tmp_path / "a.zarr", label_column="alpha")
    frame.loc[4, "alpha"] = None
    frame.to_parquet(tmp_path / "n.parquet")
    with pytest.raises(ValueError, match=r"n\.parquet: row group 0, row 4: column 'alpha' is (missing|NaN)"):
        ingest(tmp_path / "n.parquet", tmp_path / "a.zarr", label_column="species")
    assert not (tmp_path / "a.zarr").exists()


def test_columns_of_the_same_name_are_one_line(tmp_path, capsys):
    """A Parquet file with two columns named alike was a KeyError traceback."""
    pa = pytest.importorskip("pyarrow")
    import pyarrow.parquet as pq

    from dsvm.app.cli import main

    table = pa.Table.from_arrays([pa.array([1.0, 2.0, 3.0]), pa.array([4.0, 5.0, 6.0]), pa.array([0, 1, 0])],
                                 names=["a", "a", "y"])
    pq.write_table(table, tmp_path / "dup.parquet")
    with pytest.raises(ValueError, match="dup.parquet: 2 columns are named 'a'; dsvm needs distinct column names"):
        ingest(tmp_path / "dup.parquet", tmp_path / "a.zarr", label_column="y")
    assert main(["-q", "ingest", str(tmp_path / "dup.parquet"), str(tmp_path / "a.zarr"), "--label-column", "y"]) == 1
    assert capsys.readouterr().err.strip() == ("dsvm ingest: error: dup.parquet: 2 columns are named 'a'; dsvm needs "
                                               "distinct column names (rename or drop the copies)")
    frame = pd.DataFrame([[1.0, 2.0, 0], [3.0, 4.0, 1]], columns=["a", "a", "y"])
    with pytest.raises(ValueError, match="the DataFrame: 2 columns are named 'a'"):
        ingest(frame, tmp_path / "a.zarr", label_column="y")
    assert not (tmp_path / "a.zarr").exists()


def test_a_fifo_among_parquet_files_is_refused(tmp_path):
    pytest.importorskip("pyarrow")
    from dsvm.exceptions import InputFileError

    (tmp_path / "parts").mkdir()
    _frame(10).to_parquet(tmp_path / "parts" / "a.parquet")
    os.mkfifo(tmp_path / "parts" / "b.parquet")
    with pytest.raises(InputFileError, match=r"b\.parquet: it is a FIFO \(named pipe\), not a regular file"):
        ingest(tmp_path / "parts", tmp_path / "a.zarr", label_column="species")


@pytest.mark.slow
def test_a_frame_larger_than_a_worker_ingests_and_trains(tmp_path):
    """A Dask DataFrame of 3.2x a worker's memory limit (pandas memory) ingests and trains on a one-worker
    cluster: no partition runs in the client (they refuse to), the client's peak memory grows by less than a
    tenth of the frame, the worker is never restarted, and the model learnt (accuracy well above chance)."""
    import json
    import subprocess
    import sys
    from pathlib import Path

    from procs import idle_worker_mib

    script = Path(__file__).with_name("frame_out_of_core.py")
    # What a worker holds with pandas, pyarrow and dsvm loaded differs between environments by 100 MiB
    # and more (shared libraries' resident pages): the limit leaves the same room above it everywhere.
    idle = idle_worker_mib("dsvm.io._frames", "dsvm.blocks._dask_blocks", "dask.array", "pandas", "pyarrow")
    worker_memory = int((idle + 500) * 2**20)
    out = subprocess.run([sys.executable, str(script), str(tmp_path), str(worker_memory), "3.2"],
                         capture_output=True, text=True, timeout=900)
    assert out.returncode == 0, out.stderr[-3000:]
    result = json.loads(out.stdout.strip().splitlines()[-1])
    assert result["frame_bytes"] > 3 * worker_memory
    assert result["peak_after_fit"] - result["peak_before"] < 0.1 * result["frame_bytes"], result
    assert result["worker_survived"] and result["classes"] == ["inside", "outside"]
    assert result["feature_names"] == ["f0", "f1"] and result["accuracy"] > 0.65, result
