"""``split_dataset``: a stratified train/test split by the row hash, chunk by chunk, without loading the data."""

from __future__ import annotations

import threading
import time

import numpy as np
import pytest
import scipy.sparse as sp

from dsvm.blocks import row_hash
from dsvm.io import open_dataset, split_dataset, write_dataset


def _oracle_test_rows(y: np.ndarray, fraction: float, seed: int) -> np.ndarray:
    """The rule on the whole label vector in memory: per class, the round(fraction * n_c) rows of smallest hash."""
    h = row_hash(y.size, seed)
    test = np.zeros(y.size, dtype=bool)
    for c in np.unique(y):
        rows = np.flatnonzero(y == c)
        test[rows[np.argsort(h[rows])[: int(np.rint(fraction * rows.size))]]] = True
    return test


@pytest.fixture(scope="module")
def problem():
    rng = np.random.default_rng(0)
    n = 5_003
    X = rng.normal(size=(n, 6)).astype(np.float32)
    y = rng.choice([1, 2, 5], size=n, p=[0.6, 0.3, 0.1])
    return X, y


@pytest.mark.parametrize("fraction,seed", [(0.2, 0), (0.37, 11)])
def test_two_chunkings_give_the_same_parts_in_the_same_order_exactly_stratified(tmp_path, problem, fraction, seed):
    X, y = problem
    parts = []
    for chunk_rows in (1000, 777, 5_003):
        ds = write_dataset(tmp_path / f"d{chunk_rows}.zarr", X, y, chunk_rows=chunk_rows)
        train, test = split_dataset(ds, tmp_path / f"tr{chunk_rows}.zarr", tmp_path / f"te{chunk_rows}.zarr",
                                    test_fraction=fraction, seed=seed)
        parts.append((train.load(), test.load()))
    want = _oracle_test_rows(y, fraction, seed)
    for (Xtr, ytr), (Xte, yte) in parts:
        np.testing.assert_array_equal(Xte, X[want])
        np.testing.assert_array_equal(yte, y[want])
        np.testing.assert_array_equal(Xtr, X[~want])
        np.testing.assert_array_equal(ytr, y[~want])
    for c in (1, 2, 5):
        assert np.sum(parts[0][1][1] == c) == int(np.rint(fraction * np.sum(y == c)))


def test_sparse_data_many_classes_and_chunks_without_test_rows(tmp_path):
    rng = np.random.default_rng(1)
    n = 600
    X = sp.random(n, 40, density=0.05, format="csr", random_state=2, dtype=np.float64)
    y = rng.integers(0, 150, size=n).astype(np.float64)  # many small classes: fewer histogram bits
    ds = write_dataset(tmp_path / "s.zarr", X, y, dense=False, chunk_rows=3, dtype="float64")
    train, test = split_dataset(ds, tmp_path / "tr.zarr", tmp_path / "te.zarr", test_fraction=0.25, seed=3)
    assert train.sparse and test.sparse and ds.n_chunks == 200
    want = _oracle_test_rows(y, 0.25, 3)
    Xte, yte = test.load()
    Xtr, ytr = train.load()
    assert (Xte != X[want]).nnz == 0 and (Xtr != X[~want]).nnz == 0
    np.testing.assert_array_equal(yte, y[want])
    np.testing.assert_array_equal(ytr, y[~want])


def test_parts_keep_the_dataset_attributes_and_record_the_split(tmp_path, problem):
    X, y = problem
    ds = write_dataset(tmp_path / "d.zarr", X, y, chunk_rows=1000, attrs={"zero_based": True, "note": "x"})
    train, test = split_dataset(ds, tmp_path / "tr.zarr", tmp_path / "te.zarr", test_fraction=0.2, seed=0)
    for part, name in ((train, "train"), (test, "test")):
        assert part.attrs["zero_based"] is True and part.attrs["note"] == "x"
        assert part.attrs["split"] == {"of": ds.path, "part": name, "test_fraction": 0.2, "seed": 0}
        assert part.attrs["source"] == f"<array> ({name} part)"
        assert part.n_samples == int(np.sum(part.class_counts))
    assert train.n_samples + test.n_samples == ds.n_samples


def test_an_empty_part_and_an_existing_target_are_refused_before_writing(tmp_path, problem):
    X, y = problem
    ds = write_dataset(tmp_path / "d.zarr", X[:4], y[:4])
    with pytest.raises(ValueError, match="leaves the test part empty"):
        split_dataset(ds, tmp_path / "tr.zarr", tmp_path / "te.zarr", test_fraction=0.1)
    assert not (tmp_path / "tr.zarr").exists() and not (tmp_path / "te.zarr").exists()
    big = write_dataset(tmp_path / "b.zarr", X, y)
    (tmp_path / "mine").mkdir()
    with pytest.raises(FileExistsError):
        split_dataset(big, tmp_path / "mine", tmp_path / "te.zarr")
    with pytest.raises(ValueError, match="between 0 and 1"):
        split_dataset(big, tmp_path / "tr.zarr", tmp_path / "te.zarr", test_fraction=1.0)


class PeakRSS(threading.Thread):
    """This process's peak resident memory, sampled every 50 ms."""

    def __init__(self):
        import psutil

        super().__init__(daemon=True)
        self.process, self.stop, self.start_rss = psutil.Process(), threading.Event(), psutil.Process().memory_info().rss
        self.peak = self.start_rss

    def run(self):
        while not self.stop.is_set():
            self.peak = max(self.peak, self.process.memory_info().rss)
            time.sleep(0.05)


@pytest.mark.slow
def test_a_dataset_three_times_a_workers_memory_is_split_without_loading_it(tmp_path):
    """Rows three times a worker's memory limit split on that one worker: neither the worker nor this
    process ever holds the data (the worker would be paused or killed, and dsvm would stop with an error).
    The limit leaves the split's need (about 140 MiB: four stored chunks and a heap) above what an idle
    worker of this environment holds."""
    distributed = pytest.importorskip("distributed")
    import dask
    import dask.array as da
    from procs import idle_worker_mib

    held = idle_worker_mib("dsvm.io._split", "dsvm.blocks._dask_blocks")
    limit = int((held + 200) / 0.8 * 2**20)  # Dask pauses a worker at 80 % of its limit
    p, rows = 300, 16_384  # chunks of 19 MiB: a split task holds about three
    n = -(-3 * limit // (4 * p * rows)) * rows
    X = da.random.default_rng(0).standard_normal((n, p), chunks=(rows, p), dtype=np.float32)
    y = da.from_array(np.random.default_rng(1).integers(0, 2, n), chunks=rows)
    with dask.config.set(scheduler="threads"):  # written here, so that the worker starts fresh
        ds = write_dataset(tmp_path / "big.zarr", X, y, chunk_rows=rows)
    assert ds.n_samples * ds.n_features * 4 >= 3 * limit
    with distributed.LocalCluster(n_workers=1, threads_per_worker=1, memory_limit=limit, processes=True,
                                  dashboard_address=None, host="127.0.0.1") as cluster, \
            distributed.Client(cluster) as client:
        workers = set(client.scheduler_info()["workers"])
        sampler = PeakRSS()
        sampler.start()
        train, test = split_dataset(open_dataset(ds.path), tmp_path / "tr.zarr", tmp_path / "te.zarr",
                                    test_fraction=0.2, seed=0)
        sampler.stop.set()
        sampler.join()
        logs = "\n".join(line for log in client.get_worker_logs().values() for _, line in log)
        assert set(client.scheduler_info()["workers"]) == workers, "the worker died"
    assert "Pausing worker" not in logs
    assert test.n_samples == int(np.sum(np.rint(0.2 * ds.class_counts))) and train.n_samples + test.n_samples == n
    # this process never held more than a few chunks (one is 19.7 MiB; the data is over 1.2 GB)
    assert sampler.peak - sampler.start_rss < 100 * 2**20
