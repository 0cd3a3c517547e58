"""The in-process Newton solve with and without its per-block margin cache (Table 3's setting).

Each data set's Nyström features (uniform landmarks, the paper experiments' k
and γ, seed 0) are made once; then the LA-SN solve of Table 3 (the subsample
warm start, then the full solve, one thread) runs ``--repeats`` times with
the cache of :class:`dsvm.problems._losses.MarginCache` on and off, alternated so that
both see the same machine load.  Both must reach the same objective to the
last bit (the cache hands back the floats a recomputation gives).

Usage::

    python benchmarks/bench_solve_passes.py [--data-dir ../shared/data] [--repeats 9]
        [--datasets a9a,w8a,ijcnn1,mushrooms,splice]

Prints a Markdown table; writes JSON to benchmarks/results/solve_passes.json.
"""

from __future__ import annotations

import argparse
import logging
import statistics
import tempfile
import time
from pathlib import Path

from common import DEFAULT_DATA_DIR, REPO, machine, save_json, table

from dsvm.experiments import PAPER_DATASETS, lasn_fits, load_split
from dsvm.experiments._datasets import signed_labels
from dsvm.experiments._linear import LinearProblem, solve_from_subsample


def solve_once(problem: LinearProblem, cache: bool, tol: float):
    op, sub = problem.operator(), problem.subsample_operator()
    if not cache:
        for o in (op, sub):
            if o is not None:
                o.margin_cache = None
    t0 = time.perf_counter()
    res = solve_from_subsample(op, sub, problem.dim, tol=tol, max_iter=100, hessian=problem.hessian())
    return time.perf_counter() - t0, res


def bench_dataset(name: str, data_dir: Path, work: Path, repeats: int, tol: float) -> dict:
    from threadpoolctl import threadpool_limits

    ds = PAPER_DATASETS[name]
    split = load_split(ds, data_dir, work)
    with threadpool_limits(1):
        model = lasn_fits(split, gamma=ds.gamma, k=ds.k, repeats=1)[0][0]
        problem = LinearProblem(model.feature_map_.transform_block(split.X_train),
                                signed_labels(split.y_train, model.classes_), 10.0)
        times = {True: [], False: []}
        objectives = {}
        for _ in range(repeats):
            for cache in (True, False):
                seconds, res = solve_once(problem, cache, tol)
                times[cache].append(seconds)
                objectives[cache] = res.objective
    on, off = statistics.median(times[True]), statistics.median(times[False])
    return {"data": name, "n": int(problem.F.shape[0]), "k": ds.k, "tol": tol,
            "with cache (s)": on, "without (s)": off, "without / with": off / on,
            "same objective": objectives[True] == objectives[False], "times": {"with": times[True],
                                                                            "without": times[False]}}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data-dir", type=Path, default=DEFAULT_DATA_DIR)
    ap.add_argument("--repeats", type=int, default=9)
    ap.add_argument("--datasets", default="a9a,w8a,ijcnn1,mushrooms,splice")
    ap.add_argument("--tol", type=float, default=1e-4)
    args = ap.parse_args()
    logging.basicConfig(level=logging.WARNING)
    rows = []
    with tempfile.TemporaryDirectory() as work:
        for name in [d for d in args.datasets.split(",") if d]:
            rows.append(bench_dataset(name, args.data_dir, Path(work), args.repeats, args.tol))
    print(f"machine: {machine()}; one thread; medians of {args.repeats} alternated solves\n")
    print(table(rows, ["data", "n", "k", "with cache (s)", "without (s)", "without / with", "same objective"]))
    save_json({"machine": machine(), "repeats": args.repeats, "rows": rows},
              REPO / "benchmarks" / "results" / "solve_passes.json")


if __name__ == "__main__":
    main()
