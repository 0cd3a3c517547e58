"""The column opening: a Newton fit whose rows are too few for a subsample opens from its features' leading
columns, and ends at the unopened fit's optimum."""

from __future__ import annotations

import logging

import dask.array as da
import numpy as np
import pytest
from helpers import interrupt_fit, make_circles_problem

import dsvm.svm._opening as opening
from dsvm import KernelSpec, NystroemSVC, NystroemSVR, fit_feature_map

N = 3000
PARAMS = dict(C=3.0, gamma=0.4, n_components=80, random_state=0, tol=1e-9, dtype="float64")


def _fit(options, X, y, cls=NystroemSVC, **params):
    return cls(**{**PARAMS, **params, "solver_options": options}).fit(X, y)


def _same_optimum(got, ref):
    np.testing.assert_allclose(got.objective_, ref.objective_, rtol=1e-9)
    np.testing.assert_allclose(got.coef_, ref.coef_, rtol=0, atol=1e-5 * np.abs(ref.coef_).max())
    np.testing.assert_allclose(got.intercept_, ref.intercept_, rtol=0, atol=1e-5)


def test_leading_columns_of_a_cholesky_map_are_the_map_of_the_first_landmarks():
    """Why the leading problem is a Nyström problem of its own: a triangular map's first columns depend on the
    first landmarks only."""
    rng = np.random.default_rng(0)
    L, X = rng.normal(size=(40, 3)), rng.normal(size=(200, 3))
    spec = KernelSpec("rbf", gamma=0.3)
    whole = fit_feature_map(L, spec, dtype=np.float64, method="cholesky")
    first = fit_feature_map(L[:10], spec, dtype=np.float64, method="cholesky")
    np.testing.assert_allclose(whole.transform_block(X)[:, :10], first.transform_block(X), rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize("method", ["cholesky", "eigen"])
def test_the_leading_map_gives_the_leading_features(method):
    """``FeatureMap.leading``: the first ``r0`` features of every row, from the first ``r0`` landmarks alone for
    a triangular map (what implicit passes of the opening compute)."""
    rng = np.random.default_rng(1)
    L, X = rng.normal(size=(40, 3)), rng.normal(size=(150, 3))
    whole = fit_feature_map(L, KernelSpec("rbf", gamma=0.3), dtype=np.float64, method=method)
    part = whole.leading(12)
    assert part.n_output == 12 and part.n_components == (12 if method == "cholesky" else 40)
    np.testing.assert_allclose(part.transform_block(X), whole.transform_block(X)[:, :12], rtol=1e-9, atol=1e-12)
    with pytest.raises(ValueError, match="r0 must be in 1..40"):
        whole.leading(0)


@pytest.mark.parametrize("store", ["disk", "implicit"])
def test_every_store_opens_from_its_leading_columns(store):
    """Asked for, the opening runs on features read from disk (Dask input: in-memory input keeps its features
    in memory) and on implicit ones (the leading map's kernel blocks), and the fit ends at the unopened
    optimum."""
    X, y = make_circles_problem(n=N, seed=4)
    if store == "disk":
        X, y = da.from_array(X, chunks=(1000, -1)), da.from_array(y, chunks=1000)
    got, ref = (_fit({"warm_start": w}, X, y, feature_store=store, landmarks="pivoted") for w in ("columns", "none"))
    assert got.solver_stats_["opening"]["columns"] == got.solver_stats_["n_features_out"] // 4
    assert got.solver_stats_["feature_store"] == store
    _same_optimum(got, ref)


@pytest.mark.parametrize("landmarks", ["uniform", "kmeans"])
def test_opened_from_the_leading_columns_the_fit_ends_at_the_unopened_optimum(landmarks):
    X, y = make_circles_problem(n=N, seed=3)
    sw = np.random.default_rng(0).uniform(0.5, 2.0, size=N)
    ref = NystroemSVC(**PARAMS, landmarks=landmarks, solver_options={"warm_start": "none"}).fit(X, y, sample_weight=sw)
    got = NystroemSVC(**PARAMS, landmarks=landmarks, solver_options={"warm_start": "columns"}).fit(
        X, y, sample_weight=sw)
    r = got.solver_stats_["n_features_out"]
    assert got.solver_stats_["opening"]["columns"] == r // 4 and len(got.solver_stats_["opening"]["n_iter"]) == 1
    assert "opening" not in ref.solver_stats_
    _same_optimum(got, ref)
    # the full solve began nearer the optimum: its first iterate is lower than the one from zero
    first = got.solver_stats_["problems"][0]["history"][0]["objective"]
    assert first < ref.solver_stats_["problems"][0]["history"][0]["objective"]


def test_every_class_and_the_regressor_open_from_their_own_leading_problem():
    X, y01 = make_circles_problem(n=N, seed=5)
    y = np.where(y01 > 0, "out", np.where(X[:, 0] > 0, "east", "west"))
    got, ref = (_fit({"warm_start": w}, X, y, probability=True) for w in ("columns", "none"))
    assert len(got.solver_stats_["opening"]["n_iter"]) == 3
    _same_optimum(got, ref)
    np.testing.assert_allclose(got.predict_proba(X[:200]), ref.predict_proba(X[:200]), atol=1e-5)
    t = np.sin(X[:, 0]) + 0.5 * X[:, 1] ** 2
    got, ref = (_fit({"warm_start": w}, X, t, NystroemSVR, epsilon=0.1) for w in ("columns", "none"))
    assert got.solver_stats_["opening"]["columns"] > 0
    _same_optimum(got, ref)


def test_auto_opens_from_the_columns_only_for_many_features_held_in_this_process(monkeypatch):
    X, y = make_circles_problem(n=N, seed=3)
    assert "opening" not in _fit({}, X, y).solver_stats_  # 80 features: the first Gram matrix is cheap
    monkeypatch.setattr(opening, "COLUMN_OPENING_MIN_FEATURES", 50)
    assert _fit({}, X, y).solver_stats_["opening"]["columns"] > 0
    assert "opening" not in _fit({}, X, y, feature_store="implicit").solver_stats_
    # implicit features from IMPLICIT_COLUMN_OPENING_MIN_FEATURES, where the rows are too few for a subsample,
    # and only for a triangular map (pivoted landmarks): the eigen map's leading columns need every landmark
    monkeypatch.setattr(opening, "IMPLICIT_COLUMN_OPENING_MIN_FEATURES", 50)
    assert _fit({}, X, y, feature_store="implicit", landmarks="pivoted").solver_stats_["opening"]["columns"] > 0
    assert "opening" not in _fit({}, X, y, feature_store="implicit").solver_stats_
    # a CG solve takes its preconditioner from a subsample opening: never the columns' under "auto"
    assert "columns" not in _fit({}, X, y, hessian="cg").solver_stats_.get("opening", {})
    gram_max = opening.GRAM_MAX_DIM
    monkeypatch.setattr(opening, "GRAM_MAX_DIM", 60)  # 80 features: the full solve cannot use the Gram matrix
    assert "columns" not in _fit({}, X, y).solver_stats_.get("opening", {})
    monkeypatch.setattr(opening, "GRAM_MAX_DIM", gram_max)
    Xd, yd = da.from_array(X, chunks=(1000, -1)), da.from_array(y, chunks=1000)
    assert "opening" not in _fit({}, Xd, yd).solver_stats_
    # enough rows for a subsample: that opening, not the columns'
    assert "rows" in _fit({"warm_rows": 500}, X, y).solver_stats_["opening"]
    monkeypatch.setattr(opening, "default_warm_rows", lambda r: N // 4)  # rows for a subsample opening
    assert "rows" in _fit({}, X, y, feature_store="implicit", landmarks="pivoted").solver_stats_["opening"]


def test_auto_leaves_the_columns_to_solves_the_cost_model_gives_to_cg(monkeypatch):
    """Where "auto" would solve the unopened problem by CG (large k on few rows), the solve needs the subsample
    opening's preconditioner: no column opening."""
    import dsvm.svm._fitting as fitting

    X, y = make_circles_problem(n=N, seed=3)
    monkeypatch.setattr(opening, "COLUMN_OPENING_MIN_FEATURES", 50)
    assert _fit({}, X, y).solver_stats_["opening"]["columns"] > 0
    monkeypatch.setattr(fitting, "resolve_hessian", lambda hessian, *args: "cg" if hessian == "auto" else hessian)
    assert "columns" not in _fit({}, X, y).solver_stats_.get("opening", {})


def test_an_unknown_warm_start_names_the_choices():
    X, y = make_circles_problem(n=500, seed=3)
    with pytest.raises(ValueError, match="'auto', 'subsample', 'columns' or 'none', got 'rows'"):
        _fit({"warm_start": "rows"}, X, y)


class _StopInTheFullSolve(logging.Handler):
    """Interrupts the fit at the full solve's second iteration (not the leading problem's)."""

    def emit(self, record):
        message = record.getMessage()
        if "newton it=2 " in message and "[columns]" not in message:
            raise KeyboardInterrupt


def test_an_interrupted_fit_resumes_from_its_checkpoint_not_from_the_columns_again(tmp_path):
    X, y = make_circles_problem(n=N, seed=3)
    params = dict(tol=1e-8, solver_options={"warm_start": "columns"})
    whole = NystroemSVC(**{**PARAMS, **params}).fit(X, y)
    ckpt = tmp_path / "fit.ckpt.npz"
    interrupt_fit(lambda: NystroemSVC(**{**PARAMS, **params}, checkpoint=str(ckpt)).fit(X, y), _StopInTheFullSolve())
    assert ckpt.exists()
    resumed = NystroemSVC(**{**PARAMS, **params}, checkpoint=str(ckpt)).fit(X, y)
    assert "opening" not in resumed.solver_stats_ and not ckpt.exists()
    np.testing.assert_allclose(resumed.coef_, whole.coef_, rtol=1e-7, atol=1e-9)
