"""Accuracy and fit time against k on the bumps problem, the one that keeps gaining from landmarks.

Generates ``make_bumps_zarr`` data (default 1M training rows and 100,000
test rows, 20 features, 2000 bumps), loads it into this process and fits
``NystroemSVC(n_components=k, feature_store=STORE)`` at each ``--ks`` in turn
(C = 10, gamma="scale", uniform landmarks), printing fit seconds with their
stages, test accuracy, and each fit's time against the first k's.  The
default store is ``implicit``: at k = 4000 the features of 1M rows take 16 GB,
at 8000 32 GB.

Usage::

    python benchmarks/bench_k.py [--rows 1000000] [--ks 1000,2000,4000,8000] [--store implicit]
                                 [--hessian auto] [--workdir DIR]
"""

from __future__ import annotations

import argparse
import logging
import shutil
import tempfile
import time
import warnings
from pathlib import Path

from common import REPO, machine, save_json, table

TEST_ROWS = 100_000


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--ks", default="1000,2000,4000,8000")
    ap.add_argument("--store", default="implicit")
    ap.add_argument("--hessian", default="auto", help="the Newton variant: auto, gram or cg")
    ap.add_argument("--C", type=float, default=10.0)
    ap.add_argument("--workdir", type=Path, default=None)
    ap.add_argument("--out", type=Path, default=REPO / "benchmarks" / "results" / "k.json")
    args = ap.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s: %(message)s", datefmt="%H:%M:%S")
    import dsvm

    workdir = Path(tempfile.mkdtemp(prefix="dsvm-k-", dir=args.workdir))
    try:
        t0 = time.perf_counter()
        X, y = dsvm.make_bumps_zarr(workdir / "bumps.zarr", args.rows + TEST_ROWS, random_state=0).load()
        generate_s = time.perf_counter() - t0
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    Xtr, ytr, Xte, yte = X[: args.rows], y[: args.rows], X[args.rows :], y[args.rows :]
    rows = []
    for k in (int(v) for v in args.ks.split(",")):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            t0 = time.perf_counter()
            model = dsvm.NystroemSVC(C=args.C, n_components=k, random_state=0, feature_store=args.store,
                                     hessian=args.hessian).fit(Xtr, ytr)
            fit_s = time.perf_counter() - t0
        s = model.solver_stats_
        row = {"k": k, "fit_s": fit_s, "accuracy": float(model.score(Xte, yte)), "landmark_s": s["landmark_seconds"],
               "opening_s": s.get("opening", {}).get("seconds", 0.0), "feature_s": s["feature_seconds"],
               "solve_s": s["solve_seconds"], "newton_iter": int(model.n_iter_),
               "passes": s["problems"][0]["n_passes"], "hessian": s["hessian"],
               "cg_steps": sum(h["cg_steps"] for h in s["problems"][0]["history"]),
               "opening_rows": s.get("opening", {}).get("rows", 0)}
        row["time_vs_first"] = fit_s / (rows[0]["fit_s"] if rows else fit_s)
        rows.append(row)
        print({key: round(v, 4) if isinstance(v, float) else v for key, v in row.items()}, flush=True)
    print(f"\n## bumps, {args.rows} training rows, {TEST_ROWS} test rows, store {args.store}, hessian {args.hessian}, "
          f"C = {args.C}\n")
    print(f"machine: {machine()}; data generated in {generate_s:.0f} s\n")
    print(table(rows, ["k", "fit_s", "time_vs_first", "accuracy", "landmark_s", "opening_s", "feature_s", "solve_s",
                       "newton_iter", "passes", "hessian", "cg_steps", "opening_rows"]))
    save_json({"machine": machine(), "rows": args.rows, "store": args.store, "C": args.C, "fits": rows}, args.out)


if __name__ == "__main__":
    main()
