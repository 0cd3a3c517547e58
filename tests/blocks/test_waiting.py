"""Waiting on a cluster never hangs silently: workers paused for memory, pinned workers lost, no workers."""

from __future__ import annotations

import time

import dask
import dask.array as da
import numpy as np
import pytest

from dsvm.blocks import as_row_blocks
from dsvm.blocks._waiting import ClusterWatch, PinnedWorkerLost, TaskFootprint
from dsvm.exceptions import WorkersPausedError


class FakeClient:
    """A client whose scheduler reports the statuses it is given."""

    asynchronous = False

    def __init__(self, statuses: dict[str, str]):
        self.statuses = statuses
        self.scheduler = self  # the scheduler's RPC: ``identity``

    def sync(self, method, **kwargs):
        return method(**kwargs)

    def identity(self, n_workers=-1):
        return {"workers": {a: {"status": s, "memory_limit": 500 * 2**20, "metrics": {"memory": 420 * 2**20}}
                            for a, s in self.statuses.items()}}


def _looks(watch, seconds, step=0.02):
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        watch.look()
        time.sleep(step)


def test_every_worker_paused_for_the_timeout_stops_the_wait():
    client = FakeClient({"a": "paused", "b": "paused"})
    with dask.config.set({"dsvm.paused-timeout": 0.3}):
        watch = ClusterWatch(client, TaskFootprint(64 * 2**20, "blocks of 1024 rows"))
        with pytest.raises(WorkersPausedError) as err:
            _looks(watch, 2.0)
    text = str(err.value)
    assert "every Dask worker (2) has been paused by Dask for lack of memory for 0 s" in text
    assert "holds 420.0 MiB of its 500.0 MiB limit" in text and "needs about 64.0 MiB (blocks of 1024 rows)" in text
    assert "\n" not in text


def test_a_worker_still_running_or_resuming_keeps_the_wait_going():
    client = FakeClient({"a": "paused", "b": "running"})
    with dask.config.set({"dsvm.paused-timeout": 0.2}):
        watch = ClusterWatch(client)
        _looks(watch, 0.6)  # one of two workers paused: the other one runs the tasks
        client.statuses["b"] = "paused"
        _looks(watch, 0.1)
        client.statuses["a"] = "running"  # resumed before the timeout: the clock starts again
        _looks(watch, 0.15)
        client.statuses["a"] = "paused"
        _looks(watch, 0.1)


def test_workers_that_pause_again_and_again_stop_the_wait():
    client = FakeClient({"a": "paused"})
    with dask.config.set({"dsvm.paused-timeout": 0.2}):
        watch = ClusterWatch(client)
        with pytest.raises(WorkersPausedError, match=r"has been paused by Dask for lack of memory in \d+% of the last"):
            for _ in range(200):  # resumes for one look in twenty: never paused 0.2 s at a stretch
                for status in ["paused"] * 19 + ["running"]:
                    client.statuses["a"] = status
                    watch.look()
                    time.sleep(0.005)


def test_a_paused_worker_that_tasks_are_pinned_to_stops_the_wait_and_a_lost_one_is_reported():
    client = FakeClient({"a": "paused", "b": "running"})
    with dask.config.set({"dsvm.paused-timeout": 0.2}):
        with pytest.raises(WorkersPausedError, match=r"1 Dask worker\(s\) holding blocks this pass runs on"):
            _looks(ClusterWatch(client, pinned={"a", "b"}), 1.0)
    client = FakeClient({"b": "running"})
    with pytest.raises(PinnedWorkerLost, match="'a'"):
        ClusterWatch(client, pinned={"a", "b"}).look()


def _hog(fraction_over_pause: float):
    """Runs on a worker: keep enough unmanaged memory on the worker object that Dask pauses it."""
    import psutil
    from distributed import get_worker

    worker = get_worker()
    limit = worker.memory_manager.memory_limit
    pause = dask.config.get("distributed.worker.memory.pause")
    want = pause * limit + fraction_over_pause * limit - psutil.Process().memory_info().rss
    worker.dsvm_test_hog = np.ones(max(0, int(want)) // 8)
    return int(want)


@pytest.mark.slow
def test_a_worker_paused_for_memory_stops_a_pass_with_a_clear_error():
    """A real LocalCluster whose only worker stays paused (a task left 300+ MiB it cannot spill): a pass over
    row blocks stops after ``dsvm.paused-timeout`` with one line naming the memory held and the limit,
    instead of waiting for ever."""
    distributed = pytest.importorskip("distributed")
    with distributed.LocalCluster(n_workers=1, threads_per_worker=2, memory_limit="500MB", processes=True,
                                  dashboard_address=None, host="127.0.0.1") as cluster, \
            distributed.Client(cluster, set_as_default=False) as client:
        client.submit(_hog, 0.05, pure=False).result()
        deadline = time.monotonic() + 30
        while [w["status"] for w in client.scheduler_info()["workers"].values()] != ["paused"]:
            assert time.monotonic() < deadline, "the worker never paused"
            time.sleep(0.2)
        blocks = as_row_blocks(da.ones((40_000, 10), chunks=(5_000, 10)), 0)
        blocks.footprint = TaskFootprint(3 * 2**20, "blocks of 5000 rows")
        t0 = time.monotonic()
        with dask.config.set({"dsvm.paused-timeout": 5}), client.as_current():
            with pytest.raises(WorkersPausedError) as err:
                blocks.map_reduce(lambda b: b.sum(axis=0))
        waited = time.monotonic() - t0
    assert 5 <= waited < 5 + 15
    text = str(err.value)
    assert "every Dask worker (1) has been paused by Dask for lack of memory for 5 s" in text
    assert "of its 476.8 MiB limit" in text and "needs about 3.0 MiB (blocks of 5000 rows)" in text


def test_the_scheduler_s_view_of_the_workers_never_comes_back_empty():
    """``Client.scheduler_info`` returns a cache that the client's periodic refresh (fetching no workers) can
    overwrite between the fetch and the return: once, a ``dsvm predict`` on a one-worker cluster saw no worker,
    skipped the memory check and lost the worker four times.  Refreshed every 5 ms here to make the race
    frequent; the scheduler's view dsvm reads must name the worker every time."""
    distributed = pytest.importorskip("distributed")
    from dsvm.blocks import scheduler_workers

    with dask.config.set({"distributed.client.scheduler-info-interval": "5ms"}), \
            distributed.LocalCluster(n_workers=1, threads_per_worker=1, processes=False,
                                     dashboard_address=None) as cluster, \
            distributed.Client(cluster, set_as_default=False) as client:
        seen = [len(scheduler_workers(client)) for _ in range(1000)]
    assert seen == [1] * 1000
