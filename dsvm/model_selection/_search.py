"""Cross-validated selection of ``C``, ``gamma`` and ``n_components`` that reuses work.

:class:`NystroemSVCCV` returns what ``GridSearchCV(NystroemSVC(), param_grid)``
returns (``cv_results_``, ``best_params_``, ``best_score_``,
``best_estimator_``) with one deliberate difference: a fold model is fitted in
the feature space of the landmarks of *all* rows (which have seen the held-out
rows' inputs, never their labels).  That is what lets the work be shared:
landmarks drawn once (uniform ones nested over ``k``), kernel columns stored
once per ``gamma``, one feature matrix per ``(gamma, k)`` for every ``C`` and
fold, the ``C`` path warm-started, one scoring pass per ``(gamma, k)`` and a
warm-started refit.  Landmarks that depend on ``gamma`` or on the labels
(``"pivoted"``, ``"active"``) cannot be shared and are refused.  Every pass
runs block-wise on the active Dask scheduler, as a fit's does.  The design,
step by step, is in the documentation's architecture page ("How the
cross-validated search reuses work").
"""

from __future__ import annotations

import logging
import time
import warnings
from collections import Counter, defaultdict
from collections.abc import Iterable
from typing import Any

import numpy as np
from sklearn.base import BaseEstimator, ClassifierMixin, clone
from sklearn.exceptions import ConvergenceWarning
from sklearn.model_selection import ParameterGrid, check_cv
from sklearn.utils.metaestimators import available_if
from sklearn.utils.validation import check_is_fitted

from ..svm import (
    SCORINGS,
    NystroemSVC,
    check_params,
    evaluate,
    fit_classifier,
    k_schedule,
    param_names,
    prepare_classification,
    score_from_confusion,
    unpack_dataset,
)
from ._cpath import merge_stats, refit_start
from ._folds import SearchContext
from ._group import search_group
from ._results import format_results, hashable

logger = logging.getLogger(__name__)

__all__ = ["NystroemSVCCV", "check_auto_k", "check_search_params", "check_search_landmarks", "SEARCH_LANDMARKS", "CHEAP_AXES",
           "DEFAULT_GRID"]

CHEAP_AXES = ("C", "gamma", "n_components")  # shared landmarks, kernel columns and warm starts along these
DEFAULT_GRID = {"C": [0.1, 1.0, 10.0, 100.0]}


def check_search_params(scoring, n_jobs) -> None:
    """Reject a ``scoring`` NystroemSVCCV cannot compute from confusion matrices, and ``n_jobs = 0``."""
    if scoring is not None and (not isinstance(scoring, str) or scoring not in SCORINGS):
        raise ValueError(
            f"scoring={scoring!r} is not supported by NystroemSVCCV; choose one of {SCORINGS} "
            "(for any other scorer use sklearn's GridSearchCV(NystroemSVC(), ...))"
        )
    if n_jobs is not None and (not isinstance(n_jobs, (int, np.integer)) or n_jobs == 0):
        raise ValueError(f"n_jobs must be None or a non-zero integer, got {n_jobs!r}")


# Landmarks the search can share between gamma values and folds: drawn once, before the kernel is known
SEARCH_LANDMARKS = ("uniform", "kmeans")
_UNSHARED_LANDMARKS = {
    "pivoted": "pivoted landmarks depend on the kernel's gamma",
    "active": "active landmarks come from a first model that would see the held-out rows' labels",
}


def check_search_landmarks(methods: Iterable) -> None:
    """Reject the landmark methods NystroemSVCCV cannot share between gamma values and folds
    (other values are left to the estimator's own check)."""
    for method in methods:
        if isinstance(method, str) and method in _UNSHARED_LANDMARKS:
            raise ValueError(
                f"landmarks={method!r} is not supported by NystroemSVCCV ({_UNSHARED_LANDMARKS[method]}); "
                f"choose one of {SEARCH_LANDMARKS}, or search with those and refit "
                f"NystroemSVC(landmarks={method!r}, **best_params_)"
            )


def check_auto_k(values: list) -> bool:
    """Whether the search chooses k itself (``n_components="auto"`` at every point); mixing it with given k
    values is refused."""
    auto = [isinstance(v, str) and v == "auto" for v in values]
    if any(auto) and not all(auto):
        raise ValueError("n_components='auto' cannot be mixed with given k values in one search: search k "
                         "over a grid of values, or let every point choose it")
    return any(auto)


def _joined_scores(parts: list[tuple]) -> tuple:
    """The results of several :meth:`NystroemSVCCV._score_candidates` calls as one, candidates in order."""
    arrays = [np.concatenate([part[j] for part in parts]) for j in range(4)]
    functions, stats, offset = {}, Counter(), 0
    for part in parts:
        functions.update({offset + i: f for i, f in part[4].items()})
        stats = merge_stats(stats, part[5])
        offset += len(part[0])
    return (*arrays, functions, stats)


def _estimator_has(attr: str):
    """``available_if`` check: the (best or to-be-fitted) NystroemSVC has ``attr``."""

    def check(self):
        if hasattr(self, "best_estimator_"):
            getattr(self.best_estimator_, attr)
        else:
            getattr(self._base_estimator(), attr)
        return True

    return check


class NystroemSVCCV(ClassifierMixin, BaseEstimator):
    """:class:`~dsvm.NystroemSVC` with ``C``, ``gamma`` and ``n_components`` chosen by cross-validation.

    Equivalent to ``GridSearchCV(NystroemSVC(**params), param_grid, cv=cv,
    scoring=scoring)`` but shares the landmarks, the kernel columns and the
    feature matrix between grid points and folds and warm-starts the ``C``
    path.  The one difference in what is computed: a
    fold model uses the landmarks (and Nyström map) of *all* rows, where
    ``GridSearchCV`` would draw them from the fold's training rows; so does
    the ``scale`` step, whose statistics come from all rows (it is not a
    searchable parameter).

    Parameters
    ----------
    param_grid : dict or list of dicts, default=None
        Lists of values to try for any of NystroemSVC's parameters, as for
        ``GridSearchCV``; the cheap axes are ``C``, ``gamma`` and
        ``n_components``.  ``None`` searches ``C`` in ``[0.1, 1, 10, 100]``.
    cv : int, cross-validation generator or iterable, default=5
        As in scikit-learn (an int means ``StratifiedKFold(cv)``).
    scoring : str, default="accuracy"
        One of ``accuracy``, ``balanced_accuracy``, ``f1``, ``precision``,
        ``recall`` (binary; positive class ``classes_[1]``), ``f1_macro``,
        ``precision_macro``, ``recall_macro`` — scores computed from held-out
        confusion matrices, block-wise.  For other scorers use
        ``GridSearchCV(NystroemSVC(), ...)``.
    refit : bool, default=True
        Refit ``best_estimator_`` on all rows with the best parameters.
    return_train_score : bool, default=False
        Also score every fold model on its training rows (same pass).
    n_jobs : int or None, default=None
        Folds solved concurrently (client threads) after the first fold of
        every (gamma, k); ``None`` or 1 solves them one after another.
    kernel, gamma, degree, coef0, C, n_components, landmarks, solver, hessian, tol, max_iter, \
fit_intercept, class_weight, probability, dtype, eig_rtol, kmeans_iter, feature_store, block_rows, \
solver_options, random_state, scale, time_budget, k_tol
        Parameters of every :class:`~dsvm.NystroemSVC` fitted; those named in
        ``param_grid`` are searched (all but ``scale``).  ``probability``, ``time_budget`` and
        ``feature_store="implicit"`` only affect the refit ``best_estimator_`` (the C paths gather fold rows
        of stored features: they run as ``"auto"``).  ``n_components="auto"`` searches k per point of the
        grid: each point is scored at ``k = 250, 500, 1000, …`` until a doubling gains less than ``k_tol``
        in mean test score (``cv_results_`` has a row per point and k; it cannot be mixed with given k
        values).  ``landmarks`` is ``"uniform"`` or ``"kmeans"``
        (the landmarks of other methods depend on ``gamma`` or on the labels,
        so a search could not share them).

    Attributes
    ----------
    cv_results_ : dict of arrays
        As ``GridSearchCV.cv_results_``: ``params``, ``param_<name>``,
        ``split<i>_test_score``, ``mean_test_score``, ``std_test_score``,
        ``rank_test_score``, ``mean_fit_time``, ``std_fit_time``,
        ``mean_score_time``, ``std_score_time`` (and train scores if asked).
        ``fit_time`` of a (candidate, fold) is its solve time plus an equal
        share of the landmark / kernel / feature stages it reuses.
    best_index_, best_params_, best_score_
    best_estimator_ : NystroemSVC
        Refitted on all rows (``refit=True``).
    refit_time_ : float
    n_iter_ : int
        Newton iterations of ``best_estimator_`` (without refit: the most of any fold solve).
    n_splits_ : int
    scoring_ : str
        The scoring used (``scoring``, or ``"accuracy"`` for None).
    classes_, n_features_in_
    search_stats_ : dict
        Seconds spent per stage, number of solves, Newton iterations, passes.

    Examples
    --------
    >>> from sklearn.datasets import make_moons
    >>> from dsvm import NystroemSVCCV
    >>> X, y = make_moons(n_samples=300, noise=0.2, random_state=0)
    >>> search = NystroemSVCCV({"C": [0.01, 10], "n_components": [20, 50]}, cv=3,
    ...                        random_state=0).fit(X, y)
    >>> search.best_params_["C"]
    10
    >>> len(search.cv_results_["params"]), search.n_splits_
    (4, 3)
    >>> search.best_estimator_.score(X, y) > 0.9
    True
    """

    # Over 60 lines on purpose: scikit-learn's rule, one keyword and one plain assignment per parameter.
    def __init__(
        self,
        param_grid=None,
        *,
        cv=5,
        scoring="accuracy",
        refit=True,
        return_train_score=False,
        n_jobs=None,
        kernel="rbf",
        gamma="scale",
        degree=3,
        coef0=0.0,
        C=1.0,
        n_components=500,
        landmarks="uniform",
        solver="newton",
        hessian="auto",
        tol=1e-4,
        max_iter=100,
        fit_intercept=True,
        class_weight=None,
        probability=False,
        dtype="float32",
        eig_rtol=None,
        kmeans_iter=1,
        feature_store="auto",
        block_rows=None,
        solver_options=None,
        checkpoint=None,
        random_state=None,
        scale=None,
        time_budget=None,
        k_tol=0.002,
    ):
        self.param_grid = param_grid
        self.cv = cv
        self.scoring = scoring
        self.refit = refit
        self.return_train_score = return_train_score
        self.n_jobs = n_jobs
        self.kernel = kernel
        self.gamma = gamma
        self.degree = degree
        self.coef0 = coef0
        self.C = C
        self.n_components = n_components
        self.landmarks = landmarks
        self.solver = solver
        self.hessian = hessian
        self.tol = tol
        self.max_iter = max_iter
        self.fit_intercept = fit_intercept
        self.class_weight = class_weight
        self.probability = probability
        self.dtype = dtype
        self.eig_rtol = eig_rtol
        self.kmeans_iter = kmeans_iter
        self.feature_store = feature_store
        self.block_rows = block_rows
        self.solver_options = solver_options
        self.checkpoint = checkpoint
        self.random_state = random_state
        self.scale = scale
        self.time_budget = time_budget
        self.k_tol = k_tol

    # ------------------------------------------------------------------ helpers
    def _base_estimator(self) -> NystroemSVC:
        names = param_names(NystroemSVC)
        return NystroemSVC(**{name: getattr(self, name) for name in names})

    def _candidates(self) -> list[dict]:
        grid = DEFAULT_GRID if self.param_grid is None else self.param_grid
        if isinstance(grid, dict):
            grid = [grid]
        allowed = set(param_names(NystroemSVC))
        for g in grid:
            if not isinstance(g, dict):
                raise ValueError(f"param_grid must be a dict or a list of dicts, got {self.param_grid!r}")
            unknown = set(g) - allowed
            if "scale" in g:
                raise ValueError("param_grid cannot search 'scale': the search scales all rows once; set "
                                 "NystroemSVCCV(scale=...), or use GridSearchCV(NystroemSVC(), ...) to compare scalings")
            if unknown:
                raise ValueError(
                    f"param_grid names {sorted(unknown)} which are not NystroemSVC parameters "
                    f"(use 'n_components' for k); valid: {sorted(allowed)}"
                )
        candidates = list(ParameterGrid(grid))
        if not candidates:
            raise ValueError("param_grid holds no parameter combination")
        return candidates

    def _search_context(self, base: NystroemSVC, X, y, sample_weight, groups) -> SearchContext:
        """The checked input and its folds (decided on the client from the labels, as scikit-learn does)."""
        data = prepare_classification(base, X, y, sample_weight)
        X_rb, codes, classes, sw, checked = data.X, data.codes, data.classes, data.sample_weight, data.checked
        self.classes_ = classes
        self.n_features_in_ = base.n_features_in_
        if X_rb.is_distributed:
            codes = codes.persist()
            sw = sw.persist() if sw is not None else None
        y_codes = np.asarray(codes.compute())
        cv = check_cv(self.cv, y_codes, classifier=True)
        splits = list(cv.split(np.zeros((X_rb.n_rows, 1)), y_codes, groups))
        if not splits:
            raise ValueError("the cross-validation splitter produced no split")
        self.n_splits_ = len(splits)
        return SearchContext.build(X_rb, checked, codes, y_codes, classes, sw, splits, base)

    def _score_candidates(self, base: NystroemSVC, ctx: SearchContext, candidates: list[dict]):
        """Every candidate's fold scores and times, fold-mean functions and the search's counts, group by group
        (candidates that differ only in ``C``, ``gamma`` and ``n_components`` share one group)."""
        shape = (len(candidates), ctx.n_splits)
        test_scores, train_scores = np.full(shape, np.nan), np.full(shape, np.nan)
        fit_times, score_times = np.zeros(shape), np.zeros(shape)
        groups_of = defaultdict(list)
        for i, cand in enumerate(candidates):
            other = tuple(sorted((k, hashable(v)) for k, v in cand.items() if k not in CHEAP_AXES))
            groups_of[other].append(i)
        stats: Counter = Counter()
        fold_functions: dict[int, Any] = {}
        for other, idxs in groups_of.items():
            est = clone(base).set_params(**{k: candidates[idxs[0]][k] for k, _ in other})
            check_params(est)
            group = search_group(est, ctx, [candidates[i] for i in idxs], self.n_features_in_, n_jobs=self.n_jobs,
                                 return_train_score=self.return_train_score)
            stats = merge_stats(stats, group.stats)
            for row, i in enumerate(idxs):
                fold_functions[i] = group.functions.get(row)
                cms = group.confusions[row]
                test_scores[i] = [score_from_confusion(cm, self.scoring_) for cm in cms[:, 0]]
                if self.return_train_score:
                    train_scores[i] = [score_from_confusion(cm, self.scoring_) for cm in cms[:, 1]]
                fit_times[i], score_times[i] = group.fit_seconds[row], group.score_seconds[row]
        return test_scores, train_scores, fit_times, score_times, fold_functions, stats

    def _auto_k_rounds(self, base: NystroemSVC, ctx: SearchContext, points: list[dict]):
        """``n_components="auto"``: every point scored at ``k = 250, 500, …`` (:func:`~dsvm.svm.k_schedule`; the
        landmarks come from all rows, as the grid's do), a point dropping out once a doubling gains less than ``k_tol`` in mean test score.
        Returns the candidates scored (each with its k) and their scores as :meth:`_score_candidates` does."""
        growing, last = list(range(len(points))), {}
        candidates, parts = [], []
        for k in k_schedule(ctx.X_rb.n_rows):
            if not growing:
                break
            batch = [{**points[i], "n_components": k} for i in growing]
            part = self._score_candidates(base, ctx, batch)
            means = np.nanmean(part[0], axis=1)
            logger.info("search, auto k: k=%d scored %d points (best mean %.5f)", k, len(batch), np.nanmax(means))
            scored_now = dict(zip(growing, means))
            growing = [i for i, m in scored_now.items() if i not in last or m - last[i] >= self.k_tol]
            last.update(scored_now)
            candidates += batch
            parts.append(part)
        return candidates, _joined_scores(parts)

    # ------------------------------------------------------------------ fit
    def fit(self, X, y=None, sample_weight=None, groups=None):
        """Run the search; refit the best model on all rows.

        Parameters
        ----------
        X : array-like, sparse matrix, dask array or Dataset
        y : array-like or dask array, optional when X is a Dataset
        sample_weight : array-like, optional
            Per-row weights of the training objective (not of the scores).
        groups : array-like, optional
            Group labels for a group splitter (``cv=GroupKFold(...)``).
        """
        t_start = time.perf_counter()
        check_search_params(self.scoring, self.n_jobs)
        self.scoring_ = self.scoring or "accuracy"
        candidates = self._candidates()
        check_search_landmarks([cand.get("landmarks", self.landmarks) for cand in candidates])
        base = self._base_estimator()
        auto = check_auto_k([cand.get("n_components", self.n_components) for cand in candidates])
        for cand in candidates:  # every point as its fit would check it, before any work (C is never refitted)
            check_params(clone(base).set_params(**cand))
        X_in, y_in = X, y
        ctx = self._search_context(base, X, y, sample_weight, groups)
        S = ctx.n_splits
        if auto:
            candidates, scored = self._auto_k_rounds(base, ctx, candidates)
        else:
            scored = self._score_candidates(base, ctx, candidates)
        test_scores, train_scores, fit_times, score_times, fold_functions, stats = scored
        if stats["not_converged"]:
            warnings.warn(
                f"{int(stats['not_converged'])} of {int(stats['n_solves'])} fold solves did not converge; "
                "increase max_iter", ConvergenceWarning, stacklevel=2,
            )
        self.cv_results_ = format_results(candidates, test_scores, train_scores if self.return_train_score else None,
                                           fit_times, score_times)
        self.best_index_ = int(np.argmin(self.cv_results_["rank_test_score"]))
        self.best_params_ = candidates[self.best_index_]
        self.best_score_ = float(self.cv_results_["mean_test_score"][self.best_index_])
        self.search_stats_ = dict(stats, search_seconds=time.perf_counter() - t_start)
        logger.info("search: best %s %s=%.5f (%d candidates x %d folds in %.2fs)", self.best_params_,
                    self.scoring_, self.best_score_, len(candidates), S, self.search_stats_["search_seconds"])
        self.n_iter_ = int(stats["max_newton_iter"])
        if self.refit:
            t0 = time.perf_counter()
            best = clone(base).set_params(**self.best_params_)
            start = refit_start(fold_functions.get(self.best_index_))
            self.best_estimator_ = fit_classifier(best, X_in, y_in, sample_weight, start=start)
            self.refit_time_ = time.perf_counter() - t0
            self.n_iter_ = int(self.best_estimator_.n_iter_)
        self.search_stats_["fit_seconds"] = time.perf_counter() - t_start
        return self

    # ------------------------------------------------------------------ delegation
    def _check_refit(self):
        check_is_fitted(self)
        if not self.refit or not hasattr(self, "best_estimator_"):
            raise AttributeError("this NystroemSVCCV was fitted with refit=False; there is no best_estimator_")

    def decision_function(self, X):
        """``best_estimator_.decision_function(X)``."""
        self._check_refit()
        return self.best_estimator_.decision_function(X)

    def predict(self, X):
        """``best_estimator_.predict(X)``."""
        self._check_refit()
        return self.best_estimator_.predict(X)

    @available_if(_estimator_has("predict_proba"))
    def predict_proba(self, X):
        """``best_estimator_.predict_proba(X)`` (needs ``probability=True``)."""
        self._check_refit()
        return self.best_estimator_.predict_proba(X)

    @available_if(_estimator_has("predict_log_proba"))
    def predict_log_proba(self, X):
        """``best_estimator_.predict_log_proba(X)`` (needs ``probability=True``)."""
        self._check_refit()
        return self.best_estimator_.predict_log_proba(X)

    def score(self, X, y=None, sample_weight=None):
        """The search's ``scoring`` of ``best_estimator_`` on ``(X, y)`` (block-wise for dask input)."""
        self._check_refit()
        if sample_weight is not None or self.scoring_ == "accuracy":
            return self.best_estimator_.score(X, y, sample_weight=sample_weight)
        X, y = unpack_dataset(X, y)
        result = evaluate(self.best_estimator_, X, y)
        return score_from_confusion(np.asarray(result["confusion"]), self.scoring_)

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.sparse = True
        return tags
