"""The scale step's statistics, fitted in one pass over row blocks, against scikit-learn's scalers in memory.

Oracles: ``StandardScaler``, ``MinMaxScaler`` and ``MaxAbsScaler`` fitted on the whole array; the
statistics must not depend on how the rows are blocked (in-process blocks or Dask chunks).
"""

from __future__ import annotations

import dask.array as da
import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.preprocessing import MaxAbsScaler, MinMaxScaler, StandardScaler

from dsvm.approx import Scaling, fit_scaling
from dsvm.blocks import as_row_blocks

SKLEARN = {"standard": StandardScaler, "minmax": MinMaxScaler, "maxabs": MaxAbsScaler}


def _dense(n: int = 3000, seed: int = 0) -> np.ndarray:
    """Columns on very different scales and offsets, one constant column and one all-zero column."""
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 6)) * [1.0, 250.0, 1e-4, 3.0, 0.0, 1.0] + [0.0, 1e5, -2.0, 7.0, 0.0, 0.0]
    X[:, 5] = 3.25
    return X


def _blockings(X):
    yield "one block", as_row_blocks(X, X.shape[0], min_blocks=1)
    yield "in-process blocks", as_row_blocks(X, 701, min_blocks=1)
    yield "dask chunks", as_row_blocks(da.from_array(X, chunks=(433, -1)), 433)


def _check(scaling: Scaling, ref, X):
    for name, values in scaling.stats.items():
        expected = getattr(ref, name)
        if expected is None:  # StandardScaler(with_mean=False) on sparse input keeps no mean
            continue
        np.testing.assert_allclose(values, expected, rtol=1e-6, atol=1e-12, err_msg=name)
    assert scaling.n_samples == ref.n_samples_seen_
    got = scaling.transform_block(X)
    want = ref.transform(X)
    if sp.issparse(want):
        assert sp.issparse(got)
        got, want = got.toarray(), want.toarray()
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-9)


@pytest.mark.parametrize("kind", ["standard", "minmax", "maxabs"])
def test_dense_statistics_equal_scikit_learns(kind):
    X = _dense()
    ref = SKLEARN[kind]().fit(X)
    for _how, blocks in _blockings(X):
        scaling = fit_scaling(blocks, kind)
        _check(scaling, ref, X)
    # constant columns scale by one: they stay constant and finite
    out = fit_scaling(as_row_blocks(X, 500), kind).transform_block(X)
    assert np.all(np.isfinite(out)) and np.ptp(out[:, 4]) == 0 and np.ptp(out[:, 5]) == 0


@pytest.mark.parametrize("kind, ref", [("standard", StandardScaler(with_mean=False)), ("maxabs", MaxAbsScaler())])
def test_sparse_statistics_equal_scikit_learns(kind, ref):
    """Sparse input: standard scaling does not centre (scikit-learn requires with_mean=False), rows stay sparse."""
    rng = np.random.default_rng(1)
    X = sp.random(2500, 9, density=0.15, format="csr", random_state=2, data_rvs=lambda n: rng.normal(3, 5, n))
    dense = X.toarray() * [1, 10, 100, 1e-3, 1, 1, 1, 1, 1]
    dense[:, 7] = 0.0  # an empty column
    X = sp.csr_matrix(dense)
    ref.fit(X)
    for _how, blocks in _blockings(X):
        scaling = fit_scaling(blocks, kind)
        assert not scaling.center
        _check(scaling, ref, X)


def test_minmax_on_sparse_input_only_when_zeros_stay_zero():
    X = sp.random(400, 5, density=0.3, format="csr", random_state=0)  # values in [0, 1): every minimum is 0
    scaling = fit_scaling(as_row_blocks(X, 100), "minmax")
    np.testing.assert_allclose(scaling.transform_block(X).toarray(), MinMaxScaler().fit_transform(X.toarray()),
                               rtol=1e-12)
    X = X.tolil()
    X[3, 2] = -4.0
    with pytest.raises(ValueError, match=r"scale='minmax' would turn the zeros of sparse X into non-zeros \(column 2 "
                                         r"has minimum -4, not 0\).*'maxabs'"):
        fit_scaling(as_row_blocks(X.tocsr(), 100), "minmax")


def test_a_model_centred_on_dense_rows_scales_sparse_rows_dense():
    X = _dense(500)
    scaling = fit_scaling(as_row_blocks(X, 100), "standard")
    out = scaling.transform_block(sp.csr_matrix(X))
    assert isinstance(out, np.ndarray)
    np.testing.assert_allclose(out, StandardScaler().fit(X).transform(X), rtol=1e-6, atol=1e-9)


def test_float32_blocks_stay_float32_and_non_finite_rows_are_named():
    X = _dense(600).astype(np.float32)
    scaling = fit_scaling(as_row_blocks(X, 200), "standard")
    assert scaling.transform_block(X).dtype == np.float32
    X[417, 3] = np.inf
    with pytest.raises(ValueError, match="X contains NaN or infinity at row 417"):
        fit_scaling(as_row_blocks(da.from_array(X, chunks=(128, -1)), 128), "maxabs")


def test_unknown_kind():
    with pytest.raises(ValueError, match=r"scale='zscore' is not supported; choose None or one of"):
        fit_scaling(as_row_blocks(np.ones((3, 2)), 3), "zscore")


def test_a_variance_that_overflows_is_an_error_not_a_column_of_zeros():
    """``(1e200)²`` overflows float64: the column's scale was infinite and every scaled value 0."""
    from dsvm.exceptions import NonFiniteError

    X = np.random.default_rng(0).normal(size=(40, 3))
    X[:, 1] *= 1e200
    with pytest.raises(NonFiniteError, match="scale='standard': the variance of column 1 overflows float64"):
        fit_scaling(as_row_blocks(X, 16), "standard")
    assert fit_scaling(as_row_blocks(X, 16), "maxabs").stats["max_abs_"][1] > 1e200  # what it suggests works
