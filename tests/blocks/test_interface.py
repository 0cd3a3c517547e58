"""The RowBlocks interface, on in-process blocks and Dask blocks alike, against numpy on the whole array."""

from __future__ import annotations

import dask
import dask.array as da
import numpy as np
import pytest
import scipy.sparse as sp

from dsvm.blocks import (
    RowBlocks,
    aligned_vector,
    as_row_blocks,
    check_dask_X,
    from_blocks,
    lazy_result,
    row_index_blocks,
    spill_blocks,
    task_sized_blocks,
)
from dsvm.blocks._interface import tree_sum

N, P = 23, 4
CHUNKINGS = [1, 5, (3, 10, 1, 9), N]


def _data(sparse: bool = False):
    rng = np.random.default_rng(0)
    X = rng.normal(size=(N, P))
    X[rng.random(size=X.shape) < 0.4] = 0.0
    return sp.csr_matrix(X) if sparse else X


def _split(X, chunks):
    sizes = [chunks] * (N // chunks) + ([N % chunks] if N % chunks else []) if isinstance(chunks, int) else list(chunks)
    bounds = np.cumsum([0, *sizes])
    return [X[a:b] for a, b in zip(bounds[:-1], bounds[1:])], tuple(sizes)


def _blocks(X, chunks, kind: str) -> RowBlocks:
    parts, sizes = _split(X, chunks)
    if kind == "memory":
        return from_blocks(parts)
    dense = X.toarray() if sp.issparse(X) else X
    darr = da.from_array(dense, chunks=(sizes, -1))
    if sp.issparse(X):
        darr = darr.map_blocks(sp.csr_matrix, dtype=X.dtype, meta=sp.csr_matrix((0, 0), dtype=X.dtype))
    return as_row_blocks(darr, 0)


def _dense(a):
    return a.toarray() if sp.issparse(a) else np.asarray(a)


@pytest.fixture(autouse=True)
def _threads():
    with dask.config.set(scheduler="threads"):
        yield


KINDS = ["memory", "dask"]


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("chunks", CHUNKINGS)
@pytest.mark.parametrize("sparse", [False, True])
def test_map_reduce_sums_numbers_arrays_and_trees(kind, chunks, sparse):
    X = _data(sparse)
    rb = _blocks(X, chunks, kind)
    assert rb.n_rows == N and sum(rb.chunks) == N and rb.n_blocks == len(rb.chunks)
    np.testing.assert_array_equal(rb.offsets, np.concatenate([[0], np.cumsum(rb.chunks)]))
    dense = _dense(X)
    np.testing.assert_allclose(rb.map_reduce(lambda b: float(_dense(b).sum())), dense.sum())
    np.testing.assert_allclose(rb.map_reduce(lambda b: _dense(b).sum(axis=0)), dense.sum(axis=0))
    tree = rb.map_reduce(lambda b: {"n": b.shape[0], "pair": (_dense(b).sum(), np.abs(_dense(b)).sum(axis=0))})
    assert tree["n"] == N
    np.testing.assert_allclose(tree["pair"][0], dense.sum())
    np.testing.assert_allclose(tree["pair"][1], np.abs(dense).sum(axis=0))


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("chunks", CHUNKINGS)
def test_map_reduce_with_another_associative_combine(kind, chunks):
    X = _data()
    rb = _blocks(X, chunks, kind)
    assert rb.map_reduce(lambda b: float(b.max()), combine=max) == X.max()
    rows = rb.map_reduce(lambda b, r: np.asarray(r), aligned=(row_index_blocks(rb),),
                         combine=lambda parts: np.concatenate(list(parts)))
    np.testing.assert_array_equal(np.sort(rows), np.arange(N))


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("chunks", CHUNKINGS)
def test_map_blocks_with_aligned_shared_and_offsets(kind, chunks):
    X = _data()
    v = np.arange(N, dtype=np.float64) * 0.5
    rb = _blocks(X, chunks, kind)
    vb = aligned_vector(v, rb)

    def scaled(block, other, none, factor, offset=0):
        assert none is None
        return block * other * factor + offset

    out = rb.map_blocks(scaled, P, np.float64, aligned=(rb, None), shared=(2.0,), with_offset=True)
    offsets = np.repeat(rb.offsets[:-1], rb.chunks)[:, None]
    np.testing.assert_allclose(_dense(out.compute()), X * X * 2.0 + offsets)
    assert out.n_cols == P and vb.n_cols is None and rb.n_cols == P
    # 1-d output from 1-d blocks with an aligned vector
    rows = row_index_blocks(rb)
    w = rows.map_blocks(lambda r, vec, offset=0: r + vec + offset, None, np.float64, aligned=(vb,), with_offset=True)
    assert w.n_cols is None
    np.testing.assert_allclose(w.compute(), np.arange(N) + v + np.repeat(rb.offsets[:-1], rb.chunks))
    np.testing.assert_array_equal(_dense(lazy_result(out)), _dense(out.compute()))


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("chunks", CHUNKINGS)
@pytest.mark.parametrize("sparse", [False, True])
def test_take_returns_the_rows_asked_in_that_order(kind, chunks, sparse):
    X = _data(sparse)
    rb = _blocks(X, chunks, kind)
    idx = np.array([17, 3, 3, 22, 0, 9])
    np.testing.assert_array_equal(_dense(rb.take(idx)), _dense(X)[idx])


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("chunks", CHUNKINGS)
def test_fold_visits_blocks_in_order_and_threads_the_state(kind, chunks):
    X = _data()
    rb = _blocks(X, chunks, kind)
    order = list(range(rb.n_blocks))[::-1]

    def step(block, rows, state, tag):
        return state + [(tag, int(rows[0]) if len(rows) else -1, block.shape[0])]

    visited = rb.fold(step, [], aligned=(row_index_blocks(rb),), shared=("x",), order=order)
    assert [v[1] for v in visited] == [int(rb.offsets[i]) for i in order]
    assert sum(v[2] for v in visited) == N and all(v[0] == "x" for v in visited)
    default = rb.fold(step, [], aligned=(row_index_blocks(rb),), shared=("x",))
    assert [v[1] for v in default] == [int(o) for o in rb.offsets[:-1]]


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("chunks", CHUNKINGS)
def test_iter_blocks_and_compute_give_every_row_in_order(kind, chunks):
    X = _data()
    rb = _blocks(X, chunks, kind)
    np.testing.assert_array_equal(np.concatenate(list(rb.iter_blocks(batch=2))), X)
    np.testing.assert_array_equal(rb.compute(), X)
    np.testing.assert_array_equal(rb.persist().compute(), X)
    np.testing.assert_array_equal(row_index_blocks(rb).compute(), np.arange(N))


@pytest.mark.parametrize("chunks", CHUNKINGS)
def test_select_blocks_and_compress_are_numpy_slicing(chunks):
    X = _data()
    rb = _blocks(X, chunks, "memory")
    parts, _ = _split(X, chunks)
    pick = [i for i in range(rb.n_blocks) if i % 2 == 0]
    for split in (1, 2, 3):
        sel = rb.select_blocks(pick, split=split)
        np.testing.assert_array_equal(sel.compute(), np.concatenate([parts[i] for i in pick]))
        assert sel.n_blocks >= len(pick)
    mask = aligned_vector(X[:, 0] > 0, rb)
    np.testing.assert_array_equal(rb.compress(mask).compute(), X[X[:, 0] > 0])


def test_select_blocks_returns_views_and_compress_copies():
    X = _data()
    rb = from_blocks([X[:10], X[10:]])
    view = rb.select_blocks([1]).compute()
    assert np.shares_memory(view, X)
    assert not np.shares_memory(rb.compress(aligned_vector(np.ones(N, dtype=bool), rb)).compute(), X)


def test_in_process_only_and_dask_only_methods_say_so(tmp_path):
    X = _data()
    on_dask = _blocks(X, 5, "dask")
    with pytest.raises(NotImplementedError):
        on_dask.select_blocks([0])
    with pytest.raises(NotImplementedError):
        on_dask.compress(aligned_vector(np.ones(N, dtype=bool), on_dask))
    with pytest.raises(NotImplementedError):
        spill_blocks(_blocks(X, 5, "memory"), _copy_into, P, X.dtype, str(tmp_path))


def _copy_into(block, out=None):
    out[...] = block
    return out


@pytest.mark.parametrize("chunks", CHUNKINGS)
def test_spill_writes_each_block_once_and_reads_it_back(tmp_path, chunks):
    X = _data()
    spilled, _ = spill_blocks(_blocks(X, chunks, "dask"), _copy_into, P, X.dtype, str(tmp_path))
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(f"block-{i}.raw" for i in range(len(spilled.chunks)))
    np.testing.assert_array_equal(spilled.compute(), X)
    np.testing.assert_allclose(spilled.map_reduce(lambda b: b.sum(axis=0)), X.sum(axis=0))


def test_empty_row_chunks_are_dropped():
    X = _data()
    darr = da.from_array(X, chunks=((5, 0, 10, 0, 8), -1))
    rb = as_row_blocks(darr, 0)
    assert rb.chunks == (5, 10, 8)
    np.testing.assert_array_equal(rb.map_blocks(lambda b, offset=0: np.full(b.shape[0], offset), None, np.int64,
                                                with_offset=True).compute(), np.repeat([0, 5, 15], [5, 10, 8]))


def test_unknown_chunks_and_column_blocks_are_refused_with_their_fix():
    X = da.from_array(_data(), chunks=(5, 2))
    with pytest.raises(ValueError, match=r"2 chunks along the feature axis.*rechunk\(\{1: -1\}\)"):
        check_dask_X(X)
    with pytest.raises(ValueError, match="chunks along the feature axis"):
        as_row_blocks(X, 0)
    unknown = da.from_array(_data(), chunks=(5, -1))
    unknown = unknown[unknown[:, 0] > -np.inf]
    with pytest.raises(ValueError, match=r"unknown chunk sizes.*compute_chunk_sizes\(\)"):
        check_dask_X(unknown)
    with pytest.raises(ValueError, match="unknown chunk sizes"):
        as_row_blocks(unknown, 0)


def test_in_memory_input_is_split_for_every_core():
    X = np.zeros((50_000, 3))
    rb = as_row_blocks(X, 10_000, min_blocks=8)
    assert max(rb.chunks) <= 10_000 and rb.n_blocks >= 5
    assert as_row_blocks(X, 50_000, min_blocks=1).n_blocks == 1


def test_task_sized_blocks_bound_the_rows_of_a_task():
    X = da.zeros((40_000, 3), chunks=(40_000, -1))
    with dask.config.set({"dsvm.block-bytes": 8 * 100 * 1000}):  # 1000 rows of 100 float64 kernel values
        rb = task_sized_blocks(X, 100)
    assert max(rb.chunks) <= 1000 and sum(rb.chunks) == 40_000


def test_few_blocks_are_split_into_a_multiple_of_the_threads():
    """15 blocks on 2 threads leave one idle for the last block of every pass: a 16th is split off the
    chunk of the longest blocks.  Never when the blocks are many, or would get shorter than min_rows."""
    X = da.zeros((1_000_000, 2), chunks=((599_040, 400_960), -1))
    rb = as_row_blocks(X, 0).split_blocks(2, max_rows=66_827)
    assert rb.n_blocks == 16 and sum(rb.chunks) == 1_000_000 and max(rb.chunks) <= 66_827
    assert rb.chunks[:9] == (66_560,) * 9  # the other chunk, whose parts were the longest, got the extra one
    assert as_row_blocks(X, 0).split_blocks(3, max_rows=66_827).n_blocks == 15  # a multiple already
    rb7 = as_row_blocks(X, 0).split_blocks(7, max_rows=66_827)
    assert rb7.n_blocks == 21 and sum(rb7.chunks) == 1_000_000 and max(rb7.chunks) <= 66_827
    many = as_row_blocks(X, 0).split_blocks(2, max_rows=29_000)  # 21 + 14 = 35 blocks, over 16 per thread: kept
    assert many.n_blocks == 35
    short = da.zeros((9_000, 2), chunks=((3_000, 3_000, 3_000), -1))  # 3 blocks; halving one would go below
    assert as_row_blocks(short, 0).split_blocks(2, min_rows=2_048).n_blocks == 3


def test_tree_sum_of_nested_results():
    parts = [{"a": (1, np.array([1.0, 2.0])), "b": None}, {"a": (2, np.array([3.0, 4.0])), "b": None}]
    out = tree_sum(parts)
    assert out["a"][0] == 3 and out["b"] is None
    np.testing.assert_array_equal(out["a"][1], [4.0, 6.0])


def test_tree_sum_adds_into_the_arrays_it_made_and_leaves_the_parts_alone():
    rng = np.random.default_rng(0)
    parts = [{"h": rng.normal(size=(4, 4)), "g": (rng.normal(size=3), 1.5), "x": np.float32(1.0)} for _ in range(5)]
    parts.append({"h": 0.0, "g": (rng.normal(size=3).astype(np.float32), 2), "x": None})  # a scalar in a matrix's place
    parts.append({"h": rng.normal(size=(4, 4)).astype(np.float32), "g": (np.ones(3), 0.5), "x": None})
    copies = [{"h": np.copy(p["h"]), "g": np.copy(p["g"][0])} for p in parts]
    out = tree_sum(parts)
    np.testing.assert_allclose(out["h"], sum(c["h"] for c in copies))
    np.testing.assert_allclose(out["g"][0], sum(c["g"] for c in copies), rtol=1e-6)
    assert out["g"][1] == 1.5 * 5 + 2 + 0.5 and out["x"] == 5.0 and out["h"].dtype == np.float64
    for p, c in zip(parts, copies):  # no part was written to
        np.testing.assert_array_equal(p["h"], c["h"])
        np.testing.assert_array_equal(p["g"][0], c["g"])
    # a float32 sum made first takes a float64 term by a new array, not by rounding it into float32
    low = tree_sum([np.ones(2, dtype=np.float32), np.ones(2, dtype=np.float32), np.full(2, 1e-9)])
    assert low.dtype == np.float64 and low[0] == 2.0 + 1e-9


def test_tree_sum_makes_one_array_per_place_not_one_per_part():
    """Twelve (k+1)² block sums: one new array, the other eleven terms added into it."""
    made = []

    class Counting(np.ndarray):
        def __add__(self, other):
            made.append(1)
            return np.add(np.asarray(self), np.asarray(other)).view(Counting)

    parts = [np.full((30, 30), float(i)).view(Counting) for i in range(12)]
    out = tree_sum(parts)
    assert len(made) == 1
    np.testing.assert_array_equal(out, np.full((30, 30), float(sum(range(12)))))


@pytest.mark.slow
def test_map_reduce_on_a_cluster_uses_the_persisted_futures(local_cluster_client):
    X = _data()
    with local_cluster_client.as_current():
        rb = _blocks(X, (3, 10, 1, 9), "dask").persist()
        np.testing.assert_allclose(rb.map_reduce(np.sum), X.sum())
        np.testing.assert_allclose(rb.map_reduce(lambda b: b.sum(axis=0)), X.sum(axis=0))
