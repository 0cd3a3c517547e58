"""One group of the CV search: the candidates that differ only in ``C``, ``gamma`` and ``n_components``.

Their landmarks are drawn once (uniform ones nested over ``k``: the largest
``k``'s rows, whose first ``k`` are the smaller ones'), kernel columns are
stored once per ``gamma`` (nested landmarks), and every ``(gamma, k)`` gets one
feature matrix on which :func:`~dsvm.model_selection._cpath.cv_pair` solves
every fold and ``C``.
"""

from __future__ import annotations

import logging
import time
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from sklearn.base import clone

from ..approx import (
    KernelColumnsMap,
    ProjectedMap,
    clip_n_components,
    default_eig_rtol,
    fit_feature_map,
    gamma_for,
    kernel_matrix,
    make_kernel_spec,
    nystroem_normalization,
    prepare_landmarks,
    select_landmarks,
)
from ..problems import FeatureStore
from ..svm import check_params, class_weights
from ._cpath import PairResult, cv_pair, map_to_larger_k, merge_stats, record_functions
from ._results import hashable

logger = logging.getLogger(__name__)

__all__ = ["GroupResult", "search_group"]


@dataclass
class GroupResult:
    """What :func:`search_group` returns, per candidate row of the group.

    ``confusions`` ``(rows, folds, 2, classes, classes)``: held-out ``[0]`` and training ``[1]``;
    ``fit_seconds`` and ``score_seconds`` ``(rows, folds)``; ``functions[row]`` the fold models' mean
    function (:func:`~dsvm.model_selection._cpath.record_functions`); ``stats`` the group's counts.
    """

    confusions: np.ndarray
    fit_seconds: np.ndarray
    score_seconds: np.ndarray
    functions: dict[int, Any] = field(default_factory=dict)
    stats: Counter = field(default_factory=Counter)


@dataclass
class _Pairs:
    """The group's plan: ``gammas[key]`` the resolved gamma, ``c_rows[key][k]`` the ``(C, row)`` to solve."""

    gammas: dict
    c_rows: dict

    @property
    def ks(self) -> list[int]:
        return sorted({k for ks in self.c_rows.values() for k in ks})

    @property
    def n_pairs(self) -> int:
        return sum(len(ks) for ks in self.c_rows.values())


def _plan_pairs(est, ctx, cands: list[dict], n_features_in: int) -> _Pairs:
    """Resolve gamma ("scale"/"auto") and clip k as a fit does; group the candidates by ``(gamma, k)``."""
    gammas: dict = {}
    c_rows: dict = defaultdict(lambda: defaultdict(list))
    for row, cand in enumerate(cands):
        g = cand.get("gamma", est.gamma)
        key = hashable(g)
        if key not in gammas:
            check_params(clone(est).set_params(gamma=g))
            # the search scales X itself when scale= is set; otherwise mixed column scales warn, as in a fit
            gammas[key] = gamma_for(g, ctx.X_rb, n_features_in, warn_scales=est.scale is None, stacklevel=6)
        k = clip_n_components(int(cand.get("n_components", est.n_components)), ctx.X_rb.n_rows, stacklevel=6)
        c_rows[key][k].append((float(cand.get("C", est.C)), row))
    return _Pairs(gammas, c_rows)


def _search_store(est) -> str:
    """The feature store of the search's feature matrices: ``"implicit"`` is read as ``"auto"`` (the C path
    gathers fold rows of F and shares one kernel store between k, which need stored features)."""
    return "auto" if est.feature_store == "implicit" else est.feature_store


def _draw_landmarks(est, ctx, ks: list[int]) -> dict[int, np.ndarray]:
    """Landmark rows per ``k``; uniform ones are nested: one draw of the largest ``k`` under key ``max(ks)``."""
    if est.landmarks == "uniform":
        # through select_landmarks: rows too wide to hold dense are refused before they are drawn
        rows = select_landmarks(ctx.X_orig, ks[-1], "uniform", est.random_state).components
        if rows.shape[0] < ks[-1]:
            logger.info("search: %d distinct landmark rows for k_max=%d", rows.shape[0], ks[-1])
        return {ks[-1]: rows}
    return {k: select_landmarks(ctx.X_orig, k, est.landmarks, est.random_state, est.kmeans_iter).components
            for k in ks}


def _nested_pairs(est, ctx, rows: np.ndarray, spec, c_rows_by_k: dict, solve_pair) -> tuple[dict, Counter]:
    """Every k of one gamma on nested landmarks: kernel columns stored once, each larger k starting from the
    smaller one's solutions.  ``(pair results by k, stats)``."""
    dtype = np.dtype(est.dtype)
    rtol = default_eig_rtol(dtype) if est.eig_rtol is None else float(est.eig_rtol)
    stats, results, prev = Counter(kernel_stores=1), {}, None
    t0 = time.perf_counter()
    with FeatureStore(ctx.X_rb, KernelColumnsMap(prepare_landmarks(rows, spec, dtype)), _search_store(est),
                      check_finite=not ctx.checked) as kstore:
        K_LL = kernel_matrix(rows, rows, spec)
        t_kernel = time.perf_counter() - t0
        stats["kernel_seconds"] += t_kernel
        for k, c_rows in sorted(c_rows_by_k.items()):
            k_eff = min(k, rows.shape[0])
            t1 = time.perf_counter()
            normalization, lam = nystroem_normalization(K_LL[:k_eff, :k_eff], rtol)
            with FeatureStore(kstore.features, ProjectedMap(normalization, dtype), _search_store(est),
                              check_finite=False) as fstore:
                t_feat = time.perf_counter() - t1
                stats.update(feature_seconds=t_feat, feature_stores=1)
                start = None if prev is None else map_to_larger_k(prev, normalization, lam, c_rows)
                pair = solve_pair(fstore.features, c_rows, t_feat + t_kernel / len(c_rows_by_k), f"k={k_eff}", start)
            prev = (normalization, pair.W, pair.Cs)
            results[k] = (pair, record_functions(rows[:k_eff], normalization, pair.W, pair.Cs, c_rows))
    return results, stats


def _separate_pairs(est, ctx, landmarks: dict, spec, c_rows_by_k: dict, solve_pair) -> tuple[dict, Counter]:
    """Every k of one gamma on its own landmarks (k-means): one feature matrix each.  ``(results by k, stats)``."""
    stats, results = Counter(), {}
    for k, c_rows in sorted(c_rows_by_k.items()):
        t1 = time.perf_counter()
        fmap = fit_feature_map(landmarks[k], spec, dtype=np.dtype(est.dtype), eig_rtol=est.eig_rtol)
        with FeatureStore(ctx.X_rb, fmap, _search_store(est), check_finite=not ctx.checked) as fstore:
            t_feat = time.perf_counter() - t1
            stats.update(feature_seconds=t_feat, feature_stores=1)
            pair = solve_pair(fstore.features, c_rows, t_feat, f"k={k}", None)
        results[k] = (pair, record_functions(fmap.components, fmap.normalization, pair.W, pair.Cs, c_rows))
    return results, stats


def search_group(est, ctx, cands: list[dict], n_features_in: int, *, n_jobs=None,
                 return_train_score: bool = False) -> GroupResult:
    """Scores of every candidate of one group (candidates sharing their non-(C, gamma, k) parameters)."""
    pairs = _plan_pairs(est, ctx, cands, n_features_in)
    if est.feature_store == "implicit":
        logger.info("search: the C paths run on stored features (feature_store='auto'); the refit is implicit")
    class_w = class_weights(est.class_weight, ctx.classes, ctx.codes)
    m, S = ctx.classes.size, ctx.n_splits
    positives = [1] if m == 2 else list(range(m))
    t0 = time.perf_counter()
    landmarks = _draw_landmarks(est, ctx, pairs.ks)
    t_landmarks = time.perf_counter() - t0
    out = GroupResult(np.zeros((len(cands), S, 2, m, m)), np.zeros((len(cands), S)), np.zeros((len(cands), S)),
                      stats=Counter(landmark_seconds=t_landmarks))
    for gkey, c_rows_by_k in pairs.c_rows.items():
        spec = make_kernel_spec(est.kernel, pairs.gammas[gkey], est.degree, est.coef0)

        def solve_pair(F, c_rows, shared, k_label, start, spec=spec) -> PairResult:
            return cv_pair(est, ctx, F, c_rows, class_w, positives, shared + t_landmarks / pairs.n_pairs,
                           f"[gamma={spec.gamma:g} {k_label}] ", x_start=start, n_jobs=n_jobs,
                           return_train_score=return_train_score)

        if est.landmarks == "uniform":
            results, stats = _nested_pairs(est, ctx, landmarks[pairs.ks[-1]], spec, c_rows_by_k, solve_pair)
        else:
            results, stats = _separate_pairs(est, ctx, landmarks, spec, c_rows_by_k, solve_pair)
        out.stats = merge_stats(out.stats, stats)
        for k, (pair, functions) in results.items():
            rows = [row for _, row in c_rows_by_k[k]]
            out.confusions[rows], out.fit_seconds[rows], out.score_seconds[rows] = (
                pair.confusions, pair.fit_seconds, pair.score_seconds)
            out.functions.update(functions)
            out.stats = merge_stats(out.stats, pair.stats)
    return out
