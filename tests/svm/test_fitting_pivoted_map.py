"""Fits whose landmarks are dependent above ``EIGEN_MAP_MAX_ORDER`` (dsvm.approx._nystroem): the pivoted
Cholesky map drops the dependent landmarks, and the model says which it kept."""

from types import SimpleNamespace

import numpy as np
import pytest

import dsvm
from dsvm import NystroemSVC


@pytest.fixture
def crowded_rows():
    """Rows in two dimensions: 150 landmarks of them are dependent to rounding (K(L, L) has eigenvalues the
    eigen map cuts)."""
    rng = np.random.default_rng(0)
    X = rng.normal(size=(600, 2))
    y = (X[:, 0] * X[:, 1] + 0.3 * rng.normal(size=600) > 0).astype(int)
    return X, y


def test_dependent_landmarks_above_the_bound_get_the_pivoted_map_and_the_same_model(monkeypatch, crowded_rows,
                                                                                     tmp_path):
    import dsvm.approx._nystroem as nystroem

    X, y = crowded_rows
    params = dict(n_components=150, C=10.0, gamma=0.5, dtype="float64", eig_rtol=1e-10, tol=1e-8, random_state=0)
    eigen = NystroemSVC(**params).fit(X, y)  # 150 landmarks: below the bound, the eigen map
    assert eigen.n_components_ == 150 and eigen.normalization_.shape[0] < 150  # eigenvalues cut
    monkeypatch.setattr(nystroem, "EIGEN_MAP_MAX_ORDER", 30)
    pivoted = NystroemSVC(**params).fit(X, y)
    r = pivoted.n_components_
    assert abs(r - eigen.normalization_.shape[0]) <= 0.25 * r  # about the rank the eigen map keeps
    assert pivoted.components_.shape == (r, 2) and pivoted.normalization_.shape == (r, r)
    assert not np.triu(pivoted.normalization_, 1).any()
    np.testing.assert_array_equal(X[pivoted.component_indices_], pivoted.components_)
    assert len(np.unique(pivoted.components_, axis=0)) == r
    # nearly the same feature space (each map within its cut-off of the kernel): nearly the same solution
    np.testing.assert_allclose(pivoted.objective_, eigen.objective_, rtol=1e-4)
    np.testing.assert_allclose(pivoted.decision_function(X), eigen.decision_function(X), atol=0.05)
    dsvm.save_model(pivoted, tmp_path / "m.npz")
    loaded = dsvm.load_model(tmp_path / "m.npz")
    np.testing.assert_array_equal(loaded.component_indices_, pivoted.component_indices_)
    np.testing.assert_allclose(loaded.decision_function(X), pivoted.decision_function(X), rtol=1e-12, atol=1e-12)


def test_a_fit_on_the_pivoted_map_resumes_from_its_checkpoint(monkeypatch, crowded_rows, tmp_path):
    """The checkpoint holds the kept landmarks and their data rows: the resumed fit is the uninterrupted one."""
    from helpers import KillOnIteration, interrupt_fit

    import dsvm.approx._nystroem as nystroem

    monkeypatch.setattr(nystroem, "EIGEN_MAP_MAX_ORDER", 30)
    X, y = crowded_rows
    params = dict(n_components=150, C=10.0, gamma=0.5, dtype="float64", tol=1e-8, random_state=0)
    whole = NystroemSVC(**params).fit(X, y)
    assert whole.n_components_ < 150
    ckpt = tmp_path / "fit.ckpt.npz"
    handler = KillOnIteration(1, lambda: (_ for _ in ()).throw(KeyboardInterrupt()))
    interrupt_fit(lambda: NystroemSVC(**params, checkpoint=str(ckpt)).fit(X, y), handler)
    assert ckpt.exists()
    resumed = NystroemSVC(**params, checkpoint=str(ckpt)).fit(X, y)
    assert not ckpt.exists()
    np.testing.assert_array_equal(resumed.component_indices_, whole.component_indices_)
    np.testing.assert_array_equal(X[resumed.component_indices_], resumed.components_)
    np.testing.assert_allclose(resumed.coef_, whole.coef_, rtol=1e-8, atol=1e-10)


def test_a_smaller_fit_starts_a_fit_on_the_pivoted_map(monkeypatch, crowded_rows):
    """n_components="auto" grows k from an earlier fit's model: on a pivoted map, whose landmarks are no longer
    the earlier ones followed by new ones, the start is the earlier decision function in the new features."""
    import dsvm.approx._nystroem as nystroem
    from dsvm.svm._auto_k import start_from

    X, y = crowded_rows
    params = dict(C=10.0, gamma=0.5, dtype="float64", tol=1e-8, random_state=0)
    small = NystroemSVC(n_components=40, **params).fit(X, y)
    monkeypatch.setattr(nystroem, "EIGEN_MAP_MAX_ORDER", 30)
    fmap = NystroemSVC(n_components=150, **params).fit(X, y).feature_map_
    assert fmap.kept is not None
    earlier = SimpleNamespace(feature_map=small.feature_map_, coef=small.coef_, intercept=small.intercept_)
    (w,) = start_from(earlier)(fmap)
    np.testing.assert_allclose(fmap.transform_block(X) @ w[:-1] + w[-1], small.decision_function(X), atol=1e-2)


def test_the_auto_k_path_names_the_landmarks_drawn_and_refits_the_chosen_draw(monkeypatch):
    """A linear kernel's pivoted map keeps its rank (2 here) at every k of the path: keyed by the map's count,
    two path fits were one entry and the final fit could take the other's landmarks."""
    import dsvm.approx._nystroem as nystroem
    from dsvm.svm._auto_k import _chosen

    monkeypatch.setattr(nystroem, "EIGEN_MAP_MAX_ORDER", 30)
    rng = np.random.default_rng(5)
    X = rng.normal(size=(1200, 2))
    y = (X[:, 0] + 0.5 * X[:, 1] + 0.3 * rng.normal(size=1200) > 0).astype(int)
    model = NystroemSVC(n_components="auto", kernel="linear", C=1.0, random_state=0).fit(X, y)
    ks = [p["k"] for p in model.k_path_]
    assert len(ks) >= 2 and len(set(ks)) == len(ks) and all(k > 30 for k in ks)
    assert model.n_components_ == 2
    chosen = _chosen(model.k_path_, model.k_tol)["k"]
    fixed = NystroemSVC(n_components=chosen, kernel="linear", C=1.0, random_state=0).fit(X, y)
    np.testing.assert_array_equal(np.sort(model.component_indices_), np.sort(fixed.component_indices_))
