import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.kernel_approximation import Nystroem
from sklearn.metrics.pairwise import rbf_kernel

from dsvm.approx import fit_feature_map, make_kernel_spec, nystroem_normalization


def test_features_match_sklearn_nystroem_on_same_landmarks():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(200, 6))
    ref = Nystroem(kernel="rbf", gamma=0.2, n_components=30, random_state=0).fit(X)
    fmap = fit_feature_map(ref.components_, make_kernel_spec("rbf", 0.2), dtype=np.float64)
    assert fmap.normalization.shape == (30, 30)
    F = fmap.transform_block(X)
    # Same feature space up to an orthogonal rotation: compare Gram matrices.
    Fr = ref.transform(X)
    np.testing.assert_allclose(F @ F.T, Fr @ Fr.T, atol=1e-8)
    # sklearn's convention: F = K(X, components_) @ normalization_.T
    np.testing.assert_allclose(F, rbf_kernel(X, fmap.components, gamma=0.2) @ fmap.normalization.T, atol=1e-12)


def test_duplicate_landmarks_are_dropped_not_amplified():
    rng = np.random.default_rng(1)
    L = rng.normal(size=(20, 4))
    L = np.vstack([L, L[:5], L[:5] + 1e-9])  # exact and near duplicates
    fmap = fit_feature_map(L, make_kernel_spec("rbf", 0.5), dtype=np.float32)
    assert fmap.normalization.shape[0] <= 20
    assert fmap.normalization.shape[1] == 30
    X = rng.normal(size=(500, 4)) * 3
    F = fmap.transform_block(X).astype(np.float64)
    # ‖f(x)‖² is the Nyström approximation of k(x, x) = 1 from below.
    assert np.all(np.isfinite(F))
    assert np.max(np.sum(F * F, axis=1)) <= 1.0 + 1e-3


def test_normalization_reproduces_landmark_kernel():
    rng = np.random.default_rng(2)
    L = rng.normal(size=(15, 3))
    K = rbf_kernel(L, L, gamma=0.3)
    M, lam = nystroem_normalization(K, 1e-12)
    F = K @ M.T
    np.testing.assert_allclose(F @ F.T, K, atol=1e-8)
    assert np.all(np.diff(lam) <= 0)


def test_indefinite_sigmoid_kernel_keeps_positive_part():
    rng = np.random.default_rng(3)
    L = rng.normal(size=(25, 5))
    fmap = fit_feature_map(L, make_kernel_spec("sigmoid", 0.5, coef0=-1.0), dtype=np.float64)
    assert np.all(fmap.eigenvalues > 0)
    assert np.all(np.isfinite(fmap.transform_block(L)))


def test_sparse_and_dense_rows_give_same_features():
    rng = np.random.default_rng(4)
    X = rng.normal(size=(50, 8)) * (rng.random((50, 8)) < 0.3)
    fmap = fit_feature_map(X[:10], make_kernel_spec("rbf", 0.1), dtype=np.float32)
    np.testing.assert_allclose(fmap.transform_block(sp.csr_matrix(X)), fmap.transform_block(X), atol=1e-5)


def test_feature_map_pickles_without_cached_copies():
    import pickle

    rng = np.random.default_rng(5)
    fmap = fit_feature_map(rng.normal(size=(10, 3)), make_kernel_spec("rbf", 1.0))
    size = len(pickle.dumps(fmap))
    before = fmap.transform_block(np.ones((2, 3)))  # builds the cast copies
    assert len(pickle.dumps(fmap)) == size  # which are not shipped
    clone = pickle.loads(pickle.dumps(fmap))
    np.testing.assert_array_equal(clone.transform_block(np.ones((2, 3))), before)


def test_no_positive_eigenvalue_is_an_error():
    with pytest.raises(ValueError, match="no positive eigenvalue"):
        nystroem_normalization(-np.eye(3), 1e-6)


# --------------------------------------------------------------- the Cholesky map
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_cholesky_map_spans_the_eigen_maps_space_and_is_triangular(dtype):
    rng = np.random.default_rng(6)
    L, X = rng.normal(size=(40, 5)), rng.normal(size=(300, 5))
    spec = make_kernel_spec("rbf", 0.2)
    chol = fit_feature_map(L, spec, dtype=dtype, method="cholesky")
    eig = fit_feature_map(L, spec, dtype=np.float64)
    N = chol.normalization
    assert N.shape == (40, 40) and not np.triu(N, 1).any()
    assert np.all(chol.eigenvalues > 0)
    # the same kernel approximation K(X, L) K(L, L)⁻¹ K(L, X)
    F, Fe = chol.transform_block(X).astype(np.float64), eig.transform_block(X)
    atol = 1e-8 if dtype == np.float64 else 1e-4
    np.testing.assert_allclose(F @ F.T, Fe @ Fe.T, atol=atol)
    # the triangular product is the documented F = K(X, components_) @ normalization_.T
    np.testing.assert_allclose(F, rbf_kernel(X, chol.components, gamma=0.2) @ N.T, atol=atol, rtol=1e-5)
    np.testing.assert_allclose(chol.transform_block(sp.csr_matrix(X)), F, atol=atol)
    assert chol.transform_block(X[:0]).shape == (0, 40)


def test_cholesky_map_of_dependent_landmarks_falls_back_to_the_eigen_map():
    rng = np.random.default_rng(7)
    L = rng.normal(size=(10, 3))
    for extra in (L[:2], L[:2] + 1e-4):  # duplicates (no factor) and near-duplicates (a tiny pivot)
        fmap = fit_feature_map(np.vstack([L, extra]), make_kernel_spec("rbf", 0.5), method="cholesky")
        assert fmap.normalization.shape[0] <= 10 < fmap.normalization.shape[1]
    with pytest.raises(ValueError, match="method='qr'"):
        fit_feature_map(L, make_kernel_spec("rbf", 0.5), method="qr")


def test_triangular_product_is_used_only_for_a_triangular_normalization(monkeypatch):
    import scipy.linalg.blas

    calls = []
    real = scipy.linalg.blas.get_blas_funcs

    def spy(name, arrays=(), **kw):
        calls.append(name)
        return real(name, arrays, **kw)

    monkeypatch.setattr(scipy.linalg.blas, "get_blas_funcs", spy)
    rng = np.random.default_rng(8)
    L, X = rng.normal(size=(20, 3)), rng.normal(size=(50, 3))
    spec = make_kernel_spec("rbf", 0.4)
    fit_feature_map(L, spec).transform_block(X)
    assert calls == []
    fit_feature_map(L, spec, method="cholesky").transform_block(X)
    assert calls == ["trmm"]


# --------------------------------------------------------------- the fused slab transform
def _float32_bound(X, fmap, K64):
    """A float32 rounding bound of ``F = K(X, L) M`` entry by entry: the exponent's terms
    ``γ(‖x − s‖² + 2|(x − s)·(l − s)| + ‖l − s‖²)`` rounded over ``p + 3`` operations, the kernel
    values relative to that, then the projection's ``k``-term sums."""
    eps = np.finfo(np.float32).eps
    g = fmap.spec.gamma
    s = fmap.components.mean(axis=0)
    xs, ls = X - s, fmap.components - s
    terms = g * ((xs**2).sum(1)[:, None] + 2 * np.abs(xs @ ls.T) + (ls**2).sum(1)[None, :])
    dK = K64 * (X.shape[1] + 3) * eps * (terms + 1.0)
    absM = np.abs(fmap.normalization.T)
    return dK @ absM + fmap.n_components * eps * (K64 @ absM)


@pytest.mark.parametrize("method", ["eigen", "cholesky"])
@pytest.mark.parametrize("n", [1, 300, 2500])  # one row, one slab, several slabs and a partial one
def test_fused_transform_is_the_dense_formula_to_float32_rounding(method, n, monkeypatch):
    import dsvm.approx._nystroem as nystroem

    monkeypatch.setattr(nystroem, "SLAB_BYTES", 64 * 40 * 4)  # 64-row slabs at k = 40
    rng = np.random.default_rng(9)
    L = rng.normal(size=(40, 7)) + 3.0  # away from the origin: the shift matters
    X = rng.normal(size=(n, 7)) * 1.5 + 3.0
    fmap = fit_feature_map(L, make_kernel_spec("rbf", 0.15), dtype=np.float32, method=method)
    K64 = rbf_kernel(X, fmap.components, gamma=0.15)
    F64 = K64 @ fmap.normalization.T
    out = np.full((n, fmap.n_output), np.nan, dtype=np.float32)
    F = fmap.transform_block(X.astype(np.float32), out=out)
    assert F is out and F.dtype == np.float32
    err = np.abs(F - F64)
    bound = _float32_bound(X, fmap, K64)
    assert np.all(err <= bound), float((err / bound).max())
    # float64 features reach float64 accuracy through the same code
    f64 = fit_feature_map(L, make_kernel_spec("rbf", 0.15), dtype=np.float64, method=method)
    np.testing.assert_allclose(f64.transform_block(X), rbf_kernel(X, L, gamma=0.15) @ f64.normalization.T,
                               atol=1e-11)


@pytest.mark.parametrize("n", [5, 100])  # a part of one slab; a slab and a partial one
def test_short_wide_slabs_take_the_triangular_product_by_column_panels(n, monkeypatch):
    """Slabs shorter than ``TRMM_MIN_ROWS`` of a triangular map wider than it are multiplied panel by panel
    (uneven panels here): the dense formula to float32 rounding, and no TRMM."""
    import dsvm.approx._nystroem as nystroem

    monkeypatch.setattr(nystroem, "SLAB_BYTES", 64 * 100 * 4)  # 64-row slabs (the fewest) at k = 100
    monkeypatch.setattr(nystroem, "TRMM_MIN_ROWS", 80)
    monkeypatch.setattr(nystroem, "PANEL_COLUMNS", 24)
    rng = np.random.default_rng(10)
    L, X = rng.normal(size=(100, 6)), rng.normal(size=(n, 6))
    fmap = fit_feature_map(L, make_kernel_spec("rbf", 0.2), dtype=np.float32, method="cholesky")
    assert fmap.n_output == 100 and not np.triu(fmap.normalization, 1).any()
    panel_calls = []
    monkeypatch.setattr(nystroem, "_panel_product", _counting(nystroem._panel_product, panel_calls))
    F = fmap.transform_block(X.astype(np.float32))
    assert len(panel_calls) == -(-n // 64)  # one per slab
    K64 = rbf_kernel(X, L, gamma=0.2)
    err = np.abs(F - K64 @ fmap.normalization.T)
    assert np.all(err <= _float32_bound(X, fmap, K64)), float(err.max())


def _counting(function, calls: list):
    def counted(*args):
        calls.append(1)
        return function(*args)

    return counted


@pytest.mark.parametrize("name,kw", [("poly", {"degree": 2, "coef0": 1.0}), ("sigmoid", {"coef0": -0.5}),
                                     ("linear", {})])
def test_fused_transform_of_the_other_kernels(name, kw, monkeypatch):
    from sklearn.metrics.pairwise import linear_kernel, polynomial_kernel, sigmoid_kernel

    import dsvm.approx._nystroem as nystroem

    monkeypatch.setattr(nystroem, "SLAB_BYTES", 64 * 30 * 8)
    rng = np.random.default_rng(10)
    L, X = rng.normal(size=(30, 5)), rng.normal(size=(700, 5))
    spec = make_kernel_spec(name, 0.3, **kw)
    fmap = fit_feature_map(L, spec, dtype=np.float64)
    K = {"poly": lambda: polynomial_kernel(X, L, degree=2, gamma=0.3, coef0=1.0),
         "sigmoid": lambda: sigmoid_kernel(X, L, gamma=0.3, coef0=-0.5),
         "linear": lambda: linear_kernel(X, L)}[name]()
    np.testing.assert_allclose(fmap.transform_block(X), K @ fmap.normalization.T, atol=1e-10)
    np.testing.assert_allclose(fmap.transform_block(sp.csr_matrix(X)), K @ fmap.normalization.T, atol=1e-10)


def test_transform_out_must_fit():
    rng = np.random.default_rng(11)
    fmap = fit_feature_map(rng.normal(size=(10, 3)), make_kernel_spec("rbf", 1.0))
    with pytest.raises(ValueError, match="out must be"):
        fmap.transform_block(np.ones((4, 3)), out=np.empty((4, 10), dtype=np.float64))
    with pytest.raises(ValueError, match="out must be"):
        fmap.transform_block(np.ones((4, 3)), out=np.empty((10, 4), dtype=np.float32).T)


# ------------------------------------------------------------------ non-finite values (issue 25, item 3)
def test_a_landmark_kernel_matrix_that_overflows_is_named():
    """Before: "the landmark kernel matrix has no positive eigenvalue" (eigh of infinities), blaming the kernel."""
    from dsvm.exceptions import NonFiniteError

    L = np.random.default_rng(0).uniform(1, 2, size=(20, 4))
    with pytest.raises(NonFiniteError, match=r"K\(L, L\) holds NaN or infinity \(first in landmark 0.*poly kernel "
                                             r"\(gamma=10, coef0=0, degree=200\) overflows float64"):
        fit_feature_map(L, make_kernel_spec("poly", 10.0, degree=200), dtype=np.float32)


def test_check_features_names_the_row_and_whether_the_kernel_or_the_map_overflowed():
    from dsvm.approx import check_features
    from dsvm.exceptions import NonFiniteError

    rng = np.random.default_rng(0)
    X = rng.normal(size=(30, 4))
    fmap = fit_feature_map(X[:10], make_kernel_spec("poly", 1.0, degree=3), dtype=np.float32)
    X[17] *= 1e13  # (1e26)³ overflows float32
    with np.errstate(all="ignore"):
        F = fmap.transform_block(X)
    with pytest.raises(NonFiniteError, match=r"features of row 117 hold NaN or infinity \(the largest \|value\| of the "
                                             r"row is \d\.\d+e\+13, of the landmarks \d\.\d+\): the poly kernel .* "
                                             r"overflows float32 on it"):
        check_features(F, X, fmap, offset=100)
    check_features(F[:17], X[:17], fmap)  # the rows before are fine
    # RBF kernel values (within [0, 1]) and a crafted map whose first feature sums them times 3e38
    fmap = fit_feature_map(X[:10], make_kernel_spec("rbf", 0.1), dtype=np.float32)
    fmap.normalization[0] = 3e38
    with np.errstate(all="ignore"):
        F = fmap.transform_block(X[:5])
    with pytest.raises(NonFiniteError, match="row 0 .* the Nyström map turns its finite kernel values into NaN"):
        check_features(F, X[:5], fmap)


# ------------------------------------------------------------------ a linear model folded into the landmarks
@pytest.mark.parametrize("method", ["eigen", "cholesky"])
@pytest.mark.parametrize("n", [0, 1, 300, 2500])  # no row, one row, one slab, several slabs and a partial one
def test_expansion_is_the_features_times_the_coefficients(method, n, monkeypatch):
    """``K(X, L) α``, ``α = normalizationᵀ coefᵀ``, slab by slab, is ``F coefᵀ`` (exact in float64 arithmetic)."""
    import dsvm.approx._nystroem as nystroem

    monkeypatch.setattr(nystroem, "SLAB_BYTES", 64 * 40 * 8)  # 64-row slabs at k = 40 in float64
    rng = np.random.default_rng(12)
    L, X = rng.normal(size=(40, 5)) + 2.0, rng.normal(size=(n, 5)) + 2.0
    fmap = fit_feature_map(L, make_kernel_spec("rbf", 0.2), dtype=np.float64, method=method)
    coef = rng.normal(size=(3, fmap.n_output))
    expansion = fmap.expansion(coef)
    np.testing.assert_array_equal(expansion.alpha, fmap.normalization.T @ coef.T)
    K = rbf_kernel(X, L, gamma=0.2) if n else np.empty((0, 40))
    for rows in (X, sp.csr_matrix(X)):
        values = expansion.product_block(rows)
        assert values.shape == (n, 3) and values.dtype == np.float64
        np.testing.assert_allclose(values, K @ fmap.normalization.T @ coef.T, rtol=1e-10, atol=1e-10)
    f32 = fit_feature_map(L, make_kernel_spec("rbf", 0.2), dtype=np.float32, method=method)
    assert f32.expansion(coef[:, : f32.n_output]).product_block(X).dtype == np.float32  # the map's dtype


def test_expansion_is_kept_for_equal_coefficients_and_never_pickled():
    import pickle

    rng = np.random.default_rng(13)
    fmap = fit_feature_map(rng.normal(size=(30, 3)), make_kernel_spec("rbf", 1.0))
    coef = rng.normal(size=(1, fmap.n_output))
    size = len(pickle.dumps(fmap))
    expansion = fmap.expansion(coef)
    assert fmap.expansion(coef.copy()) is expansion
    assert fmap.expansion(coef + 1.0) is not expansion
    expansion.product_block(np.ones((2, 3)))  # builds its cast copies
    assert len(pickle.dumps(fmap)) == size  # the map ships without it
    # the expansion ships the landmarks and α, not the k x r map nor its cast copies
    shipped = pickle.loads(pickle.dumps(expansion))
    assert shipped._ready_arrays is None and not hasattr(shipped, "normalization")
    np.testing.assert_array_equal(shipped.product_block(np.ones((2, 3))), expansion.product_block(np.ones((2, 3))))
    with pytest.raises(ValueError, match=r"coef must have shape \(n_problems, 30\), got \(1, 29\)"):
        fmap.expansion(coef[:, 1:])


def test_check_expansion_names_the_row_and_whether_the_kernel_or_the_product_overflowed():
    from dsvm.approx import check_expansion
    from dsvm.exceptions import NonFiniteError

    rng = np.random.default_rng(0)
    X = rng.normal(size=(30, 4))
    fmap = fit_feature_map(X[:10], make_kernel_spec("poly", 1.0, degree=3), dtype=np.float32)
    expansion = fmap.expansion(rng.normal(size=(2, fmap.n_output)))
    X[17] *= 1e13  # (1e26)³ overflows float32
    with np.errstate(all="ignore"):
        values = expansion.product_block(X)
    with pytest.raises(NonFiniteError, match=r"^the kernel values of row 117 hold NaN or infinity \(the largest "
                                             r"\|value\| of the row is \d\.\d+e\+13, of the landmarks \d\.\d+\): the "
                                             r"poly kernel .* overflows float32 on it; .*dtype='float64'$"):
        check_expansion(values, X, expansion, offset=100)
    check_expansion(values[:17], X[:17], expansion)  # the rows before are fine
    # RBF kernel values (within [0, 1]) times a crafted α beyond float32
    fmap = fit_feature_map(X[:10], make_kernel_spec("rbf", 0.1), dtype=np.float32)
    coef = np.zeros((1, fmap.n_output))
    coef[0, 0] = 1e45
    expansion = fmap.expansion(coef)
    with np.errstate(all="ignore"):
        values = expansion.product_block(X[:5])
    with pytest.raises(NonFiniteError, match=r"^the decision values of row 0 hold NaN or infinity: its kernel values "
                                             r"times the model's coefficients on the landmarks \(M coefᵀ, largest "
                                             r"\|value\| \d\.\d+e\+\d+\) overflow float32"):
        check_expansion(values, X[:5], expansion)

