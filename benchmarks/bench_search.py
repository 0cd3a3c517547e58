"""CV search and probability benchmarks on a9a, ratios measured in one run.

1. ``search``: :class:`dsvm.NystroemSVCCV` (shared landmarks / kernel columns /
   features, warm-started C path) against scikit-learn's
   ``GridSearchCV(NystroemSVC())`` on the same grid (default C ∈ {1, 10, 100} ×
   γ ∈ {0.01, 0.05, 0.1} × k ∈ {200, 500}) with the *same* splitter object
   (``StratifiedKFold(5, shuffle=True, random_state=0)``); both refit the best
   model.  Runs are alternated (``--repeats``) and the medians compared.
   Reported: wall and CPU seconds, the ratio, both ``best_params_``, each
   best's score in the *other* table, and the largest difference between the
   two tables' mean scores.
2. ``calibration``: ``NystroemSVC(probability=True)`` against
   ``SVC(probability=True)`` (LIBSVM; minutes) on all of a9a, C=10, γ=0.05,
   k=500: log-loss, Brier score and accuracy on a9a.test.

Usage::

    python benchmarks/bench_search.py [--part search|calibration|all] [--repeats 2]
        [--grid C=1,10,100 gamma=0.01,0.05,0.1 k=200,500] [--data-dir ../shared/data]

On a9a the default grid is flat (all 18 mean scores within 0.0015, below the
fold standard deviation 0.0045), so which point wins is noise for either
method; ``--grid C=1,10,100 gamma=0.002,0.05,0.5 k=200,500`` has a clear
optimum.  Timings on a shared machine are noisy: use ``--repeats 3``.

Prints Markdown tables; writes JSON to benchmarks/results/search.json (``--out``).
"""

from __future__ import annotations

import argparse
import logging
import statistics
import time
import warnings
from pathlib import Path

import numpy as np
from common import DEFAULT_DATA_DIR, REPO, load_libsvm, machine, save_json, table

DEFAULT_GRID = ["C=1,10,100", "gamma=0.01,0.05,0.1", "k=200,500"]


def _run(fn):
    t0, c0 = time.perf_counter(), time.process_time()
    out = fn()
    return time.perf_counter() - t0, time.process_time() - c0, out


def bench_search(Xtr, ytr, Xte, yte, grid, repeats, folds):
    from sklearn.model_selection import GridSearchCV, StratifiedKFold

    from dsvm import NystroemSVC, NystroemSVCCV

    cv = StratifiedKFold(folds, shuffle=True, random_state=0)
    runs = {"NystroemSVCCV": [], "GridSearchCV(NystroemSVC())": []}
    fitted = {}
    for rep in range(repeats):
        order = list(runs) if rep % 2 == 0 else list(runs)[::-1]
        for name in order:
            if name == "NystroemSVCCV":
                fn = lambda: NystroemSVCCV(grid, cv=cv, random_state=0).fit(Xtr, ytr)  # noqa: E731
            else:
                fn = lambda: GridSearchCV(NystroemSVC(random_state=0), grid, cv=cv).fit(Xtr, ytr)  # noqa: E731
            wall, cpu, search = _run(fn)
            runs[name].append((wall, cpu))
            fitted[name] = search
            print(f"  run {rep + 1} {name}: {wall:.2f} s wall, {cpu:.2f} s CPU", flush=True)
    ours, theirs = fitted["NystroemSVCCV"], fitted["GridSearchCV(NystroemSVC())"]
    params = [str(p) for p in theirs.cv_results_["params"]]
    assert params == [str(p) for p in ours.cv_results_["params"]]
    rows = []
    for name, search in fitted.items():
        other = theirs if search is ours else ours
        walls, cpus = [w for w, _ in runs[name]], [c for _, c in runs[name]]
        rows.append({
            "method": name, "wall_s": statistics.median(walls), "cpu_s": statistics.median(cpus),
            "runs_wall_s": [round(w, 2) for w in walls], "best_params": search.best_params_,
            "best_cv_score": search.best_score_,
            "same_point_in_other_table": float(other.cv_results_["mean_test_score"][search.best_index_]),
            "rank_in_other_table": int(other.cv_results_["rank_test_score"][search.best_index_]),
            "test_accuracy": search.best_estimator_.score(Xte, yte),
        })
    diff = np.abs(ours.cv_results_["mean_test_score"] - theirs.cv_results_["mean_test_score"])
    fold_std = float(np.median(theirs.cv_results_["std_test_score"]))
    summary = {
        "ratio_wall": rows[1]["wall_s"] / rows[0]["wall_s"],
        "ratio_cpu": rows[1]["cpu_s"] / rows[0]["cpu_s"],
        "same_best_params": ours.best_params_ == theirs.best_params_,
        "max_abs_mean_score_diff": float(diff.max()),
        "median_fold_std": fold_std,
        "score_spread_over_grid": float(np.ptp(theirs.cv_results_["mean_test_score"])),
        "search_stats": ours.search_stats_,
    }
    per_point = [
        {"params": p, "NystroemSVCCV": float(a), "GridSearchCV": float(b)}
        for p, a, b in zip(params, ours.cv_results_["mean_test_score"], theirs.cv_results_["mean_test_score"])
    ]
    return rows, summary, per_point


def bench_calibration(Xtr, ytr, Xte, yte, skip_libsvm):
    from sklearn.metrics import brier_score_loss, log_loss

    from dsvm import NystroemSVC

    rows = []
    wall, _, clf = _run(lambda: NystroemSVC(C=10.0, gamma=0.05, n_components=500, random_state=0,
                                            probability=True).fit(Xtr, ytr))
    P = clf.predict_proba(Xte)
    rows.append({"model": "dsvm NystroemSVC(probability=True) k=500", "fit_s": wall, "log_loss": log_loss(yte, P),
                 "brier": brier_score_loss(yte == 1, P[:, 1]), "accuracy": clf.score(Xte, yte)})
    wall, _, plain = _run(lambda: NystroemSVC(C=10.0, gamma=0.05, n_components=500, random_state=0).fit(Xtr, ytr))
    rows.append({"model": "dsvm NystroemSVC(probability=False) k=500", "fit_s": wall, "accuracy": plain.score(Xte, yte)})
    if not skip_libsvm:
        from sklearn.svm import SVC

        with warnings.catch_warnings():
            warnings.simplefilter("ignore", FutureWarning)  # probability= is deprecated in scikit-learn 1.9
            wall, _, svc = _run(lambda: SVC(C=10.0, gamma=0.05, probability=True, random_state=0,
                                            cache_size=2000).fit(Xtr, ytr))
        Q = svc.predict_proba(Xte)
        rows.append({"model": "LIBSVM SVC(probability=True)", "fit_s": wall, "log_loss": log_loss(yte, Q),
                     "brier": brier_score_loss(yte == 1, Q[:, 1]), "accuracy": svc.score(Xte, yte)})
    return rows


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data-dir", type=Path, default=DEFAULT_DATA_DIR)
    ap.add_argument("--part", choices=["search", "calibration", "all"], default="search")
    ap.add_argument("--repeats", type=int, default=2, help="alternated runs of each search (median reported)")
    ap.add_argument("--folds", type=int, default=5)
    ap.add_argument("--grid", nargs="+", default=DEFAULT_GRID, metavar="NAME=V1,V2",
                    help="grid in `dsvm train --search` syntax (default: %(default)s)")
    ap.add_argument("--out", type=Path, default=REPO / "benchmarks" / "results" / "search.json")
    ap.add_argument("--skip-libsvm", action="store_true", help="calibration part without SVC (it takes minutes)")
    ap.add_argument("--blas-threads", type=int, default=1,
                    help="BLAS threads of the client-side work (the Newton solver's Cholesky); blocks run in their "
                         "own threads with one BLAS thread each either way.  On a shared 2-core machine two "
                         "OpenBLAS threads make a 500x500 Cholesky take up to 0.5 s instead of 3 ms (spin-waiting "
                         "threads), which slows both methods 3-5x and buries the comparison (default 1; 0 = leave)")
    args = ap.parse_args(argv)
    if args.blas_threads:
        import scipy.linalg  # noqa: F401  (load scipy's own OpenBLAS before limiting it)
        import sklearn.svm  # noqa: F401
        from threadpoolctl import threadpool_limits

        import dsvm  # noqa: F401

        threadpool_limits(args.blas_threads, user_api="blas")
    logging.basicConfig(level=logging.WARNING)
    warnings.simplefilter("ignore", UserWarning)

    from dsvm.app._search_report import parse_search_args

    Xtr, ytr = load_libsvm(args.data_dir, "a9a", "train")
    Xte, yte = load_libsvm(args.data_dir, "a9a", "test")
    print(f"# a9a: {Xtr.shape[0]} train / {Xte.shape[0]} test rows; {machine()}; "
          f"BLAS threads {args.blas_threads or 'default'}\n")
    result = {"machine": machine()}
    if args.part in ("search", "all"):
        grid = parse_search_args(args.grid)
        n_points = int(np.prod([len(v) for v in grid.values()]))
        print(f"## CV search: {n_points} grid points x {args.folds} folds ({' '.join(args.grid)})\n")
        rows, summary, per_point = bench_search(Xtr, ytr, Xte, yte, grid, args.repeats, args.folds)
        print()
        print(table(rows, ["method", "wall_s", "cpu_s", "runs_wall_s", "best_params", "best_cv_score",
                           "same_point_in_other_table", "rank_in_other_table", "test_accuracy"]))
        print(f"\nspeed-up: {summary['ratio_wall']:.2f}x wall, {summary['ratio_cpu']:.2f}x CPU; "
              f"same best params: {summary['same_best_params']}; largest |mean score difference| "
              f"{summary['max_abs_mean_score_diff']:.4f} (median fold std {summary['median_fold_std']:.4f}, "
              f"spread of mean scores over the grid {summary['score_spread_over_grid']:.4f})\n")
        print(table(per_point, ["params", "NystroemSVCCV", "GridSearchCV"]))
        result["search"] = {"grid": grid, "folds": args.folds, "rows": rows, "summary": summary, "per_point": per_point}
    if args.part in ("calibration", "all"):
        print("\n## Probabilities on a9a.test (C=10, gamma=0.05)\n")
        rows = bench_calibration(Xtr, ytr, Xte, yte, args.skip_libsvm)
        print(table(rows, ["model", "fit_s", "log_loss", "brier", "accuracy"]))
        result["calibration"] = rows
    save_json(result, args.out)
    print(f"\nwritten {args.out}")


if __name__ == "__main__":
    main()
