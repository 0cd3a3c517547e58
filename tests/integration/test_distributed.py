"""The same model from numpy, the threaded scheduler and a 2-process LocalCluster."""

import dask
import dask.array as da
import numpy as np
import pytest
import scipy.sparse as sp
from helpers import make_circles_problem

from dsvm import NystroemSVC
from dsvm.blocks import scheduler_workers

PARAMS = dict(C=10.0, gamma=0.3, n_components=80, random_state=0, tol=1e-6)


def test_numpy_threads_and_local_cluster_agree(local_cluster_client):
    X, y = make_circles_problem(n=900, seed=1)
    X_test, y_test = make_circles_problem(n=300, seed=2)
    ref = NystroemSVC(**PARAMS).fit(X, y)
    Xd = da.from_array(X, chunks=(128, -1))
    yd = da.from_array(y, chunks=128)
    with dask.config.set(scheduler="threads"):
        threaded = NystroemSVC(**PARAMS).fit(Xd, yd)
    with local_cluster_client.as_current():
        dist = NystroemSVC(**PARAMS).fit(Xd, yd)
        pred_dist = dist.predict(da.from_array(X_test, chunks=(50, -1))).compute()
        score_dist = dist.score(da.from_array(X_test, chunks=(50, -1)), da.from_array(y_test, chunks=50))
        assert local_cluster_client.run(lambda: 1)  # the cluster really did the work
    dec_ref = ref.decision_function(X_test)
    for model in (threaded, dist):
        np.testing.assert_allclose(model.components_, ref.components_)
        np.testing.assert_allclose(model.decision_function(X_test), dec_ref, atol=1e-4)
    clear = np.abs(dec_ref) > 1e-3
    np.testing.assert_array_equal(pred_dist[clear], ref.predict(X_test)[clear])
    np.testing.assert_array_equal(threaded.predict(X_test)[clear], ref.predict(X_test)[clear])
    assert abs(score_dist - ref.score(X_test, y_test)) <= 1 / len(y_test) + 1e-12


def test_sparse_dask_input_on_local_cluster(local_cluster_client):
    X, y = make_circles_problem(n=500, seed=3)
    X = np.where(np.abs(X) < 0.4, 0.0, X)
    ref = NystroemSVC(**PARAMS).fit(sp.csr_matrix(X), y)
    Xd = da.from_array(X, chunks=(64, -1)).map_blocks(sp.csr_matrix, meta=sp.csr_matrix((0, 0), dtype=float))
    with local_cluster_client.as_current():
        dist = NystroemSVC(**PARAMS).fit(Xd, da.from_array(y, chunks=64))
    np.testing.assert_allclose(dist.decision_function(X), ref.decision_function(X), atol=1e-4)


@pytest.mark.slow
def test_separate_worker_processes_each_hold_part_of_F_and_give_the_single_process_model(tmp_path, monkeypatch):
    """Two ``dask worker`` processes, as on two hosts: each holds only part of the feature matrix, no block
    of it travels, each pass sends one packed Gram matrix (and k-vectors) per worker, and the model is the
    one the same data gives in a single process."""
    import importlib

    import distributed
    from procs import start_scheduler, start_worker, stop

    import dsvm
    from dsvm.blocks._dask_blocks import DaskBlocks

    ds = dsvm.make_classification_zarr(tmp_path / "d.zarr", n_samples=200_000, n_features=10, chunk_rows=20_000,
                                       random_state=0)
    params = dict(C=1.0, gamma=0.1, n_components=150, random_state=0, tol=1e-8, dtype="float64",
                  feature_store="memory")
    single = NystroemSVC(**params).fit(ds)  # this process, threaded scheduler

    def served(dask_worker):  # runs on a worker (defined here: it travels by value)
        import time

        log = [(e["who"], e["keys"], e["start"]) for e in dask_worker.transfer_outgoing_log]
        return {"now": time.time(), "log": log}

    sched, sched_file, address = start_scheduler(tmp_path)
    workers = [start_worker(sched_file, tmp_path / f"w{i}.log", f"w{i}", memory="1500MiB") for i in range(2)]
    client = distributed.Client(address, timeout="30s", set_as_default=False)
    passes = []
    original = DaskBlocks.map_reduce

    def metered(self, fn, *args, **kwargs):
        before = client.run(served)
        out = original(self, fn, *args, **kwargs)
        after = client.run(served)
        if fn.__name__.endswith("_pass"):
            moved = {"results": 0, "features": 0, "other": 0, "to_client": 0}
            for w, state in after.items():
                for who, keys, start in state["log"]:
                    if start < before[w]["now"]:
                        continue
                    for key, nbytes in keys.items():
                        name = str(key)
                        kind = ("to_client" if who not in after else "features" if "_feature_block" in name
                                else "results" if name.startswith((fn.__name__, "tree_sum")) else "other")
                        moved[kind] += nbytes
            passes.append(moved)
        return out

    try:
        client.wait_for_workers(2, timeout=60)
        # both workers import the block functions' modules first, so that neither starts the feature stage
        # seconds behind the other (Dask places root tasks where a thread is free, not by a share of bytes)
        client.run(importlib.import_module, "dsvm.blocks")
        monkeypatch.setattr(DaskBlocks, "map_reduce", metered)
        with client.as_current():
            multi = NystroemSVC(**params).fit(ds)
        held = [w["metrics"]["managed_bytes"] for w in scheduler_workers(client).values()]
    finally:
        client.close()
        stop(workers + [sched])

    r = multi.coef_.shape[1]
    f_bytes = ds.n_samples * r * 8
    assert multi.solver_stats_["feature_store"] == "memory" and len(passes) >= 3
    assert all(0 < h < f_bytes for h in held), (held, f_bytes)  # F is spread: neither holds all of it
    gram = (r + 1) * (r + 2) // 2 * 8  # one packed float64 Gram matrix
    for p in passes:
        assert p["features"] == 0, passes  # no block of F ever travels
        assert p["results"] <= gram + 64 * (r + 1), passes  # one partial result: the other worker's
        assert p["to_client"] <= gram + 64 * (r + 1), passes  # one result to this process
    # Besides those, only blocks of label codes travel (int32, fetched for a pass pinned to the worker that
    # holds the features of their rows, where the scheduler put the codes elsewhere): each at most once.
    assert sum(p["other"] for p in passes) <= ds.n_samples * 4, passes
    np.testing.assert_allclose(multi.components_, single.components_)
    np.testing.assert_allclose(multi.coef_, single.coef_, rtol=1e-6, atol=1e-9 * np.abs(single.coef_).max())
    np.testing.assert_allclose(multi.intercept_, single.intercept_, rtol=1e-6)
