"""The same model from numpy, the threaded scheduler and a 2-process LocalCluster."""

import dask
import dask.array as da
import numpy as np
import scipy.sparse as sp

from dsvm import NystroemSVC

from helpers import make_circles_problem

PARAMS = dict(C=10.0, gamma=0.3, n_components=80, random_state=0, tol=1e-6)


def test_numpy_threads_and_local_cluster_agree(local_cluster_client):
    X, y = make_circles_problem(n=900, seed=1)
    X_test, y_test = make_circles_problem(n=300, seed=2)
    ref = NystroemSVC(**PARAMS).fit(X, y)
    Xd = da.from_array(X, chunks=(128, -1))
    yd = da.from_array(y, chunks=128)
    with dask.config.set(scheduler="threads"):
        threaded = NystroemSVC(**PARAMS).fit(Xd, yd)
    with local_cluster_client.as_current():
        dist = NystroemSVC(**PARAMS).fit(Xd, yd)
        pred_dist = dist.predict(da.from_array(X_test, chunks=(50, -1))).compute()
        score_dist = dist.score(da.from_array(X_test, chunks=(50, -1)), da.from_array(y_test, chunks=50))
        assert local_cluster_client.run(lambda: 1)  # the cluster really did the work
    dec_ref = ref.decision_function(X_test)
    for model in (threaded, dist):
        np.testing.assert_allclose(model.components_, ref.components_)
        np.testing.assert_allclose(model.decision_function(X_test), dec_ref, atol=1e-4)
    clear = np.abs(dec_ref) > 1e-3
    np.testing.assert_array_equal(pred_dist[clear], ref.predict(X_test)[clear])
    np.testing.assert_array_equal(threaded.predict(X_test)[clear], ref.predict(X_test)[clear])
    assert abs(score_dist - ref.score(X_test, y_test)) <= 1 / len(y_test) + 1e-12


def test_sparse_dask_input_on_local_cluster(local_cluster_client):
    X, y = make_circles_problem(n=500, seed=3)
    X = np.where(np.abs(X) < 0.4, 0.0, X)
    ref = NystroemSVC(**PARAMS).fit(sp.csr_matrix(X), y)
    Xd = da.from_array(X, chunks=(64, -1)).map_blocks(sp.csr_matrix, meta=sp.csr_matrix((0, 0), dtype=float))
    with local_cluster_client.as_current():
        dist = NystroemSVC(**PARAMS).fit(Xd, da.from_array(y, chunks=64))
    np.testing.assert_allclose(dist.decision_function(X), ref.decision_function(X), atol=1e-4)
