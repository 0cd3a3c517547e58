"""BLAS threads of the client's factorisations, on idle cores and beside another job.

The client factors ``K(L, L)`` once per fit (``eigh``, order k) and the Newton
system once per iteration (Cholesky, order r + 1).  OpenBLAS runs them on every
core; where another job holds the cores its threads wait for each other.  This
benchmark times both factorisations at ``--orders`` on all BLAS threads, on one,
and as dsvm runs them (:func:`dsvm.blas.blas_for_order`: one thread below
its order threshold), first on idle cores and then beside a competing job (a process running
float64 GEMMs on ``--load-threads`` BLAS threads), in the same run.  With
``--fits`` it also fits NystroemSVC on ijcnn1 (γ = 2, C = 10, uniform
landmarks) at k = 500 and k = 1000 beside the competing job, the ratio the
issue asks about, with each feature store of ``--stores`` in turn.

Usage::

    python benchmarks/bench_factor_threads.py [--orders 1000 2000] [--repeats 3] [--fits]
                                              [--stores memory,implicit] [--data-dir DIR]

Prints Markdown tables; writes JSON to benchmarks/results/factor_threads.json.
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import multiprocessing
import statistics
import time

import numpy as np
import scipy.linalg
from common import DEFAULT_DATA_DIR, REPO, load_libsvm, machine, save_json, table

from dsvm import blas


def _competing_job(threads: int, stop) -> None:
    from threadpoolctl import threadpool_limits

    a = np.random.default_rng(0).standard_normal((1500, 1500))
    with threadpool_limits(threads, user_api="blas"):
        while not stop.is_set():
            a @ a


@contextlib.contextmanager
def competing_job(threads: int):
    """Another process computing GEMMs on ``threads`` BLAS threads while the block runs (or nothing at 0)."""
    if threads <= 0:
        yield
        return
    ctx = multiprocessing.get_context("spawn")
    stop = ctx.Event()
    proc = ctx.Process(target=_competing_job, args=(threads, stop), daemon=True)
    proc.start()
    time.sleep(2.0)  # let it import numpy and start its GEMMs
    try:
        yield
    finally:
        stop.set()
        proc.join(10)


def _factorisations(order: int):
    rng = np.random.default_rng(order)
    a = rng.standard_normal((order, order))
    spd = a @ a.T / order + np.eye(order)
    return {"eigh": lambda: np.linalg.eigh(spd),
            "cholesky": lambda: scipy.linalg.cho_factor(spd, lower=False, check_finite=False)}


def _median_seconds(fn, repeats: int) -> float:
    runs = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        runs.append(time.perf_counter() - t0)
    return statistics.median(runs)


def time_factorisations(orders, repeats: int, condition: str) -> list[dict]:
    """Median seconds of each factorisation on all threads, one thread and dsvm's choice."""
    rows = []
    for order in orders:
        for name, fn in _factorisations(order).items():
            fn()  # warm
            all_s = _median_seconds(fn, repeats)
            with blas.single_threaded_blas():
                one_s = _median_seconds(fn, repeats)

            def chosen(fn=fn, order=order):
                with blas.blas_for_order(order):
                    fn()

            dsvm_s = _median_seconds(chosen, repeats)
            rows.append({"condition": condition, "factorisation": name, "order": order, "all_threads_s": all_s,
                         "one_thread_s": one_s, "dsvm_s": dsvm_s, "dsvm_vs_best": dsvm_s / min(all_s, one_s)})
    return rows


def time_fits(data_dir, repeats: int, store: str) -> list[dict]:
    """ijcnn1 fits at k = 500 and 1000 (medians of ``repeats``) with ``feature_store=store``, to be run beside
    the competing job."""
    from dsvm import NystroemSVC

    X, y = load_libsvm(data_dir, "ijcnn1", "train")
    rows = []
    for k in (500, 1000):
        model = NystroemSVC(C=10.0, gamma=2.0, n_components=k, random_state=0, feature_store=store)
        seconds = []
        for _ in range(repeats):
            t0 = time.perf_counter()
            model.fit(X, y)
            seconds.append(time.perf_counter() - t0)
        stats = model.solver_stats_
        rows.append({"store": store, "k": k, "fit_s": statistics.median(seconds),
                     "landmark_s": stats["landmark_seconds"], "feature_s": stats["feature_seconds"],
                     "solve_s": stats["solve_seconds"], "runs": [round(s, 3) for s in seconds]})
    rows[1]["ratio_vs_k500"] = rows[1]["fit_s"] / rows[0]["fit_s"]
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--orders", type=int, nargs="+", default=[1000, 2000])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--load-threads", type=int, default=2)
    parser.add_argument("--fits", action="store_true", help="also time ijcnn1 fits at k=500 and 1000 beside the job")
    parser.add_argument("--stores", default="memory,implicit",
                        help="feature_store values the --fits are made with, in turn (default memory,implicit)")
    parser.add_argument("--data-dir", default=DEFAULT_DATA_DIR)
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)
    t0 = time.perf_counter()
    rows = time_factorisations(args.orders, args.repeats, "idle")
    with competing_job(args.load_threads):
        rows += time_factorisations(args.orders, args.repeats, f"beside a {args.load_threads}-thread job")
        fits = [row for store in args.stores.split(",") for row in time_fits(args.data_dir, args.repeats, store)] \
            if args.fits else []
    print(f"# Factorisation threads\n\nmachine: {machine()}\n")
    print(table(rows, ["condition", "factorisation", "order", "all_threads_s", "one_thread_s", "dsvm_s",
                       "dsvm_vs_best"]))
    if fits:
        print(f"\n## ijcnn1 fits beside a {args.load_threads}-thread job\n")
        print(table(fits, ["store", "k", "fit_s", "ratio_vs_k500", "landmark_s", "feature_s", "solve_s", "runs"]))
    path = REPO / "benchmarks" / "results" / "factor_threads.json"
    save_json({"machine": machine(), "factorisations": rows, "fits": fits}, path)
    print(f"\nJSON: {path.relative_to(REPO)}\ntotal benchmark time {time.perf_counter() - t0:.0f}s")


if __name__ == "__main__":
    main()
