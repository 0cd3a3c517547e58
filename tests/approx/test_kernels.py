import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.metrics.pairwise import linear_kernel, polynomial_kernel, rbf_kernel, sigmoid_kernel

from dsvm.approx import (
    check_kernel_params,
    gamma_for,
    kernel_block,
    kernel_diagonal,
    kernel_matrix,
    make_kernel_spec,
    prepare_landmarks,
    resolve_gamma,
    row_sq_norms,
)
from dsvm.blocks import as_row_blocks

ORACLES = {
    "rbf": lambda X, L, s: rbf_kernel(X, L, gamma=s.gamma),
    "poly": lambda X, L, s: polynomial_kernel(X, L, degree=s.degree, gamma=s.gamma, coef0=s.coef0),
    "sigmoid": lambda X, L, s: sigmoid_kernel(X, L, gamma=s.gamma, coef0=s.coef0),
    "linear": lambda X, L, s: linear_kernel(X, L),
}


def _data(seed=0, n=40, p=7, k=9, density=0.4, offset=0.0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, p)) * (rng.random((n, p)) < density) + offset
    L = rng.normal(size=(k, p)) + offset
    return X, L


@pytest.fixture(params=["densified", "csr"])
def sparse_mode(request, monkeypatch):
    import dsvm.approx.kernels

    if request.param == "csr":
        monkeypatch.setattr(dsvm.approx.kernels, "DENSIFY_MAX_FEATURES", 0)
    else:
        monkeypatch.setattr(dsvm.approx.kernels, "DENSIFY_SLAB_ROWS", 7)  # several slabs
    return request.param


@pytest.mark.parametrize("name", ["rbf", "poly", "sigmoid", "linear"])
@pytest.mark.parametrize("sparse", [False, True])
@pytest.mark.parametrize("dtype,rtol", [(np.float64, 1e-10), (np.float32, 2e-5)])
def test_kernel_block_matches_sklearn(name, sparse, dtype, rtol, sparse_mode):
    X, L = _data()
    spec = make_kernel_spec(name, gamma=0.3, degree=3, coef0=0.7)
    Xin = sp.csr_matrix(X) if sparse else X
    K = kernel_block(Xin, prepare_landmarks(L, spec, dtype))
    assert K.dtype == dtype and K.shape == (X.shape[0], L.shape[0])
    np.testing.assert_allclose(K, ORACLES[name](X, L, spec), rtol=rtol, atol=rtol)


@pytest.mark.parametrize("sparse", [False, True])
def test_rbf_float32_is_accurate_far_from_the_origin(sparse, sparse_mode):
    # ||x||² ~ 1e6 would cancel catastrophically in float32 without the shift.
    X, L = _data(offset=1000.0, density=1.0)
    spec = make_kernel_spec("rbf", gamma=0.05)
    Xin = sp.csr_matrix(X) if sparse else X
    K = kernel_block(Xin, prepare_landmarks(L, spec, np.float32))
    np.testing.assert_allclose(K, rbf_kernel(X, L, gamma=0.05), atol=5e-5)


@pytest.fixture
def sparse_path(monkeypatch):
    """Force the CSR code path (normally taken for more than 1024 features)."""
    import dsvm.approx.kernels

    monkeypatch.setattr(dsvm.approx.kernels, "DENSIFY_MAX_FEATURES", 0)


def test_sparse_block_is_not_densified(monkeypatch, sparse_path):
    X, L = _data()
    Xs = sp.csr_matrix(X)
    spec = make_kernel_spec("rbf", gamma=0.3)

    def boom(*a, **k):
        raise AssertionError("sparse block was densified")

    monkeypatch.setattr(sp.csr_matrix, "toarray", boom)
    monkeypatch.setattr(sp.csr_matrix, "todense", boom)
    K = kernel_block(Xs, prepare_landmarks(L, spec, np.float32))
    assert K.shape == (X.shape[0], L.shape[0])


def test_row_sq_norms_sparse_with_empty_rows():
    X = sp.csr_matrix(np.array([[0.0, 0.0], [3.0, 4.0], [0.0, 0.0], [1.0, 0.0]]))
    np.testing.assert_allclose(row_sq_norms(X), [0.0, 25.0, 0.0, 1.0])


def test_kernel_matrix_symmetric_rbf():
    X, _ = _data()
    K = kernel_matrix(X, X, make_kernel_spec("rbf", 0.2))
    np.testing.assert_allclose(np.diag(K), 1.0, atol=1e-12)
    np.testing.assert_allclose(K, K.T, atol=1e-12)


@pytest.mark.parametrize(
    "kwargs,match",
    [
        ({"name": "laplace", "gamma": 1.0}, "kernel"),
        ({"name": "rbf", "gamma": 0.0}, "gamma"),
        ({"name": "rbf", "gamma": -1.0}, "gamma"),
        ({"name": "rbf", "gamma": float("nan")}, "gamma"),
        ({"name": "poly", "gamma": 1.0, "degree": 0}, "degree"),
        ({"name": "poly", "gamma": 1.0, "coef0": float("inf")}, "coef0"),
    ],
)
def test_bad_kernel_parameters(kwargs, match):
    with pytest.raises(ValueError, match=match):
        make_kernel_spec(**kwargs)


@pytest.mark.parametrize("name, kw", [("rbf", {}), ("linear", {}), ("poly", dict(degree=3, coef0=0.5)),
                                      ("sigmoid", dict(coef0=-0.2))])
@pytest.mark.parametrize("sparse", [False, True])
def test_kernel_diagonal_is_the_diagonal_of_the_kernel_matrix(name, kw, sparse):
    X = np.random.default_rng(0).normal(size=(30, 4)) * (np.random.default_rng(1).random((30, 4)) < 0.6)
    spec = make_kernel_spec(name, 0.3, **kw)
    Xin = sp.csr_matrix(X) if sparse else X
    np.testing.assert_allclose(kernel_diagonal(Xin, spec), np.diag(kernel_matrix(X, X, spec)), rtol=1e-12, atol=1e-12)


# ---------------------------------------------------------------- kernel parameters
def test_gamma_scale_and_auto_as_scikit_learn_computes_them():
    rng = np.random.default_rng(7)
    X = rng.normal(size=(300, 6)) * (rng.random((300, 6)) < 0.5)
    for data in (X, sp.csr_matrix(X)):
        blocks = as_row_blocks(data, 64, min_blocks=1)
        var = float(np.var(X))  # SVC's rule: the variance of all entries, zeros of sparse rows included
        np.testing.assert_allclose(gamma_for("scale", blocks, 6), 1.0 / (6 * var), rtol=1e-12)
        assert gamma_for("auto", blocks, 6) == 1.0 / 6
        assert gamma_for(0.25, blocks, 6) == 0.25
    assert resolve_gamma("scale", 4, lambda: 0.0) == 1.0  # constant data


def test_gamma_variance_is_computed_only_for_scale():
    def boom():
        raise AssertionError("Var X computed for a gamma that does not need it")

    assert resolve_gamma("auto", 5, boom) == 0.2 and resolve_gamma(3, 5, boom) == 3.0


@pytest.mark.parametrize(("kernel", "gamma", "message"), [
    ("laplacian", "scale", "kernel='laplacian' is not supported"),
    ("rbf", "large", "gamma must be 'scale', 'auto' or a positive number"),
    ("rbf", 0.0, "gamma must be positive"),
    ("rbf", float("nan"), "gamma must be a finite number"),
])
def test_bad_kernel_parameters_are_named(kernel, gamma, message):
    with pytest.raises(ValueError, match=message):
        check_kernel_params(kernel, gamma)
    for ok in ("scale", "auto", 0.5, 2):
        check_kernel_params("rbf", ok)
