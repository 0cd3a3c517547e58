"""Row hashes: chunking-independent pseudo-random numbers of global row indices (dsvm.blocks._rowhash)."""

import numpy as np
from scipy.stats import kstest

from dsvm.blocks import row_hash, row_uniform


def _knuth(i: int, seed: int) -> float:
    """The formula written out with Python integers (no numpy wrap-around involved)."""
    return ((i + (seed % 2**31) * 0x9E3779B9) * 2654435761 % 2**32) / 2**32


def test_row_uniform_is_the_documented_formula():
    """Pinned values: an edit that changes the hash changes active landmarks, warm starts and
    checkpoint fingerprints, so it must be deliberate."""
    rows = np.array([0, 1, 2, 17, 123_456, 2**31 - 1, 2**40 + 5], dtype=np.int64)
    for seed in (0, 1, 7, 2**31 - 1, 2**31 + 3):
        expected = np.array([_knuth(int(i), seed) for i in rows])
        np.testing.assert_array_equal(row_uniform(rows, seed), expected)
    assert row_uniform(np.array([1]))[0] == 2654435761 / 2**32


def test_row_uniform_does_not_depend_on_the_blocking():
    rows = np.arange(10_000, dtype=np.int64)
    whole = row_uniform(rows, 3)
    pieces = np.concatenate([row_uniform(rows[a:b], 3) for a, b in ((0, 17), (17, 4000), (4000, 10_000))])
    np.testing.assert_array_equal(whole, pieces)


def test_row_uniform_is_roughly_uniform_and_seeded():
    u = row_uniform(np.arange(50_000), seed=11)
    assert u.min() >= 0.0 and u.max() < 1.0
    assert kstest(u, "uniform").pvalue > 1e-3
    assert not np.array_equal(u, row_uniform(np.arange(50_000), seed=12))


def test_row_hash_is_uniform_and_independent_of_blocking():
    h = row_hash(100_000, seed=7)
    np.testing.assert_array_equal(h[40_000:40_100], row_hash(100, seed=7, offset=40_000))
    counts = np.bincount((h % np.uint64(5)).astype(int), minlength=5)
    assert np.all(np.abs(counts - 20_000) < 600)
    assert not np.array_equal(h[:100], row_hash(100, seed=8))
