import dask.array as da
import numpy as np
import pytest
import scipy.sparse as sp

from dsvm.approx import clip_n_components, kmeans_landmarks, select_landmarks, uniform_landmarks
from dsvm.blocks import as_row_blocks


def _data(n=400, p=5, seed=0, dup=True):
    rng = np.random.default_rng(seed)
    X = rng.integers(0, 3, size=(n, p)).astype(float)  # many repeated rows
    if not dup:
        X = rng.normal(size=(n, p))
    return X


@pytest.mark.parametrize("method", ["uniform", "kmeans"])
def test_deterministic_given_random_state(method):
    X = as_row_blocks(_data(dup=False), 128)
    a = select_landmarks(X, 20, method, random_state=3)
    b = select_landmarks(X, 20, method, random_state=3)
    c = select_landmarks(X, 20, method, random_state=4)
    np.testing.assert_array_equal(a.components, b.components)
    assert not np.array_equal(a.components, c.components)


@pytest.mark.parametrize("method", ["uniform", "kmeans"])
def test_landmarks_are_distinct_rows(method):
    X = _data(dup=True)  # 3**5 = 243 possible rows, many repeats among 400
    lm = select_landmarks(as_row_blocks(X, 100), 60, method, random_state=0)
    assert lm.components.shape == (60, 5)
    assert np.unique(lm.components, axis=0).shape[0] == 60


@pytest.mark.parametrize("permute_max_rows", [1 << 22, 10])  # one permutation / batched draws
def test_uniform_landmarks_are_nested_in_k(monkeypatch, permute_max_rows):
    import dsvm.approx.landmarks as landmarks

    monkeypatch.setattr(landmarks, "PERMUTE_MAX_ROWS", permute_max_rows)
    X = as_row_blocks(_data(n=3000, p=7, dup=True), 500)  # repeated rows: some draws are skipped
    big = uniform_landmarks(X, 200, random_state=5)
    assert np.unique(big.components, axis=0).shape[0] == 200
    for k in (1, 17, 60, 150):
        small = uniform_landmarks(X, k, random_state=5)
        np.testing.assert_array_equal(small.indices, big.indices[:k])
        np.testing.assert_array_equal(small.components, big.components[:k])
    other = uniform_landmarks(X, 200, random_state=6)
    assert not np.array_equal(other.indices, big.indices)


def test_uniform_landmarks_are_rows_of_x_with_their_indices():
    X = _data(dup=True)
    lm = uniform_landmarks(as_row_blocks(X, 64), 30, random_state=1)
    assert lm.indices.shape == (30,)
    assert np.unique(lm.indices).size == 30
    np.testing.assert_array_equal(X[lm.indices], lm.components)


@pytest.mark.parametrize("method", ["uniform", "kmeans"])
@pytest.mark.parametrize("sparse", [False, True])
def test_same_landmarks_from_numpy_and_dask(method, sparse):
    X = _data(dup=False)
    X[np.abs(X) < 0.5] = 0.0
    Xin = sp.csr_matrix(X) if sparse else X
    a = select_landmarks(as_row_blocks(Xin, 1000), 25, method, random_state=7)
    if sparse:
        Xd = da.from_array(X, chunks=(77, -1)).map_blocks(sp.csr_matrix, meta=sp.csr_matrix((0, 0)))
    else:
        Xd = da.from_array(X, chunks=(77, -1))
    b = select_landmarks(as_row_blocks(Xd, 0), 25, method, random_state=7)
    np.testing.assert_allclose(a.components, b.components, rtol=1e-10, atol=1e-12)
    if method == "uniform":
        np.testing.assert_array_equal(a.indices, b.indices)


def test_too_few_distinct_rows_warns_and_returns_what_exists():
    X = np.repeat(np.eye(4), 10, axis=0)
    with pytest.warns(UserWarning, match="distinct"):
        lm = uniform_landmarks(as_row_blocks(X, 8), 10, random_state=0)
    assert lm.components.shape == (4, 4)


def test_kmeans_improves_inertia_over_its_seeds():
    rng = np.random.default_rng(0)
    centers = rng.normal(size=(8, 3)) * 10
    X = np.vstack([c + rng.normal(size=(100, 3)) for c in centers])
    rb = as_row_blocks(X, 128)
    seeds = kmeans_landmarks(rb, 8, random_state=0, n_iter=1)
    refined = kmeans_landmarks(rb, 8, random_state=0, n_iter=10)

    def inertia(C):
        d = ((X[:, None, :] - C[None]) ** 2).sum(-1)
        return d.min(1).sum()

    assert inertia(refined.components) <= inertia(seeds.components) + 1e-9
    assert refined.indices is None


def test_unknown_method():
    with pytest.raises(ValueError, match="landmarks="):
        select_landmarks(as_row_blocks(_data(), 10), 3, "random-fourier")


# --------------------------------------------------------------- landmarks="active"
def _active_fit(X, y, **kw):
    from dsvm import NystroemSVC

    params = dict(C=10.0, gamma=0.5, n_components=60, landmarks="active", random_state=5)
    params.update(kw)
    return NystroemSVC(**params).fit(X, y)


def _imbalanced(n=1500, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 3))
    y = np.where(np.linalg.norm(X - 1.0, axis=1) < 1.2, 1, -1)  # ~9 % positive
    return X, y


def test_active_landmarks_deterministic_distinct_and_from_the_boundary():
    X, y = _imbalanced()
    a, b = _active_fit(X, y), _active_fit(X, y)
    np.testing.assert_array_equal(a.components_, b.components_)
    assert not np.array_equal(a.components_, _active_fit(X, y, random_state=6).components_)
    assert np.unique(a.components_, axis=0).shape[0] == a.components_.shape[0] == 60
    np.testing.assert_array_equal(X[a.component_indices_], a.components_)
    # the minority class (all of it near the boundary here) gets many more landmarks than a uniform draw
    uniform = _active_fit(X, y, landmarks="uniform")
    share = np.mean(y[a.component_indices_] == 1)
    share_u = np.mean(y[uniform.component_indices_] == 1)
    assert share > max(3 * share_u, 0.25), (share, share_u)


def test_active_landmarks_same_on_numpy_and_dask():
    X, y = _imbalanced(seed=1)
    a = _active_fit(X, y, dtype="float64")
    b = _active_fit(da.from_array(X, chunks=(200, -1)), da.from_array(y, chunks=200), dtype="float64")
    np.testing.assert_array_equal(a.component_indices_, b.component_indices_)
    np.testing.assert_allclose(a.coef_, b.coef_, rtol=1e-6, atol=1e-8)


def test_clip_n_components_warns_only_when_k_exceeds_the_rows():
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert clip_n_components(50, 50) == 50
    with pytest.warns(UserWarning, match=r"n_components=80 is larger than the number of rows \(50\); using n_components=50"):
        assert clip_n_components(80, 50) == 50
