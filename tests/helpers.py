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
