"""How many CG steps a Newton direction costs under each preconditioner (the large-k question).

Fits ``NystroemSVC`` in float64 on bumps data (``make_bumps_zarr``), forms the
Newton matrix ``H = diag(1, …, 1, 0) + 2 C [F 1]_Aᵀ [F 1]_A`` at the solution
densely, and counts the preconditioned CG steps that solve ``H d = b``
(random ``b``) to each relative residual, for:

* none;
* the landmarks' curvature, ``diag(1 + 2 C |A| λ / k)`` (FALKON's
  ``K_nMᵀ K_nM ≈ (n / M) K_MM²`` in the eigen map's coordinates, a diagonal);
* Jacobi, the exact diagonal of ``H``;
* a subsampled Gram matrix of ``s`` active rows (``s = k/2 … 4k``), scaled to
  ``|A|``, by Cholesky.

Each CG step of a Newton direction is a pass over the data; a subsampled
Gram matrix costs ``2 s k²`` flops and a ``k³/3`` Cholesky per Newton iteration.

Usage::

    python benchmarks/bench_newton_cg.py [--rows 100000] [--k 1000] [--C 10]
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
import warnings
from pathlib import Path

import numpy as np
import scipy.linalg
from common import machine, table


def cg_steps(H: np.ndarray, b: np.ndarray, solve_p, rtol: float, max_iter: int = 5000) -> int:
    """Preconditioned CG steps until ``‖H x − b‖ ≤ rtol ‖b‖`` (``solve_p(r)`` applies ``P⁻¹``)."""
    x, r = np.zeros_like(b), b.copy()
    z = solve_p(r)
    p, rz, target = z.copy(), float(r @ z), rtol * float(np.linalg.norm(b))
    for it in range(1, max_iter + 1):
        Hp = H @ p
        a = rz / float(p @ Hp)
        x += a * p
        r -= a * Hp
        if np.linalg.norm(r) <= target:
            return it
        z = solve_p(r)
        rz_new = float(r @ z)
        p, rz = z + (rz_new / rz) * p, rz_new
    return max_iter


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", type=int, default=100_000)
    ap.add_argument("--k", type=int, default=1000)
    ap.add_argument("--C", type=float, default=10.0)
    args = ap.parse_args()
    import dsvm

    workdir = Path(tempfile.mkdtemp(prefix="dsvm-cg-"))
    try:
        X, y = dsvm.make_bumps_zarr(workdir / "bumps.zarr", args.rows, random_state=0).load()
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = dsvm.NystroemSVC(C=args.C, n_components=args.k, dtype="float64", random_state=0).fit(X, y)
    fmap = model.feature_map_
    F = fmap.transform_block(model.scaling_.transform(X) if model.scaling_ is not None else X)
    sign = np.where(y == model.classes_[1], 1.0, -1.0)
    active = sign * (F @ model.coef_[0] + model.intercept_[0]) < 1.0
    FA = np.hstack([F[active], np.ones((int(active.sum()), 1))])
    reg = np.append(np.ones(F.shape[1]), 0.0)
    H = np.diag(reg) + 2.0 * args.C * FA.T @ FA
    b = np.random.default_rng(0).normal(size=H.shape[0])
    landmark = reg + 2.0 * args.C * active.sum() * np.append(fmap.eigenvalues / args.k, 1.0)
    jacobi = np.diag(H).copy()
    preconditioners = {"none": lambda v: v, "landmark curvature": lambda v: v / landmark,
                       "Jacobi": lambda v: v / jacobi}
    rng = np.random.default_rng(1)
    for s in (args.k // 2, args.k, 2 * args.k, 4 * args.k):
        rows = FA[rng.choice(FA.shape[0], min(s, FA.shape[0]), replace=False)]
        P = np.diag(reg) + 2.0 * args.C * (FA.shape[0] / rows.shape[0]) * rows.T @ rows
        P[np.diag_indices_from(P)] += 1e-10 * np.trace(P) / P.shape[0]
        factor = scipy.linalg.cho_factor(P)
        preconditioners[f"subsampled Gram, {rows.shape[0]} rows"] = lambda v, c=factor: scipy.linalg.cho_solve(c, v)
    rows = [{"preconditioner": name, "steps_1e-2": cg_steps(H, b, fn, 1e-2), "steps_1e-4": cg_steps(H, b, fn, 1e-4)}
            for name, fn in preconditioners.items()]
    print(f"\n## Newton system at the solution: bumps, {args.rows} rows, k = {args.k}, C = {args.C}, "
          f"{FA.shape[0]} active\n\nmachine: {machine()}\n")
    print(table(rows, ["preconditioner", "steps_1e-2", "steps_1e-4"]))


if __name__ == "__main__":
    main()
