"""The LA-SN paper's experiments as a benchmark script (same code as ``dsvm run pipelines/paper.yaml``).

1. Table 3 analogue: t_linear (the linear solve only) of LA-SN (semismooth
   Newton), LA-DCD and LA-TRON (LIBLINEAR via ``LinearSVC(dual=True/False)``)
   and dsvm's TRON on the same Nyström features, at equal objective (within
   1e-4 of the optimum of dsvm's objective; LIBLINEAR at the loosest
   tolerance that gets there), with test accuracy;
2. Table 4 analogue: LA-SN (``--repeats`` landmark seeds) vs LIBSVM (``SVC``, once);
3. sensitivity: 80/20 split of the training set, CV and held-out accuracy over k x C;
4. structure: SLSQP on the dual QP vs LIBSVM vs dsvm at N = 200, 800, 2000 (a9a).

Everything runs in this process on in-memory data, one core per solver
(BLAS limited to one thread; see :mod:`dsvm.experiments` and :mod:`dsvm.app._paper`).

Usage::

    python benchmarks/bench_paper.py [--data-dir ../shared/data] [--repeats 10] [--quick]
        [--datasets a9a,w8a,ijcnn1,mushrooms,splice] [--parts table3,table4,sensitivity,structure]

Prints the Markdown report; writes it with JSON and PNG plots to
benchmarks/results/paper/ (``--out``).
"""

from __future__ import annotations

import argparse
import logging
import time
from pathlib import Path

from common import DEFAULT_DATA_DIR, REPO

from dsvm.app._paper import run_paper
from dsvm.experiments import DEFAULTS


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data-dir", type=Path, default=DEFAULT_DATA_DIR)
    ap.add_argument("--repeats", type=int, default=10)
    ap.add_argument("--quick", action="store_true", help="1,500-row subsets, k <= 100, small grids (a minute)")
    ap.add_argument("--datasets", default=",".join(DEFAULTS["datasets"]))
    ap.add_argument("--parts", default=",".join(DEFAULTS["parts"]))
    ap.add_argument("--liblinear-budget", type=float, default=DEFAULTS["liblinear_budget_s"],
                    help="seconds per LIBLINEAR solver and repetition for its tolerance ladder")
    ap.add_argument("--slsqp-cap", type=float, default=DEFAULTS["structure"]["slsqp_cap_s"],
                    help="seconds after which SLSQP is stopped (larger N extrapolated)")
    ap.add_argument("--no-plots", action="store_true")
    ap.add_argument("--out", type=Path, default=REPO / "benchmarks" / "results" / "paper")
    ap.add_argument("-v", "--verbose", action="store_true")
    args = ap.parse_args()
    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING, format="%(asctime)s %(message)s")
    for noisy in ("dsvm.solvers", "dsvm.svm", "dsvm.problems", "dsvm.approx", "dsvm.reference", "dsvm.io"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
    spec = {
        "name": "paper (benchmarks/bench_paper.py)",
        "output": str(args.out),
        "experiments": {"paper": {
            "data_dir": str(args.data_dir), "repeats": args.repeats, "quick": args.quick,
            "datasets": [d for d in args.datasets.split(",") if d],
            "parts": [p for p in args.parts.split(",") if p],
            "liblinear_budget_s": args.liblinear_budget,
            "structure": {"slsqp_cap_s": args.slsqp_cap},
        }},
        "report": {"plots": not args.no_plots},
    }
    run_paper(spec)
    print((args.out / "report.md").read_text())
    print(f"JSON: {args.out / 'report.json'}")


if __name__ == "__main__":
    t0 = time.time()
    main()
    print(f"total benchmark time {time.time() - t0:.0f}s")
