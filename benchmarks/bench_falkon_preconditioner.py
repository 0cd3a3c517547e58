"""How well FALKON's preconditioner fits dsvm's Newton systems: the measurement behind not taking its solve.

FALKON solves on the landmarks' coefficients by conjugate gradients, preconditioned
by what the landmark rows alone say about the whole Hessian: with ``K(L, L) = TᵀT``
and features ``G = K(X, L) T⁻¹`` (never formed), ``G_Aᵀ G_A ≈ (n/k) T D Tᵀ``, where
``D`` marks the landmark rows in the active set ``A`` (LogisticFalkon rebuilds it
with the loss's curvature at the centres).  For dsvm's problem ``½‖w‖² + C Σ
max(0, 1 − y(Gw + b))²`` the Newton matrix is ``H = I + 2C [G_A 1]ᵀ[G_A 1]`` (the
bias free) and the preconditioner ``P = I + 2C (n/k) [Tᵀ 1]ᵀ D [Tᵀ 1]``.

For each k this prints the condition number of ``H`` and of ``P⁻¹H`` (from the
generalised eigenvalues), at two active sets: every row (the first Newton
iteration, from zero) and the rows a dsvm fit of the same k leaves active.
Conjugate gradients need about ``√cond`` steps for each digit of accuracy, and
each step is a pass over the kernel rows.  ``T`` is a Cholesky factor of
``K(L, L) + δI``, δ the float32 eigen map's cut-off (10⁻⁶ of the largest
eigenvalue).  Dense float64 matrices of n x k: keep k to a few thousand.

Usage::

    python benchmarks/bench_falkon_preconditioner.py [--dataset ijcnn1] [--ks 500,1000,2000] [--data-dir DIR]
"""

from __future__ import annotations

import argparse
import logging
import warnings
from pathlib import Path

import numpy as np
import scipy.linalg as sla
from bench_speed import DATASETS, load
from common import DEFAULT_DATA_DIR, REPO, machine, save_json, table

logger = logging.getLogger("bench_falkon_preconditioner")

C = 10.0
#: the float32 eigen map's relative cut-off, used as the jitter of K(L, L)'s Cholesky factor
JITTER = 1e-6


def rbf(A: np.ndarray, B: np.ndarray, gamma: float) -> np.ndarray:
    """The Gaussian kernel matrix of the rows of ``A`` against those of ``B`` (float64)."""
    sq = np.einsum("ij,ij->i", A, A)[:, None] + np.einsum("ij,ij->i", B, B)[None, :] - 2.0 * (A @ B.T)
    return np.exp(-gamma * np.maximum(sq, 0.0))


def jittered_factor(K_LL: np.ndarray) -> np.ndarray:
    """Upper Cholesky factor ``T`` of ``K_LL + δI``, δ = :data:`JITTER` x the largest eigenvalue."""
    k = K_LL.shape[0]
    top = sla.eigh(K_LL, subset_by_index=[k - 1, k - 1], eigvals_only=True)[0]
    return sla.cholesky(K_LL + JITTER * top * np.eye(k), lower=False)


def conditions(G: np.ndarray, T: np.ndarray, active: np.ndarray, landmarks: np.ndarray) -> tuple[float, float]:
    """(cond H, cond P⁻¹H) at the active set ``active`` (a boolean mask over the rows)."""
    n, k = G.shape
    Ga = np.hstack([G[active], np.ones((int(active.sum()), 1))])
    H = 2.0 * C * (Ga.T @ Ga)
    H[np.diag_indices(k)] += 1.0
    on = active[landmarks]
    Gl = np.hstack([T.T[on], np.ones((int(on.sum()), 1))])
    P = 2.0 * C * n / k * (Gl.T @ Gl)
    P[np.diag_indices(k)] += 1.0
    P[k, k] += 1e-8 * P[k, k] + 1e-12  # the free bias: nonsingular when no landmark row is active
    h = np.linalg.eigvalsh(H)
    g = sla.eigh(H, P, eigvals_only=True)
    return float(h[-1] / h[0]), float(g[-1] / g[0])


def measure(name: str, k: int, data_dir: Path) -> dict:
    from dsvm import NystroemSVC

    gamma = DATASETS[name][0]
    Xtr, ytr, _, _ = load(data_dir, name)
    X = Xtr.toarray() if hasattr(Xtr, "toarray") else np.asarray(Xtr, dtype=np.float64)
    classes = np.unique(ytr)
    y = np.where(ytr == classes[1], 1.0, -1.0)
    landmarks = np.random.default_rng(0).choice(X.shape[0], k, replace=False)
    K = rbf(X, X[landmarks], gamma)
    T = jittered_factor(0.5 * (K[landmarks] + K[landmarks].T))
    G = sla.solve_triangular(T, K.T, lower=False, trans="T").T
    del K
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = NystroemSVC(C=C, gamma=gamma, n_components=k, landmarks="uniform", random_state=0).fit(Xtr, ytr)
    at_solution = y * model.decision_function(Xtr) < 1.0
    row = {"dataset": name, "k": k}
    for label, active in (("all", np.ones(X.shape[0], dtype=bool)), ("solution", at_solution)):
        cond_h, cond_ph = conditions(G, T, active, landmarks)
        row.update({f"{label}_active": int(active.sum()), f"{label}_cond_H": cond_h, f"{label}_cond_PH": cond_ph})
        logger.info("%s k=%d, %s active (%d rows): cond H %.3g, cond P^-1 H %.3g", name, k, label,
                    int(active.sum()), cond_h, cond_ph)
    return row


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dataset", default="ijcnn1", choices=sorted(DATASETS))
    parser.add_argument("--ks", default="500,1000,2000", help="landmark counts, comma-separated")
    parser.add_argument("--data-dir", type=Path, default=DEFAULT_DATA_DIR)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    rows = [measure(args.dataset, int(k), args.data_dir) for k in args.ks.split(",")]
    body = [{"k": r["k"], "active set": s, "rows active": r[f"{s}_active"], "cond H": r[f"{s}_cond_H"],
             "cond P⁻¹H": r[f"{s}_cond_PH"]} for r in rows for s in ("all", "solution")]
    logger.info("\n%s", table(body, ["k", "active set", "rows active", "cond H", "cond P⁻¹H"]))
    save_json({"machine": machine(), "rows": rows}, REPO / "benchmarks" / "results" / "falkon_preconditioner.json")

if __name__ == "__main__":
    main()
