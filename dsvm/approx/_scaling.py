"""Per-feature scaling of the input rows, fitted in one pass over the row blocks: :class:`Scaling`.

An RBF kernel compares features on one scale; this is the step LIBSVM's
``svm-scale`` and scikit-learn's scalers provide, fitted out of core.  The
kinds are scikit-learn's:

``"standard"``  ``(x - mean) / std`` (``StandardScaler``).  Sparse input is
                not centred (``StandardScaler(with_mean=False)``: ``x / std``),
                which keeps it sparse; for the ``rbf`` kernel centring
                changes nothing (distances do not move).
``"minmax"``    ``(x - min) / (max - min)``, into [0, 1] (``MinMaxScaler``).
                Sparse input only when every column's minimum is 0 (else its
                zeros would move); otherwise use ``"maxabs"``.
``"maxabs"``    ``x / max|x|``, into [-1, 1] (``MaxAbsScaler``), sparse or not.

A constant column is divided by 1 (scikit-learn's rule, including its
round-off bound on the variance).  The statistics come from one
:meth:`~dsvm.blocks.RowBlocks.map_reduce` pass: each block gives its row
count, per-column mean and centred sum of squares (Chan, Golub and LeVeque's
pairwise update merges them, in float64), minimum and maximum, so the result
does not depend on how the rows are blocked beyond round-off.  The fitted
transform is ``(x - offset) * factor``, applied block by block.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import scipy.sparse as sp

from ..blocks import RowBlocks, row_index_blocks
from ..exceptions import NonFiniteError
from ..options import SCALINGS

__all__ = ["Scaling", "fit_scaling", "check_scale", "SCALINGS", "column_stats", "merge_column_stats",
           "constant_columns"]

EPS = np.finfo(np.float64).eps


def check_scale(scale) -> None:
    """``scale`` is None or one of :data:`SCALINGS` (``ValueError`` naming the choices)."""
    if scale is not None and scale not in SCALINGS:
        raise ValueError(f"scale={scale!r} is not supported; choose None or one of {SCALINGS}")


@dataclass(frozen=True, eq=False)
class Scaling:
    """A fitted per-feature scaling: ``(x - offset) * factor``.

    ``center`` (standard only): whether the mean is subtracted (not for
    sparse input).  ``stats`` holds the statistics under scikit-learn's attribute names
    (``mean_``, ``var_``, ``scale_``; ``data_min_``, ``data_max_``,
    ``data_range_``, ``scale_``, ``min_``; ``max_abs_``, ``scale_``), as
    float64 arrays of one value per feature.
    """

    kind: str
    n_samples: int
    center: bool
    stats: dict[str, np.ndarray] = field(repr=False)
    offset: np.ndarray = field(repr=False)
    factor: np.ndarray = field(repr=False)

    @classmethod
    def from_stats(cls, kind: str, n_samples: int, center: bool, **stats: np.ndarray) -> Scaling:
        """The scaling given its primary statistics: ``mean_`` and ``var_`` (standard), ``data_min_`` and
        ``data_max_`` (minmax), ``max_abs_`` (maxabs); the derived ones are computed here (the one rule)."""
        check_scale(kind)
        if kind is None:
            raise ValueError("a Scaling needs a kind")
        stats = {k: np.asarray(v, dtype=np.float64) for k, v in stats.items()}
        if kind == "standard":
            mean, var = stats["mean_"], stats["var_"]
            constant = constant_columns(n_samples, mean, var)
            scale = np.where(constant, 1.0, np.sqrt(var))
            stats["scale_"] = scale
            offset = mean if center else np.zeros_like(mean)
            factor = 1.0 / scale
        elif kind == "minmax":
            lo, hi = stats["data_min_"], stats["data_max_"]
            span = hi - lo
            stats["data_range_"] = span
            factor = 1.0 / np.where(span < 10 * EPS, 1.0, span)
            stats["scale_"] = factor
            stats["min_"] = -lo * factor
            offset = lo
        else:
            max_abs = stats["max_abs_"]
            scale = np.where(max_abs < 10 * EPS, 1.0, max_abs)
            stats["scale_"] = scale
            offset = np.zeros_like(max_abs)
            factor = 1.0 / scale
        return cls(kind=kind, n_samples=int(n_samples), center=bool(center), stats=stats, offset=offset,
                   factor=factor)

    @property
    def n_features(self) -> int:
        return int(self.factor.shape[0])

    @property
    def shifts_zeros(self) -> bool:
        """True if a zero does not stay zero (sparse input is then scaled dense)."""
        return bool(np.any(self.offset != 0))

    def primary_stats(self) -> dict[str, np.ndarray]:
        """The statistics :meth:`from_stats` takes (what a model file stores)."""
        names = {"standard": ("mean_", "var_"), "minmax": ("data_min_", "data_max_"), "maxabs": ("max_abs_",)}
        return {name: self.stats[name] for name in names[self.kind]}

    def transform_block(self, X_block):
        """One block scaled, in its own dtype (computed in float64); sparse stays sparse unless zeros move."""
        if sp.issparse(X_block):
            X_block = sp.csr_matrix(X_block)
            if not self.shifts_zeros:
                data = (X_block.data.astype(np.float64) * self.factor[X_block.indices]).astype(X_block.dtype)
                return sp.csr_matrix((data, X_block.indices, X_block.indptr), shape=X_block.shape)
            X_block = X_block.toarray()
        X = np.asarray(X_block)
        dtype = X.dtype if X.dtype.kind == "f" else np.dtype(np.float64)
        return ((X.astype(np.float64) - self.offset) * self.factor).astype(dtype, copy=False)


def constant_columns(n_samples: int, mean: np.ndarray, var: np.ndarray) -> np.ndarray:
    """Which columns count as constant: a variance within scikit-learn's round-off bound
    ``n·eps·var + (n·mean·eps)²`` (the rule of ``StandardScaler``)."""
    with np.errstate(over="ignore", invalid="ignore"):  # a non-finite statistic is refused by its caller
        return var <= n_samples * EPS * var + (n_samples * mean * EPS) ** 2


# statistics of one block and their merge ------------------------------------------------
@np.errstate(over="ignore", invalid="ignore")  # statistics that overflow are refused by the callers
def column_stats(X_block, rows=None, check_finite: bool = False) -> dict[str, Any]:
    """Count, mean, centred sum of squares, minimum and maximum per column of one block, the first row
    with NaN or infinity (``inf`` if none; looked for only with ``check_finite``, which needs the block's
    row numbers ``rows``) and whether it was sparse.  Blocks merge with :func:`merge_column_stats`."""
    n, p = X_block.shape
    first_bad = np.inf
    if sp.issparse(X_block):
        X = sp.csr_matrix(X_block)
        data = X.data.astype(np.float64)
        if check_finite and not np.isfinite(data).all():
            pos = int(np.flatnonzero(~np.isfinite(data))[0])
            first_bad = float(np.asarray(rows)[np.searchsorted(X.indptr, pos, side="right") - 1])
            data = np.where(np.isfinite(data), data, 0.0)
        counts = np.bincount(X.indices, minlength=p)
        mean = np.bincount(X.indices, weights=data, minlength=p) / max(n, 1)
        m2 = np.bincount(X.indices, weights=(data - mean[X.indices]) ** 2, minlength=p) + (n - counts) * mean**2
        lo, hi = np.full(p, np.inf), np.full(p, -np.inf)
        np.minimum.at(lo, X.indices, data)
        np.maximum.at(hi, X.indices, data)
        implicit = counts < n  # columns with an unstored zero
        lo[implicit] = np.minimum(lo[implicit], 0.0)
        hi[implicit] = np.maximum(hi[implicit], 0.0)
        sparse = True
    else:
        X = np.asarray(X_block, dtype=np.float64)
        if check_finite and not np.isfinite(X).all():
            first_bad = float(np.asarray(rows)[np.flatnonzero(~np.isfinite(X).all(axis=1))[0]])
            X = np.where(np.isfinite(X), X, 0.0)
        mean = X.mean(axis=0) if n else np.zeros(p)
        m2 = ((X - mean) ** 2).sum(axis=0)
        lo = X.min(axis=0) if n else np.full(p, np.inf)
        hi = X.max(axis=0) if n else np.full(p, -np.inf)
        sparse = False
    return {"n": n, "mean": mean, "m2": m2, "min": lo, "max": hi, "first_bad": first_bad, "sparse": sparse}


@np.errstate(over="ignore", invalid="ignore")
def _merge_two(a: dict[str, Any], b: dict[str, Any]) -> dict[str, Any]:
    n = a["n"] + b["n"]
    if a["n"] == 0 or b["n"] == 0:
        moments = (a["mean"], a["m2"]) if b["n"] == 0 else (b["mean"], b["m2"])
    else:
        delta = b["mean"] - a["mean"]
        moments = (a["mean"] + delta * (b["n"] / n), a["m2"] + b["m2"] + delta**2 * (a["n"] * b["n"] / n))
    return {"n": n, "mean": moments[0], "m2": moments[1], "min": np.minimum(a["min"], b["min"]),
            "max": np.maximum(a["max"], b["max"]), "first_bad": min(a["first_bad"], b["first_bad"]),
            "sparse": a["sparse"] or b["sparse"]}


def merge_column_stats(parts) -> dict[str, Any]:
    """The statistics of :func:`column_stats` of several blocks as of one (pairwise, in float64)."""
    parts = list(parts)
    out = parts[0]
    for part in parts[1:]:
        out = _merge_two(out, part)
    return out


def fit_scaling(X: RowBlocks, kind: str, check_finite: bool = True) -> Scaling:
    """Fit a :class:`Scaling` of ``kind`` in one pass over ``X``.

    Raises
    ------
    ValueError
        A NaN or infinity in X (naming its row, when ``check_finite``), or
        ``"minmax"`` on sparse input whose zeros it would move.
    """
    check_scale(kind)
    s = X.map_reduce(column_stats, aligned=(row_index_blocks(X),), shared=(check_finite,),
                     combine=merge_column_stats)
    if np.isfinite(s["first_bad"]):
        raise ValueError(f"X contains NaN or infinity at row {int(s['first_bad'])}")
    n = int(s["n"])
    overflow = np.flatnonzero(~(np.isfinite(s["mean"]) & np.isfinite(s["m2"])))
    if kind == "standard" and overflow.size:
        raise NonFiniteError(f"scale='standard': the variance of column {int(overflow[0])} overflows float64 (its "
                             "values are too large to square); use scale='maxabs' or 'minmax'")
    if kind == "standard":
        return Scaling.from_stats(kind, n, center=not s["sparse"], mean_=s["mean"], var_=s["m2"] / max(n, 1))
    if kind == "minmax":
        scaling = Scaling.from_stats(kind, n, center=False, data_min_=s["min"], data_max_=s["max"])
        if s["sparse"] and scaling.shifts_zeros:
            col = int(np.flatnonzero(scaling.offset != 0)[0])
            raise ValueError(f"scale='minmax' would turn the zeros of sparse X into non-zeros (column {col} has "
                             f"minimum {s['min'][col]:g}, not 0); use scale='maxabs', or 'standard', which does "
                             "not centre sparse input")
        return scaling
    return Scaling.from_stats(kind, n, center=False, max_abs_=np.maximum(np.abs(s["min"]), np.abs(s["max"])))
