"""``-k auto`` out of core: a dataset larger than a worker's memory gives the in-memory fit's k and model.

Writes ``make_classification_zarr`` data (default 2.5M rows x 64 float32 features: 640 MB, in
chunks of 65,536 rows), then, with the same seed and parameters (implicit features in both: no F
is stored, in memory or on disk):

1. ``dsvm train DATA -k auto`` on a local cluster of ``--workers`` workers of ``--memory-limit``
   each (smaller than the data), in a subprocess;
2. ``NystroemSVC(n_components="auto")`` in this process on the data loaded into memory.

Printed: the data's size against one worker's memory, both k paths (k, held-out score), the chosen
k, both times, and how far the two models' decision values on a sample of rows are apart.

Usage::

    python benchmarks/bench_auto_k_out_of_core.py [--rows 2500000] [--features 64] [--memory-limit 600MB]
                                                   [--k-tol 0.002]
"""

from __future__ import annotations

import argparse
import logging
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from common import REPO, machine, save_json

logger = logging.getLogger("bench_auto_k_out_of_core")
PARAMS = {"C": 10.0, "gamma": 0.02, "random_state": 0, "feature_store": "implicit"}


def cli_fit(data: Path, model: Path, args) -> float:
    """Seconds of ``dsvm train -k auto`` on a local cluster of small workers."""
    cmd = [sys.executable, "-m", "dsvm", "--log-level", "INFO", "--no-progress", "train", str(data), "--model",
           str(model), "-k", "auto", "-C", str(PARAMS["C"]), "--gamma", str(PARAMS["gamma"]), "--random-state",
           str(PARAMS["random_state"]), "--workers", str(args.workers), "--threads-per-worker", "1",
           "--memory-limit", args.memory_limit, "--feature-store", PARAMS["feature_store"], "--k-tol", str(args.k_tol)]
    t0 = time.perf_counter()
    done = subprocess.run(cmd, capture_output=True, text=True)
    seconds = time.perf_counter() - t0
    if done.returncode != 0:
        raise SystemExit(f"dsvm train failed ({done.returncode}):\n{done.stderr[-4000:]}")
    for line in done.stderr.splitlines():
        if "auto k" in line or "fit:" in line:
            logger.info("cli: %s", line)
    return seconds


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", type=int, default=2_500_000)
    ap.add_argument("--features", type=int, default=64)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--memory-limit", default="600MB")
    ap.add_argument("--k-tol", type=float, default=0.002)
    ap.add_argument("--workdir", type=Path, default=None)
    ap.add_argument("--out", type=Path, default=REPO / "benchmarks" / "results" / "auto_k_out_of_core.json")
    args = ap.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    import dask.utils

    import dsvm

    workdir = Path(tempfile.mkdtemp(prefix="dsvm-autok-ooc-", dir=args.workdir))
    try:
        data = workdir / "train.zarr"
        dsvm.make_classification_zarr(data, args.rows, args.features, chunk_rows=65_536, random_state=0)
        data_bytes = args.rows * args.features * 4
        worker_bytes = dask.utils.parse_bytes(args.memory_limit)
        cli_seconds = cli_fit(data, workdir / "m.npz", args)
        out_of_core = dsvm.load_model(workdir / "m.npz")
        X, y = dsvm.open_dataset(data).load()
        t0 = time.perf_counter()
        in_memory = dsvm.NystroemSVC(n_components="auto", k_tol=args.k_tol, **PARAMS).fit(X, y)
        mem_seconds = time.perf_counter() - t0
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    sample = np.random.default_rng(1).choice(args.rows, 100_000, replace=False)
    d_ooc, d_mem = out_of_core.decision_function(X[sample]), in_memory.decision_function(X[sample])
    result = {
        "machine": machine(), "rows": args.rows, "features": args.features, "data_bytes": data_bytes,
        "worker_memory_bytes": worker_bytes, "workers": args.workers, "k_tol": args.k_tol,
        "cli": {"seconds": cli_seconds, "k": out_of_core.n_components_, "path": out_of_core.k_path_},
        "in_memory": {"seconds": mem_seconds, "k": in_memory.n_components_, "path": in_memory.k_path_},
        "same_k": out_of_core.n_components_ == in_memory.n_components_,
        "same_landmarks": bool(np.array_equal(out_of_core.component_indices_, in_memory.component_indices_)),
        "max_decision_difference": float(np.max(np.abs(d_ooc - d_mem))),
        "largest_decision": float(np.max(np.abs(d_mem))),
        "labels_differing": int(np.count_nonzero(np.sign(d_ooc) != np.sign(d_mem))),
        "objective_relative_difference": float(abs(out_of_core.objective_ - in_memory.objective_)
                                               / abs(in_memory.objective_)),
    }
    for key, value in result.items():
        print(f"{key}: {value}", flush=True)
    save_json(result, args.out)


if __name__ == "__main__":
    main()
