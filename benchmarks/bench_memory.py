"""Small workers: a fit on the default local cluster with a memory limit per worker, and the memory check.

Generates a synthetic zarr dataset with the default chunking (3M rows x 28
features: 336 MB, chunks of 64 MiB), starts the default local cluster with
``--memory-limit`` per worker (1 GiB), fits ``NystroemSVC`` and reports: the
fit's wall time and stages, the block rows the memory check chose, the
feature store, the peak memory of each worker against the line where Dask
pauses it, and whether any worker paused, spilled or restarted.  The check:
the fit finishes with no worker paused.

It also prints the memory a worker needs per thread for a few ``k`` (the
model of :mod:`dsvm.blocks._resources`).

Usage::

    python benchmarks/bench_memory.py [--rows 3000000] [--features 28] [-k 500] [--memory-limit 1GiB]
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import shutil
import tempfile
import time
from pathlib import Path

from bench_scale import MemorySampler
from common import REPO, machine, save_json

logger = logging.getLogger("bench_memory")
MiB = 2**20


def memory_table(ks=(100, 500, 1000, 2000, 5000), threads: int = 2, chunk_mib: float = 64.0) -> list[dict]:
    """Per thread and per worker, for float32 fits: the smallest blocks and the largest (``dsvm.block-bytes``)."""
    import dask.config

    from dsvm import config
    from dsvm.blocks._resources import CHUNK_COPIES, MIN_BLOCK_ROWS, task_bytes

    idle = 180 * MiB  # a worker with dsvm loaded (measured: 178-191 MiB)
    fixed = CHUNK_COPIES * chunk_mib * MiB + config.get("worker-heap-bytes")
    pause = dask.config.get("distributed.worker.memory.pause")
    rows = []
    for k in ks:
        largest = max(MIN_BLOCK_ROWS, int(config.get("block-bytes") // (8 * k)))
        smallest_thread = task_bytes(MIN_BLOCK_ROWS, k, 4)
        largest_thread = task_bytes(largest, k, 4)
        rows.append({
            "k": k,
            "per_thread_MiB_256_rows": smallest_thread / MiB,
            "largest_block_rows": largest,
            "per_thread_MiB_largest": largest_thread / MiB,
            f"min_worker_limit_MiB_{threads}_threads": (idle + fixed + threads * smallest_thread) / pause / MiB,
            f"worker_limit_MiB_largest_blocks_{threads}_threads": (idle + fixed + threads * largest_thread) / pause / MiB,
        })
    return rows


class _Capture(logging.Handler):
    def __init__(self):
        super().__init__()
        self.messages: list[str] = []

    def emit(self, record):
        self.messages.append(record.getMessage())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", type=int, default=3_000_000)
    ap.add_argument("--features", type=int, default=28)
    ap.add_argument("-k", type=int, default=500)
    ap.add_argument("--memory-limit", default="1GiB")
    ap.add_argument("--workdir", type=Path, default=None, help="where the dataset and the scratch store go")
    ap.add_argument("--out", type=Path, default=REPO / "benchmarks" / "results" / "memory.json")
    args = ap.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s: %(message)s", datefmt="%H:%M:%S")

    import dask.config

    import dsvm
    from dsvm.app.cluster import connect

    result: dict = {"machine": machine(), "rows": args.rows, "features": args.features, "k": args.k,
                    "memory_limit": args.memory_limit, "memory_table": memory_table()}
    workdir = Path(tempfile.mkdtemp(prefix="dsvm-memory-", dir=args.workdir))
    try:
        t0 = time.perf_counter()
        ds = dsvm.make_classification_zarr(workdir / "data.zarr", n_samples=args.rows, n_features=args.features,
                                           random_state=0)
        result["generate_s"] = time.perf_counter() - t0
        result["chunk_rows"] = ds.chunk_rows
        blocks_log = _Capture()
        logging.getLogger("dsvm.blocks._resources").addHandler(blocks_log)
        with dask.config.set({"dsvm.scratch-directory": str(workdir)}), \
                connect(local={"memory_limit": args.memory_limit}) as client:
            sampler = MemorySampler(client)
            sampler.start()
            workers_before = set(client.scheduler_info()["workers"])
            t0 = time.perf_counter()
            model = dsvm.NystroemSVC(n_components=args.k, random_state=0).fit(ds)
            result["fit_s"] = time.perf_counter() - t0
            sampler.stop.set()
            sampler.join()
            info = client.scheduler_info()["workers"]
            logs = "\n".join(line for log in client.get_worker_logs().values() for _, line in log)
            pause = dask.config.get("distributed.worker.memory.pause")
            result.update({
                "workers": len(info), "threads_per_worker": [w["nthreads"] for w in info.values()],
                "worker_limit_MiB": [w["memory_limit"] / MiB for w in info.values()],
                "pause_line_MiB": [pause * w["memory_limit"] / MiB for w in info.values()],
                "peak_worker_rss_MiB": [v / MiB for v in sampler.peak.values()],
                "paused": logs.count("Pausing worker"),
                "restarted": set(info) != workers_before,
            })
        s = model.solver_stats_
        result["row_blocks"] = blocks_log.messages
        result.update({"feature_store": s["feature_store"], "landmark_s": s["landmark_seconds"],
                       "feature_s": s["feature_seconds"], "solve_s": s["solve_seconds"], "newton_iter": model.n_iter_})
        result["ok"] = result["paused"] == 0 and not result["restarted"]
        print(json.dumps(result, indent=2))
        save_json(result, args.out)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    os.environ.setdefault("PYTHONWARNINGS", "ignore")
    main()
