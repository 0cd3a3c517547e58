"""Shared fixtures: benchmark data from ../shared/data, small problems, a local cluster."""

from __future__ import annotations

import lzma
import os
from pathlib import Path

import numpy as np
import pytest

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
    from sklearn.datasets import load_svmlight_file

    with lzma.open(data_file(name)) as f:
        X, y = load_svmlight_file(f, n_features=n_features)
    return X, y


@pytest.fixture(scope="session")
def a9a():
    Xtr, ytr = load_libsvm("a9a.train", 123)
    Xte, yte = load_libsvm("a9a.test", 123)
    return Xtr, ytr, Xte, yte


@pytest.fixture(scope="session")
def splice():
    Xtr, ytr = load_libsvm("splice.train", 60)
    Xte, yte = load_libsvm("splice.test", 60)
    return Xtr, ytr, Xte, yte


@pytest.fixture(scope="session")
def ijcnn1():
    Xtr, ytr = load_libsvm("ijcnn1.train", 22)
    Xte, yte = load_libsvm("ijcnn1.test", 22)
    return Xtr, ytr, Xte, yte


def make_circles_problem(n: int = 600, p: int = 5, noise: float = 0.1, seed: int = 0):
    """A binary problem with a non-linear boundary (sphere in p dims)."""
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, p))
    radius = np.sqrt(p) * 0.95
    y = np.where(np.linalg.norm(X, axis=1) + noise * rng.normal(size=n) > radius, 1, -1)
    return X, y


@pytest.fixture
def circles():
    return make_circles_problem()


@pytest.fixture(scope="module")
def local_cluster_client():
    """A real ``distributed.LocalCluster`` with two worker processes."""
    distributed = pytest.importorskip("distributed")
    cluster = distributed.LocalCluster(
        n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None, host="127.0.0.1"
    )
    # Not the global default: tests opt in with ``with client.as_current():``.
    client = distributed.Client(cluster, set_as_default=False)
    try:
        yield client
    finally:
        client.close()
        cluster.close()
