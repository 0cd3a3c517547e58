"""Shared test helpers: paths, benchmark data, small problems and dense oracles.

Importable from every test folder (``pythonpath = ["tests"]`` in pyproject.toml):
``from helpers import make_circles_problem``.
"""

from __future__ import annotations

import logging
import lzma
import os
from pathlib import Path

import numpy as np
import pytest
from sklearn.datasets import load_svmlight_file

REPO = Path(__file__).resolve().parents[2]
DATA_DIR = Path(os.environ.get("DSVM_DATA_DIR", REPO.parent / "shared" / "data"))


def data_file(name: str) -> Path:
    """Path of a LIBSVM benchmark file in the shared data folder; skips if absent."""
    path = DATA_DIR / f"{name}.xz"
    if not path.exists():
        pytest.skip(f"benchmark data {path} not found (set DSVM_DATA_DIR to the folder holding the .xz files)")
    return path


def load_libsvm(name: str, n_features: int | None = None):
    """Load a benchmark set with scikit-learn's reader (an oracle independent of dsvm.io)."""
    with lzma.open(data_file(name)) as f:
        X, y = load_svmlight_file(f, n_features=n_features)
    return X, y


def make_circles_problem(n: int = 600, p: int = 5, noise: float = 0.1, seed: int = 0):
    """A binary problem with a non-linear boundary (sphere in p dims)."""
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, p))
    radius = np.sqrt(p) * 0.95
    y = np.where(np.linalg.norm(X, axis=1) + noise * rng.normal(size=n) > radius, 1, -1)
    return X, y


def zero_based_libsvm_files(tmp_path: Path) -> dict[str, Path]:
    """A training file with indices 0-3 and a zero-based test file that never uses feature 0.

    The label is the sign of x1 - x2; feature 0 is noise.  Read as one-based, the
    test file's columns shift by one and the model sees x2 - x3 instead.
    """
    rng = np.random.default_rng(3)
    paths = {}
    for name, n, with_zero in (("train", 1500, True), ("test", 600, False)):
        X = rng.random((n, 4))
        if not with_zero:
            X[:, 0] = 0.0
        y = np.where(X[:, 1] > X[:, 2], 1, -1)
        with open(tmp_path / f"{name}.libsvm", "w") as f:
            for xi, yi in zip(X, y):
                f.write(f"{yi:+d} " + " ".join(f"{j}:{v:.6f}" for j, v in enumerate(xi) if v) + "\n")
        paths[name] = tmp_path / f"{name}.libsvm"
    return paths


class KillOnIteration(logging.Handler):
    """Runs ``action`` when the Newton log reports iteration ``it``."""

    def __init__(self, it: int, action):
        super().__init__()
        self.marker, self.action, self.fired = f"newton it={it} ", action, False

    def emit(self, record):
        if not self.fired and self.marker in record.getMessage():
            self.fired = True
            self.action()


# ---------------------------------------------------------------- dense oracles
def feature_blocks(X, fmap, *, check_finite: bool = True, store: str = "memory"):
    """The feature blocks of ``X`` kept in memory (``store="memory"``) or recomputed every pass."""
    from dsvm.problems import FeatureStore

    if store not in ("memory", "recompute"):
        raise ValueError("feature_blocks() keeps features in memory or recomputes them; use FeatureStore for zarr")
    return FeatureStore(X, fmap, store, check_finite=check_finite).features


def sqhinge_objective_dense(F: np.ndarray, y: np.ndarray, c: np.ndarray, w: np.ndarray, b: float) -> float:
    """Primal squared-hinge objective in float64 (dense; y in ±1)."""
    m = np.asarray(F, dtype=np.float64) @ np.asarray(w, dtype=np.float64) + b
    r = np.maximum(0.0, 1.0 - y * m)
    return 0.5 * float(np.dot(w, w)) + float(np.dot(c, r * r))


def sqeps_objective_dense(F: np.ndarray, y: np.ndarray, c: np.ndarray, w: np.ndarray, b: float, epsilon: float) -> float:
    """Primal squared ε-insensitive objective in float64 (dense)."""
    m = np.asarray(F, dtype=np.float64) @ np.asarray(w, dtype=np.float64) + b
    r = np.maximum(0.0, np.abs(m - y) - epsilon)
    return 0.5 * float(np.dot(w, w)) + float(np.dot(c, r * r))


def dense_pass_reference(F, y_pm, c, x):
    """Loss, gradient, generalized Hessian (loss part, times 2) and active set at ``x = (w, b)``, dense float64."""
    Ft = np.hstack([F, np.ones((F.shape[0], 1))])
    m = Ft @ x
    r = np.maximum(0.0, 1.0 - y_pm * m)
    active = r > 0
    loss = float(np.dot(c, r * r))
    grad = -2.0 * Ft.T @ (c * y_pm * r)
    H = 2.0 * (Ft[active] * c[active, None]).T @ Ft[active]
    return loss, grad, H, active


def lbfgs_sqhinge_optimum(F, y_pm, c, fit_intercept: bool = True) -> float:
    """Minimum of the dense float64 squared-hinge objective with per-row costs ``c`` by L-BFGS (an oracle
    independent of dsvm's solvers); without an intercept the bias stays 0."""
    from scipy.optimize import minimize

    def fun(x):
        w, b = x[:-1], (x[-1] if fit_intercept else 0.0)
        r = np.maximum(0.0, 1.0 - y_pm * (F @ w + b))
        s = -2.0 * c * y_pm * r
        return 0.5 * w @ w + c @ (r * r), np.concatenate([w + F.T @ s, [s.sum() if fit_intercept else 0.0]])

    res = minimize(fun, np.zeros(F.shape[1] + 1), jac=True, method="L-BFGS-B",
                   options={"maxiter": 50_000, "ftol": 1e-16, "gtol": 1e-11, "maxcor": 50})
    return res.fun
