"""Is ``time_budget`` respected?  Fits on the bumps problem (1M rows) with and without a budget.

Generates ``make_bumps_zarr`` data (default 1M training rows, 20 features), loads it into this
process, then fits ``NystroemSVC`` (C = 10, gamma="scale", uniform landmarks):

1. at ``--k`` with no budget, a tight ``tol`` (its time ``T`` and Newton iterations);
2. at ``--k`` with ``time_budget`` = each of ``--fractions`` times ``T``;
3. ``n_components="auto"`` with ``time_budget`` = each of ``--auto-budgets`` times ``T``.

Printed per fit: the budget, the wall time, their ratio, the seconds before the solve began
(landmarks, opening, features: not cut short by a budget), the stop reason, and the mean seconds of a
pass over all rows.  The budget is checked between Newton iterations and between the fits of the k
path: a fit overshoots by at most what the iteration it is in has left, unless the stages before the
solve alone take longer than the budget (the first fraction shows that case).

Usage::

    python benchmarks/bench_time_budget.py [--rows 1000000] [--k 1000] [--fractions 0.5,0.8,0.9]
                                           [--auto-budgets 1,3]
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


def fit(X, y, **params) -> tuple[float, object]:
    """(wall seconds, model) of one NystroemSVC fit, warnings silenced (a budget stop warns)."""
    import dsvm

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        t0 = time.perf_counter()
        model = dsvm.NystroemSVC(C=10.0, random_state=0, **params).fit(X, y)
        return time.perf_counter() - t0, model


def row(name: str, budget: float | None, seconds: float, model) -> dict:
    problem = model.solver_stats_["problems"][0]
    passes = max(int(problem["n_passes"]), 1)
    stats = model.solver_stats_
    return {"fit": name, "budget_s": budget, "wall_s": seconds,
            "wall_vs_budget": None if budget is None else seconds / budget,
            "before_solve_s": stats["fit_seconds"] - stats["solve_seconds"],
            "k": int(model.n_components_), "newton_iter": int(model.n_iter_), "stop": problem["stop_reason"],
            "pass_s": problem["seconds"] / passes,
            "path": None if model.k_path_ is None else [p["k"] for p in model.k_path_]}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--k", type=int, default=1000)
    ap.add_argument("--fractions", default="0.5,0.8,0.9")
    ap.add_argument("--auto-budgets", default="1,3")
    ap.add_argument("--workdir", type=Path, default=None)
    ap.add_argument("--out", type=Path, default=REPO / "benchmarks" / "results" / "time_budget.json")
    args = ap.parse_args()
    logging.basicConfig(level=logging.WARNING)
    import dsvm

    workdir = Path(tempfile.mkdtemp(prefix="dsvm-budget-", dir=args.workdir))
    try:
        X, y = dsvm.make_bumps_zarr(workdir / "bumps.zarr", args.rows, random_state=0).load()
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    T, free = fit(X, y, n_components=args.k, tol=1e-6, max_iter=100)
    rows = [row(f"k={args.k}, no budget", None, T, free)]
    print(rows[-1], flush=True)
    for fraction in (float(v) for v in args.fractions.split(",")):
        budget = fraction * T
        seconds, model = fit(X, y, n_components=args.k, tol=1e-6, max_iter=100, time_budget=budget)
        rows.append(row(f"k={args.k}, {fraction:g} T", budget, seconds, model))
        print(rows[-1], flush=True)
    for times in (float(v) for v in args.auto_budgets.split(",")):
        seconds, model = fit(X, y, n_components="auto", time_budget=times * T)
        rows.append(row(f"auto, {times:g} T", times * T, seconds, model))
        print(rows[-1], flush=True)
    print(f"\n## time_budget on the bumps problem, {args.rows} rows, C = 10\n\nmachine: {machine()}\n")
    print(table(rows, ["fit", "budget_s", "wall_s", "wall_vs_budget", "before_solve_s", "k", "newton_iter", "stop", "pass_s", "path"]))
    save_json({"machine": machine(), "rows": args.rows, "k": args.k, "fits": rows}, args.out)


if __name__ == "__main__":
    main()
