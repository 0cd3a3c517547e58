"""Scale: a feature matrix larger than this machine's RAM, end to end.

Generates a synthetic zarr dataset (default 10M rows x 28 features), trains
``NystroemSVC(n_components=1000)`` on the default local Dask cluster (F = n x k
float32 = 40 GB for the defaults, more than the 24 GiB of RAM here, so the
feature store streams it from a zarr scratch store or recomputes it) and
reports: wall time per stage, passes over the data, peak memory per worker
(sampled every second), and the achieved read bandwidth and feature-stage
FLOP rate as fractions of what the machine does (``dd`` sequential read of a
file larger than the page cache can hold, numpy GEMM) measured in the same run.

Usage::

    python benchmarks/bench_scale.py [--rows 10000000] [--features 28] [-k 1000] [--workdir /path/with/80GB]

Needs free disk of about 1.2 x F plus the dataset (about 50 GB for the defaults).
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import shutil
import subprocess
import tempfile
import threading
import time
from pathlib import Path

from common import REPO, gemm_gflops, machine, save_json

logger = logging.getLogger("bench_scale")


def disk_read_bandwidth(workdir: Path, gib: int = 4) -> float:
    """Sequential read bandwidth (bytes/s) of ``workdir`` with O_DIRECT (page cache bypassed)."""
    path = workdir / "dd-probe.bin"
    subprocess.run(["dd", "if=/dev/urandom", f"of={path}", "bs=16M", f"count={gib * 64}", "conv=fdatasync"],
                   check=True, capture_output=True)
    t0 = time.perf_counter()
    subprocess.run(["dd", f"if={path}", "of=/dev/null", "bs=16M", "iflag=direct"], check=True, capture_output=True)
    seconds = time.perf_counter() - t0
    path.unlink()
    return gib * 2**30 / seconds


class MemorySampler(threading.Thread):
    """Peak RSS of every worker, sampled with ``client.run`` once a second."""

    def __init__(self, client):
        super().__init__(daemon=True)
        self.client, self.peak, self.stop = client, {}, threading.Event()

    def run(self):
        import psutil

        while not self.stop.is_set():
            try:
                rss = self.client.run(lambda: psutil.Process().memory_info().rss)
                for w, v in rss.items():
                    self.peak[w] = max(self.peak.get(w, 0), v)
            except Exception:  # a worker restarting: keep sampling
                pass
            self.stop.wait(1.0)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", type=int, default=10_000_000)
    ap.add_argument("--features", type=int, default=28)
    ap.add_argument("-k", type=int, default=1000)
    ap.add_argument("--workdir", type=Path, default=None, help="where the dataset and the scratch store go")
    ap.add_argument("--keep", action="store_true", help="keep the generated dataset")
    ap.add_argument("--out", type=Path, default=REPO / "benchmarks" / "results" / "scale.json")
    args = ap.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s: %(message)s", datefmt="%H:%M:%S")

    import dask.config

    import dsvm
    from dsvm.app.cluster import connect

    workdir = Path(tempfile.mkdtemp(prefix="dsvm-scale-", dir=args.workdir))
    result: dict = {"machine": machine(), "rows": args.rows, "features": args.features, "k": args.k}
    try:
        result["gemm_gflops"] = gemm_gflops()
        result["disk_read_GBps"] = disk_read_bandwidth(workdir) / 1e9
        logger.info("machine: GEMM %.0f GFLOP/s, disk read %.2f GB/s", result["gemm_gflops"], result["disk_read_GBps"])
        t0 = time.perf_counter()
        ds = dsvm.make_classification_zarr(workdir / "scale.zarr", n_samples=args.rows, n_features=args.features,
                                           random_state=0)
        result["generate_s"] = time.perf_counter() - t0
        f_bytes = args.rows * args.k * 4
        result["F_GB"] = f_bytes / 1e9
        with dask.config.set({"dsvm.scratch-directory": str(workdir)}), connect() as client:
            sampler = MemorySampler(client)
            sampler.start()
            t0 = time.perf_counter()
            model = dsvm.NystroemSVC(C=1.0, n_components=args.k, random_state=0).fit(ds)
            result["fit_s"] = time.perf_counter() - t0
            sampler.stop.set()
            sampler.join()
            limits = {w: info["memory_limit"] for w, info in client.scheduler_info()["workers"].items()}
        s = model.solver_stats_
        prob = s["problems"][0]
        passes = s["landmark_passes"] + 1 + prob["n_passes"]  # landmarks, feature stage, solve
        solve_read = prob["n_passes"] * f_bytes if s["feature_store"] == "zarr" else 0
        feature_flops = 2.0 * args.rows * args.k * (args.features + model.coef_.shape[1])
        result.update({
            "feature_store": s["feature_store"], "landmark_s": s["landmark_seconds"], "feature_s": s["feature_seconds"],
            "solve_s": s["solve_seconds"], "newton_iter": model.n_iter_, "passes_over_data": passes,
            "solve_passes": prob["n_passes"],
            "peak_worker_rss_GB": {w: v / 1e9 for w, v in sampler.peak.items()},
            "worker_memory_limit_GB": {w: v / 1e9 for w, v in limits.items()},
            "feature_stage_gflops": feature_flops / s["feature_seconds"] / 1e9,
            "solve_read_GBps": solve_read / s["solve_seconds"] / 1e9 if solve_read else None,
        })
        result["feature_gflops_fraction_of_gemm"] = result["feature_stage_gflops"] / result["gemm_gflops"]
        if result["solve_read_GBps"]:
            result["solve_read_fraction_of_dd"] = result["solve_read_GBps"] / result["disk_read_GBps"]
        print(json.dumps(result, indent=2))
        save_json(result, args.out)
    finally:
        if not args.keep:
            shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    os.environ.setdefault("PYTHONWARNINGS", "ignore")
    main()
