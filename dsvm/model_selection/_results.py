"""``cv_results_`` in scikit-learn's layout, and parameter values as keys."""

from __future__ import annotations

from typing import Any

import numpy as np
from scipy.stats import rankdata

__all__ = ["format_results", "hashable"]


def hashable(v):
    """A parameter value as a hashable key (dicts and lists as sorted tuples)."""
    if isinstance(v, dict):
        return ("__dict__", tuple(sorted((k, hashable(x)) for k, x in v.items())))
    if isinstance(v, list):
        return tuple(hashable(x) for x in v)
    return v


def format_results(candidates, test, train, fit_times, score_times) -> dict:
    """``cv_results_`` in scikit-learn's layout."""
    n_cand, S = test.shape
    res: dict[str, Any] = {}

    def add(name, values, rank=False):
        for s in range(S):
            res[f"split{s}_{name}"] = values[:, s]
        means = values.mean(axis=1)
        res[f"mean_{name}"] = means
        res[f"std_{name}"] = values.std(axis=1)
        if rank:
            if np.isnan(means).all():
                res[f"rank_{name}"] = np.ones(n_cand, dtype=np.int32)
            else:
                filled = np.where(np.isnan(means), np.nanmin(means) - 1, means)
                res[f"rank_{name}"] = rankdata(-filled, method="min").astype(np.int32)

    for name, values in (("fit_time", fit_times), ("score_time", score_times)):
        res[f"mean_{name}"] = values.mean(axis=1)
        res[f"std_{name}"] = values.std(axis=1)
    keys = sorted({k for c in candidates for k in c})
    for key in keys:
        col = np.ma.MaskedArray(np.empty(n_cand, dtype=object), mask=True)
        for i, c in enumerate(candidates):
            if key in c:
                col[i] = c[key]
        res[f"param_{key}"] = col
    res["params"] = candidates
    add("test_score", test, rank=True)
    if train is not None:
        add("train_score", train)
    return res
