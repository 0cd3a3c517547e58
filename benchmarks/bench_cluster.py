"""Several machines: a fit on N separate ``dask worker`` processes, with the bytes each pass moves.

Starts a ``dask scheduler`` and N ``dask worker`` processes (as on N hosts;
one thread each by default), fits ``NystroemSVC`` on a synthetic zarr dataset
with the feature matrix F kept in the workers' memory, and reports for every
solver pass (one ``map_reduce`` of the loss over F):

* the bytes moved between workers and from the workers to this process
  (the workers' transfer logs: whoever asked for the data);
* its seconds, and the busy seconds of each worker (the task stream);
* the bytes of F each worker holds;

for N = 1 and 2 (``--workers``), then the cost model of README's "Several
machines" (one packed Gram matrix of ``S = 2 (r+1)^2`` bytes and a few
k-vectors per worker and pass; pass time = one worker's busy time / N + the
round trip of a pass over the same blocks with nothing in them + the Gram
matrices' transfers) against the measured 2-worker passes, and whether both
fits gave the same model.

Usage::

    python benchmarks/bench_cluster.py [--rows 1000000] [--features 28] [-k 500] [--workers 1 2]
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from common import REPO, machine, save_json

logger = logging.getLogger("bench_cluster")


def _spawn(args: list[str], log: Path) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", *args], stdout=log.open("wb"), stderr=subprocess.STDOUT,
                            start_new_session=True)


def _stop(procs: list[subprocess.Popen]) -> None:
    for proc in procs:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGTERM)
    for proc in procs:
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


def start_cluster(tmp: Path, n_workers: int, threads: int, memory: str) -> tuple[list[subprocess.Popen], Path]:
    """A scheduler and ``n_workers`` worker processes on 127.0.0.1; returns them and the scheduler file."""
    sched_file = tmp / "scheduler.json"
    procs = [_spawn(["distributed.cli.dask_scheduler", "--host", "127.0.0.1", "--port", "0", "--dashboard-address",
                     "127.0.0.1:0", "--scheduler-file", str(sched_file)], tmp / "scheduler.log")]
    deadline = time.monotonic() + 60
    while not sched_file.exists() or not sched_file.read_text().strip():
        if time.monotonic() > deadline:
            _stop(procs)
            raise RuntimeError((tmp / "scheduler.log").read_text()[-2000:])
        time.sleep(0.1)
    for i in range(n_workers):
        procs.append(_spawn(["distributed.cli.dask_worker", "--scheduler-file", str(sched_file), "--host", "127.0.0.1",
                             "--nthreads", str(threads), "--name", f"w{i}", "--dashboard-address", "127.0.0.1:0",
                             "--memory-limit", memory], tmp / f"w{i}.log"))
    return procs, sched_file


def _transfers(dask_worker):
    """Runs on a worker: its clock and every transfer it served (who asked, bytes, when)."""
    return {"now": time.time(), "log": [(e["who"], e["total"], e["start"]) for e in dask_worker.transfer_outgoing_log]}


class PassMeter:
    """Wraps ``map_reduce`` of Dask row blocks: per call, seconds, bytes moved, busy seconds per worker."""

    def __init__(self, client, workers: list[str]):
        from dsvm.blocks._dask_blocks import DaskBlocks

        self.client, self.workers, self.calls = client, workers, []
        self.cls, self.original = DaskBlocks, DaskBlocks.map_reduce
        meter = self

        def map_reduce(blocks, fn, aligned=(), shared=(), combine=None, **kw):
            from distributed import get_task_stream

            before = meter.client.run(_transfers)
            with get_task_stream(meter.client) as stream:
                t0 = time.perf_counter()
                out = (meter.original(blocks, fn, aligned, shared, combine, **kw) if combine is not None
                       else meter.original(blocks, fn, aligned, shared, **kw))
                seconds = time.perf_counter() - t0
            after = meter.client.run(_transfers)
            between = to_client = 0
            for w in meter.workers:
                for who, nbytes, start in after[w]["log"]:
                    if start < before[w]["now"]:
                        continue
                    if who in meter.workers:
                        between += nbytes
                    else:
                        to_client += nbytes
            busy = dict.fromkeys(meter.workers, 0.0)
            for task in stream.data:
                for ss in task["startstops"]:
                    if ss["action"] == "compute" and task["worker"] in busy:
                        busy[task["worker"]] += ss["stop"] - ss["start"]
            meter.calls.append({"fn": getattr(fn, "__name__", "?"), "seconds": seconds, "blocks": blocks.n_blocks,
                                "bytes_between_workers": between, "bytes_to_client": to_client,
                                "busy_s": [busy[w] for w in meter.workers]})
            return out

        DaskBlocks.map_reduce = map_reduce

    def close(self):
        self.cls.map_reduce = self.original


def run(n_workers: int, args, ds_path: Path, tmp: Path) -> dict:
    from distributed import Client

    import dsvm

    procs, sched_file = start_cluster(tmp, n_workers, args.threads, args.memory_limit)
    try:
        client = Client(scheduler_file=str(sched_file), timeout="60s")
        client.wait_for_workers(n_workers, timeout=120)
        workers = sorted(client.scheduler_info()["workers"])
        meter = PassMeter(client, workers)
        params = dict(C=1.0, n_components=args.k, random_state=0, feature_store="memory")
        try:
            with client.as_current():
                t0 = time.perf_counter()
                model = dsvm.NystroemSVC(**params).fit(dsvm.open_dataset(ds_path))
                fit_s = time.perf_counter() - t0
                info = client.scheduler_info()["workers"]
                f_bytes = [info[w]["metrics"]["managed_bytes"] for w in workers]
                # the round trip of a pass over the same blocks that does nothing
                import dask.array as da

                from dsvm.blocks import as_row_blocks

                n_blocks = max(c["blocks"] for c in meter.calls if c["fn"].endswith("_pass"))
                empty = as_row_blocks(da.zeros((n_blocks * 8, 1), chunks=(8, 1)), 0).persist()
                trips = []
                for _ in range(7):
                    t0 = time.perf_counter()
                    empty.map_reduce(_nothing)
                    trips.append(time.perf_counter() - t0)
        finally:
            meter.close()
        client.close()
    finally:
        _stop(procs)
    s = model.solver_stats_
    passes = [c for c in meter.calls if c["fn"].endswith("_pass")]
    r = model.coef_.shape[1]
    return {"workers": n_workers, "threads_per_worker": args.threads, "fit_s": fit_s,
            "feature_s": s["feature_seconds"], "solve_s": s["solve_seconds"], "newton_iter": model.n_iter_,
            "objective": float(model.objective_), "r": r, "F_bytes_per_worker": f_bytes,
            "packed_gram_bytes": (r + 1) * (r + 2) // 2 * 4, "round_trip_s": float(np.median(trips)),
            "passes": passes, "coef": model.coef_.ravel().tolist(), "intercept": float(model.intercept_[0])}


def _nothing(block):
    return 0.0


def model_check(one: dict, two: dict) -> dict:
    """The cost model's figures for the 2-worker passes from the 1-worker run, against the measured ones."""
    S = one["packed_gram_bytes"]
    rows = []
    for p1, p2 in zip(one["passes"], two["passes"]):
        busy1 = sum(p1["busy_s"])
        # the Gram matrix of a worker crosses 127.0.0.1 in about 1 ms: (N-1) S / W is left out
        predicted = busy1 / 2 + two["round_trip_s"]
        # the same with each worker's busy time as measured (other tenants share the cores)
        from_busy = max(p2["busy_s"]) + two["round_trip_s"]
        rows.append({"pass_s_1": p1["seconds"], "pass_s_2": p2["seconds"], "busy_s_1": busy1,
                     "busy_s_2_per_worker": p2["busy_s"], "predicted_pass_s_2": predicted,
                     "measured_over_predicted": p2["seconds"] / predicted,
                     "predicted_from_busy_s_2": from_busy, "measured_over_predicted_from_busy": p2["seconds"] / from_busy,
                     "predicted_between_workers_bytes": S, "measured_between_workers_bytes": p2["bytes_between_workers"],
                     "predicted_to_client_bytes_at_most": S + 64 * (one["r"] + 1),
                     "measured_to_client_bytes": p2["bytes_to_client"]})
    return {"passes": rows}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--features", type=int, default=28)
    ap.add_argument("-k", type=int, default=500)
    ap.add_argument("--workers", type=int, nargs="+", default=[1, 2])
    ap.add_argument("--threads", type=int, default=1, help="threads per worker process")
    ap.add_argument("--memory-limit", default="8GiB", help="per worker process")
    ap.add_argument("--workdir", type=Path, default=None)
    ap.add_argument("--out", type=Path, default=REPO / "benchmarks" / "results" / "cluster.json")
    args = ap.parse_args()
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(name)s: %(message)s", datefmt="%H:%M:%S")
    logger.setLevel(logging.INFO)

    import dsvm

    workdir = Path(tempfile.mkdtemp(prefix="dsvm-cluster-", dir=args.workdir))
    result: dict = {"machine": machine(), "rows": args.rows, "features": args.features, "k": args.k, "runs": []}
    try:
        ds = dsvm.make_classification_zarr(workdir / "data.zarr", n_samples=args.rows, n_features=args.features,
                                           random_state=0)
        for n in args.workers:
            (workdir / f"n{n}").mkdir()
            run_result = run(n, args, Path(ds.path), workdir / f"n{n}")
            result["runs"].append(run_result)
            for i, p in enumerate(run_result["passes"]):
                logger.info("N=%d pass %d: %.2fs, %.2f MB between workers, %.2f MB to the client, busy %s", n, i,
                            p["seconds"], p["bytes_between_workers"] / 1e6, p["bytes_to_client"] / 1e6,
                            ", ".join(f"{b:.2f}s" for b in p["busy_s"]))
        runs = {r["workers"]: r for r in result["runs"]}
        if 1 in runs and 2 in runs:
            c1, c2 = np.asarray(runs[1]["coef"]), np.asarray(runs[2]["coef"])
            result["same_model_max_rel_coef_diff"] = float(np.max(np.abs(c1 - c2)) / np.max(np.abs(c1)))
            result["model_check"] = model_check(runs[1], runs[2])
        for r in result["runs"]:
            r.pop("coef")
        print(json.dumps(result, indent=1))
        save_json(result, args.out)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    os.environ.setdefault("PYTHONWARNINGS", "ignore")
    main()
