"""The sensitivity experiment: CV and held-out accuracy of LA-SN over a grid of ``k`` and ``C``."""

from __future__ import annotations

import logging
import time

import numpy as np
from sklearn.model_selection import StratifiedKFold, train_test_split

from ..approx import fit_feature_map, make_kernel_spec, select_landmarks
from ..blocks import as_row_blocks
from ..solvers import solve
from ._datasets import signed_labels
from ._linear import LinearProblem

logger = logging.getLogger(__name__)

__all__ = ["nystroem_map", "sensitivity"]


def nystroem_map(X, k: int, gamma: float, seed: int):
    """The Nyström feature map NystroemSVC would build (uniform landmarks, RBF, float32)."""
    k = min(int(k), X.shape[0])
    lm = select_landmarks(as_row_blocks(X, X.shape[0]), k, "uniform", seed)
    return fit_feature_map(lm.components, make_kernel_spec("rbf", gamma), dtype=np.float32)


def _accuracy_over_C(fmap, X_fit, y_fit, X_eval, y_eval, Cs, single_core=True) -> list[float]:
    """Accuracy on (X_eval, y_eval) of LA-SN fitted on (X_fit, y_fit) with one feature map, for each C."""
    F = fmap.transform_block(X_fit)
    F_eval = fmap.transform_block(X_eval).astype(np.float64)
    out = []
    for C in Cs:
        problem = LinearProblem(F, y_fit, C, single_core)
        res = solve("newton", problem.operator(), problem.dim, tol=1e-4, max_iter=100, hessian=problem.hessian())
        pred = np.where(F_eval @ res.x[:-1] + res.x[-1] > 0, 1.0, -1.0)
        out.append(float(np.mean(pred == y_eval)))
    return out


def sensitivity(
    X, y, *, gamma: float, ks, Cs, folds: int = 3, test_fraction: float = 0.2, random_state: int = 0, name: str = "",
    single_core: bool = True,
) -> dict:
    """CV accuracy (``folds``-fold, on the 80 %) and held-out accuracy (the 20 %) over ``ks`` × ``Cs``.

    Features depend on ``k`` and the landmarks but not on ``C``: one feature
    map per (k, fold), one Newton solve per C.
    """
    y = np.asarray(y)
    classes = np.unique(y)
    X80, X20, y80, y20 = train_test_split(X, y, test_size=test_fraction, random_state=random_state, stratify=y)
    y80, y20 = signed_labels(y80, classes), signed_labels(y20, classes)
    cv = StratifiedKFold(n_splits=folds, shuffle=True, random_state=random_state)
    cv_mean, cv_std, test_acc, seconds = [], [], [], []
    for k in ks:
        t0 = time.perf_counter()
        per_fold = []
        for f, (tr, va) in enumerate(cv.split(np.zeros(len(y80)), y80)):
            fmap = nystroem_map(X80[tr], k, gamma, random_state + f)
            per_fold.append(_accuracy_over_C(fmap, X80[tr], y80[tr], X80[va], y80[va], Cs, single_core))
        per_fold = np.asarray(per_fold)
        cv_mean.append(per_fold.mean(axis=0).tolist())
        cv_std.append(per_fold.std(axis=0).tolist())
        fmap = nystroem_map(X80, k, gamma, random_state)
        test_acc.append(_accuracy_over_C(fmap, X80, y80, X20, y20, Cs, single_core))
        seconds.append(time.perf_counter() - t0)
        logger.info("%s sensitivity k=%d: CV %s, held-out %s (%.1fs)", name, k,
                    np.round(cv_mean[-1], 4).tolist(), np.round(test_acc[-1], 4).tolist(), seconds[-1])
    cvm = np.asarray(cv_mean)
    i, j = np.unravel_index(np.argmax(cvm), cvm.shape)
    return {"dataset": name, "k": [int(k) for k in ks], "C": [float(c) for c in Cs], "folds": folds,
            "test_fraction": test_fraction, "random_state": random_state, "n_80": int(len(y80)), "n_20": int(len(y20)),
            "cv_accuracy": cv_mean, "cv_std": cv_std, "test_accuracy": test_acc, "seconds_per_k": seconds,
            "best_by_cv": {"k": int(ks[i]), "C": float(Cs[j]), "cv_accuracy": float(cvm[i, j]),
                           "test_accuracy": float(test_acc[i][j])}}
