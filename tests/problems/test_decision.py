"""Decision values and the labels they predict: one rule for every estimator, metric and file writer."""

import numpy as np
import pytest
import scipy.sparse as sp

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
    np.testing.assert_allclose(decision_blocks(as_row_blocks(X, 7), fmap, coef, intercept).compute(), whole,
                               rtol=1e-12)
    np.testing.assert_allclose(decision_block(sp.csr_matrix(X), fmap, coef, intercept), whole, rtol=1e-10)
    np.testing.assert_array_equal(decision_block(X, fmap, coef, intercept, check_finite=False),
                                  decision_block(X, fmap, coef, intercept))
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
    with pytest.raises(NonFiniteError, match=r"features of row 23 hold NaN or infinity .* poly kernel .* overflows "
                                             r"float32"):
        decision_blocks(as_row_blocks(X, 7, min_blocks=1), fmap, coef, intercept).compute()
    with pytest.raises(NonFiniteError, match="features of row 23"):
        decision_blocks(as_row_blocks(da.from_array(X, chunks=10), 10), fmap, coef, intercept).compute()


def test_decision_values_that_overflow_after_finite_features_are_named():
    from dsvm.exceptions import NonFiniteError

    X, fmap, coef, intercept = _poly_model()
    coef[0, 0] = 3e38  # a crafted model: finite features times it overflow float32
    with pytest.raises(NonFiniteError, match=r"decision values of row \d+ hold NaN or infinity.*overflow float32"):
        decision_block(X, fmap, coef, intercept, offset=0)
