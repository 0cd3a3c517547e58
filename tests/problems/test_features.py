"""Feature storage policy: memory, zarr scratch, recompute — same model, scratch cleaned up."""

import os

import dask
import dask.array as da
import numpy as np
import pytest
from helpers import make_circles_problem

from dsvm import NystroemSVC
from dsvm.approx import fit_feature_map, make_kernel_spec
from dsvm.blocks import as_row_blocks
from dsvm.problems import FeatureStore, plan_feature_store


@pytest.fixture
def data():
    X, y = make_circles_problem(n=700, seed=7)
    return da.from_array(X, chunks=(90, -1)), da.from_array(y, chunks=90), X, y


@pytest.mark.parametrize("store,kind", [("disk", "disk"), ("recompute", "recompute")])
def test_same_model_whatever_the_store(tmp_path, data, store, kind):
    Xd, yd, X, y = data
    params = dict(C=3.0, gamma=0.4, n_components=60, random_state=0, dtype="float64", tol=1e-8)
    ref = NystroemSVC(**params, feature_store="memory").fit(Xd, yd)
    with dask.config.set({"dsvm.scratch-directory": str(tmp_path)}):
        other = NystroemSVC(**params, feature_store=store).fit(Xd, yd)
    assert other.solver_stats_["feature_store"] == kind
    np.testing.assert_allclose(other.coef_, ref.coef_, rtol=1e-6, atol=1e-9)
    assert os.listdir(tmp_path) == []  # the scratch store is gone


def test_the_earlier_store_name_zarr_is_refused_naming_the_choices(data):
    """feature_store="zarr" (the disk store's name before it held raw files) is gone: a one-line error."""
    Xd, yd, _, _ = data
    with pytest.raises(ValueError, match=r"^feature_store='zarr' is not supported; choose one of .*'disk'"):
        NystroemSVC(n_components=30, feature_store="zarr", random_state=0).fit(Xd, yd)


def test_scratch_removed_when_the_fit_fails(tmp_path, data):
    Xd, yd, X, y = data
    fmap = fit_feature_map(X[:20], make_kernel_spec("rbf", 0.5))
    with dask.config.set({"dsvm.scratch-directory": str(tmp_path)}):
        with pytest.raises(RuntimeError, match="boom"):
            with FeatureStore(as_row_blocks(Xd, 0), fmap, "disk") as fs:
                assert fs.kind == "disk" and len(os.listdir(tmp_path)) == 1
                # float32 features, k = 20: each is a 20-term sum of |K||M| <= 4.1, so any two blockings
                # agree to about k * eps32 * 4.1 = 1e-5 (features near zero included)
                np.testing.assert_allclose(fs.features.compute(), fmap.transform_block(X), rtol=1e-5, atol=1e-5)
                raise RuntimeError("boom")
    assert os.listdir(tmp_path) == []


def test_auto_policy_follows_memory(data):
    Xd, yd, X, y = data
    rb = as_row_blocks(Xd, 0)
    assert plan_feature_store("auto", rb, 50, 50, 4)[0] == "memory"
    assert plan_feature_store("auto", as_row_blocks(X, 100), 50, 50, 4)[0] == "memory"
    with dask.config.set({"dsvm.memory-fraction": 1e-12}):
        kind, reason = plan_feature_store("auto", rb, 50, 50, 4)
        assert kind in ("disk", "implicit") and "GiB" in reason
        # a slow disk makes kernel passes (cheap here: p = 5) the better choice; "recompute" is never chosen
        with dask.config.set({"dsvm.disk-bandwidth": 1.0}):
            assert plan_feature_store("auto", rb, 500, 500, 4)[0] == "implicit"
        # a fast disk and few landmark columns make the stage and its reads the better choice
        with dask.config.set({"dsvm.disk-bandwidth": 1e15}):
            assert plan_feature_store("auto", rb, 2, 2, 4)[0] == "disk"
    with pytest.raises(ValueError, match="feature_store"):
        plan_feature_store("ssd", rb, 5, 5, 4)


@pytest.mark.parametrize("chunks", [(0, 700), (350, 0, 350), (300, 0, 0, 400)])
def test_empty_row_chunks_give_the_same_model_in_every_store(tmp_path, chunks):
    """A boolean selection leaves empty chunks; every store must give the same model."""
    X, y = make_circles_problem(n=700, seed=8)
    params = dict(C=3.0, gamma=0.4, n_components=40, random_state=0, dtype="float64", tol=1e-8)
    ref = NystroemSVC(**params).fit(X, y)
    Xd, yd = da.from_array(X, chunks=(chunks, -1)), da.from_array(y, chunks=(chunks,))
    with dask.config.set({"dsvm.scratch-directory": str(tmp_path)}):
        for store in ("disk", "memory", "recompute", "implicit"):
            m = NystroemSVC(**params, feature_store=store).fit(Xd, yd)
            np.testing.assert_allclose(m.objective_, ref.objective_, rtol=1e-9, err_msg=store)
            np.testing.assert_allclose(m.coef_, ref.coef_, rtol=1e-6, atol=1e-9, err_msg=store)
    assert os.listdir(tmp_path) == []


def test_prediction_blocks_are_cut_to_the_task_budget_like_the_fit():
    """A dataset stored as one chunk must not need one (chunk x k) kernel block at predict time."""
    X, y = make_circles_problem(n=4000, seed=9)
    m = NystroemSVC(C=3.0, gamma=0.4, n_components=50, random_state=0).fit(X, y)
    Xd = da.from_array(X, chunks=(4000, -1))
    with dask.config.set({"dsvm.block-bytes": 8 * 50 * 1000}):  # 1000 rows of kernel values per task
        dec = m.decision_function(Xd)
        assert dec.numblocks[0] >= 4 and max(dec.chunks[0]) <= 1000
        # other blocks, other float32 rounding (BLAS may round a product by the row's place in a block): a
        # feature is a sum of k = 50 landmark terms, a row's features have norm at most 1 (rbf Nyström), so a
        # decision value moves by at most about k eps32 ‖coef‖ (the bound of a k-term sum, Cauchy-Schwarz)
        bound = 50 * np.finfo(np.float32).eps * np.linalg.norm(m.coef_)
        ref = m.decision_function(X)
        np.testing.assert_allclose(dec.compute(), ref, rtol=0, atol=bound)
        assert np.abs(ref).min() > bound  # so no label can differ, and the scores are equal
        assert m.score(Xd, da.from_array(y, chunks=4000)) == m.score(X, y)


# Scratch stores are named per run, marked with their owner and cleaned on SIGTERM, or later --------
def _only_store(scratch):
    stores = [p for p in scratch.iterdir() if p.name.startswith("dsvm-features-")]
    assert len(stores) == 1, stores
    return stores[0]


def test_sigterm_during_a_fit_removes_the_scratch_store(tmp_path, data, monkeypatch):
    import signal

    from dsvm.blocks._scratch import read_owner
    from dsvm.problems import SquaredHingeOperator
    from dsvm.signals import Terminated

    Xd, yd, X, y = data
    seen = {}

    def terminate(self, *args, **kwargs):
        store = _only_store(tmp_path)
        seen["owner"] = read_owner(store)
        # only a handler of dsvm's makes SIGTERM clean up; the default action would end this process
        assert signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL
        os.kill(os.getpid(), signal.SIGTERM)
        raise AssertionError("SIGTERM did not stop the fit")

    monkeypatch.setattr(SquaredHingeOperator, "evaluate", terminate)
    before = signal.getsignal(signal.SIGTERM)
    with dask.config.set({"dsvm.scratch-directory": str(tmp_path)}):
        with pytest.raises(Terminated) as stopped:
            NystroemSVC(n_components=30, feature_store="disk", random_state=0).fit(Xd, yd)
    assert stopped.value.code == 128 + signal.SIGTERM
    assert seen["owner"]["pid"] == os.getpid() and seen["owner"]["kind"] == "features"
    assert os.listdir(tmp_path) == []
    assert signal.getsignal(signal.SIGTERM) is before


def test_sigterm_while_a_worker_still_writes_a_block_removes_the_store(tmp_path, data, monkeypatch):
    """SIGTERM during a SLURM fit left 237 MB of block-*.raw in a store a worker wrote into after the client's
    removal had taken its owner marker; `dsvm clean` then kept it ("no dsvm owner marker")."""
    import signal

    from dsvm.blocks._scratch import OWNER_FILE
    from dsvm.problems import SquaredHingeOperator
    from dsvm.signals import Terminated

    Xd, yd, X, y = data
    real_unlink, late = os.unlink, []

    def unlink(path, *args, **kwargs):  # a task still running on a worker writes its block just then
        real_unlink(path, *args, **kwargs)
        if os.path.basename(os.fsdecode(path)) == OWNER_FILE and not late:
            late.append(_only_store(tmp_path) / "block-99.raw")
            late[0].write_bytes(b"\0" * 4096)

    def terminate(self, *args, **kwargs):
        monkeypatch.setattr(os, "unlink", unlink)
        os.kill(os.getpid(), signal.SIGTERM)
        raise AssertionError("SIGTERM did not stop the fit")

    monkeypatch.setattr(SquaredHingeOperator, "evaluate", terminate)
    with dask.config.set({"dsvm.scratch-directory": str(tmp_path)}):
        with pytest.raises(Terminated):
            NystroemSVC(n_components=30, feature_store="disk", random_state=0).fit(Xd, yd)
    assert late and os.listdir(tmp_path) == []


def test_disk_full_in_the_scratch_store(tmp_path, data, monkeypatch):
    import errno

    import dsvm.blocks._file_blocks
    from dsvm import DiskFullError

    def full(*args, **kwargs):
        raise OSError(errno.ENOSPC, "No space left on device")

    Xd, yd, X, y = data
    monkeypatch.setattr(dsvm.blocks._file_blocks, "write_raw", full)
    with dask.config.set({"dsvm.scratch-directory": str(tmp_path)}):
        with pytest.raises(DiskFullError, match=r"no space left on the device while writing the scratch feature "
                                                r"store .*needs about .*DASK_DSVM__SCRATCH_DIRECTORY.*"
                                                r"feature_store='implicit'"):
            NystroemSVC(n_components=30, feature_store="disk", random_state=0).fit(Xd, yd)
    assert os.listdir(tmp_path) == []


def _dead_pid():
    import subprocess
    import sys

    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def test_stale_stores_are_removed_by_the_next_run_and_by_dsvm_clean(tmp_path, data, capsys):
    import json

    from dsvm.app.cli import main
    from dsvm.blocks._scratch import OWNER_FILE, mark_owner

    Xd, yd, X, y = data
    scratch = tmp_path / "scratch"
    for name in ("dsvm-features-1-a.zarr", "dsvm-features-2-b.zarr", "dsvm-features-3-c.zarr"):
        (scratch / name / "block-0").mkdir(parents=True)
        mark_owner(scratch / name, "features")
    stale, other_host, alive = (scratch / n for n in ("dsvm-features-1-a.zarr", "dsvm-features-2-b.zarr",
                                                      "dsvm-features-3-c.zarr"))
    for folder, change in ((stale, {"pid": _dead_pid()}), (other_host, {"pid": _dead_pid(), "host": "elsewhere"})):
        marker = json.loads((folder / OWNER_FILE).read_text())
        (folder / OWNER_FILE).write_text(json.dumps({**marker, **change}))
    unmarked = scratch / "dsvm-features-4-d.zarr"
    unmarked.mkdir()
    with dask.config.set({"dsvm.scratch-directory": str(scratch)}):
        NystroemSVC(n_components=30, feature_store="disk", random_state=0).fit(Xd, yd)
    assert sorted(p.name for p in scratch.iterdir()) == sorted(p.name for p in (other_host, alive, unmarked))

    # leftovers next to datasets and models: an ingest's staging folder; a file named as earlier versions
    # named their temporary files is the user's (a name proves nothing) and stays
    project = tmp_path / "project"
    (project / "data" / ".train.zarr.x1.dsvm-tmp" / "store").mkdir(parents=True)
    mark_owner(project / "data" / ".train.zarr.x1.dsvm-tmp", "ingest")
    marker = json.loads((project / "data" / ".train.zarr.x1.dsvm-tmp" / OWNER_FILE).read_text())
    (project / "data" / ".train.zarr.x1.dsvm-tmp" / OWNER_FILE).write_text(json.dumps({**marker, "pid": _dead_pid()}))
    dead_tmp = project / f".ck.npz.tmp-{_dead_pid()}"
    dead_tmp.write_bytes(b"")
    os.utime(dead_tmp, (1e9, 1e9))
    keep = [project / "notes.tmp-1", project / "data" / "x.zarr", dead_tmp]
    keep[0].write_text("not dsvm's")
    keep[1].mkdir()
    capsys.readouterr()
    assert main(["-q", "clean", str(project), str(scratch), "--dry-run"]) == 0
    assert (project / "data" / ".train.zarr.x1.dsvm-tmp").exists()
    assert main(["-q", "clean", str(project), str(scratch)]) == 0
    out = capsys.readouterr().out
    assert not (project / "data" / ".train.zarr.x1.dsvm-tmp").exists()
    assert all(p.exists() for p in keep)
    assert other_host.exists() and alive.exists() and unmarked.exists()
    assert "removed  " in out and "another host, kept" in out and "no dsvm owner marker" in out
    assert str(dead_tmp) not in out


def _train_until_the_solve(tmp_path, data_file):
    """A real ``dsvm train`` (a LIBSVM file, so it also makes a temporary dataset) that waits in its
    first Newton pass, its scratch store written; returns the process and the store."""
    import subprocess
    import sys
    import time

    ready = tmp_path / "ready"
    script = tmp_path / "pausing_train.py"
    script.write_text(f"""
import pathlib, sys, time
import dsvm.problems._operators as op

evaluate = op.SquaredHingeOperator.evaluate

def wait_in_the_solve(self, *args, **kwargs):
    pathlib.Path({str(ready)!r}).write_text("in the solve")
    time.sleep(120)
    return evaluate(self, *args, **kwargs)

if __name__ == "__main__":  # not in the worker processes, which import this file again
    op.SquaredHingeOperator.evaluate = wait_in_the_solve
    from dsvm.app.cli import main

    sys.exit(main(sys.argv[1:]))
""")
    env = dict(os.environ, DASK_DSVM__SCRATCH_DIRECTORY=str(tmp_path / "scratch"), TMPDIR=str(tmp_path / "tmp"))
    (tmp_path / "tmp").mkdir()
    proc = subprocess.Popen(
        [sys.executable, str(script), "-q", "train", str(data_file), "--model", str(tmp_path / "m.npz"),
         "--feature-store", "disk", "-k", "20", "--workers", "1", "--threads-per-worker", "1"],
        env=env, start_new_session=True, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
    )
    deadline = time.monotonic() + 120
    while not ready.exists():
        if proc.poll() is not None or time.monotonic() > deadline:
            out = proc.communicate()[0].decode()[-3000:] if proc.poll() is not None else ""
            from procs import stop

            stop([proc])
            pytest.fail(f"dsvm train did not reach the solve:\n{out}")
        time.sleep(0.1)
    return proc, _only_store(tmp_path / "scratch")


@pytest.fixture
def train_file(tmp_path):
    X, y = make_circles_problem(n=500, seed=3)
    path = tmp_path / "train.libsvm"
    path.write_text("".join(f"{yi:+d} " + " ".join(f"{j + 1}:{v:.5f}" for j, v in enumerate(xi)) + "\n"
                            for xi, yi in zip(X, y)))
    return path


@pytest.mark.slow
def test_sigterm_to_dsvm_train_leaves_nothing(tmp_path, train_file):
    import signal

    from procs import stop

    proc, store = _train_until_the_solve(tmp_path, train_file)
    assert [p.name.startswith("dsvm-train-") for p in (tmp_path / "tmp").glob("dsvm-*")] == [True]
    try:
        os.kill(proc.pid, signal.SIGTERM)
        assert proc.wait(timeout=60) == 128 + signal.SIGTERM
    finally:
        stop([proc])  # the local cluster's workers, if any are left
    assert not store.exists() and os.listdir(tmp_path / "scratch") == []
    assert not [p for p in (tmp_path / "tmp").iterdir() if p.name.startswith("dsvm-")]
    assert not (tmp_path / "m.npz").exists()


@pytest.mark.slow
def test_kill_9_leftovers_are_removed_by_the_next_run_and_dsvm_clean(tmp_path, train_file, data, capsys):
    import signal

    from procs import stop

    from dsvm.app.cli import main
    from dsvm.blocks._scratch import read_owner

    proc, store = _train_until_the_solve(tmp_path, train_file)
    stop([proc], signal.SIGKILL)
    assert store.exists() and read_owner(store)["pid"] == proc.pid
    (train_tmp,) = (tmp_path / "tmp").glob("dsvm-*")  # besides Dask's own dask-scratch-space
    assert train_tmp.name.startswith("dsvm-train-") and read_owner(train_tmp)["kind"] == "train"
    Xd, yd, _, _ = data
    with dask.config.set({"dsvm.scratch-directory": str(tmp_path / "scratch")}):
        NystroemSVC(n_components=30, feature_store="disk", random_state=0).fit(Xd, yd)
    assert not store.exists()
    capsys.readouterr()
    assert main(["-q", "clean", str(tmp_path / "tmp")]) == 0
    assert not train_tmp.exists()
    assert f"removed  {train_tmp}  (train: pid {proc.pid} on" in capsys.readouterr().out


def test_int16_store_is_planned_for_bounded_features_and_by_the_cost_model(data):
    from dsvm.problems._features import plan_store_dtype

    Xd, yd, X, y = data
    rbf = fit_feature_map(X[:20], make_kernel_spec("rbf", 0.5))
    poly = fit_feature_map(X[:20], make_kernel_spec("poly", 0.5))
    assert plan_store_dtype("float32", rbf, 10**6)[0] is None
    assert plan_store_dtype("int16", rbf, 10**6)[0] == "int16"
    assert plan_store_dtype("int16", poly, 10**6)[0] is None  # no bound on poly features
    assert plan_store_dtype("int16", fit_feature_map(X[:20], make_kernel_spec("rbf", 0.5), dtype=np.float64),
                            10**6)[0] is None
    with dask.config.set({"dsvm.disk-bandwidth": 1e8}):  # a slow disk: the bytes saved pay for the decoding
        stored, why = plan_store_dtype("auto", rbf, 10**6)
        assert stored == "int16" and "saves" in why
    with dask.config.set({"dsvm.disk-bandwidth": 1e12}):
        assert plan_store_dtype("auto", rbf, 10**6)[0] is None
    with pytest.raises(ValueError, match="feature-store-dtype"):
        plan_store_dtype("float16", rbf, 10)


def test_int16_store_gives_the_model_to_its_rounding(tmp_path, data):
    Xd, yd, X, y = data
    params = dict(C=3.0, gamma=0.4, n_components=60, random_state=0, tol=1e-8)
    with dask.config.set({"dsvm.scratch-directory": str(tmp_path)}):
        ref = NystroemSVC(**params, feature_store="disk").fit(Xd, yd)
        with dask.config.set({"dsvm.feature-store-dtype": "int16"}):
            m = NystroemSVC(**params, feature_store="disk").fit(Xd, yd)
    # features 1.5e-5 apart at most: the objective moves by about that much relative, decisions by a little more
    np.testing.assert_allclose(m.objective_, ref.objective_, rtol=1e-4)
    np.testing.assert_allclose(m.decision_function(X), ref.decision_function(X), atol=2e-3)
    assert not np.array_equal(m.coef_, ref.coef_)  # the stored features did change
    assert os.listdir(tmp_path) == []
