"""Worker loss, an empty cluster, workers killed for memory (real processes)."""

from __future__ import annotations

import logging
import os
import signal
import time

import dask
import numpy as np
import pytest
from helpers import KillOnIteration
from procs import start_scheduler, start_worker, stop

import dsvm
from dsvm.blocks import scheduler_workers

pytestmark = pytest.mark.slow

PARAMS = dict(C=10.0, gamma=0.1, n_components=150, random_state=0, tol=1e-8, dtype="float64")


@pytest.fixture(scope="module")
def dataset(tmp_path_factory):
    path = tmp_path_factory.mktemp("worker_loss") / "train.zarr"
    return dsvm.make_classification_zarr(path, n_samples=60_000, n_features=10, chunk_rows=7_500, random_state=3)


@pytest.fixture
def two_workers(tmp_path):
    """A scheduler and two worker processes without nannies (a killed worker stays dead)."""
    distributed = pytest.importorskip("distributed")
    sched, sched_file, address = start_scheduler(tmp_path)
    workers = [start_worker(sched_file, tmp_path / f"w{i}.log", f"w{i}", nanny=False) for i in range(2)]
    client = distributed.Client(address, timeout="30s", set_as_default=False)
    try:
        client.wait_for_workers(2, timeout=60)
        yield client, workers
    finally:
        client.close()
        stop(workers + [sched])


def _fit_with_handler(client, ds, handler):
    log = logging.getLogger("dsvm.solvers._newton")
    log.addHandler(handler)
    old = log.level
    log.setLevel(logging.INFO)
    try:
        with client.as_current():
            return dsvm.NystroemSVC(**PARAMS).fit(ds)
    finally:
        log.removeHandler(handler)
        log.setLevel(old)


def test_fit_survives_the_loss_of_a_worker(two_workers, dataset):
    client, workers = two_workers
    with client.as_current():
        undisturbed = dsvm.NystroemSVC(**PARAMS).fit(dataset)
    assert undisturbed.n_iter_ >= 4  # there is work left after the kill

    def kill_one():
        os.killpg(workers[0].pid, signal.SIGKILL)
        workers[0].wait(timeout=10)

    handler = KillOnIteration(2, kill_one)
    disturbed = _fit_with_handler(client, dataset, handler)
    assert handler.fired and workers[0].poll() is not None
    assert len(scheduler_workers(client)) == 1
    np.testing.assert_allclose(disturbed.coef_, undisturbed.coef_, rtol=1e-8, atol=1e-10)
    np.testing.assert_allclose(disturbed.intercept_, undisturbed.intercept_, rtol=1e-8, atol=1e-10)


def test_no_worker_left_is_a_clear_error_not_a_hang(two_workers, dataset):
    client, workers = two_workers

    def kill_all():
        for w in workers:
            os.killpg(w.pid, signal.SIGKILL)

    t0 = time.monotonic()
    with dask.config.set({"dsvm.no-worker-timeout": 3}):
        with pytest.raises(RuntimeError, match="no Dask workers left"):
            _fit_with_handler(client, dataset, KillOnIteration(1, kill_all))
    assert time.monotonic() - t0 < 120


def test_a_stored_chunk_larger_than_a_worker_is_a_one_line_error_before_the_work(tmp_path, capsys):
    """``dsvm predict`` on a dataset whose stored chunk does not fit a worker: refused before any task runs,
    with one line naming the workers' memory and what the work needs, not a KilledWorker traceback."""
    from dsvm.app.cli import main

    rng = np.random.default_rng(0)
    p = 1500
    model = dsvm.NystroemSVC(n_components=20, random_state=0).fit(rng.random((300, p)), rng.integers(0, 2, 300))
    dsvm.save_model(model, tmp_path / "m.npz")
    n = 100_000  # one stored chunk of 572 MiB (a few MB compressed: all ones)
    dsvm.write_dataset(tmp_path / "big.zarr", np.ones((n, p), dtype=np.float32), np.zeros(n, dtype=np.int64),
                       chunk_rows=n)
    capsys.readouterr()
    t0 = time.monotonic()
    status = main(["-q", "predict", str(tmp_path / "m.npz"), str(tmp_path / "big.zarr"), "--out",
                   str(tmp_path / "p.npy"), "--workers", "1", "--threads-per-worker", "1", "--memory-limit", "400MiB"])
    assert status == 1 and time.monotonic() - t0 < 60
    err = [line for line in capsys.readouterr().err.splitlines() if line.startswith("dsvm ")]
    assert len(err) == 1, err
    assert "too little memory for this computation" in err[0] and "has a 400.0 MiB memory limit" in err[0]
    assert "a stored chunk of 572.2 MiB read whole, twice" in err[0] and "Give each worker at least" in err[0]
    assert not (tmp_path / "p.npy").exists()


def _allocate(mib):
    block = np.ones(mib * 2**20 // 8)
    return float(block.sum())


def test_workers_killed_for_memory_give_a_one_line_error():
    """A task that needs more memory than a worker has (more than the check before the work could know):
    after the workers died on it, one line naming their memory and what a task needs."""
    distributed = pytest.importorskip("distributed")
    from dsvm.blocks import compute
    from dsvm.blocks._waiting import TaskFootprint
    from dsvm.exceptions import WorkerMemoryError

    with dask.config.set({"distributed.scheduler.allowed-failures": 1}), \
            distributed.LocalCluster(n_workers=1, threads_per_worker=1, memory_limit="400MiB", processes=True,
                                     dashboard_address=None, host="127.0.0.1") as cluster, \
            distributed.Client(cluster, set_as_default=False) as client, client.as_current():
        with pytest.raises(WorkerMemoryError) as err:
            compute(dask.delayed(_allocate)(600), footprint=TaskFootprint(600 * 2**20, "one 600 MiB array"))
    text = str(err.value)
    assert "Dask workers died 2 times running the same task" in text
    assert "Each worker has 400.0 MiB of memory" in text and "needs about 600.0 MiB (one 600 MiB array)" in text


def test_a_worker_lost_during_a_pinned_pass_runs_it_again_unpinned(two_workers, caplog):
    """Pass tasks are pinned to the worker holding their block; when that worker dies during the pass, the
    tasks cannot run anywhere: the pass runs again unpinned, on blocks Dask recomputes, with the same result."""
    import dask.array as da
    from distributed import futures_of, get_worker

    from dsvm.blocks import as_row_blocks

    client, workers = two_workers

    def sum_or_die(block):  # defined here: it travels to the workers by value
        if get_worker().name == "w0":
            os.kill(os.getpid(), signal.SIGKILL)
        return block.sum(axis=0)

    X = np.random.default_rng(0).normal(size=(4_000, 3))
    with client.as_current():
        blocks = as_row_blocks(da.from_array(X, chunks=(250, 3)), 0).persist()
        holders = {w for ws in client.who_has(futures_of(blocks.array)).values() for w in ws}
        assert len(holders) == 2  # both workers hold blocks, so the pass needs w0
        with caplog.at_level(logging.WARNING, logger="dsvm.blocks._dask_blocks"):
            total = blocks.map_reduce(sum_or_die)
    assert workers[0].poll() is not None and len(scheduler_workers(client)) == 1
    np.testing.assert_allclose(total, X.sum(axis=0))
    assert "left the cluster during a pass; running the pass again without pinning its tasks" in caplog.text
