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

REPO = Path(__file__).resolve().parents[1]
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


def make_xor_problem(n: int, seed: int = 0):
    """A non-linear problem whose optimal bias is about zero (LIBLINEAR regularises the bias)."""
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 4))
    return X, np.where(X[:, 0] * X[:, 1] > 0, 1, -1)


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


def interrupt_fit(fit, handler: logging.Handler) -> None:
    """Run ``fit()`` with ``handler`` on the Newton solver's log (at INFO), expecting the KeyboardInterrupt it
    raises there (a fit stopped mid-solve, its checkpoint left behind); the log is restored afterwards."""
    log = logging.getLogger("dsvm.solvers._newton")
    level = log.level
    log.addHandler(handler)
    log.setLevel(logging.INFO)
    try:
        with pytest.raises(KeyboardInterrupt):
            fit()
    finally:
        log.removeHandler(handler)
        log.setLevel(level)


# ---------------------------------------------------------------- dense oracles
def feature_blocks(X, fmap, *, check_finite: bool = True, store: str = "memory"):
    """The feature blocks of ``X`` kept in memory (``store="memory"``) or recomputed every pass."""
    from dsvm.problems import FeatureStore

    if store not in ("memory", "recompute"):
        raise ValueError("feature_blocks() keeps features in memory or recomputes them; use FeatureStore for zarr")
    return FeatureStore(X, fmap, store, check_finite=check_finite).features


# Decision values of a float32 model against the explicit float64 ``F coefᵀ``: float32 rounding of the kernel
# values, of the Nyström map and of the sums over the landmarks, relative to the sum of the terms' magnitudes
# (``explicit_decisions``'s scale); a few eps32 of it on the tests' problems, 32 leaves a margin.
FLOAT32_DECISION_TOL = 32 * float(np.finfo(np.float32).eps)
FLOAT64_DECISION_TOL = 32 * float(np.finfo(np.float64).eps)


def explicit_decisions(X, fmap, coef, intercept, scaling=None):
    """``F coefᵀ + intercept`` the long way, in float64, from scikit-learn's kernels (an oracle independent of
    dsvm's kernel code): ``F = K(X, L) normalizationᵀ``; and per value its scale ``|K| |normalizationᵀ| |coefᵀ|``
    (what rounding errors are relative to).  ``scaling``: a fitted Scaling applied to ``X`` first."""
    import scipy.sparse as sp
    from sklearn.metrics.pairwise import pairwise_kernels

    if scaling is not None:
        X = scaling.transform_block(X)
    X = X.astype(np.float64) if sp.issparse(X) else np.asarray(X, dtype=np.float64)
    spec = fmap.spec
    params = {"rbf": {"gamma": spec.gamma}, "linear": {}, "sigmoid": {"gamma": spec.gamma, "coef0": spec.coef0},
              "poly": {"gamma": spec.gamma, "degree": spec.degree, "coef0": spec.coef0}}[spec.name]
    K = pairwise_kernels(X, fmap.components, metric=spec.name, **params)
    M = fmap.normalization.T
    coef = np.asarray(coef, dtype=np.float64)
    return (K @ M) @ coef.T + intercept, (np.abs(K) @ np.abs(M)) @ np.abs(coef.T)


def assert_same_decisions(dec, expected, scale, tol: float) -> None:
    """Decision values within ``tol`` times their scale of the expected ones (both (n, n_problems))."""
    dec = np.asarray(dec, dtype=np.float64).reshape(expected.shape)
    err = np.abs(dec - expected) / np.maximum(scale, np.finfo(np.float64).tiny)
    assert np.all(err <= tol), f"largest error {err.max():.3g} of the scale, allowed {tol:.3g}"


def assert_same_labels(codes, expected, scale, tol: float) -> None:
    """The class indices ``codes`` predict are those of the decision values ``expected`` (n, n_problems), except on
    rows whose decision is within ``tol`` times its scale of a tie (0 for one problem; the two largest values for
    several)."""
    from dsvm.problems import predicted_codes

    codes, want = np.asarray(codes), predicted_codes(expected)
    margin = tol * scale
    if expected.shape[1] == 1:
        near_tie = np.abs(expected[:, 0]) <= margin[:, 0]
    else:
        top2 = np.sort(expected, axis=1)[:, -2:]
        near_tie = top2[:, 1] - top2[:, 0] <= 2 * margin.max(axis=1)
    differ = codes != want
    assert not np.any(differ & ~near_tie), f"{int(np.sum(differ & ~near_tie))} labels differ away from a tie"


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


class DenseSquaredHinge:
    """The operator contract of dsvm.solvers on a dense float64 matrix, written from the formulas: an
    oracle for the solvers independent of dsvm.problems.

    ``F`` (n x r), labels ``y`` in ±1, cost ``C`` times optional ``sample_weight``.  ``fold`` cuts the
    rows into ``n_blocks`` blocks.
    """

    def __init__(self, F, y, C=1.0, sample_weight=None, fit_intercept=True, n_blocks=3):
        self.F = np.asarray(F, dtype=np.float64)
        self.y = np.asarray(y, dtype=np.float64)
        self.sw = None if sample_weight is None else np.asarray(sample_weight, dtype=np.float64)
        self.c = C * (np.ones(len(self.y)) if self.sw is None else self.sw)
        self.class_cost = np.array([C, C], dtype=np.float64)
        self.fit_intercept = fit_intercept
        self.n_passes = 0
        self._bounds = np.linspace(0, len(self.y), n_blocks + 1).astype(int)
        self.Ft = np.hstack([self.F, np.ones((self.F.shape[0], 1))])

    n_rows = property(lambda self: self.F.shape[0])
    n_blocks = property(lambda self: len(self._bounds) - 1)
    is_distributed = False

    def _residual(self, x):
        return np.maximum(0.0, 1.0 - self.y * (self.Ft @ x))

    def _gram(self, rows):
        return 2.0 * (self.Ft[rows] * self.c[rows, None]).T @ self.Ft[rows]

    def evaluate(self, x0, x1, t_grid=(), hessian="none"):
        from dsvm.problems import PassResult

        self.n_passes += 1
        x0, x1 = np.asarray(x0, dtype=np.float64), np.asarray(x1, dtype=np.float64)
        r1, r0 = self._residual(x1), self._residual(x0)
        a1, a0 = (r1 > 0) & (self.c > 0), (r0 > 0) & (self.c > 0)
        grad = -2.0 * self.Ft.T @ (self.c * self.y * r1)
        grid = np.array([float(self.c @ self._residual(x0 + t * (x1 - x0)) ** 2) for t in t_grid])
        hess = {"none": None, "full": self._gram(a1) if hessian == "full" else None,
                "delta": self._gram(a1 & ~a0) - self._gram(a0 & ~a1) if hessian == "delta" else None}[hessian]
        if not self.fit_intercept:
            grad[-1] = 0.0
            if hess is not None:
                hess[-1, :] = hess[:, -1] = 0.0
        return PassResult(loss=float(self.c @ r1**2), grad=grad, n_active=int(a1.sum()),
                          n_changed=int((a1 != a0).sum()), loss_grid=grid, hess=hess)

    def hess_vec(self, x, v):
        self.n_passes += 1
        out = self._gram((self._residual(np.asarray(x)) > 0) & (self.c > 0)) @ v
        if not self.fit_intercept:
            out[-1] = 0.0
        return out

    def objective(self, x):
        x = np.asarray(x, dtype=np.float64)
        b = x[-1] if self.fit_intercept else 0.0
        r = np.maximum(0.0, 1.0 - self.y * (self.F @ x[:-1] + b))
        return 0.5 * float(x[:-1] @ x[:-1]) + float(self.c @ r**2)

    def hinge_objective(self, x):
        self.n_passes += 1
        return 0.5 * float(x[:-1] @ x[:-1]) + float(self.c @ self._residual(x))

    def gather(self):
        self.n_passes += 1
        return self.F, self.y, self.c

    def fold(self, step, state, params, order=None):
        self.n_passes += 1
        for i in (range(self.n_blocks) if order is None else order):
            a, b = self._bounds[i], self._bounds[i + 1]
            state = step(self.F[a:b], self.y[a:b], self.c[a:b], state, params)
        return state

    def max_sample_weight(self):
        return 1.0 if self.sw is None else float(self.sw.max())


# ---------------------------------------------------------------- the command in a subprocess
def run_dsvm(*args: str, cwd: Path, timeout: float = 120, check: bool = False):
    """``python -m dsvm -q ARGS`` in a fresh process (a new interpreter, its own Dask cluster);
    with ``check`` the exit status must be 0."""
    import subprocess
    import sys

    proc = subprocess.run([sys.executable, "-m", "dsvm", "-q", *args], cwd=cwd, capture_output=True, text=True,
                          timeout=timeout)
    if check:
        assert proc.returncode == 0, f"dsvm {' '.join(args)} failed ({proc.returncode}):\n{proc.stderr[-3000:]}"
    return proc


# ---------------------------------------------------------------- calls that might block on a FIFO
def call_near_fifos(fn, *fifos, timeout: float = 30):
    """The exception ``fn()`` raises (None if it returns), run in a thread; a call still blocked after
    ``timeout`` fails the test, once the ``fifos`` it may wait on got a writer (and so an end) to let it finish."""
    import threading

    outcome: dict = {}

    def target():
        try:
            fn()
        except BaseException as exc:
            outcome["exc"] = exc

    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    thread.join(timeout)
    if thread.is_alive():
        for _ in range(100):  # a reader may open the FIFO again: give it an end each time
            for fifo in fifos:
                try:
                    os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
                except OSError:
                    pass
            thread.join(0.1)
            if not thread.is_alive():
                break
        pytest.fail(f"{getattr(fn, '__name__', fn)} was still blocked after {timeout} s, waiting on a FIFO")
    return outcome.get("exc")


def make_mixed_scales_problem(n=1500, seed=0):
    """Tabular columns as a user has them: z-scores, amounts around 1000 ± 250, ratios in [0, 1]; the label
    depends on the z-scores and ratios only."""
    rng = np.random.default_rng(seed)
    z, amounts, ratios = rng.normal(size=(n, 10)), 1000 + 250 * rng.normal(size=(n, 10)), rng.uniform(size=(n, 10))
    y = (z[:, :3].sum(axis=1) + 2 * (ratios[:, 0] - 0.5) > 0.8).astype(int)
    return np.hstack([z, amounts, ratios]), y
