"""The Nyström maps of K(L, L) (dsvm.approx._normalization): when the Cholesky map stands in for the eigen
map, and a landmark function's weights in either."""

import numpy as np
import pytest
from sklearn.metrics.pairwise import rbf_kernel

from dsvm.approx import fit_feature_map, make_kernel_spec


def test_many_landmarks_get_the_pivoted_cholesky_map(monkeypatch):
    import dsvm.approx._nystroem as nystroem

    monkeypatch.setattr(nystroem, "EIGEN_MAP_MAX_ORDER", 30)  # as at k > 2048, on a small problem
    rng = np.random.default_rng(8)
    L, X = rng.normal(size=(40, 5)), rng.normal(size=(200, 5))
    spec = make_kernel_spec("rbf", 0.2)
    many = fit_feature_map(L, spec, dtype=np.float64)  # method "eigen" asked for: uniform landmarks
    assert not np.triu(many.normalization, 1).any() and many.normalization.shape == (40, 40)
    assert many.kept is None or sorted(many.kept) == list(range(40))  # every landmark, in pivot order
    np.testing.assert_array_equal(many.components, L if many.kept is None else L[many.kept])
    plain = fit_feature_map(L, spec, dtype=np.float64, method="cholesky")  # asked for: the landmarks' own order
    assert plain.kept is None and not np.triu(plain.normalization, 1).any()
    few = fit_feature_map(L[:30], spec, dtype=np.float64)  # at the bound: the eigen map
    assert np.triu(few.normalization, 1).any()
    eig = nystroem.nystroem_normalization(nystroem.kernel_matrix(L, L, spec), 1e-10)[0]
    Fe = rbf_kernel(X, L, gamma=0.2) @ eig.T
    F = many.transform_block(X)
    np.testing.assert_allclose(F @ F.T, Fe @ Fe.T, atol=1e-8)  # the same feature space
    # dependent landmarks: the pivoted Cholesky map of the independent ones, the same feature space
    dependent = fit_feature_map(np.vstack([L, L[:3]]), spec, dtype=np.float64)
    assert dependent.normalization.shape == (40, 40) and not np.triu(dependent.normalization, 1).any()
    assert sorted(dependent.kept % 40) == list(range(40))  # one of each duplicated pair
    np.testing.assert_array_equal(dependent.components, np.vstack([L, L[:3]])[dependent.kept])
    Fd = dependent.transform_block(X)
    np.testing.assert_allclose(Fd @ Fd.T, Fe @ Fe.T, atol=1e-8)
    # independent enough for the Cholesky factor's pivots, yet with eigenvalues the eigen map cuts
    crowded = rng.normal(size=(600, 5))
    K = nystroem.kernel_matrix(crowded, crowded, spec)
    eigenvalues = np.linalg.eigvalsh(K)
    assert eigenvalues[0] < 1e-6 * eigenvalues[-1]
    assert np.diagonal(np.linalg.cholesky(K + 0.0)).min() ** 2 > 1e-6  # the pivot test alone would pass
    fmap = fit_feature_map(crowded, spec)  # float32: eig_rtol 1e-6
    assert fmap.n_components == fmap.n_output < 600 and not np.triu(fmap.normalization, 1).any()
    monkeypatch.setattr(nystroem, "EIGEN_MAP_MAX_ORDER", 2048)
    assert np.triu(fit_feature_map(crowded, spec).normalization, 1).any()  # at or below the bound: the eigen map


def test_the_pivoted_map_keeps_the_kernel_on_every_landmark_to_the_cut_off(monkeypatch):
    """The pivoted Cholesky map drops a landmark only when its squared distance to the span of the kept
    ones is at most ``eig_rtol · λ_max``: ``F(L) F(L)ᵀ`` matches ``K(L, L)`` to that bound, on the
    dropped landmarks too (dense numpy oracle), and its rank is near the eigen map's."""
    import dsvm.approx._nystroem as nystroem

    monkeypatch.setattr(nystroem, "EIGEN_MAP_MAX_ORDER", 30)
    rng = np.random.default_rng(3)
    L = rng.normal(size=(400, 3))  # 400 landmarks in 3 dimensions: far more than the kernel's numerical rank
    spec = make_kernel_spec("rbf", 0.5)
    K = rbf_kernel(L, L, gamma=0.5)
    lam = np.linalg.eigvalsh(K)
    for rtol in (1e-10, 1e-6):
        fmap = fit_feature_map(L, spec, dtype=np.float64, eig_rtol=rtol)
        assert fmap.kept is not None and len(fmap.kept) == fmap.n_components < 400
        assert np.all(np.diff(fmap.eigenvalues) <= 1e-12)  # pivots non-increasing
        F = fmap.transform_block(L)
        assert np.abs(F @ F.T - K).max() <= 1.01 * rtol * lam[-1] + 1e-12
        eigen_rank = int((lam > rtol * lam[-1]).sum())
        assert eigen_rank <= fmap.n_output <= 1.5 * eigen_rank + 5


@pytest.mark.parametrize("method", ["eigen", "cholesky"])
def test_landmark_weights_represent_a_function_of_the_first_landmarks_in_a_larger_map(method):
    from dsvm.approx import landmark_weights

    rng = np.random.default_rng(9)
    L, X = rng.normal(size=(40, 4)), rng.normal(size=(100, 4))
    spec = make_kernel_spec("rbf", 0.3)
    fmap = fit_feature_map(L, spec, dtype=np.float64, method=method)
    assert (not np.triu(fmap.normalization, 1).any()) == (method == "cholesky")
    alpha = rng.normal(size=(2, 25))  # two functions of the first 25 landmarks
    w = landmark_weights(alpha, fmap.normalization, fmap.eigenvalues)
    assert w.shape == (2, fmap.n_output)
    np.testing.assert_allclose(fmap.transform_block(X) @ w.T, rbf_kernel(X, L[:25], gamma=0.3) @ alpha.T,
                               atol=1e-6)
    batched = landmark_weights(alpha[None], fmap.normalization, fmap.eigenvalues)  # leading axes kept
    np.testing.assert_allclose(batched[0], w)


def test_the_pivoted_map_is_only_for_semidefinite_kernels_and_survives_large_kernel_values(monkeypatch):
    """Sigmoid's K(L, L) is indefinite: pivoted Cholesky would stop at the first negative residual with a
    handful of landmarks (3 of 150 once), so it gets the eigen map.  Kernel values near 1e19 (a linear kernel
    on rows of size 1e9) overflowed a float32 estimate of the largest eigenvalue into a false "no positive
    eigenvalue" error; they get the pivoted map of the kernel's rank."""
    import dsvm.approx._nystroem as nystroem

    monkeypatch.setattr(nystroem, "EIGEN_MAP_MAX_ORDER", 30)
    rng = np.random.default_rng(4)
    L = rng.normal(size=(150, 2))
    sigmoid = fit_feature_map(L, make_kernel_spec("sigmoid", 0.5, coef0=1.0), dtype=np.float64)
    assert sigmoid.kept is None and sigmoid.n_components == 150 and np.triu(sigmoid.normalization, 1).any()
    big = fit_feature_map(L * 1e9, make_kernel_spec("linear", 1.0), dtype=np.float64)
    assert big.n_components == big.n_output == 2 and big.kept is not None
    F = big.transform_block(L * 1e9)
    K = (L * 1e9) @ (L * 1e9).T
    np.testing.assert_allclose(F @ F.T, K, rtol=1e-6, atol=1e-6 * np.abs(K).max())


def test_a_map_is_lower_triangular_only_without_any_entry_above_its_diagonal():
    from dsvm.approx._normalization import _is_lower_triangular

    rng = np.random.default_rng(0)
    L = np.tril(rng.normal(size=(1100, 1100)))
    assert _is_lower_triangular(L) and _is_lower_triangular(L, step=7)
    assert not _is_lower_triangular(L[:, :1000]) and not _is_lower_triangular(L.T)
    for i, j in [(0, 1), (511, 512), (0, 1099), (600, 1050), (1098, 1099)]:  # within a band, across bands
        bad = L.copy()
        bad[i, j] = 1e-300
        assert not _is_lower_triangular(bad), (i, j)



def test_the_pivoted_map_is_the_inverse_factor_exactly_lower_triangular_across_bands():
    """LAPACK factors a symmetrized copy in place and inverts the factor's upper triangle; what the lower one
    held is zeroed afterwards by bands of 512 rows: at 1,100 kept landmarks the bands' edges are crossed,
    with every landmark kept (the factor inverted in place) and with duplicates dropped (a copy of it)."""
    from dsvm.approx._normalization import pivoted_cholesky_normalization

    X = np.random.default_rng(5).normal(size=(1100, 30))
    K = rbf_kernel(X, X, gamma=0.05)
    rows = np.r_[0:1100, 0:40]
    for K_LL in (K, K[np.ix_(rows, rows)]):
        before = K_LL.copy()
        N, pivots, kept = pivoted_cholesky_normalization(K_LL, 1e-10)
        np.testing.assert_array_equal(K_LL, before)  # the caller's matrix is not factored in place
        assert len(kept) == 1100 and sorted(kept % 1100) == list(range(1100))
        assert N.flags.c_contiguous and not np.triu(N, 1).any()
        K_kept = K_LL[np.ix_(kept, kept)]
        np.testing.assert_allclose(N @ K_kept @ N.T, np.eye(1100), atol=1e-8)
        np.testing.assert_allclose(pivots, np.diagonal(np.linalg.cholesky(K_kept)) ** 2, rtol=1e-10)
