"""Decision values and the labels they predict: one rule for every estimator, metric and file writer."""

import numpy as np
import pytest
import scipy.sparse as sp
from helpers import (
    FLOAT32_DECISION_TOL,
    FLOAT64_DECISION_TOL,
    assert_same_decisions,
    assert_same_labels,
    explicit_decisions,
)

from dsvm.approx import fit_feature_map, make_kernel_spec
from dsvm.blocks import as_row_blocks
from dsvm.problems import decision_blocks, decisions, labels_from_decision, predicted_codes
from dsvm.problems._decision import decision_block


def _loop_codes(dec):
    """The rule written out row by row: one problem -> its sign; several -> the first largest."""
    flat = dec.reshape(-1, dec.shape[-1])
    out = []
    for row in flat:
        if row.size == 1:
            out.append(1 if row[0] > 0 else 0)
        else:
            best = 0
            for j in range(1, row.size):
                if row[j] > row[best]:
                    best = j
            out.append(best)
    return np.array(out).reshape(dec.shape[:-1])


@pytest.mark.parametrize("shape", [(7, 1), (7, 3), (5, 2, 3, 1), (5, 2, 3, 4)])
def test_predicted_codes_follow_the_rule_on_any_leading_shape(shape):
    dec = np.random.default_rng(0).normal(size=shape)
    dec.flat[0] = 0.0  # exactly on the boundary of a binary problem: the negative class
    np.testing.assert_array_equal(predicted_codes(dec), _loop_codes(dec))


def test_ties_go_to_the_first_class_and_zero_to_the_negative_one():
    np.testing.assert_array_equal(predicted_codes(np.array([[1.0, 1.0, 0.5], [0.0, 2.0, 2.0]])), [0, 1])
    np.testing.assert_array_equal(predicted_codes(np.array([[0.0], [-0.0], [1e-300]])), [0, 0, 1])
    classes = np.array(["neg", "pos"], dtype=object)
    np.testing.assert_array_equal(labels_from_decision(np.array([[-1.0], [2.0]]), classes), ["neg", "pos"])


def test_decisions_take_the_product_in_the_features_dtype_and_add_in_float64():
    rng = np.random.default_rng(1)
    F = rng.normal(size=(40, 6)).astype(np.float32)
    coef, intercept = rng.normal(size=(3, 6)), rng.normal(size=3) * 1e3
    out = decisions(F, coef, intercept)
    assert out.dtype == np.float64
    np.testing.assert_array_equal(out, (F @ coef.T.astype(np.float32)).astype(np.float64) + intercept)
    exact = F.astype(np.float64) @ coef.T + intercept
    # float32 rounding of coef and of a 6-term sum: a few eps32 of sum |F_ij coef_j|
    bound = 8 * np.finfo(np.float32).eps * (np.abs(F).astype(np.float64) @ np.abs(coef.T))
    assert np.all(np.abs(out - exact) <= bound)


def test_decision_blocks_equal_the_whole_array_and_name_a_bad_row():
    rng = np.random.default_rng(2)
    X = rng.normal(size=(30, 4))
    fmap = fit_feature_map(X[:8], make_kernel_spec("rbf", 0.5), dtype=np.float64)
    coef, intercept = rng.normal(size=(2, fmap.n_output)), rng.normal(size=2)
    whole = decisions(fmap.transform_block(X), coef, intercept)
    expansion = fmap.expansion(coef)
    np.testing.assert_allclose(decision_blocks(as_row_blocks(X, 7), fmap, coef, intercept).compute(), whole,
                               rtol=1e-10)
    np.testing.assert_allclose(decision_block(sp.csr_matrix(X), expansion, intercept), whole, rtol=1e-10)
    np.testing.assert_array_equal(decision_block(X, expansion, intercept, check_finite=False),
                                  decision_block(X, expansion, intercept))
    X[17, 1] = np.inf
    with pytest.raises(ValueError, match="NaN or infinity at row 17"):
        decision_blocks(as_row_blocks(X, 7, min_blocks=1), fmap, coef, intercept).compute()


def _poly_model(seed=3):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(40, 4))
    fmap = fit_feature_map(X[:10], make_kernel_spec("poly", 1.0, degree=3), dtype=np.float32)
    return X, fmap, rng.normal(size=(1, fmap.n_output)), np.zeros(1)


def test_non_finite_decision_values_are_an_error_naming_the_row_never_a_label():
    """Issue 25 item 3: a poly kernel on |x| ~ 1e13 overflows float32; the NaN decisions became the first
    class and ``predict --decision`` wrote ``nan``.  Numpy and Dask blocks alike (Dask: in the block function)."""
    import dask.array as da

    from dsvm.exceptions import NonFiniteError

    X, fmap, coef, intercept = _poly_model()
    X[23] *= 1e13
    # prediction forms no features: the row's kernel values are what overflow
    with pytest.raises(NonFiniteError, match=r"kernel values of row 23 hold NaN or infinity .* poly kernel .* "
                                             r"overflows float32 on it; .*dtype='float64'"):
        decision_blocks(as_row_blocks(X, 7, min_blocks=1), fmap, coef, intercept).compute()
    with pytest.raises(NonFiniteError, match="kernel values of row 23"):
        decision_blocks(as_row_blocks(da.from_array(X, chunks=10), 10), fmap, coef, intercept).compute()


def test_decision_values_that_overflow_after_finite_features_are_named():
    from dsvm.exceptions import NonFiniteError

    X, fmap, coef, intercept = _poly_model()
    coef[0, 0] = 3e38  # a crafted model: finite kernel values times its folded coefficients overflow float32
    with pytest.raises(NonFiniteError, match=r"decision values of row \d+ hold NaN or infinity.*overflow float32"):
        decision_block(X, fmap.expansion(coef), intercept, offset=0)


KERNEL_PARAMS = {"rbf": {"gamma": 0.5}, "poly": {"gamma": 0.5, "degree": 3, "coef0": 1.0},
                 "sigmoid": {"gamma": 0.1, "coef0": 0.0}, "linear": {"gamma": 1.0}}


def _model(kernel, dtype, method, n_problems, p=6, seed=4):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(200, p))
    fmap = fit_feature_map(X[:40], make_kernel_spec(kernel, **KERNEL_PARAMS[kernel]), dtype=dtype, method=method)
    return X, fmap, rng.normal(size=(n_problems, fmap.n_output)), rng.normal(size=n_problems)


@pytest.mark.parametrize("kernel", sorted(KERNEL_PARAMS))
@pytest.mark.parametrize("method", ["eigen", "cholesky"])
@pytest.mark.parametrize("n_problems", [1, 3])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_decisions_through_the_landmarks_are_the_explicit_f_coef(kernel, method, n_problems, dtype):
    """``K(X, L) α + b`` with ``α = M coefᵀ`` is ``F coefᵀ + b`` (computed here the long way), dense and sparse
    rows, to the rounding of the map's dtype; and the labels are the same but on near ties."""
    X, fmap, coef, intercept = _model(kernel, dtype, method, n_problems)
    expected, scale = explicit_decisions(X, fmap, coef, intercept)
    tol = FLOAT32_DECISION_TOL if dtype == np.float32 else FLOAT64_DECISION_TOL
    expansion = fmap.expansion(coef)
    assert expansion.alpha.dtype == np.float64 and expansion.alpha.shape == (fmap.n_components, n_problems)
    for rows in (X, sp.csr_matrix(X)):
        dec = decision_block(rows, expansion, intercept)
        assert dec.dtype == np.float64 and dec.shape == (X.shape[0], n_problems)
        assert_same_decisions(dec, expected, scale, tol)
        assert_same_labels(predicted_codes(dec), expected, scale, tol)
    # the feature path of a fit agrees too (each within tol of the explicit values)
    assert_same_decisions(decisions(fmap.transform_block(X), coef, intercept), expected, scale, tol)


def test_wide_sparse_rows_keep_the_csr_kernel_and_the_same_decisions():
    """More columns than DENSIFY_MAX_FEATURES: the CSR kernel block, never densified, then the product."""
    from dsvm.approx._kernels import DENSIFY_MAX_FEATURES

    rng = np.random.default_rng(5)
    X = sp.random(120, DENSIFY_MAX_FEATURES + 50, density=0.01, format="csr", random_state=5) * 3.0
    fmap = fit_feature_map(X[:30].toarray(), make_kernel_spec("rbf", 0.05), dtype=np.float32)  # exponents ~ 1
    coef, intercept = rng.normal(size=(2, fmap.n_output)), rng.normal(size=2)
    expected, scale = explicit_decisions(X, fmap, coef, intercept)
    assert_same_decisions(decision_block(X, fmap.expansion(coef), intercept), expected, scale, FLOAT32_DECISION_TOL)


@pytest.mark.parametrize("sparse", [False, True])
def test_dask_blocks_give_the_decisions_of_numpy_blocks(sparse):
    """Block-wise on Dask input: each block computes its kernel slabs and their product with the shared α."""
    import dask.array as da

    X, fmap, coef, intercept = _model("rbf", np.float32, "eigen", 3)
    rows = sp.csr_matrix(X) if sparse else X
    expected, scale = explicit_decisions(X, fmap, coef, intercept)
    X_da = da.from_array(rows, chunks=(35, X.shape[1]))
    dec = decision_blocks(as_row_blocks(X_da, 35), fmap, coef, intercept).compute()
    assert_same_decisions(dec, expected, scale, FLOAT32_DECISION_TOL)
    np.testing.assert_array_equal(dec, decision_blocks(as_row_blocks(rows, 35, min_blocks=1), fmap, coef,
                                                       intercept).compute())
