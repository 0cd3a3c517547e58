import warnings

import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.metrics.pairwise import linear_kernel, polynomial_kernel, rbf_kernel, sigmoid_kernel

from dsvm.approx import (
    check_kernel_params,
    gamma_for,
    kernel_matrix,
    make_kernel_spec,
    prepare_landmarks,
    resolve_gamma,
)
from dsvm.approx._kernels import kernel_block, kernel_diagonal, row_sq_norms
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
    import dsvm.approx._kernels

    if request.param == "csr":
        monkeypatch.setattr(dsvm.approx._kernels, "DENSIFY_MAX_FEATURES", 0)
    else:
        monkeypatch.setattr(dsvm.approx._kernels, "DENSIFY_SLAB_ROWS", 7)  # several slabs
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
    import dsvm.approx._kernels

    monkeypatch.setattr(dsvm.approx._kernels, "DENSIFY_MAX_FEATURES", 0)


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


# ------------------------------------------------------------------ scales and overflow (issue 25, items 3 and 5)
def _mixed_columns(n=3000, seed=0):
    """Tabular data as a user has it: z-scores, amounts around 1000 ± 250, ratios in [0, 1]."""
    rng = np.random.default_rng(seed)
    return np.hstack([rng.normal(size=(n, 10)), 1000 + 250 * rng.normal(size=(n, 10)), rng.uniform(size=(n, 10))])


def test_gamma_scale_warns_when_the_columns_scales_are_orders_of_magnitude_apart():
    from dsvm.exceptions import MixedScalesWarning

    X = _mixed_columns()
    with pytest.warns(MixedScalesWarning, match=r"standard deviations from 0\.2\d+ \(column 2\d\) to 2\d\d "
                                                r"\(column 1\d\), \d\.\d orders of magnitude apart.*scale='standard'"):
        gamma = gamma_for("scale", as_row_blocks(X, 700), X.shape[1], warn_scales=True)
    np.testing.assert_allclose(gamma, 1.0 / (X.shape[1] * X.var()), rtol=1e-12)
    # asked only by a fit without scale=, and only by the gamma="scale" pass (the others make none)
    with warnings.catch_warnings():
        warnings.simplefilter("error", MixedScalesWarning)
        gamma_for("scale", as_row_blocks(X, 700), X.shape[1])
        gamma_for(0.1, as_row_blocks(X, 700), X.shape[1], warn_scales=True)


def test_no_scale_warning_on_comparable_columns_or_rare_binary_features():
    from dsvm.exceptions import MixedScalesWarning

    rng = np.random.default_rng(1)
    z = rng.normal(size=(2000, 8)) * np.array([1, 2, 5, 10, 0.5, 0.2, 3, 1])  # 1.7 orders apart: fine
    binary = sp.random(20_000, 50, density=0.02, random_state=2, format="csr")
    binary.data[:] = 1.0
    binary[0, 49] = 0.0  # a column set in one row of 20,000: a tiny standard deviation, the same range
    binary[0, 48] = 1.0
    const = np.hstack([rng.normal(size=(500, 3)), np.full((500, 2), 7.0), np.zeros((500, 1))])
    for X in (z, binary, const):
        with warnings.catch_warnings():
            warnings.simplefilter("error", MixedScalesWarning)
            gamma_for("scale", as_row_blocks(X, 600), X.shape[1], warn_scales=True)


@pytest.mark.parametrize("name", ["a9a.train", "w8a.train", "ijcnn1.train", "mushrooms.all", "splice.train"])
def test_no_scale_warning_on_the_libsvm_benchmark_sets(name):
    from helpers import load_libsvm

    from dsvm.exceptions import MixedScalesWarning

    X, _ = load_libsvm(name)
    with warnings.catch_warnings():
        warnings.simplefilter("error", MixedScalesWarning)
        gamma = gamma_for("scale", as_row_blocks(X.tocsr(), 8192), X.shape[1], warn_scales=True)
    np.testing.assert_allclose(gamma, 1.0 / (X.shape[1] * X.toarray().var()), rtol=1e-10)


def test_a_variance_that_overflows_is_an_error_not_gamma_one():
    """``(1e200)²`` overflows float64: the variance was NaN and gamma silently 1.0."""
    from dsvm.exceptions import NonFiniteError

    X = np.random.default_rng(0).normal(size=(50, 3)) * 1e200
    for warn in (False, True):
        with pytest.raises(NonFiniteError, match="gamma='scale': the variance of X is"):
            gamma_for("scale", as_row_blocks(X, 20), 3, warn_scales=warn)


def test_non_finite_values_are_named_as_such_not_as_overflows():
    """A NaN in X made gamma='scale' say its values were too large to square, and a NaN landmark (pivoted
    landmarks are drawn before any pass checks X) that the RBF exponent overflowed."""
    from dsvm.exceptions import NonFiniteError

    X = np.random.default_rng(0).normal(size=(50, 3))
    X[7, 1] = np.nan
    with pytest.raises(NonFiniteError, match="X contains NaN or infinity"):
        gamma_for("scale", as_row_blocks(X, 20), 3, warn_scales=False)
    for kernel in ("rbf", "poly", "linear"):
        with pytest.raises(NonFiniteError, match=r"^landmark 7 contains NaN or infinity \(landmarks are rows"):
            prepare_landmarks(X[:10], make_kernel_spec(kernel, 0.5), np.float64)


def test_an_rbf_exponent_that_overflows_the_dtype_is_refused():
    from dsvm.exceptions import NonFiniteError

    L = np.random.default_rng(0).normal(size=(10, 3)) * 100
    with pytest.raises(NonFiniteError, match=r"RBF kernel's exponent overflows float32: gamma=1e\+37"):
        prepare_landmarks(L, make_kernel_spec("rbf", 1e37), np.float32)
    prepare_landmarks(L, make_kernel_spec("rbf", 1e37), np.float64)  # fine in float64
    with pytest.raises(NonFiniteError, match="overflows float64"):
        prepare_landmarks(L, make_kernel_spec("rbf", 1e307), np.float64)
