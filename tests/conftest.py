"""Shared fixtures: benchmark data from ../shared/data, small problems, a local cluster.

Helpers that tests import (paths, data loaders, problem builders, dense oracles)
live in helpers.py: pytest loads this file as a plugin, not as a module to import.
"""

from __future__ import annotations

import pytest
from helpers import load_libsvm, make_circles_problem


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


@pytest.fixture(scope="module")
def scheduler_address():
    """Address of an in-process ``distributed.LocalCluster`` (one worker, two threads) that the dsvm
    command attaches to with ``--scheduler-address``: the commands of a test module share it instead of
    each starting a cluster of its own."""
    distributed = pytest.importorskip("distributed")
    with distributed.LocalCluster(n_workers=1, threads_per_worker=2, processes=False, dashboard_address=None,
                                  protocol="tcp", host="127.0.0.1") as cluster:
        yield cluster.scheduler_address
