"""Worker loss, an empty cluster, and SIGKILL + resume from a checkpoint (real processes)."""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import dask
import numpy as np
import pytest

import dsvm
from procs import start_scheduler, start_worker, stop

pytestmark = pytest.mark.slow

PARAMS = dict(C=10.0, gamma=0.1, n_components=150, random_state=0, tol=1e-8, dtype="float64")


@pytest.fixture(scope="module")
def dataset(tmp_path_factory):
    path = tmp_path_factory.mktemp("reliability") / "train.zarr"
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


class _KillOnIteration(logging.Handler):
    """Runs ``action`` when the Newton log reports iteration ``it``."""

    def __init__(self, it: int, action):
        super().__init__()
        self.marker, self.action, self.fired = f"newton it={it} ", action, False

    def emit(self, record):
        if not self.fired and self.marker in record.getMessage():
            self.fired = True
            self.action()


def _fit_with_handler(client, ds, handler):
    log = logging.getLogger("dsvm.solvers.newton")
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

    handler = _KillOnIteration(2, kill_one)
    disturbed = _fit_with_handler(client, dataset, handler)
    assert handler.fired and workers[0].poll() is not None
    assert len(client.scheduler_info()["workers"]) == 1
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
            _fit_with_handler(client, dataset, _KillOnIteration(1, kill_all))
    assert time.monotonic() - t0 < 120


def _train_cmd(data, model, ckpt=None):
    cmd = [sys.executable, "-m", "dsvm.cli", "train", str(data), "--model", str(model), "-C", "10", "--gamma", "0.1",
           "-k", "150", "--random-state", "0", "--tol", "1e-8", "--dtype", "float64"]
    return cmd + (["--checkpoint", str(ckpt)] if ckpt else [])


def test_sigkill_during_training_then_resume_gives_the_same_model(tmp_path, dataset):
    reference = tmp_path / "reference.npz"
    subprocess.run(_train_cmd(dataset.path, reference), check=True, capture_output=True, timeout=600)

    ckpt, model = tmp_path / "fit.ckpt.npz", tmp_path / "model.npz"
    proc = subprocess.Popen(_train_cmd(dataset.path, model, ckpt), stderr=subprocess.PIPE, stdout=subprocess.DEVNULL,
                            start_new_session=True, text=True)
    seen = []
    try:
        for line in proc.stderr:
            seen.append(line)
            if "newton it=2 " in line:
                os.killpg(proc.pid, signal.SIGKILL)  # the whole process group: CLI, scheduler, workers
                break
    finally:
        proc.wait(timeout=60)
    assert proc.returncode == -signal.SIGKILL, "".join(seen[-20:])
    assert ckpt.exists() and not model.exists()

    again = subprocess.run(_train_cmd(dataset.path, model, ckpt), capture_output=True, text=True, timeout=600)
    assert again.returncode == 0, again.stderr[-3000:]
    assert "resuming after iteration" in again.stderr
    assert not ckpt.exists()  # removed once the fit completed
    a, b = dsvm.load_model(reference), dsvm.load_model(model)
    np.testing.assert_allclose(b.coef_, a.coef_, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(b.intercept_, a.intercept_, rtol=1e-10, atol=1e-12)


def test_checkpoint_of_other_data_or_parameters_is_refused(tmp_path, dataset):
    ckpt = tmp_path / "fit.ckpt.npz"
    X, y = dataset.load()
    X, y = X[:3000], y[:3000]

    def interrupted_fit(**kw):
        clf = dsvm.NystroemSVC(**{**PARAMS, "n_components": 40, **kw}, checkpoint=str(ckpt))
        handler = _KillOnIteration(1, lambda: (_ for _ in ()).throw(KeyboardInterrupt()))
        log = logging.getLogger("dsvm.solvers.newton")
        log.addHandler(handler)
        log.setLevel(logging.INFO)
        try:
            with pytest.raises(KeyboardInterrupt):
                clf.fit(X, y)
        finally:
            log.removeHandler(handler)

    interrupted_fit()
    assert ckpt.exists()
    with pytest.raises(dsvm.CheckpointMismatchError, match="other parameters .*C"):
        dsvm.NystroemSVC(**{**PARAMS, "n_components": 40, "C": 1.0}, checkpoint=str(ckpt)).fit(X, y)
    X2 = X.copy()
    X2[17, 3] += 0.5
    with pytest.raises(dsvm.CheckpointMismatchError, match="other data"):
        dsvm.NystroemSVC(**{**PARAMS, "n_components": 40}, checkpoint=str(ckpt)).fit(X2, y)
    sw = np.ones(len(y))
    sw[42] = 2.0  # other weights are another problem: resuming would mix two models
    with pytest.raises(dsvm.CheckpointMismatchError, match="other data"):
        dsvm.NystroemSVC(**{**PARAMS, "n_components": 40}, checkpoint=str(ckpt)).fit(X, y, sample_weight=sw)
    # the right data and parameters resume and finish
    # (weights of one are the unweighted problem)
    done = dsvm.NystroemSVC(**{**PARAMS, "n_components": 40}, checkpoint=str(ckpt)).fit(
        X, y, sample_weight=np.ones(len(y)))
    fresh = dsvm.NystroemSVC(**{**PARAMS, "n_components": 40}).fit(X, y)
    np.testing.assert_allclose(done.coef_, fresh.coef_, rtol=1e-10, atol=1e-12)
    assert not ckpt.exists()


def test_workers_killed_for_memory_give_a_one_line_error(tmp_path, capsys):
    """``dsvm predict`` on a dataset whose stored chunk does not fit a worker: one line naming the
    workers' memory and what a task needs, not a KilledWorker traceback."""
    from dsvm.cli import main

    rng = np.random.default_rng(0)
    p = 1500
    model = dsvm.NystroemSVC(n_components=20, random_state=0).fit(rng.random((300, p)), rng.integers(0, 2, 300))
    dsvm.save_model(model, tmp_path / "m.npz")
    n = 100_000  # one stored chunk of 572 MiB (a few MB compressed: all ones)
    dsvm.write_dataset(tmp_path / "big.zarr", np.ones((n, p), dtype=np.float32), np.zeros(n, dtype=np.int64),
                       chunk_rows=n)
    capsys.readouterr()
    with dask.config.set({"distributed.scheduler.allowed-failures": 1}):
        status = main(["-q", "predict", str(tmp_path / "m.npz"), str(tmp_path / "big.zarr"), "--out",
                       str(tmp_path / "p.npy"), "--workers", "1", "--threads-per-worker", "1",
                       "--memory-limit", "400MiB"])
    assert status == 1
    err = [line for line in capsys.readouterr().err.splitlines() if line.startswith("dsvm ")]
    assert len(err) == 1, err
    assert "Dask workers died 2 times running the same task" in err[0]
    assert "Each worker has 400.0 MiB of memory" in err[0]
    assert "needs about" in err[0] and "a stored chunk of 572.2 MiB read whole" in err[0]
    assert not (tmp_path / "p.npy").exists()
