"""Implicit features (feature_store="implicit") against the explicit features F = K(X, L)·M: the same passes,
the same problem, the same model, for every kernel, dense and sparse, binary and multiclass, SVM and SVR."""

import os

import dask
import dask.array as da
import numpy as np
import pytest
import scipy.sparse as sp
from helpers import dense_pass_reference, make_circles_problem
from sklearn.datasets import make_classification, make_regression

from dsvm import NonFiniteError, NystroemSVC, NystroemSVR
from dsvm.approx import fit_feature_map, make_kernel_spec
from dsvm.blocks import aligned_vector, as_row_blocks
from dsvm.problems import FeatureStore, SquaredHingeOperator, plan_feature_store
from dsvm.svm import encode_labels

KERNELS = {"rbf": dict(kernel="rbf", gamma=0.3), "poly": dict(kernel="poly", gamma=0.2, degree=2, coef0=1.0),
           "sigmoid": dict(kernel="sigmoid", gamma=0.05, coef0=0.0), "linear": dict(kernel="linear")}


def _operators(sparse: bool, store: str):
    """The same one-vs-rest problem (weights, three classes) over explicit F and over implicit features."""
    rng = np.random.default_rng(0)
    X = rng.normal(size=(300, 5)) * (rng.random((300, 5)) < 0.7)
    y = rng.choice(["a", "b", "c"], size=300)
    sw = rng.uniform(0.5, 2.0, size=300)
    fmap = fit_feature_map(X[:12], make_kernel_spec("rbf", 0.4), dtype=np.float64)
    rb = as_row_blocks(sp.csr_matrix(X) if sparse else X, 70)
    classes, codes = encode_labels(y, rb)
    fstore = FeatureStore(rb, fmap, store)
    op = SquaredHingeOperator(fstore.features, codes, 1, np.array([1.5, 2.0, 0.5]), aligned_vector(sw, rb))
    y_pm = np.where(np.searchsorted(classes, y) == 1, 1.0, -1.0)
    c = np.array([1.5, 2.0, 0.5])[np.searchsorted(classes, y)] * sw
    return op, fmap.transform_block(X), y_pm, c, fmap


@pytest.mark.parametrize("sparse", [False, True])
def test_an_implicit_pass_gives_the_explicit_loss_gradient_gram_and_products(sparse):
    op, F, y_pm, c, fmap = _operators(sparse, "implicit")
    assert op.features.kernel_cols == 12 and op.margin_cache == {}
    rng = np.random.default_rng(1)
    x0, x = rng.normal(size=(2, fmap.n_output + 1)) * 0.5
    loss, grad, H, active = dense_pass_reference(F, y_pm, c, x)
    res = op.evaluate(x, x, (), "full")
    np.testing.assert_allclose(res.loss, loss, rtol=1e-10)
    np.testing.assert_allclose(res.grad, grad, rtol=1e-9, atol=1e-10)
    np.testing.assert_allclose(res.hess, H, rtol=1e-8, atol=1e-9)
    assert res.n_active == active.sum()
    V = rng.normal(size=(fmap.n_output + 1, 3))
    np.testing.assert_allclose(op.hess_vec(x, V), H @ V, rtol=1e-8, atol=1e-9)
    np.testing.assert_allclose(op.hess_vec(x, V[:, 0]), H @ V[:, 0], rtol=1e-8, atol=1e-9)
    # the delta of the Gram matrix from x0's active set to x's, and the loss along the segment
    H0 = dense_pass_reference(F, y_pm, c, x0)[2]
    delta = op.evaluate(x0, x, (0.5,), "delta")
    np.testing.assert_allclose(delta.hess, H - H0, rtol=1e-8, atol=1e-9)
    np.testing.assert_allclose(delta.loss_grid[0], dense_pass_reference(F, y_pm, c, 0.5 * (x0 + x))[0], rtol=1e-10)
    assert op.predicted_positive(x) is not None


@pytest.mark.parametrize("method", ["cholesky", "eigen"])
@pytest.mark.parametrize("changed", [5, 250])
def test_a_gram_delta_is_carried_to_the_features_by_its_rows_while_it_keeps_them(method, changed, monkeypatch):
    """The change of the Gram matrix between two points, over a triangular (Cholesky) and a dense (eigen) map:
    the dense formula whether the pass kept the changed rows as rows (few) or summed them (many), and the
    rows' change never projects a (k+1)² matrix."""
    from dsvm.problems._implicit import ImplicitFeatures

    rng = np.random.default_rng(3)
    X = rng.normal(size=(400, 4))
    y_pm = np.where(X[:, 0] + 0.3 * rng.normal(size=400) > 0, 1.0, -1.0)
    fmap = fit_feature_map(X[:40], make_kernel_spec("rbf", 0.5), dtype=np.float64, method=method)
    rb = as_row_blocks(X, 400)
    op = SquaredHingeOperator(FeatureStore(rb, fmap, "implicit").features, aligned_vector((y_pm > 0).astype(np.int64), rb),
                              1, np.array([1.0, 1.0]))
    assert (op.implicit._lower is not None) == (method == "cholesky")
    F = fmap.transform_block(X)
    x0 = rng.normal(size=fmap.n_output + 1) * 0.3
    # move the bias halfway between two rows' distances to the margin, so that no row is on the boundary
    gaps = np.sort(np.abs(1.0 - y_pm * (np.hstack([F, np.ones((400, 1))]) @ x0)))
    x = x0.copy()
    x[-1] += 0.5 * float(gaps[changed] + gaps[changed + 1])
    projected = []
    plain = ImplicitFeatures.project_gram
    monkeypatch.setattr(ImplicitFeatures, "project_gram", lambda self, H: projected.append(H.shape) or plain(self, H))
    res = op.evaluate(x0, x, (), "delta")
    c = np.ones(400)
    want = dense_pass_reference(F, y_pm, c, x)[2] - dense_pass_reference(F, y_pm, c, x0)[2]
    np.testing.assert_allclose(res.hess, want, rtol=1e-9, atol=1e-9 * np.abs(want).max())
    assert 0 < res.n_changed < 400
    assert (projected == []) == (res.n_changed <= 2 * fmap.n_components)


def test_implicit_features_pickle_and_project_the_same_after():
    """What the pass functions' tasks and copies of an operator may carry: the features, whole."""
    import copy
    import pickle

    rng = np.random.default_rng(4)
    X = rng.normal(size=(50, 3))
    fmap = fit_feature_map(X[:20], make_kernel_spec("rbf", 0.5), dtype=np.float64, method="cholesky")
    features = FeatureStore(as_row_blocks(X, 25), fmap, "implicit").features
    H = rng.normal(size=(21, 21))
    H = H @ H.T
    for again in (pickle.loads(pickle.dumps(features)), copy.deepcopy(features)):
        assert again._lower is not None
        np.testing.assert_array_equal(again.project_gram(H), features.project_gram(H))


def _count_kernel_rows(monkeypatch) -> list:
    """A list that gets the number of rows of every kernel slab a pass computes (KernelRows)."""
    from dsvm.problems._implicit import KernelRows

    computed = []
    plain_rows = KernelRows.__getitem__
    monkeypatch.setattr(KernelRows, "__getitem__", lambda self, rows: computed.append(
        np.arange(self.shape[0])[rows].size) or plain_rows(self, rows))
    return computed


@pytest.mark.parametrize("sparse", [False, True])
def test_a_hessian_product_after_a_pass_computes_the_kernel_rows_of_the_active_rows_only(sparse, monkeypatch):
    op, F, y_pm, c, fmap = _operators(sparse, "implicit")
    computed = _count_kernel_rows(monkeypatch)
    rng = np.random.default_rng(2)
    x, elsewhere = rng.normal(size=(2, fmap.n_output + 1)) * 0.5
    V = rng.normal(size=(fmap.n_output + 1, 2))
    H, active = dense_pass_reference(F, y_pm, c, x)[2:]
    # no pass at x yet: every row's kernel values, the margins by GEMV
    np.testing.assert_allclose(op.hess_vec(x, V), H @ V, rtol=1e-8, atol=1e-9)
    assert sum(computed) == F.shape[0]
    op.evaluate(elsewhere, x, (0.5,))
    computed.clear()
    np.testing.assert_allclose(op.hess_vec(x, V), H @ V, rtol=1e-8, atol=1e-9)
    assert sum(computed) == np.count_nonzero(active & (c > 0)) < F.shape[0]
    computed.clear()
    op.evaluate(x, elsewhere)  # the cache keeps the last two points: x is still there
    H_else = dense_pass_reference(F, y_pm, c, elsewhere)[2]
    np.testing.assert_allclose(op.hess_vec(elsewhere, V[:, 0]), H_else @ V[:, 0], rtol=1e-8, atol=1e-9)
    np.testing.assert_allclose(op.hess_vec(x, V[:, 1]), H @ V[:, 1], rtol=1e-8, atol=1e-9)


@pytest.mark.parametrize("on_dask", [False, True])
def test_an_svr_hessian_product_after_a_pass_is_the_dense_one_on_the_active_rows(on_dask, monkeypatch):
    """Squared ε-insensitive loss, sample weights: the product at the point of the last pass (its margins kept:
    in process by the operator, on Dask by the process store while the input's blocks stay in memory)."""
    from dsvm.problems import SquaredEpsilonOperator
    rng = np.random.default_rng(4)
    X = rng.normal(size=(300, 5))
    t = np.sin(X[:, 0]) + 0.1 * rng.normal(size=300)
    sw = rng.uniform(0.5, 2.0, size=300)
    fmap = fit_feature_map(X[:15], make_kernel_spec("rbf", 0.3), dtype=np.float64)
    rb = as_row_blocks(da.from_array(X, chunks=100).persist() if on_dask else X, 100)
    op = SquaredEpsilonOperator(FeatureStore(rb, fmap, "implicit").features, aligned_vector(t, rb), 2.0, 0.1,
                                aligned_vector(sw, rb))
    x = np.append(rng.normal(size=fmap.n_output) * 0.3, 0.1)
    F = np.hstack([fmap.transform_block(X), np.ones((300, 1))])
    c = 2.0 * sw
    active = np.abs(F @ x - t) > 0.1
    H = 2.0 * (F[active] * c[active, None]).T @ F[active]
    computed = _count_kernel_rows(monkeypatch)
    V = rng.normal(size=fmap.n_output + 1)
    with dask.config.set(scheduler="sync"):
        op.evaluate(x, x)
        computed.clear()
        np.testing.assert_allclose(op.hess_vec(x, V), H @ V, rtol=1e-8, atol=1e-9)
    if not on_dask:  # a Dask chunk may be a new object in each task: there the cache may miss, never mislead
        assert sum(computed) == active.sum() < 300


def test_margins_kept_by_input_block_are_looked_up_with_the_kernel():
    """Workers keep margins by input block across fits (``IN_PROCESS``), and a point in the kernel's
    coordinates can be the same for two kernels (zero, or landmark weights carried over): the key names the
    kernel too, and only the kernel (another operator of the same map shares the margins)."""
    rng = np.random.default_rng(3)
    X = rng.normal(size=(200, 4))
    rb = as_row_blocks(X, 50)
    codes = encode_labels(np.where(X[:, 0] > 0, "a", "b"), rb)[1]
    point = rng.normal(size=13)

    def key(gamma, landmarks=X[:12], dtype=np.float64):
        fmap = fit_feature_map(landmarks, make_kernel_spec("rbf", gamma), dtype=dtype)
        op = SquaredHingeOperator(FeatureStore(rb, fmap, "implicit").features, codes, 1, np.array([1.0, 1.0]))
        return op._cache_key(point)

    assert key(0.5) == key(0.5)
    assert len({key(0.5), key(0.6), key(0.5, X[1:13]), key(0.5, dtype=np.float32)}) == 4
    stored = SquaredHingeOperator(rb, codes, 1, np.array([1.0, 1.0]))
    assert stored._cache_key(point) == point.tobytes()


def test_gathered_rows_are_the_real_features():
    """DCD gathers F in this process: the implicit store gives the features, not the kernel values."""
    op, F, y_pm, c, _ = _operators(False, "implicit")
    F_got, y_got, c_got = op.gather()
    np.testing.assert_allclose(F_got, F, rtol=1e-12)
    np.testing.assert_array_equal(y_got, y_pm)
    np.testing.assert_allclose(c_got, c)


def _data(kind: str, sparse: bool, n_classes: int):
    X, y = make_classification(600, 8, n_informative=5, n_classes=n_classes, n_clusters_per_class=1,
                               random_state=3)
    if kind == "linear":
        X = X / 3.0
    if sparse:
        X = sp.csr_matrix(X * (np.random.default_rng(0).random(X.shape) < 0.6))
    return X, y


@pytest.mark.parametrize("kernel", sorted(KERNELS))
@pytest.mark.parametrize("sparse", [False, True])
@pytest.mark.parametrize("n_classes", [2, 3])
def test_implicit_and_stored_features_fit_the_same_classifier(kernel, sparse, n_classes):
    X, y = _data(kernel, sparse, n_classes)
    params = dict(KERNELS[kernel], C=2.0, n_components=40, random_state=0, dtype="float64", tol=1e-8)
    ref = NystroemSVC(**params, feature_store="memory").fit(X, y)
    got = NystroemSVC(**params, feature_store="implicit").fit(X, y)
    assert got.solver_stats_["feature_store"] == "implicit"
    np.testing.assert_allclose(got.objective_, ref.objective_, rtol=1e-9)
    np.testing.assert_allclose(got.decision_function(X), ref.decision_function(X), rtol=1e-6, atol=1e-7)
    np.testing.assert_array_equal(got.predict(X), ref.predict(X))


@pytest.mark.parametrize("sparse", [False, True])
def test_implicit_and_stored_features_fit_the_same_regressor(sparse):
    X, y = make_regression(500, 6, noise=2.0, random_state=1)
    X = sp.csr_matrix(X) if sparse else X
    params = dict(C=5.0, epsilon=1.0, gamma=0.1, n_components=50, random_state=0, dtype="float64", tol=1e-8)
    ref = NystroemSVR(**params, feature_store="memory").fit(X, y)
    got = NystroemSVR(**params, feature_store="implicit").fit(X, y)
    np.testing.assert_allclose(got.objective_, ref.objective_, rtol=1e-9)
    np.testing.assert_allclose(got.predict(X), ref.predict(X), rtol=1e-7, atol=1e-6)


@pytest.mark.parametrize("options", [dict(solver="tron"), dict(solver="dcd"), dict(hessian="cg"),
                                     dict(probability=True), dict(class_weight="balanced")])
def test_every_solver_and_calibration_see_the_same_problem(options):
    X, y = _data("rbf", False, 3)
    params = dict(C=1.0, gamma=0.2, n_components=30, random_state=0, dtype="float64", tol=1e-7, **options)
    ref = NystroemSVC(**params, feature_store="memory").fit(X, y)
    got = NystroemSVC(**params, feature_store="implicit").fit(X, y)
    np.testing.assert_allclose(got.objective_, ref.objective_, rtol=1e-7)
    if options.get("probability"):
        np.testing.assert_allclose(got.predict_proba(X), ref.predict_proba(X), rtol=1e-5, atol=1e-7)


def test_float32_implicit_fit_matches_the_stored_one():
    """In float32 the Gram matrix is summed in float64 over kernel rows: the objectives agree to 1e-5 and the
    solve converges in as many iterations (a float32 sum carried through M twice stalled it)."""
    X, y = make_classification(3000, 10, n_informative=6, n_classes=3, n_clusters_per_class=1, random_state=0)
    params = dict(C=10.0, n_components=200, random_state=0, tol=1e-5)
    ref = NystroemSVC(**params, feature_store="memory").fit(X, y)
    got = NystroemSVC(**params, feature_store="implicit").fit(X, y)
    np.testing.assert_allclose(got.objective_, ref.objective_, rtol=1e-5)
    assert got.n_iter_ <= ref.n_iter_ + 2
    assert (got.predict(X) == ref.predict(X)).mean() > 0.998


def test_a_dask_fit_opens_from_the_subsample_and_writes_no_scratch(tmp_path):
    X, y = make_circles_problem(n=4000, seed=2)
    Xd, yd = da.from_array(X, chunks=(500, -1)), da.from_array(y, chunks=500)
    params = dict(C=3.0, gamma=0.5, n_components=60, random_state=0, dtype="float64", tol=1e-8,
                  solver_options={"warm_start": "subsample", "warm_rows": 600})
    with dask.config.set({"dsvm.scratch-directory": str(tmp_path)}):
        ref = NystroemSVC(**params, feature_store="disk").fit(Xd, yd)
        got = NystroemSVC(**params, feature_store="implicit").fit(Xd, yd)
    assert got.solver_stats_["feature_store"] == "implicit"
    assert got.solver_stats_["opening"]["rows"] > 0 and got.solver_stats_["opening"]["first_gram_rows"]
    assert os.listdir(tmp_path) == []
    np.testing.assert_allclose(got.objective_, ref.objective_, rtol=1e-9)
    np.testing.assert_allclose(got.coef_, ref.coef_, rtol=1e-6, atol=1e-8)


def test_a_non_finite_row_is_named_by_the_first_implicit_pass():
    X, y = make_circles_problem(n=1200, seed=1)
    X[777, 2] = np.nan
    with pytest.raises(ValueError, match="X contains NaN or infinity at row 777"):
        NystroemSVC(n_components=20, gamma=0.5, feature_store="implicit", random_state=0).fit(
            da.from_array(X, chunks=(300, -1)), da.from_array(y, chunks=300))


def test_overflowing_kernel_values_are_named_with_their_row():
    X, y = make_circles_problem(n=400, seed=1)
    X[123] *= 1e4
    with pytest.raises(NonFiniteError, match=r"kernel values of row 123 .*poly kernel"):
        NystroemSVC(kernel="poly", degree=9, gamma=1.0, n_components=20, landmarks="uniform",
                    feature_store="implicit", random_state=1).fit(X, y)


def test_auto_weighs_kernel_passes_against_the_feature_stage_and_scratch_reads(monkeypatch):
    """F beyond memory: few input columns make kernel passes cheap (implicit); thousands of dense columns
    make each kernel pass cost more than the stage's projection and the reads of F (disk)."""
    import dsvm.problems._features as features

    monkeypatch.setattr(features, "cluster_memory", lambda: (2**20, 2))
    narrow = as_row_blocks(da.zeros((200_000, 28), chunks=(50_000, -1)), 0)
    wide = as_row_blocks(da.zeros((200_000, 20_000), chunks=(5_000, -1)), 0)
    assert plan_feature_store("auto", narrow, 1000, 1000, 4)[0] == "implicit"
    assert plan_feature_store("auto", wide, 100, 100, 4)[0] == "disk"
    assert plan_feature_store("implicit", as_row_blocks(np.zeros((10, 2)), 5), 4, 4, 4)[0] == "implicit"
