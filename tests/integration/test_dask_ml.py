"""dask-ml with dsvm estimators: its split, its scalers, its wrappers and searches (skipped without dask-ml).

Oracles: the same estimator fitted on the same rows in memory; scikit-learn's scalers; dsvm's own
one-pass scaling statistics against dask-ml's.
"""

from __future__ import annotations

import dask.array as da
import numpy as np
import pytest
from sklearn.model_selection import KFold
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler as SkStandardScaler

from dsvm import NystroemSVC
from dsvm.approx import fit_scaling
from dsvm.blocks import as_row_blocks

dask_ml = pytest.importorskip("dask_ml", reason="dask-ml is not installed (pip install 'dsvm[dask-ml]')")
from dask_ml.model_selection import GridSearchCV, train_test_split  # noqa: E402
from dask_ml.preprocessing import MinMaxScaler, StandardScaler  # noqa: E402
from dask_ml.wrappers import ParallelPostFit  # noqa: E402

PARAMS = dict(n_components=50, gamma=0.3, random_state=0, dtype="float64", tol=1e-10)


def _problem(n=1200, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 4)) * [1.0, 50.0, 1.0, 0.5] + [0.0, 200.0, 0.0, 1.0]
    y = np.where(X[:, 0] ** 2 + ((X[:, 1] - 200) / 50) ** 2 > 1.2, "out", "in")
    return da.from_array(X, chunks=(300, -1)), da.from_array(y, chunks=300)


def test_train_test_split_then_fit_and_score_on_dask_arrays():
    X, y = _problem()
    X_tr, X_te, y_tr, y_te = train_test_split(X, y, test_size=0.25, random_state=0, shuffle=True)
    model = NystroemSVC(scale="standard", **PARAMS).fit(X_tr, y_tr)
    reference = NystroemSVC(scale="standard", **PARAMS).fit(X_tr.compute(), y_tr.compute())
    np.testing.assert_allclose(model.decision_function(X_te).compute(), reference.decision_function(X_te.compute()),
                               rtol=1e-6, atol=1e-8)
    assert model.score(X_te, y_te) == reference.score(X_te.compute(), y_te.compute()) > 0.9


def test_parallel_post_fit_predicts_block_wise():
    X, y = _problem()
    wrapped = ParallelPostFit(NystroemSVC(**PARAMS)).fit(X[:600].compute(), y[:600].compute())
    pred = wrapped.predict(X)
    assert isinstance(pred, da.Array)
    assert pred.compute().tolist() == wrapped.estimator.predict(X.compute()).tolist()


def test_dask_ml_scalers_in_a_pipeline_and_their_statistics():
    X, y = _problem()
    for dask_scaler, kind in ((StandardScaler(), "standard"), (MinMaxScaler(), "minmax")):
        fitted = dask_scaler.fit(X)
        ours = fit_scaling(as_row_blocks(X, 300), kind)
        for name in ("mean_", "var_", "scale_") if kind == "standard" else ("data_min_", "data_max_", "scale_"):
            np.testing.assert_allclose(ours.stats[name], np.asarray(getattr(fitted, name)), rtol=1e-10, err_msg=name)
    # dask-ml's scaler in front of dsvm: the same model as dsvm's own scale step
    piped = make_pipeline(StandardScaler(), NystroemSVC(**PARAMS)).fit(X, y)
    own = NystroemSVC(scale="standard", **PARAMS).fit(X, y)
    np.testing.assert_allclose(np.asarray(piped.decision_function(X)), own.decision_function(X).compute(),
                               rtol=1e-6, atol=1e-8)


def test_dask_ml_grid_search_over_a_scaled_pipeline():
    # scikit-learn's scaler, not dask-ml's: dask-ml's StandardScaler.transform subtracts and divides a NumPy
    # array in place, and its GridSearchCV hands one test fold to every candidate's pipeline (see the next test)
    X, y = _problem()
    search = GridSearchCV(make_pipeline(SkStandardScaler(), NystroemSVC(**PARAMS)),
                          {"nystroemsvc__C": [1.0, 100.0]}, cv=3).fit(X, y)
    assert search.best_score_ > 0.9 and len(search.cv_results_["mean_test_score"]) == 2
    # the refit is the pipeline fitted directly with the best C
    direct = make_pipeline(SkStandardScaler(), NystroemSVC(**{**PARAMS, "C": search.best_params_["nystroemsvc__C"]}))
    np.testing.assert_allclose(np.asarray(search.best_estimator_.decision_function(X)),
                               np.asarray(direct.fit(X, y).decision_function(X)), rtol=1e-6, atol=1e-8)


def test_dask_ml_standard_scaler_changes_a_numpy_input_in_place():
    # the hazard the user guide warns of (docs/user_guide/estimators.md): when dask-ml copies, drop the warning
    X = np.arange(6.0).reshape(3, 2)
    assert StandardScaler().fit(X).transform(X) is X and X[0, 0] < 0


def test_dask_ml_grid_search_with_dsvm_scaling_scores_each_fold_as_a_fit_of_its_own():
    # dsvm's own scale step reads its input and never writes it: every candidate scores on the folds as they
    # are, under dask-ml's threaded scheduler too (dask-ml's StandardScaler fails this: the test fold that
    # every candidate shares is scaled again by each)
    X, y = _problem()
    cv = KFold(3)
    search = GridSearchCV(NystroemSVC(scale="standard", **PARAMS), {"C": [1.0, 100.0]}, cv=cv,
                          scheduler="threads").fit(X, y)
    X_np, y_np = X.compute(), y.compute()
    for j, C in enumerate(search.cv_results_["param_C"]):
        for k, (train, test) in enumerate(cv.split(X_np)):
            model = NystroemSVC(scale="standard", **{**PARAMS, "C": C}).fit(X_np[train], y_np[train])
            assert search.cv_results_[f"split{k}_test_score"][j] == model.score(X_np[test], y_np[test]) > 0.9
