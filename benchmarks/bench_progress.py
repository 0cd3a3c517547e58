"""What progress reporting costs a fit: the same fit with ``dsvm.show_progress()`` off and on, alternated.

The ``dsvm`` command shows progress by default.  On a cluster it counts the
finished blocks of every pass: through callbacks on the persisted blocks'
futures (feature store in memory), or by asking for each block's part of a
reduction as an output and releasing it once counted (feature store on disk,
recompute).  This fits ``NystroemSVC`` on a generated zarr dataset on a local
cluster of two one-thread workers, ``--repeats`` times each way, alternating
off and on, for each feature store, and prints the median fit seconds and
their ratio (on / off).  Progress lines go to a log file, not the terminal.

Usage::

    python benchmarks/bench_progress.py [--rows 1000000] [--features 28] [-k 500] [--repeats 3]
"""

from __future__ import annotations

import argparse
import logging
import statistics
import tempfile
import time
from pathlib import Path

from common import REPO, machine, save_json, table

logger = logging.getLogger("bench_progress")


def _fit_seconds(ds, k: int, store: str) -> float:
    import dsvm

    t0 = time.perf_counter()
    dsvm.NystroemSVC(n_components=k, gamma=0.05, C=10.0, feature_store=store, random_state=0).fit(ds)
    return time.perf_counter() - t0


def _compare(ds, k: int, store: str, repeats: int) -> dict:
    """Alternate fits without and with progress; the medians and their ratio."""
    import dsvm

    seconds = {"off": [], "on": []}
    _fit_seconds(ds, k, store)  # warm: the workers' imports and caches
    for _ in range(repeats):
        for mode in ("off", "on"):
            dsvm.show_progress(mode == "on")
            seconds[mode].append(_fit_seconds(ds, k, store))
    dsvm.show_progress(False)
    off, on = statistics.median(seconds["off"]), statistics.median(seconds["on"])
    return {"store": store, "off_s": off, "on_s": on, "ratio": on / off, "off_all": seconds["off"],
            "on_all": seconds["on"]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--features", type=int, default=28)
    parser.add_argument("-k", type=int, default=500)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()

    from distributed import Client, LocalCluster

    import dsvm

    log = Path(tempfile.mkdtemp(prefix="bench-progress-")) / "progress.log"
    handler = logging.FileHandler(log)
    logging.getLogger("dsvm").addHandler(handler)  # show_progress then adds no handler on stderr
    logging.getLogger("dsvm").propagate = False
    with tempfile.TemporaryDirectory() as tmp:
        ds = dsvm.make_classification_zarr(Path(tmp) / "data.zarr", n_samples=args.rows, n_features=args.features)
        with LocalCluster(n_workers=2, threads_per_worker=1, dashboard_address=None, host="127.0.0.1") as cluster, \
                Client(cluster):
            rows = [_compare(ds, args.k, store, args.repeats) for store in ("memory", "disk")]
    progress_lines = sum(1 for line in log.read_text().splitlines() if "%" in line)
    print(f"machine: {machine()}; {args.rows} rows x {args.features}, k={args.k}, 2 workers x 1 thread; "
          f"{args.repeats} alternated fits each way; {progress_lines} progress lines logged to {log}")
    print(table(rows, ["store", "off_s", "on_s", "ratio"]))
    save_json({"args": vars(args), "machine": machine(), "rows": rows},
              REPO / "benchmarks" / "results" / "progress.json")


if __name__ == "__main__":
    main()
