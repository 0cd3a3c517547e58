"""Speed of dsvm on a9a (C=10, γ=0.05) against LIBSVM and LIBLINEAR, ratios measured in one run.

1. dsvm ``fit`` (k=500, numpy input) vs scikit-learn ``SVC`` (LIBSVM), with test accuracy;
2. the Newton solve vs LIBLINEAR's DCD (``LinearSVC(dual=True)``) and TRON
   (``dual=False``) on the identical feature matrix, for k=500 and k=2000: each
   LIBLINEAR solver is run with tolerances 1e-1, 1e-2, ... until its solution's
   objective (dsvm's definition, bias unregularised) is within 1e-4 relative of
   dsvm's optimum; the time of that first run counts (LIBLINEAR at its default
   ``intercept_scaling=1``, as in the paper experiments).  Each fit runs in a
   forked child so that a ladder can be stopped at ``--liblinear-budget``
   seconds (LIBLINEAR's DCD can take hours at k=2000); a stopped ladder is
   reported as a lower bound (">budget");
3. dsvm on the default local Dask cluster (data read from a zarr dataset by
   the workers) vs the same algorithm in plain numpy, k=500 and k=2000, with
   the share of the feature stage and of the solve.

Usage::

    python benchmarks/bench_core.py [--data-dir ../shared/data] [--repeats 3] [--skip-libsvm]

Prints Markdown tables; writes JSON to benchmarks/results/core.json.
"""

from __future__ import annotations

import argparse
import logging
import multiprocessing
import statistics
import tempfile
import time
import warnings
from pathlib import Path

import numpy as np
from common import DEFAULT_DATA_DIR, REPO, load_libsvm, machine, save_json, table, timed

C, GAMMA = 10.0, 0.05


def dense_objective(F64, y_pm, w, b):
    r = np.maximum(0.0, 1.0 - y_pm * (F64 @ w + b))
    return 0.5 * float(w @ w) + C * float(r @ r)


def _liblinear_child(conn, F64, y, dual, tol):
    from sklearn.exceptions import ConvergenceWarning
    from sklearn.svm import LinearSVC

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        t0 = time.perf_counter()
        # LIBLINEAR's default intercept_scaling=1 regularises the bias by ½b², which costs it at most
        # that much against dsvm's objective (bias free); larger scalings slow DCD down by orders of
        # magnitude (at 10, a9a k=500 does not reach tol=0.1 in 120 s)
        m = LinearSVC(C=C, loss="squared_hinge", dual=dual, tol=tol, intercept_scaling=1.0,
                      max_iter=100_000).fit(F64, y)
        conn.send((time.perf_counter() - t0, m.coef_[0], float(m.intercept_[0])))


def fit_liblinear_bounded(F64, y, dual: bool, tol: float, timeout: float):
    """``LinearSVC`` fitted in a forked child (it cannot be interrupted in-process): ``(seconds, coef,
    intercept)``, or ``None`` if it did not finish within ``timeout`` seconds (the child is killed).
    The seconds are measured around ``fit`` inside the child, without the fork."""
    ctx = multiprocessing.get_context("fork")
    parent, child = ctx.Pipe(duplex=False)
    proc = ctx.Process(target=_liblinear_child, args=(child, F64, y, dual, tol), daemon=True)
    proc.start()
    child.close()
    try:
        if parent.poll(timeout):
            return parent.recv()
        return None
    finally:
        proc.kill()
        proc.join()


def bench_libsvm(Xtr, ytr, Xte, yte):
    from sklearn.svm import SVC

    t, _, svc = timed(lambda: SVC(kernel="rbf", gamma=GAMMA, C=C, cache_size=2000).fit(Xtr, ytr))
    return {"solver": "LIBSVM SVC", "fit_s": t, "accuracy": svc.score(Xte, yte), "n_SV": int(svc.n_support_.sum())}


def bench_dsvm_numpy(Xtr, ytr, Xte, yte, k, repeats):
    from dsvm import NystroemSVC

    t, times, clf = timed(lambda: NystroemSVC(C=C, gamma=GAMMA, n_components=k, random_state=0).fit(Xtr, ytr), repeats)
    s = clf.solver_stats_
    return clf, {
        "solver": f"dsvm numpy k={k}", "fit_s": t, "runs": [round(x, 3) for x in times],
        "accuracy": clf.score(Xte, yte), "features_share": s["feature_seconds"] / s["fit_seconds"],
        "solve_share": s["solve_seconds"] / s["fit_seconds"], "newton_iter": clf.n_iter_,
    }


def bench_same_features(clf, Xtr, ytr, repeats, budget_s):
    from dsvm.blocks import as_row_blocks
    from dsvm.problems import SquaredHingeOperator
    from dsvm.solvers import semismooth_newton
    from dsvm.svm import encode_labels

    F32 = clf.feature_map_.transform_block(Xtr)
    F64 = F32.astype(np.float64)
    y_pm = np.where(ytr == clf.classes_[1], 1.0, -1.0)
    rb = as_row_blocks(F32, F32.shape[0], min_blocks=1)  # one block: one thread, as LIBLINEAR
    _, codes = encode_labels(ytr, rb)

    def newton():
        op = SquaredHingeOperator(rb, codes, 1, np.array([C, C]))
        return semismooth_newton(op, F32.shape[1] + 1, tol=1e-4, hessian="gram")

    t_newton, times, res = timed(newton, repeats)
    ours = dense_objective(F64, y_pm, res.x[:-1], res.x[-1])
    rows = [{"solver": "dsvm Newton", "k": F32.shape[1], "time_s": t_newton, "tol": 1e-4, "objective": ours,
             "rel_gap": 0.0, "ratio": 1.0, "runs": [round(x, 3) for x in times]}]
    for name, dual in (("LIBLINEAR DCD", True), ("LIBLINEAR TRON", False)):
        spent, row = 0.0, None
        for tol in (1e-1, 1e-2, 1e-3, 1e-4, 1e-5, 1e-6):
            fitted = fit_liblinear_bounded(F64, ytr, dual, tol, timeout=max(budget_s - spent, 1.0))
            if fitted is None:  # killed at the budget: the time is a lower bound
                spent = budget_s
                row = {"solver": f"{name} (stopped at the {budget_s:g} s budget)", "k": F32.shape[1],
                       "time_s": f">{budget_s:g}", "tol": tol, "objective": None, "rel_gap": None,
                       "ratio": f">{budget_s / t_newton:.3g}"}
                logging.info("%s tol=%g: stopped at the budget", name, tol)
                break
            t, coef, intercept = fitted
            spent += t
            obj = dense_objective(F64, y_pm, coef, intercept)
            gap = (obj - ours) / ours
            row = {"solver": name, "k": F32.shape[1], "time_s": t, "tol": tol, "objective": obj, "rel_gap": gap,
                   "ratio": t / t_newton}
            logging.info("%s tol=%g: %.2fs objective gap %.2e", name, tol, t, gap)
            if abs(gap) <= 1e-4 or spent > budget_s:
                break
        if row["rel_gap"] is not None and abs(row["rel_gap"]) > 1e-4:
            row["solver"] += " (1e-4 not reached)"
        rows.append(row)
    return rows


def bench_cluster(train_zarr, Xtr, ytr, k, repeats):
    """dsvm on the default LocalCluster (data from zarr) vs the same algorithm in numpy.

    The two are run alternately (cluster, numpy, cluster, ...) so that drifts
    in the load of this shared machine hit both alike; medians are compared.
    """
    from dsvm import NystroemSVC, open_dataset
    from dsvm.app.cluster import connect, local_cluster_kwargs

    params = dict(C=C, gamma=GAMMA, n_components=k, random_state=0)
    kwargs = local_cluster_kwargs()
    runs_np, runs_cl = [], []
    with connect() as client:
        ds = open_dataset(train_zarr)
        NystroemSVC(**params).fit(ds)  # warm-up: imports and first connections in the workers
        NystroemSVC(**params).fit(Xtr, ytr)
        for _ in range(repeats):
            t, _, clf_cl = timed(lambda: NystroemSVC(**params).fit(ds))
            runs_cl.append(t)
            t, _, clf_np = timed(lambda: NystroemSVC(**params).fit(Xtr, ytr))
            runs_np.append(t)
        del client
    t_np, t_cl = statistics.median(runs_np), statistics.median(runs_cl)
    s_np, s_cl = clf_np.solver_stats_, clf_cl.solver_stats_
    return [
        {"k": k, "run": "plain numpy (in-process)", "fit_s": t_np,
         "features_share": s_np["feature_seconds"] / s_np["fit_seconds"],
         "solve_share": s_np["solve_seconds"] / s_np["fit_seconds"], "runs": [round(x, 3) for x in runs_np]},
        {"k": k, "run": f"local cluster {kwargs['n_workers']}x{kwargs['threads_per_worker']}", "fit_s": t_cl,
         "features_share": s_cl["feature_seconds"] / s_cl["fit_seconds"],
         "solve_share": s_cl["solve_seconds"] / s_cl["fit_seconds"], "ratio_vs_numpy": t_cl / t_np,
         "runs": [round(x, 3) for x in runs_cl]},
    ]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data-dir", type=Path, default=DEFAULT_DATA_DIR)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--ks", default="500,2000")
    ap.add_argument("--skip-libsvm", action="store_true", help="skip the ~70 s LIBSVM fit")
    ap.add_argument("--liblinear-budget", type=float, default=300.0, help="seconds per LIBLINEAR solver and k")
    ap.add_argument("--out", type=Path, default=REPO / "benchmarks" / "results" / "core.json")
    ap.add_argument("-v", "--verbose", action="store_true")
    args = ap.parse_args()
    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING)
    ks = [int(k) for k in args.ks.split(",")]

    Xtr, ytr = load_libsvm(args.data_dir, "a9a", "train")
    Xte, yte = load_libsvm(args.data_dir, "a9a", "test")
    results: dict = {"machine": machine(), "dataset": "a9a", "C": C, "gamma": GAMMA, "repeats": args.repeats}
    print(f"# dsvm core benchmark — a9a, C={C}, gamma={GAMMA}\n\nmachine: {results['machine']}\n")

    # 1. dsvm vs LIBSVM
    clf500, row500 = bench_dsvm_numpy(Xtr, ytr, Xte, yte, 500, args.repeats)
    rows = [row500]
    if not args.skip_libsvm:
        lib = bench_libsvm(Xtr, ytr, Xte, yte)
        lib["speedup_of_dsvm"] = lib["fit_s"] / row500["fit_s"]
        rows.insert(0, lib)
    results["vs_libsvm"] = rows
    print("## dsvm vs LIBSVM (fit time, test accuracy)\n")
    print(table(rows, ["solver", "fit_s", "accuracy", "speedup_of_dsvm", "features_share", "solve_share", "newton_iter", "runs"]))

    # 2. Newton vs LIBLINEAR on identical features
    solver_rows = []
    for k in ks:
        clf = clf500 if k == 500 else bench_dsvm_numpy(Xtr, ytr, Xte, yte, k, 1)[0]
        solver_rows += bench_same_features(clf, Xtr, ytr, args.repeats, args.liblinear_budget)
    results["vs_liblinear"] = solver_rows
    print(f"\n## Newton solve vs LIBLINEAR on the identical feature matrix (objective within 1e-4; each LIBLINEAR ladder "
          f"stopped after {args.liblinear_budget:g} s)\n")
    print(table(solver_rows, ["solver", "k", "time_s", "tol", "objective", "rel_gap", "ratio"]))

    # 3. local cluster vs plain numpy
    from dsvm import ingest

    cluster_rows = []
    with tempfile.TemporaryDirectory() as tmp:
        train_zarr = Path(tmp) / "a9a.zarr"
        ingest(args.data_dir / "a9a.train.xz", train_zarr, format="libsvm", n_features=123)
        for k in ks:
            cluster_rows += bench_cluster(train_zarr, Xtr, ytr, k, args.repeats)
    results["cluster_vs_numpy"] = cluster_rows
    print("\n## default local cluster vs the same algorithm in plain numpy (fit seconds, medians)\n")
    print(table(cluster_rows, ["k", "run", "fit_s", "ratio_vs_numpy", "features_share", "solve_share", "runs"]))
    save_json(results, args.out)
    print(f"\nJSON: {args.out}")


if __name__ == "__main__":
    t0 = time.time()
    main()
    print(f"total benchmark time {time.time() - t0:.0f}s")
