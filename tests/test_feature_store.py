"""Feature storage policy: memory, zarr scratch, recompute — same model, scratch cleaned up."""

import os

import dask
import dask.array as da
import numpy as np
import pytest

from dsvm import NystroemSVC
from dsvm.blockwise import as_row_blocks
from dsvm.kernels import make_kernel_spec
from dsvm.nystroem import fit_feature_map
from dsvm.operator import FeatureStore, plan_feature_store

from conftest import make_circles_problem


@pytest.fixture
def data():
    X, y = make_circles_problem(n=700, seed=7)
    return da.from_array(X, chunks=(90, -1)), da.from_array(y, chunks=90), X, y


@pytest.mark.parametrize("store", ["zarr", "recompute"])
def test_same_model_whatever_the_store(tmp_path, data, store):
    Xd, yd, X, y = data
    params = dict(C=3.0, gamma=0.4, n_components=60, random_state=0, dtype="float64", tol=1e-8)
    ref = NystroemSVC(**params, feature_store="memory").fit(Xd, yd)
    with dask.config.set({"dsvm.scratch-directory": str(tmp_path)}):
        other = NystroemSVC(**params, feature_store=store).fit(Xd, yd)
    assert other.solver_stats_["feature_store"] == store
    np.testing.assert_allclose(other.coef_, ref.coef_, rtol=1e-6, atol=1e-9)
    assert os.listdir(tmp_path) == []  # the scratch store is gone


def test_scratch_removed_when_the_fit_fails(tmp_path, data):
    Xd, yd, X, y = data
    fmap = fit_feature_map(X[:20], make_kernel_spec("rbf", 0.5))
    with dask.config.set({"dsvm.scratch-directory": str(tmp_path)}):
        with pytest.raises(RuntimeError, match="boom"):
            with FeatureStore(as_row_blocks(Xd, 0), fmap, "zarr") as fs:
                assert fs.kind == "zarr" and len(os.listdir(tmp_path)) == 1
                np.testing.assert_allclose(fs.blocks.compute(), fmap.transform_block(X), rtol=1e-6)
                raise RuntimeError("boom")
    assert os.listdir(tmp_path) == []


def test_auto_policy_follows_memory(data):
    Xd, yd, X, y = data
    rb = as_row_blocks(Xd, 0)
    assert plan_feature_store("auto", rb, 50, 50, 4)[0] == "memory"
    assert plan_feature_store("auto", as_row_blocks(X, 100), 50, 50, 4)[0] == "memory"
    with dask.config.set({"dsvm.memory-fraction": 1e-12}):
        kind, reason = plan_feature_store("auto", rb, 50, 50, 4)
        assert kind in ("zarr", "recompute") and "GiB" in reason
        # a slow disk makes recomputing (cheap here: p = 5) the better choice
        with dask.config.set({"dsvm.disk-bandwidth": 1.0}):
            assert plan_feature_store("auto", rb, 500, 500, 4)[0] == "recompute"
        with dask.config.set({"dsvm.flops-per-thread": 1.0}):
            assert plan_feature_store("auto", rb, 500, 500, 4)[0] == "zarr"
    with pytest.raises(ValueError, match="feature_store"):
        plan_feature_store("disk", rb, 5, 5, 4)


@pytest.mark.parametrize("chunks", [(0, 700), (350, 0, 350), (300, 0, 0, 400)])
def test_empty_row_chunks_give_the_same_model_in_every_store(tmp_path, chunks):
    """A boolean selection leaves empty chunks; they once shared a scratch array with the next block."""
    X, y = make_circles_problem(n=700, seed=8)
    params = dict(C=3.0, gamma=0.4, n_components=40, random_state=0, dtype="float64", tol=1e-8)
    ref = NystroemSVC(**params).fit(X, y)
    Xd, yd = da.from_array(X, chunks=(chunks, -1)), da.from_array(y, chunks=(chunks,))
    with dask.config.set({"dsvm.scratch-directory": str(tmp_path)}):
        for store in ("zarr", "memory", "recompute"):
            m = NystroemSVC(**params, feature_store=store).fit(Xd, yd)
            np.testing.assert_allclose(m.objective_, ref.objective_, rtol=1e-9, err_msg=store)
            np.testing.assert_allclose(m.coef_, ref.coef_, rtol=1e-6, atol=1e-9, err_msg=store)
    assert os.listdir(tmp_path) == []


def test_prediction_blocks_are_cut_to_the_task_budget_like_the_fit():
    """A dataset stored as one chunk must not need one (chunk x k) kernel block at predict time."""
    X, y = make_circles_problem(n=4000, seed=9)
    m = NystroemSVC(C=3.0, gamma=0.4, n_components=50, random_state=0).fit(X, y)
    Xd = da.from_array(X, chunks=(4000, -1))
    with dask.config.set({"dsvm.block-bytes": 8 * 50 * 1000}):  # 1000 rows of kernel values per task
        dec = m.decision_function(Xd)
        assert dec.numblocks[0] >= 4 and max(dec.chunks[0]) <= 1000
        np.testing.assert_allclose(dec.compute(), m.decision_function(X), rtol=1e-5, atol=1e-6)
        assert m.score(Xd, da.from_array(y, chunks=4000)) == m.score(X, y)
