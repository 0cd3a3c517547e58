"""What a worker needs for row blocks of k kernel columns, against what it has: refuse before the work or
cut the blocks to fit."""

from __future__ import annotations

import math
import time

import dask.array as da
import pytest

from dsvm.blocks import task_sized_blocks
from dsvm.blocks._resources import MIN_BLOCK_ROWS, WorkerMemory, fit_block_rows, task_bytes
from dsvm.exceptions import WorkerMemoryError

MiB = 2**20


def _worker(limit_mib, held_mib, threads=2, pause=0.8):
    return WorkerMemory("tcp://w:1", limit_mib * MiB, threads, pause, held_mib * MiB)


def test_a_worker_whose_baseline_crosses_the_pause_line_is_refused_naming_both_figures():
    w = _worker(362, 182)  # the 380MB worker: 290 MiB pause line, 182 MiB held with dsvm loaded
    with pytest.raises(WorkerMemoryError) as err:
        fit_block_rows([w], k=300, itemsize=4, fixed=110 * MiB, what="a stored chunk read whole")
    text = str(err.value)
    need = 110 * MiB + 2 * task_bytes(MIN_BLOCK_ROWS, 300, 4)
    assert "has a 362.0 MiB memory limit, Dask pauses it at 80% (289.6 MiB)" in text
    assert "already holds 182.0 MiB with dsvm loaded, leaving 107.6 MiB" in text
    assert f"the computation needs {need / MiB:.1f} MiB there: 110.0 MiB fixed (a stored chunk read whole)" in text
    enough = math.ceil(1.15 * (182 + need / MiB) / 0.8 / 10) * 10  # with a 15 % margin, in tens of MiB
    assert enough == 430 and f"Give each worker at least {enough} MiB" in text
    assert "\n" not in text


def test_blocks_shrink_with_what_a_worker_holds_and_never_exceed_the_cap():
    roomy = fit_block_rows([_worker(4096, 180)], k=1000, itemsize=4, fixed=200 * MiB, max_rows=16384)
    assert roomy == 16384
    tight = fit_block_rows([_worker(1024, 180)], k=1000, itemsize=4, fixed=200 * MiB, max_rows=16384)
    tighter = fit_block_rows([_worker(1024, 400)], k=1000, itemsize=4, fixed=200 * MiB, max_rows=16384)
    assert MIN_BLOCK_ROWS <= tighter < tight <= 16384
    # whatever the rows, the threads' tasks and the fixed part stay below the pause line
    for held, rows in ((180, tight), (400, tighter)):
        assert 200 * MiB + 2 * task_bytes(rows, 1000, 4) <= 0.8 * 1024 * MiB - held * MiB
    # the smallest worker decides for all
    both = fit_block_rows([_worker(4096, 180), _worker(1024, 400)], k=1000, itemsize=4, fixed=200 * MiB,
                          max_rows=16384)
    assert both == tighter


def test_prediction_blocks_need_no_gram_matrices():
    assert task_bytes(1000, 2000, 4, fit=False) == 3 * 1000 * 2000 * 4
    assert task_bytes(1000, 2000, 4) == 3 * 1000 * 2000 * 4 + 20 * 2001**2


def test_too_small_workers_of_a_real_cluster_are_refused_before_any_work():
    distributed = pytest.importorskip("distributed")
    X = da.ones((200_000, 20), chunks=(200_000, 20), dtype="float32")
    # a worker whose limit leaves less room than one task of the smallest block needs, once the worker process
    # itself (with dsvm.problems imported) is counted
    with distributed.LocalCluster(n_workers=1, threads_per_worker=2, memory_limit="150MB", processes=True,
                                  dashboard_address=None, host="127.0.0.1") as cluster, \
            distributed.Client(cluster, set_as_default=False) as client, client.as_current():
        t0 = time.monotonic()
        with pytest.raises(WorkerMemoryError, match=r"too little memory .* has a 143.1 MiB memory limit"):
            task_sized_blocks(X, 300, itemsize=4, worker_modules=("dsvm.problems",))
        assert time.monotonic() - t0 < 30
        assert client.run(lambda dask_worker: len(dask_worker.data)) == {a: 0 for a in client.nthreads()}
