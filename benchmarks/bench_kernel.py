"""The kernel block against this machine's limits: a GEMM of its shape and a tight float32 exp loop.

A pass over implicit features (``feature_store="implicit"``) computes every
block's kernel values ``K(X_b, L)``; this times that block on one thread
(as a worker's thread runs it) for every kernel, dense and sparse input,
and prints it against the two costs it cannot beat, measured in the same
run on the same thread: the GEMM of the block's shape (``n x (p + 2)``
times ``(p + 2) x k``, float32, into a cache-sized slab as the block does)
and, for the kernels with a transcendental function (rbf: exp, sigmoid:
tanh), numpy's float32 loop over the same number of values held in cache.

Usage::

    python benchmarks/bench_kernel.py [--rows 33280] [--features 28] [-k 1000] [--density 0.1] [--repeats 5]
"""

from __future__ import annotations

import argparse

import numpy as np
import scipy.sparse as sp
from common import REPO, machine, save_json, table, timed
from threadpoolctl import threadpool_limits

from dsvm.approx import fit_feature_map, make_kernel_spec

KERNELS = {"rbf": dict(gamma=0.05), "poly": dict(gamma=0.05, degree=3, coef0=1.0),
           "sigmoid": dict(gamma=0.01, coef0=0.0), "linear": dict(gamma=1.0)}
SLAB_VALUES = 2**20  # values of one cache-sized slab (4 MiB of float32)


def median_seconds(fn, repeats: int) -> float:
    """Median seconds of ``repeats`` calls after one warm-up call."""
    fn()
    return timed(fn, repeats)[0]


def gemm_limit(n: int, p: int, k: int, repeats: int) -> float:
    """The block's GEMM alone: ``n x (p+2)`` times ``(p+2) x k`` into slabs of :data:`SLAB_VALUES`."""
    rng = np.random.default_rng(0)
    A = rng.random((n, p + 2), dtype=np.float32)
    B = rng.random((p + 2, k), dtype=np.float32)
    step = max(64, SLAB_VALUES // k)
    out = np.empty((step, k), dtype=np.float32)

    def run():
        for s in range(0, n, step):
            rows = A[s : s + step]
            np.matmul(rows, B, out=out[: rows.shape[0]])

    return median_seconds(run, repeats)


def function_limit(name: str, values: int, repeats: int) -> float:
    """numpy's float32 exp or tanh over ``values`` values, in cache-sized slabs (in place)."""
    fn = {"rbf": np.exp, "sigmoid": np.tanh}.get(name)
    if fn is None:
        return 0.0
    slab = -np.random.default_rng(0).random(SLAB_VALUES, dtype=np.float32)

    def run():
        for _ in range(max(1, values // SLAB_VALUES)):
            fn(slab, out=slab)
            np.negative(slab, out=slab)

    return median_seconds(run, repeats)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", type=int, default=33280)
    ap.add_argument("--features", type=int, default=28)
    ap.add_argument("-k", type=int, default=1000)
    ap.add_argument("--density", type=float, default=0.1, help="non-zeros per cell of the sparse input")
    ap.add_argument("--repeats", type=int, default=5)
    args = ap.parse_args()
    n, p, k = args.rows, args.features, args.k
    rng = np.random.default_rng(1)
    dense = rng.standard_normal((n, p)).astype(np.float32)
    sparse = sp.random(n, p, density=args.density, format="csr", dtype=np.float32, random_state=2)
    rows = []
    with threadpool_limits(1):
        gemm_s = gemm_limit(n, p, k, args.repeats)
        for name, params in KERNELS.items():
            fn_s = function_limit(name, n * k, args.repeats)
            for kind, X in (("dense", dense), ("sparse", sparse)):
                landmarks = np.asarray(X[:k].todense() if sp.issparse(X) else X[:k], dtype=np.float64)
                fmap = fit_feature_map(landmarks + 1e-3 * np.arange(k)[:, None], make_kernel_spec(name, **params))
                kernel = fmap.landmark_kernel()
                block_s = median_seconds(lambda X=X, kernel=kernel: kernel.kernel_block(X), args.repeats)
                limit = gemm_s + fn_s
                rows.append({"kernel": name, "input": kind, "block_ms": 1e3 * block_s, "gemm_ms": 1e3 * gemm_s,
                             "function_ms": 1e3 * fn_s, "block_vs_limit": block_s / limit,
                             "values_per_s": n * k / block_s})
                print(rows[-1], flush=True)
    print(f"\n# Kernel blocks of {n} rows x {p} features against k = {k} landmarks, one thread\n")
    print(f"machine: {machine()}; sparse input: density {args.density}\n")
    print(table(rows, ["kernel", "input", "block_ms", "gemm_ms", "function_ms", "block_vs_limit", "values_per_s"]))
    save_json({"machine": machine(), "rows": n, "features": p, "k": k, "results": rows},
              REPO / "benchmarks" / "results" / "kernel.json")


if __name__ == "__main__":
    main()
