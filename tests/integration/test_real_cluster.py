"""A real multi-process Dask cluster started by the test: ``dask scheduler`` and two
``dask worker`` processes on 127.0.0.1.  ``dsvm train --scheduler-address`` and
``--scheduler-file`` run on it (the dsvm command as a subprocess) and must produce the
same model as the default local cluster, with the tasks really executed by those workers.
"""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path

import numpy as np
import pytest
from helpers import make_circles_problem, run_dsvm
from procs import spawn, stop

from dsvm.blocks import scheduler_workers

pytestmark = pytest.mark.slow

TRAIN = ["-C", "10", "--gamma", "0.2", "-k", "120", "--random-state", "0", "--tol", "1e-6"]


_spawn, _stop = spawn, stop


@pytest.fixture(scope="module")
def dask_cluster(tmp_path_factory):
    """``dask scheduler`` + two ``dask worker`` subprocesses; yields (address, scheduler_file, client)."""
    distributed = pytest.importorskip("distributed")
    tmp = tmp_path_factory.mktemp("dask-cluster")
    sched_file = tmp / "scheduler.json"
    procs: list[subprocess.Popen] = []
    client = None
    try:
        procs.append(_spawn(["distributed.cli.dask_scheduler", "--host", "127.0.0.1", "--port", "0",
                             "--dashboard-address", "127.0.0.1:0", "--scheduler-file", str(sched_file)],
                            tmp / "scheduler.log"))
        deadline = time.monotonic() + 60
        while not sched_file.exists() or not sched_file.read_text().strip():
            if procs[0].poll() is not None or time.monotonic() > deadline:
                pytest.fail(f"dask scheduler did not start:\n{(tmp / 'scheduler.log').read_text()[-3000:]}")
            time.sleep(0.1)
        for i in range(2):
            procs.append(_spawn(["distributed.cli.dask_worker", "--scheduler-file", str(sched_file),
                                 "--host", "127.0.0.1", "--nthreads", "1", "--name", f"w{i}",
                                 "--dashboard-address", "127.0.0.1:0", "--memory-limit", "2GiB"],
                                tmp / f"worker{i}.log"))
        client = distributed.Client(scheduler_file=str(sched_file), timeout="30s", set_as_default=False)
        client.wait_for_workers(2, timeout=60)
        address = json.loads(sched_file.read_text())["address"]
        assert address.startswith("tcp://127.0.0.1:")
        yield address, sched_file, client
    finally:
        if client is not None:
            client.close()
        _stop(procs[1:])  # workers first, then the scheduler
        _stop(procs[:1])
        for proc in procs:
            assert proc.poll() is not None


def _dsvm(*args: str, cwd: Path, timeout: float = 300):
    return run_dsvm(*args, cwd=cwd, timeout=timeout, check=True)


@pytest.fixture(scope="module")
def dataset(tmp_path_factory):
    """A LIBSVM file written here, ingested with ``dsvm ingest`` into 8 row chunks."""
    tmp = tmp_path_factory.mktemp("data")
    X, y = make_circles_problem(n=4000, p=6, seed=5)
    lines = [f"{int(t):+d} " + " ".join(f"{j + 1}:{v:.6g}" for j, v in enumerate(row)) for row, t in zip(X, y)]
    (tmp / "train.libsvm").write_text("\n".join(lines) + "\n")
    _dsvm("ingest", "train.libsvm", "train.zarr", "--format", "libsvm", "--n-features", "6", "--chunk-rows", "500",
          "--no-progress", cwd=tmp)
    return tmp, X, y


def _executed(client) -> dict[str, int]:
    return client.run(lambda dask_worker: dask_worker.state.executed_count)


def _assert_same_model(path_a: Path, path_b: Path, X: np.ndarray) -> None:
    from dsvm import load_model

    a, b = load_model(path_a), load_model(path_b)
    np.testing.assert_array_equal(a.components_, b.components_)
    # the same solution within the solver's tolerance (1e-6): the passes' sums are combined per worker
    # first, so their order, and the last bits, follow where the blocks are
    np.testing.assert_allclose(a.coef_, b.coef_, rtol=1e-5, atol=1e-5 * np.abs(b.coef_).max())
    np.testing.assert_allclose(a.intercept_, b.intercept_, rtol=1e-5, atol=1e-5)
    np.testing.assert_array_equal(a.predict(X), b.predict(X))


def test_train_on_attached_scheduler_matches_local(dask_cluster, dataset):
    address, sched_file, client = dask_cluster
    tmp, X, y = dataset

    data = str(tmp / "train.zarr")  # absolute: the workers run in another directory
    before = _executed(client)
    _dsvm("train", data, "--model", "local.npz", *TRAIN, "--workers", "1", "--threads-per-worker", "2", cwd=tmp)
    assert _executed(client) == before, "the default run must use its own local cluster, not ours"

    _dsvm("train", data, "--model", "by-address.npz", *TRAIN, "--scheduler-address", address, cwd=tmp)
    after_address = _executed(client)
    assert set(after_address) == set(before) and len(after_address) == 2
    for worker, n in after_address.items():
        assert n > before[worker], f"worker {worker} ran no tasks: {before} -> {after_address}"

    _dsvm("train", data, "--model", "by-file.npz", *TRAIN, "--scheduler-file", str(sched_file), cwd=tmp)
    after_file = _executed(client)
    assert all(after_file[w] > after_address[w] for w in after_file), (after_address, after_file)

    _assert_same_model(tmp / "by-address.npz", tmp / "local.npz", X)
    _assert_same_model(tmp / "by-file.npz", tmp / "local.npz", X)
    from dsvm import load_model

    assert np.mean(load_model(tmp / "local.npz").predict(X) == y) > 0.9  # it learnt the sphere

    # the attached cluster is left running, and no client stays connected
    assert len(scheduler_workers(client)) == 2
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        clients = client.run_on_scheduler(lambda dask_scheduler: list(dask_scheduler.clients))
        if len([c for c in clients if c != client.id and c != "fire-and-forget"]) == 0:
            break
        time.sleep(0.2)
    else:
        pytest.fail(f"dsvm left clients connected: {clients}")


def test_evaluate_and_predict_on_attached_scheduler(dask_cluster, dataset):
    address, sched_file, client = dask_cluster
    tmp, X, y = dataset
    data = str(tmp / "train.zarr")
    if not (tmp / "local.npz").exists():
        _dsvm("train", data, "--model", "local.npz", *TRAIN, cwd=tmp)
    before = _executed(client)
    out = _dsvm("evaluate", "local.npz", data, "--json", "--scheduler-file", str(sched_file), cwd=tmp)
    result = json.loads(out.stdout.strip().splitlines()[-1])
    _dsvm("predict", "local.npz", data, "--out", "pred.npy", "--scheduler-address", address, cwd=tmp)
    after = _executed(client)
    assert all(after[w] > before[w] for w in after), (before, after)
    from dsvm import load_model

    expected = load_model(tmp / "local.npz").predict(X)
    np.testing.assert_array_equal(np.load(tmp / "pred.npy"), expected)
    assert result["accuracy"] == pytest.approx(np.mean(expected == y))


def test_relative_dataset_path_on_attached_scheduler(dask_cluster, dataset):
    """Users type relative paths; the workers of a real cluster run in their own directory."""
    address, sched_file, client = dask_cluster
    tmp, X, y = dataset
    assert Path.cwd() != tmp  # the workers' working directory is not the data folder
    _dsvm("train", "train.zarr", "--model", "relative.npz", *TRAIN, "--scheduler-address", address, cwd=tmp)
