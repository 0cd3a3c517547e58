"""The Dask operator against dense numpy formulas, for many chunkings."""

import dask.array as da
import numpy as np
import pytest
import scipy.sparse as sp
from helpers import dense_pass_reference, feature_blocks

from dsvm.approx import fit_feature_map, make_kernel_spec
from dsvm.blocks import aligned_vector, as_row_blocks, from_blocks
from dsvm.problems import SquaredHingeOperator
from dsvm.problems._gram import _GramSum
from dsvm.svm import encode_labels

N, P, K = 23, 4, 6
CHUNKINGS = [1, 5, (3, 10, 1, 9), N]


def _problem(sparse, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(N, P)) * (rng.random((N, P)) < 0.6)
    y = rng.choice(["a", "b", "c"], size=N)
    sw = rng.uniform(0.5, 2.0, size=N)
    fmap = fit_feature_map(X[:K], make_kernel_spec("rbf", 0.4), dtype=np.float64)
    F = fmap.transform_block(X)
    return (sp.csr_matrix(X) if sparse else X), y, sw, fmap, F


def _dask_x(X, chunks):
    Xd = da.from_array(X.toarray() if sp.issparse(X) else X, chunks=(chunks, -1))
    if sp.issparse(X):
        Xd = Xd.map_blocks(sp.csr_matrix, meta=sp.csr_matrix((0, 0)))
    return Xd


def _operator(X, y, sw, fmap, chunks, positive):
    rb = as_row_blocks(_dask_x(X, chunks), 0)
    classes, codes = encode_labels(da.from_array(y, chunks=(rb.chunks,)), rb)
    F = feature_blocks(rb, fmap)
    class_cost = np.array([1.5, 2.0, 0.5])
    op = SquaredHingeOperator(F, codes.persist(), positive, class_cost, aligned_vector(sw, rb).persist())
    y_pm = np.where(np.searchsorted(classes, y) == positive, 1.0, -1.0)
    c = class_cost[np.searchsorted(classes, y)] * sw
    return op, y_pm, c


@pytest.mark.parametrize("chunks", CHUNKINGS)
@pytest.mark.parametrize("sparse", [False, True])
def test_gradient_and_hessian_vector_product_match_dense(chunks, sparse):
    X, y, sw, fmap, F = _problem(sparse)
    op, y_pm, c = _operator(X, y, sw, fmap, chunks, positive=1)
    rng = np.random.default_rng(1)
    x = rng.normal(size=fmap.n_output + 1) * 0.5
    v = rng.normal(size=fmap.n_output + 1)
    loss, grad, H, active = dense_pass_reference(F, y_pm, c, x)
    res = op.evaluate(x, x, (), "full")
    np.testing.assert_allclose(res.loss, loss, rtol=1e-10)
    np.testing.assert_allclose(res.grad, grad, rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(res.hess, H, rtol=1e-9, atol=1e-12)
    assert res.n_active == active.sum()
    np.testing.assert_allclose(op.hess_vec(x, v), H @ v, rtol=1e-9, atol=1e-12)
    V = rng.normal(size=(fmap.n_output + 1, 3))
    np.testing.assert_allclose(op.hess_vec(x, V), H @ V, rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize("chunks", CHUNKINGS)
def test_line_search_grid_and_hessian_update_match_dense(chunks):
    X, y, sw, fmap, F = _problem(False, seed=2)
    op, y_pm, c = _operator(X, y, sw, fmap, chunks, positive=2)
    rng = np.random.default_rng(3)
    x0 = rng.normal(size=fmap.n_output + 1) * 0.3
    x1 = x0 + rng.normal(size=fmap.n_output + 1)
    grid = np.array([1.0, 0.5, 0.1, 0.0])
    res = op.evaluate(x0, x1, grid, "delta")
    for t, value in zip(grid, res.loss_grid):
        np.testing.assert_allclose(value, dense_pass_reference(F, y_pm, c, x0 + t * (x1 - x0))[0], rtol=1e-10)
    _, grad1, H1, active1 = dense_pass_reference(F, y_pm, c, x1)
    _, _, H0, active0 = dense_pass_reference(F, y_pm, c, x0)
    np.testing.assert_allclose(res.grad, grad1, rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(res.hess, H1 - H0, rtol=1e-9, atol=1e-10)
    assert res.n_changed == np.sum(active0 != active1)


def test_gram_batches_across_slabs_match_dense(monkeypatch):
    """Small slabs: the Gram rows of several slabs are batched, flushed and summed in float64."""

    _set_slab_rows(monkeypatch, 16)
    X, y, sw, fmap, F = _problem(False, seed=6)
    op, y_pm, c = _operator(X, y, sw, fmap, 1000, positive=1)
    rng = np.random.default_rng(7)
    x0 = rng.normal(size=fmap.n_output + 1) * 0.3
    x1 = x0 + rng.normal(size=fmap.n_output + 1)
    _, _, H1, active1 = dense_pass_reference(F, y_pm, c, x1)
    _, _, H0, active0 = dense_pass_reference(F, y_pm, c, x0)
    assert np.sum(active0 != active1) > 0 and active1.sum() > 16
    np.testing.assert_allclose(op.evaluate(x0, x1, (), "full").hess, H1, rtol=1e-9, atol=1e-10)
    np.testing.assert_allclose(op.evaluate(x0, x1, (), "delta").hess, H1 - H0, rtol=1e-9, atol=1e-10)
    # no row changes: the blocks send a scalar zero, the operator hands back a zero matrix
    same = op.evaluate(x1, x1, (), "delta")
    assert same.n_changed == 0 and same.hess.shape == H1.shape and not same.hess.any()


@pytest.mark.parametrize("class_cost", [[1.0, 1.0, 1.0], [1.5, 2.0, 0.5]])
def test_gram_of_rows_gathered_by_cost_matches_dense(class_cost, monkeypatch):
    """Without sample weights the active rows of one cost are copied unscaled into a reused buffer
    (flushed when full, and when the cost changes) and their product scaled afterwards; a slab whose
    active rows differ in cost goes the scaled way.  Either way: the dense Gram matrix."""

    _set_slab_rows(monkeypatch, 4)
    X, y, _, fmap, F = _problem(False, seed=8)
    rb = as_row_blocks(_dask_x(X, 1000), 0)
    classes, codes = encode_labels(da.from_array(y, chunks=(rb.chunks,)), rb)
    cost = np.array(class_cost)
    op = SquaredHingeOperator(feature_blocks(rb, fmap), codes.persist(), 0, cost, None)
    y_pm = np.where(np.searchsorted(classes, y) == 0, 1.0, -1.0)
    c = cost[np.searchsorted(classes, y)]
    x = np.random.default_rng(9).normal(size=fmap.n_output + 1) * 0.3
    _, grad, H, active = dense_pass_reference(F, y_pm, c, x)
    assert active.sum() > 8  # more than two buffers' worth
    res = op.evaluate(x, x, (), "full")
    np.testing.assert_allclose(res.hess, H, rtol=1e-9, atol=1e-10)
    np.testing.assert_allclose(res.grad, grad, rtol=1e-9, atol=1e-12)


def test_gram_of_gathered_rows_across_partial_buffers_and_cost_changes_matches_dense(monkeypatch):
    """The gathered rows' buffer filled across slabs (split over two products), costs changing between
    slabs (the rows buffered so far join the scaled batch), a slab of mixed costs and one with no active
    row: the dense ``[F 1]ᵀ diag(c) [F 1]`` over the active rows."""
    from dsvm.problems import _losses as losses

    _set_slab_rows(monkeypatch, 4)
    # at x = 0 every row of positive cost is active; class 2 costs nothing
    codes = np.array([0, 0, 0, 2,  0, 0, 0, 2,  1, 1, 2, 2,  1, 2, 2, 2,  # 3 at 0.5, 3 at 0.5, 2 at 2, 1 at 2
                      1, 1, 1, 1,  0, 0, 2, 2,  0, 1, 2, 2,  2, 2, 2, 2])  # 4 at 2, 2 at 0.5, mixed, none
    class_cost = np.array([0.5, 2.0, 0.0])
    F = np.random.default_rng(10).normal(size=(codes.size, 5)).astype(np.float32)
    params = {"x0": np.zeros(6), "x1": np.zeros(6), "hessian": "full", "positive": 1, "class_cost": class_cost,
              "pack": False}
    c = class_cost[codes]
    F1 = np.hstack([F.astype(np.float64), np.ones((codes.size, 1))])
    expected = F1.T @ (c[:, None] * F1)
    np.testing.assert_allclose(losses.sqhinge_pass(F, codes, None, params)["hess"], expected, rtol=2e-6, atol=1e-5)


def test_gathered_rows_buffer_is_each_threads_own_and_reused_across_widths(monkeypatch):
    """The gather buffer and the sum are kept per thread across passes: a sum still holding gathered rows
    is not disturbed by a whole pass on another thread, and one thread's passes of other widths and
    dtypes (reusing, growing the buffers) each give the dense Gram matrix, and keep giving it."""
    import threading

    from dsvm.problems import _losses as losses

    _set_slab_rows(monkeypatch, 8)
    rng = np.random.default_rng(11)

    def dense(F, rows, cost):
        F1 = np.hstack([F[rows].astype(np.float64), np.ones((rows.sum(), 1))])
        return cost * F1.T @ F1

    def full_pass(F):
        codes = np.ones(F.shape[0], dtype=np.int64)  # at x = 0 every row is active, cost 1.5
        params = {"x0": np.zeros(F.shape[1] + 1), "x1": np.zeros(F.shape[1] + 1), "hessian": "full",
                  "positive": 1, "class_cost": np.array([1.0, 1.5]), "pack": False}
        return losses.sqhinge_pass(F, codes, None, params)["hess"]

    FA = rng.normal(size=(13, 5)).astype(np.float32)
    rows = np.zeros(13, dtype=bool)
    rows[[0, 1, 2, 5, 8, 11]] = True
    held = _GramSum(5, np.float32)
    held.push(FA, rows, np.full(13, 0.5))  # fewer rows than one buffer: held in it, no product yet
    assert held._n_rows == rows.sum() < 8

    FB = rng.normal(size=(40, 4)).astype(np.float32)  # needs no more buffer than the held rows have
    out = {}
    other = threading.Thread(target=lambda: out.update(hess=full_pass(FB)))
    other.start()
    other.join()
    np.testing.assert_allclose(out["hess"], dense(FB, np.ones(40, bool), 1.5), rtol=2e-5, atol=1e-4)
    np.testing.assert_allclose(held.result(False, np.float32), dense(FA, rows, 0.5), rtol=2e-5, atol=1e-4)

    Fs = [rng.normal(size=(30, 9)).astype(np.float32), rng.normal(size=(30, 3)),  # wider, then float64,
          rng.normal(size=(30, 12)).astype(np.float32), rng.normal(size=(30, 12)).astype(np.float32)]  # twice
    results = [full_pass(F) for F in Fs]  # each its own array, not the thread's scratch total
    for F, hess in zip(Fs, results):
        np.testing.assert_allclose(hess, dense(F, np.ones(30, bool), 1.5), rtol=2e-5, atol=1e-4)


def test_scratch_arrays_over_the_keep_size_are_made_afresh(monkeypatch):
    """A thread keeps its Gram scratch arrays up to SCRATCH_KEEP_BYTES each; a larger one is made for the
    pass and not kept (big r would otherwise hold hundreds of MB per thread between fits)."""
    import threading

    from dsvm.blocks import _raw_files as raw_files
    from dsvm.problems import _gram as gram
    from dsvm.problems import _losses as losses

    _set_slab_rows(monkeypatch, 8)
    monkeypatch.setattr(gram, "SCRATCH_KEEP_BYTES", 1000)  # rows 8x12x4 = 384 and product 576 kept, total 1352 not
    F = np.random.default_rng(12).normal(size=(40, 12)).astype(np.float32)
    params = {"x0": np.zeros(13), "x1": np.zeros(13), "hessian": "full", "positive": 1,
              "class_cost": np.array([1.0, 1.5]), "pack": False}
    seen = {}

    def run():
        seen["hess"] = losses.sqhinge_pass(F, np.ones(40, dtype=np.int64), None, params)["hess"]
        kept = raw_files._LOCAL  # the threads' buffers (dsvm.blocks.thread_buffer)
        seen["kept"] = {name for name in ("gram_rows", "gram_product", "gram_total") if hasattr(kept, f"scratch-{name}")}

    thread = threading.Thread(target=run)  # a fresh thread: nothing kept from earlier tests
    thread.start()
    thread.join()
    assert seen["kept"] == {"gram_rows", "gram_product"}
    # a total made for its sum alone is handed out as it is; the thread's kept one is copied
    big, small = _GramSum(12, np.float32), _GramSum(5, np.float32)
    for g, width in ((big, 12), (small, 5)):
        g.push(F[:, :width], np.ones(40, dtype=bool), np.ones(40))
    assert big.result(False, np.float32) is big.total
    assert small.result(False, np.float32) is not small.total
    F1 = np.hstack([F.astype(np.float64), np.ones((40, 1))])
    np.testing.assert_allclose(seen["hess"], 1.5 * F1.T @ F1, rtol=2e-5, atol=1e-4)


def _numpy_operator(X, y, sw, fmap, block_rows, positive):
    rb = as_row_blocks(X, block_rows, min_blocks=1)
    classes, codes = encode_labels(y, rb)
    class_cost = np.array([1.5, 2.0, 0.5])
    op = SquaredHingeOperator(feature_blocks(rb, fmap), codes, positive, class_cost, aligned_vector(sw, rb))
    y_pm = np.where(np.searchsorted(classes, y) == positive, 1.0, -1.0)
    return op, y_pm, class_cost[np.searchsorted(classes, y)] * sw


@pytest.mark.parametrize("block_rows", [4, 9, N])
@pytest.mark.parametrize("change", ["mixed", "only_leaving", "only_entering"])
def test_in_process_hessian_update_matches_dense(block_rows, change, monkeypatch):
    """In this process the blocks hand back Gram matrices unpacked; the rows that enter and leave
    the active set are two separate symmetric products (either may be empty)."""

    _set_slab_rows(monkeypatch, 4)  # several batches per block
    X, y, sw, fmap, F = _problem(False, seed=8)
    op, y_pm, c = _numpy_operator(X, y, sw, fmap, block_rows, positive=1)
    rng = np.random.default_rng(9)
    x = rng.normal(size=fmap.n_output + 1)
    zero = np.zeros_like(x)  # every row is active at zero
    x0, x1 = {"mixed": (x, rng.normal(size=x.size)), "only_leaving": (zero, x),
              "only_entering": (x, zero)}[change]
    _, grad1, H1, active1 = dense_pass_reference(F, y_pm, c, x1)
    _, _, H0, active0 = dense_pass_reference(F, y_pm, c, x0)
    entered, left = np.sum(active1 & ~active0), np.sum(active0 & ~active1)
    assert {"mixed": entered > 0 and left > 0, "only_leaving": entered == 0 and left > 0,
            "only_entering": entered > 0 and left == 0}[change]
    delta = op.evaluate(x0, x1, (), "delta")
    np.testing.assert_allclose(delta.hess, H1 - H0, rtol=1e-9, atol=1e-10)
    np.testing.assert_array_equal(delta.hess, delta.hess.T)
    np.testing.assert_allclose(op.evaluate(x0, x1, (), "full").hess, H1, rtol=1e-9, atol=1e-10)
    np.testing.assert_allclose(delta.grad, grad1, rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize("block_rows", [4, 9, N])
def test_margin_cache_gives_the_passes_a_recomputation_gives(block_rows, monkeypatch):
    """In this process each block keeps its margins at the last points evaluated: a Newton
    sequence of passes (current point, trial point, a shorter step, the zero point) returns
    exactly what passes that recompute every margin return, and the cached margins are used."""

    _set_slab_rows(monkeypatch, 4)  # several slabs per block
    X, y, sw, fmap, F = _problem(False, seed=11)
    cached, y_pm, c = _numpy_operator(X, y, sw, fmap, block_rows, positive=2)
    plain, _, _ = _numpy_operator(X, y, sw, fmap, block_rows, positive=2)
    plain.margin_cache = None
    rng = np.random.default_rng(12)
    x = rng.normal(size=fmap.n_output + 1)
    d = rng.normal(size=x.size)
    zero, grid = np.zeros_like(x), np.array([1.0, 0.5, 0.25])
    calls = [(x, x, (), "full"), (zero, zero, (), "none"), (x, x + d, grid, "delta"),
             (x, x + d, grid[1:], "none"), (x, x + 0.5 * d, (), "delta"), (x + 0.5 * d, x - d, grid, "delta")]
    for x0, x1, t, mode in calls:
        a, b = cached.evaluate(x0, x1, t, mode), plain.evaluate(x0, x1, t, mode)
        assert (a.loss, a.n_active, a.n_changed) == (b.loss, b.n_active, b.n_changed)
        np.testing.assert_array_equal(a.grad, b.grad)
        np.testing.assert_array_equal(a.loss_grid, b.loss_grid)
        np.testing.assert_array_equal(np.asarray(a.hess), np.asarray(b.hess))
    n_blocks = cached.features.n_blocks
    assert len(cached.margin_cache) == n_blocks and plain.margin_cache is None
    # each block remembers the last two points, and a pass reads them instead of recomputing:
    # with the remembered margins at x − d spoiled, the loss there comes out wrong
    for _block, kept in cached.margin_cache.values():
        assert len(kept) == 2
        kept[(x - d).tobytes()] = kept[(x - d).tobytes()] + 1.0
    assert cached.evaluate(x - d, x - d).loss != plain.evaluate(x - d, x - d).loss
    assert cached.evaluate(x, x).loss == plain.evaluate(x, x).loss  # a point not kept is recomputed


@pytest.mark.parametrize("store", ["memory", "disk"])
def test_margin_cache_on_dask_blocks_is_kept_in_the_worker_process(store, tmp_path, monkeypatch):
    """Blocks on Dask keep their margins in the process that works on them (keyed by the stored
    block's file, or by the block in memory): the same passes as recomputing, and the kept margins used."""
    import dask

    import dsvm.problems._margin_cache as margin_cache
    from dsvm.problems import FeatureStore
    from dsvm.problems._margin_cache import IN_PROCESS

    monkeypatch.setattr(margin_cache, "_PROCESS_STORE", {})
    X, y, sw, fmap, F = _problem(False, seed=13)
    rb = as_row_blocks(_dask_x(X, (3, 10, 1, 9)), 0)
    classes, codes = encode_labels(da.from_array(y, chunks=(rb.chunks,)), rb)
    codes, weights = codes.persist(), aligned_vector(sw, rb).persist()
    with dask.config.set({"dsvm.scratch-directory": str(tmp_path)}), FeatureStore(rb, fmap, store) as fs:
        cached = SquaredHingeOperator(fs.features, codes, 1, np.array([1.5, 2.0, 0.5]), weights)
        plain = SquaredHingeOperator(fs.features, codes, 1, np.array([1.5, 2.0, 0.5]), weights)
        plain.margin_cache = None
        assert cached.margin_cache == IN_PROCESS
        rng = np.random.default_rng(14)
        x, d = rng.normal(size=fmap.n_output + 1), rng.normal(size=fmap.n_output + 1) * 0.1
        for x0, x1, mode in [(x, x, "full"), (x, x + d, "delta"), (x + d, x - d, "delta")]:
            a, b = cached.evaluate(x0, x1, (0.5,), mode), plain.evaluate(x0, x1, (0.5,), mode)
            assert (a.loss, a.n_active, a.n_changed) == (b.loss, b.n_active, b.n_changed)
            np.testing.assert_array_equal(a.grad, b.grad)
            np.testing.assert_array_equal(a.hess, b.hess)
        kept = margin_cache._PROCESS_STORE
        assert len(kept) == fs.features.n_blocks
        for _owner, margins in kept.values():
            assert len(margins) == 2
            margins[(x - d).tobytes()] = margins[(x - d).tobytes()] + 1.0
        assert cached.evaluate(x - d, x - d).loss != plain.evaluate(x - d, x - d).loss


def _gram_rows(n: int, r: int, seed: int):
    """``(F, c, dense)``: float32 rows, their costs, and ``dense(rows)``, the float64 ``[F 1]ᵀ C [F 1]`` of a mask."""
    rng = np.random.default_rng(seed)
    F = rng.normal(size=(n, r)).astype(np.float32)
    c = rng.uniform(0.5, 2.0, size=n)

    def dense(rows):
        A = np.hstack([F[rows].astype(np.float64), np.ones((rows.sum(), 1))])
        return A.T @ (c[rows, None] * A)

    return F, c, dense


def test_gram_delta_keeps_few_rows_as_rows_and_sums_like_the_dense_gram():
    import pickle

    from dsvm.problems._gram import GramDelta

    r = 10
    F, c, dense = _gram_rows(40, r, seed=15)

    plus, minus = np.zeros(40, bool), np.zeros(40, bool)
    plus[[1, 7]], minus[[3]] = True, True
    few = GramDelta(r, np.float32, pack=True)
    few.push(F, plus, c, 1.0)
    few.push(F, minus, c, -1.0)
    assert few.n_rows == 3 and few.packed is None  # r / 2 = 5 rows are kept as rows
    more = GramDelta(r, np.float32, pack=True)
    many = np.zeros(40, bool)
    many[10:30] = True
    more.push(F, many, c, 1.0)
    assert more.n_rows == 0 and more.packed is not None and more.packed.dtype == np.float32
    total = pickle.loads(pickle.dumps(0.0 + few + more + None))
    np.testing.assert_allclose(total.matrix(), dense(plus) - dense(minus) + dense(many), rtol=1e-5, atol=1e-5)
    both = few + few
    assert both.n_rows == 0 and both.packed is not None  # 6 rows are more than 5: a matrix
    np.testing.assert_allclose(both.matrix(), 2 * (dense(plus) - dense(minus)), rtol=1e-5, atol=1e-5)
    np.testing.assert_array_equal(GramDelta(r, np.float64, pack=False).matrix(), np.zeros((r + 1, r + 1)))


def test_gram_delta_in_this_process_keeps_rows_up_to_two_matrices_bytes_and_sums_dense_float64():
    from dsvm.problems._gram import GramDelta

    r = 10
    F, c, dense = _gram_rows(120, r, seed=16)

    half, rest = np.zeros(120, bool), np.zeros(120, bool)
    half[:30], rest[30:] = True, True
    kept = GramDelta(r, np.float32, pack=False)
    kept.push(F, half, c, 1.0)
    assert kept.n_rows == 30 and kept.packed is None  # 30 rows: more than r / 2, fewer than 48 (16 (r+1)² / 4r)
    summed = kept + GramDelta(r, np.float32, pack=False)
    assert summed.n_rows == 30 and summed.packed is None
    over = kept + kept  # 60 rows: a dense float64 matrix
    assert over.n_rows == 0 and over.packed.shape == (r + 1, r + 1) and over.packed.dtype == np.float64
    np.testing.assert_allclose(over.matrix(), 2 * dense(half), rtol=1e-5, atol=1e-5)
    removed = GramDelta(r, np.float32, pack=False)
    removed.push(F, rest, c, -1.0)  # 90 rows, subtracted: a matrix at once
    again = over + kept + removed  # matrices and rows together
    np.testing.assert_allclose(again.matrix(), 3 * dense(half) - dense(rest), rtol=1e-5, atol=1e-4)


def test_a_full_gram_of_few_rows_comes_back_as_its_rows_and_adds_to_blocks_matrices():
    """In this process a block's full Gram sum of rows that never made a product comes back as those rows
    (a GramDelta), where they are few enough; the reduction adds them to other blocks' float64 matrices in
    either order (numpy defers to the delta), to the 0.0 of an empty block, and to other rows: the dense sum.
    Gathered rows of one cost and scaled rows of mixed costs, added and removed, all count."""
    from dsvm.blocks._interface import tree_sum
    from dsvm.problems._gram import GramDelta, _GramSum, rows_kept

    r = 10
    F, c, dense = _gram_rows(120, r, seed=17)
    one_cost = np.ones(120)
    first, second, third = (np.zeros(120, bool) for _ in range(3))
    first[:12], second[40:50], third[60:110] = True, True, True
    gathered = _GramSum(r, np.float32)
    gathered.push(F, first, one_cost)  # one cost: gathered unscaled into the thread's buffer
    gathered.push(F, second, c, -1.0)  # removed: scaled rows
    rows = gathered.result(False, np.float32, rows_ok=True)
    assert isinstance(rows, GramDelta) and rows.n_rows == 22 and rows.packed is None
    expected_rows = (F[first].T @ F[first]) - dense(second)[:r, :r]
    np.testing.assert_allclose(rows.matrix()[:r, :r], expected_rows, rtol=1e-5, atol=1e-5)
    matrix_sum = _GramSum(r, np.float32)
    matrix_sum.push(F, third, c)
    as_matrix = matrix_sum.result(False, np.float32, rows_ok=rows_kept(r, np.float32, False) < third.sum())
    assert isinstance(as_matrix, np.ndarray) and as_matrix.shape == (r + 1, r + 1)
    plain = _GramSum(r, np.float32)
    plain.push(F, first, one_cost)
    assert isinstance(plain.result(False, np.float32), np.ndarray)  # without rows_ok: the matrix, as before
    packed = _GramSum(r, np.float32)
    packed.push(F, first, one_cost)
    assert packed.result(True, np.float32, rows_ok=True).ndim == 1  # to travel: packed, never rows
    ones = np.zeros((r + 1, r + 1))
    ones[:r, :r] = F[first].T @ F[first]
    ones[:r, r] = ones[r, :r] = F[first].sum(axis=0)
    ones[r, r] = first.sum()
    expected = ones - dense(second) + dense(third)
    before = as_matrix.copy()
    for order in ([as_matrix, 0.0, rows], [rows, as_matrix, 0.0], [0.0, rows, as_matrix]):
        total = tree_sum(order)
        assert isinstance(total, GramDelta)
        np.testing.assert_allclose(total.matrix(), expected, rtol=1e-5, atol=1e-4)
    np.testing.assert_array_equal(as_matrix, before)  # a block's matrix is a term, not the sum
    twice = rows_kept(r, np.float32, False) // 22 + 1  # more rows than a delta keeps: one matrix
    joined = tree_sum([rows] * twice)
    assert joined.n_rows == 0 and joined.packed.dtype == np.float64
    np.testing.assert_allclose(joined.matrix(), twice * (ones - dense(second)), rtol=1e-5, atol=1e-3)


def test_a_full_pass_sends_rows_only_where_the_pass_keeps_few(monkeypatch):
    """The pass's blocks send their active rows while their count times the blocks stays within what a
    delta keeps, else each its matrix; the operator's Gram matrix is the dense one either way."""
    from dsvm.problems import _gram, _losses

    X, y, sw, fmap, F = _problem(False, seed=6)
    _, y_pm, c = _operator(X, y, sw, fmap, 60, positive=1)
    rb = from_blocks([X[a : a + 5] for a in range(0, len(X), 5)])  # in this process
    _, codes = encode_labels(y, rb)
    op = SquaredHingeOperator(feature_blocks(rb, fmap), codes, 1, np.array([1.5, 2.0, 0.5]), aligned_vector(sw, rb))
    x = np.random.default_rng(7).normal(size=fmap.n_output + 1) * 0.3
    _, _, H, active = dense_pass_reference(F, y_pm, c, x)
    assert len(rb.chunks) > 1
    sent = []
    real = _losses._block_gram
    monkeypatch.setattr(_losses, "_block_gram", lambda *a: sent.append(real(*a)) or sent[-1])
    for kept, kind in ((10**6, _gram.GramDelta), (1, np.ndarray)):
        monkeypatch.setattr(_losses, "rows_kept", lambda r, dtype, pack, kept=kept: kept)
        sent.clear()
        np.testing.assert_allclose(op.evaluate(x, x, (), "full").hess, H, rtol=1e-9, atol=1e-10)
        assert sent and all(isinstance(s, (kind, float)) for s in sent)
        assert any(isinstance(s, kind) for s in sent)


def _set_slab_rows(monkeypatch, rows: int) -> None:
    """Slabs of ``rows`` rows in the pass and in its Gram sums."""
    from dsvm.problems import _gram, _losses

    monkeypatch.setattr(_losses, "SLAB_ROWS", rows)
    monkeypatch.setattr(_gram, "SLAB_ROWS", rows)


def test_numpy_blocks_equal_dask_blocks():
    X, y, sw, fmap, F = _problem(False, seed=4)
    op_d, y_pm, c = _operator(X, y, sw, fmap, 7, positive=0)
    rb = as_row_blocks(X, 4)
    classes, codes = encode_labels(y, rb)
    op_n = SquaredHingeOperator(feature_blocks(rb, fmap), codes, 0, np.array([1.5, 2.0, 0.5]), aligned_vector(sw, rb))
    x = np.random.default_rng(5).normal(size=fmap.n_output + 1)
    a, b = op_d.evaluate(x, x, (), "full"), op_n.evaluate(x, x, (), "full")
    np.testing.assert_allclose(a.grad, b.grad, rtol=1e-10)
    np.testing.assert_allclose(a.hess, b.hess, rtol=1e-10)


def test_nan_in_dask_input_is_reported_with_its_row():
    X, y, sw, fmap, F = _problem(False)
    X = X.copy()
    X[13, 2] = np.nan
    rb = as_row_blocks(_dask_x(X, 5), 0)
    with pytest.raises(ValueError, match="NaN or infinity at row 13"):
        feature_blocks(rb, fmap)


# ---------------------------------------------------------------- the solver contract
@pytest.mark.parametrize("chunks", [1, (3, 10, 1, 9), N])
def test_gather_and_fold_hand_the_solver_labels_and_costs_and_count_their_pass(chunks):
    X, y, sw, fmap, F = _problem(False, seed=2)
    op, y_pm, c = _operator(X, y, sw, fmap, chunks, positive=2)
    assert op.n_rows == N and op.n_blocks == len(op.features.chunks) and op.is_distributed
    np.testing.assert_array_equal(op.class_cost, [1.5, 2.0, 0.5])
    assert op.max_sample_weight() == sw.max() and op.n_passes == 0  # a reduction of the weights only

    F_g, y_g, c_g = op.gather()
    assert op.n_passes == 1
    np.testing.assert_allclose(F_g, F, rtol=1e-12)
    np.testing.assert_array_equal(y_g, y_pm)
    np.testing.assert_allclose(c_g, c, rtol=1e-15)

    def step(Fb, yb, cb, state, scale):
        return state + [(Fb.sum(axis=0) * scale, yb, cb)]

    order = list(range(op.n_blocks))[::-1]
    parts = op.fold(step, [], 2.0, order=order)
    assert op.n_passes == 2 and len(parts) == op.n_blocks
    np.testing.assert_array_equal(np.concatenate([p[1] for p in parts[::-1]]), y_pm)
    np.testing.assert_allclose(np.concatenate([p[2] for p in parts[::-1]]), c, rtol=1e-15)
    np.testing.assert_allclose(sum(p[0] for p in parts), 2.0 * F.sum(axis=0), rtol=1e-12)


def test_max_sample_weight_is_one_without_weights():
    X, y, sw, fmap, F = _problem(False, seed=3)
    rb = as_row_blocks(X, 5)
    _, codes = encode_labels(y, rb)
    op = SquaredHingeOperator(feature_blocks(rb, fmap), codes, 0, np.array([1.0, 1.0, 1.0]))
    assert op.max_sample_weight() == 1.0 and not op.is_distributed and op.margin_cache == {}


def test_pass_results_scale_with_the_costs_and_exchange_rows():
    """``scaled(f)`` is the pass with every cost times f; ``a.exchanged(b, c)`` the pass over a's rows plus
    b's minus c's — against the dense formulas on the resulting rows."""
    X, y, sw, fmap, F = _problem(False, seed=6)
    rows = np.arange(N)
    A, B, Cr = rows[:8], rows[8:15], rows[15:]
    x = np.random.default_rng(1).normal(size=fmap.n_output + 1) * 0.3
    y_pm = np.where(y == "a", 1.0, -1.0)

    def op_of(idx, cost=1.0):
        rb = as_row_blocks(X[idx], 4)
        _, codes = encode_labels(y[idx], rb, classes=np.array(["a", "b", "c"]))
        return SquaredHingeOperator(feature_blocks(rb, fmap), codes, 0, cost * np.ones(3), aligned_vector(sw[idx], rb))

    ab = op_of(np.r_[A, B]).evaluate(x, x, (), "full")
    scaled = ab.scaled(3.0)
    loss, grad, H, _ = dense_pass_reference(F[np.r_[A, B]], y_pm[np.r_[A, B]], 3.0 * sw[np.r_[A, B]], x)
    np.testing.assert_allclose(scaled.loss, loss, rtol=1e-10)
    np.testing.assert_allclose(scaled.grad, grad, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(scaled.hess, H, rtol=1e-10, atol=1e-12)

    ac = ab.exchanged(op_of(Cr).evaluate(x, x, (), "full"), op_of(B).evaluate(x, x, (), "full"))
    loss, grad, H, active = dense_pass_reference(F[np.r_[A, Cr]], y_pm[np.r_[A, Cr]], sw[np.r_[A, Cr]], x)
    np.testing.assert_allclose(ac.loss, loss, rtol=1e-10)
    np.testing.assert_allclose(ac.grad, grad, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(ac.hess, H, rtol=1e-10, atol=1e-12)
    assert ac.n_active == int(active.sum()) and ac.n_changed == 0


@pytest.mark.parametrize("chunks", [5, N])
def test_a_pass_counts_the_training_rows_predicted_positive_at_its_point(chunks):
    """What the one-class warning of a fit reads (issue 25 item 5): the last pass's count, no pass of its own."""
    X, y, sw, fmap, F = _problem(False)
    sw[[2, 9]] = 0.0  # rows of zero weight are not training rows of the problem
    op, y_pm, c = _operator(X, y, sw, fmap, chunks, positive=1)
    rng = np.random.default_rng(2)
    xs = [rng.normal(size=fmap.n_output + 1) * 0.5 for _ in range(6)]
    for x in xs:
        op.evaluate(x, x, (), "none")
    for x in xs[-4:]:  # the last four points are kept
        margins = F @ x[:-1] + x[-1]
        assert op.predicted_positive(x) == (int(np.sum(c > 0)), int(np.sum((margins > 0) & (c > 0))))
    assert op.predicted_positive(xs[0]) is None and op.predicted_positive(xs[0] + 1.0) is None
