"""Run by ``test_frames.py::test_a_frame_larger_than_a_worker_ingests_and_trains`` in a fresh process.

``python frame_out_of_core.py WORKDIR WORKER_MEMORY FACTOR`` starts a one-worker ``LocalCluster`` whose
worker may use WORKER_MEMORY bytes, builds a Dask DataFrame FACTOR times that size (in pandas memory)
from generated partitions that refuse to be computed in this process, ingests it, trains on the dataset
and scores a held-out partition; it prints one JSON line with what the test checks: this process's peak
memory before and after, the frame's size, whether the worker survived, the accuracy.
"""

from __future__ import annotations

import json
import os
import resource
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd

N_COLS = 16
ROWS_PER_PART = 200_000


def part(k: int, client_pid: int) -> pd.DataFrame:
    """Partition k: N_COLS normal features, a string label (inside or outside a sphere in the first three)."""
    if os.getpid() == client_pid:
        raise AssertionError(f"partition {k} was computed in the client process")
    rng = np.random.default_rng(k)
    X = rng.normal(size=(ROWS_PER_PART, N_COLS))
    frame = pd.DataFrame(X, columns=[f"f{j}" for j in range(N_COLS)])
    frame["label"] = np.where((X[:, :3] ** 2).sum(axis=1) > 2.37, "outside", "inside")  # chi2(3) median
    return frame


def peak_rss() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def main() -> None:
    import dask.dataframe as dd
    import distributed

    import dsvm

    workdir, worker_memory, factor = Path(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3])
    part_bytes = int(part(0, -1).memory_usage(deep=True).sum())
    n_parts = int(np.ceil(factor * worker_memory / part_bytes))
    with distributed.LocalCluster(n_workers=1, threads_per_worker=2, memory_limit=worker_memory, processes=True,
                                  dashboard_address=None, host="127.0.0.1") as cluster, \
            distributed.Client(cluster) as client:
        workers = set(client.scheduler_info()["workers"])
        frame = dd.from_map(part, range(1, n_parts + 1), client_pid=os.getpid(), meta=part(0, -1).iloc[:0])
        before = peak_rss()
        t0 = time.perf_counter()
        ds = dsvm.ingest(frame, workdir / "big.zarr", label_column="label", chunk_rows=65536)
        t1 = time.perf_counter()
        after_ingest = peak_rss()
        model = dsvm.NystroemSVC(n_components=50, gamma=0.1, C=1.0, feature_store="recompute",
                                 random_state=0).fit(ds)
        t2 = time.perf_counter()
        after_fit = peak_rss()
        held_out = part(0, -1)
        accuracy = model.score(held_out.drop(columns="label"), held_out["label"])
        survived = set(client.scheduler_info()["workers"]) == workers
    print(json.dumps({"frame_bytes": part_bytes * n_parts, "n_rows": ds.n_samples, "peak_before": before,
                      "peak_after_ingest": after_ingest, "peak_after_fit": after_fit, "worker_survived": survived, "accuracy": accuracy,
                      "classes": ds.classes.tolist(), "feature_names": ds.feature_names.tolist()[:2],
                      "ingest_seconds": t1 - t0, "fit_seconds": t2 - t1,
                      "feature_store": model.solver_stats_["feature_store"]}))


if __name__ == "__main__":
    main()
