"""The distributed operator of the solve: the L2-loss SVM over row-blocked features.

A :class:`SquaredHingeOperator` binds the feature blocks ``F``, the label codes
and optional sample weights (all aligned :class:`~dsvm.blockwise.RowBlocks`)
to one binary (one-vs-rest) problem and exposes it to the solvers as plain
callables on float64 k-vectors:

* :meth:`evaluate` — one fused pass: loss on a batch of step sizes, loss,
  gradient, active-set size and (optionally) the generalized Hessian ``[F 1]_Aᵀ
  C [F 1]_A`` or its change since the last point, all in one round trip;
* :meth:`hess_vec` — generalized Hessian-vector products for CG.

Solvers never see Dask; only sums over rows come back (scalars, k-vectors, a
``k x k`` matrix).
"""

from __future__ import annotations

import logging
import shutil
from contextlib import ExitStack
from dataclasses import dataclass

import numpy as np

from ._signals import sigterm_cleanup
from ._validation import check_finite_block
from .blockwise import InMemoryBlocks, RowBlocks
from .io.errors import disk_full_error, is_disk_full
from .losses import (
    hinge_loss_block,
    labels_pm1,
    row_costs,
    sqeps_active,
    sqeps_hvp,
    sqeps_pass,
    sqhinge_active,
    sqhinge_hvp,
    sqhinge_pass,
    unpack_symmetric,
)
from .scratch import make_temporary_folder, scratch_base

logger = logging.getLogger(__name__)


@dataclass
class PassResult:
    """Sums over all rows returned by :meth:`SquaredHingeOperator.evaluate`."""

    loss: float
    grad: np.ndarray
    n_active: int
    n_changed: int
    loss_grid: np.ndarray
    hess: np.ndarray | None


class LossOperator:
    """One L2-loss problem on row-blocked features (base of the concrete operators).

    Subclasses set ``_pass_fn`` / ``_hvp_fn`` (block functions of
    :mod:`dsvm.losses`), the aligned row arrays they read and the parameters
    they share.
    """

    _pass_fn = None
    _hvp_fn = None
    _active_fn = None

    def __init__(self, features: RowBlocks, aligned: tuple, fixed_params: dict, fit_intercept: bool = True):
        self.features = features
        self.aligned = aligned
        self.fixed_params = fixed_params
        self.fit_intercept = bool(fit_intercept)
        self.n_passes = 0
        # margins at the last points, per block, where the blocks live in this process
        # (dsvm.losses.MarginCache); distributed blocks recompute them
        self._margin_cache: dict | None = {} if isinstance(features, InMemoryBlocks) else None

    def evaluate(self, x0: np.ndarray, x1: np.ndarray, t_grid=(), hessian: str = "none") -> PassResult:
        """Loss, gradient and Hessian data at ``x1``; loss along ``x0 → x1`` at ``t_grid``."""
        params = {
            **self.fixed_params,
            "x0": np.asarray(x0, dtype=np.float64),
            "x1": np.asarray(x1, dtype=np.float64),
            "t_grid": np.asarray(t_grid, dtype=np.float64),
            "hessian": hessian,
            # partial Gram matrices are packed only to travel between processes
            "pack": self.features.is_distributed,
        }
        if self._margin_cache is not None:
            params.update(margin_cache=self._margin_cache, x0_key=params["x0"].tobytes(),
                          x1_key=params["x1"].tobytes())
        out = self.features.map_reduce(type(self)._pass_fn, aligned=self.aligned, shared=(params,))
        self.n_passes += 1
        grad = out["grad"]
        hess = out["hess"]
        if hess is not None:
            # packed (1-d) from other processes, a matrix in this one, or a scalar 0.0
            # when no block had a row to add (see dsvm.losses._GramSum.result)
            if np.ndim(hess) == 1:
                hess = 2.0 * unpack_symmetric(hess)
            elif np.ndim(hess) == 2:
                hess = np.multiply(hess, 2.0, dtype=np.float64)
            else:
                hess = np.zeros((params["x1"].size,) * 2)
        if not self.fit_intercept:
            grad = grad.copy()
            grad[-1] = 0.0
            if hess is not None:
                hess[-1, :] = 0.0
                hess[:, -1] = 0.0
        return PassResult(
            loss=float(out["loss"]),
            grad=grad,
            n_active=int(out["n_active"]),
            n_changed=int(out["n_changed"]),
            loss_grid=np.asarray(out["loss_grid"], dtype=np.float64),
            hess=hess,
        )

    def hess_vec(self, x: np.ndarray, v: np.ndarray) -> np.ndarray:
        """``2 [F 1]_Aᵀ C [F 1]_A v`` (the loss part of the generalized Hessian)."""
        params = {**self.fixed_params, "x": np.asarray(x, dtype=np.float64), "V": np.asarray(v, dtype=np.float64)}
        out = 2.0 * self.features.map_reduce(type(self)._hvp_fn, aligned=self.aligned, shared=(params,))
        self.n_passes += 1
        if not self.fit_intercept:
            out[-1] = 0.0
        return out


class SquaredHingeOperator(LossOperator):
    """One binary (one-vs-rest) squared-hinge problem on row-blocked features.

    Parameters
    ----------
    features : RowBlocks
        Feature rows ``F`` (n x r).
    codes : RowBlocks
        Integer class code of every row, aligned with ``features``.
    positive : int
        Code of the positive class (rows with another code are −1).
    class_cost : ndarray
        Cost ``C * class_weight`` per class code.
    sample_weight : RowBlocks or None
        Optional per-row weights, aligned with ``features``.
    fit_intercept : bool
        If False the bias coordinate is held at zero.
    """

    _pass_fn = staticmethod(sqhinge_pass)
    _hvp_fn = staticmethod(sqhinge_hvp)
    _active_fn = staticmethod(sqhinge_active)

    def __init__(self, features, codes, positive, class_cost, sample_weight=None, fit_intercept=True):
        super().__init__(
            features,
            (codes, sample_weight),
            {"positive": int(positive), "class_cost": np.asarray(class_cost, dtype=np.float64)},
            fit_intercept,
        )

    def hinge_objective(self, x: np.ndarray) -> float:
        """``½‖w‖² + Σ c_i max(0, 1 − y_i m_i)`` at ``x`` (one pass)."""
        x = np.asarray(x, dtype=np.float64)
        params = {**self.fixed_params, "x": x}
        loss = self.features.map_reduce(hinge_loss_block, aligned=self.aligned, shared=(params,))
        self.n_passes += 1
        return 0.5 * float(x[:-1] @ x[:-1]) + float(loss)

    def gather(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(F, y in ±1, c)`` in this process, for in-memory solvers (LIBLINEAR's DCD).

        Raises
        ------
        MemoryError
            If ``F`` would take more than half of this machine's available memory.
        """
        import psutil

        n, r = self.features.n_rows, None
        first = self.features.blocks[0] if hasattr(self.features, "blocks") else self.features.array
        r = first.shape[1]
        need = float(n) * r * 8  # LIBLINEAR works in float64
        avail = psutil.virtual_memory().available
        if need > 0.5 * avail:
            raise MemoryError(
                f"solver='dcd' needs the {n} x {r} feature matrix in this process's memory as float64 "
                f"({need / 2**30:.2f} GiB) but only {avail / 2**30:.2f} GiB are available; "
                "use solver='newton' or 'tron', which stream the data"
            )
        F = np.asarray(self.features.compute())
        codes = np.asarray(self.aligned[0].compute())
        sw = None if self.aligned[1] is None else np.asarray(self.aligned[1].compute())
        y = labels_pm1(codes, self.fixed_params["positive"])
        c = row_costs(codes, sw, self.fixed_params["class_cost"])
        return F, y, c


class SquaredEpsilonOperator(LossOperator):
    """The squared ε-insensitive (L2-loss SVR) problem on row-blocked features.

    Parameters
    ----------
    features : RowBlocks
    targets : RowBlocks
        Float targets aligned with ``features``.
    C, epsilon : float
    sample_weight : RowBlocks or None
    fit_intercept : bool
    """

    _pass_fn = staticmethod(sqeps_pass)
    _hvp_fn = staticmethod(sqeps_hvp)
    _active_fn = staticmethod(sqeps_active)

    def __init__(self, features, targets, C, epsilon, sample_weight=None, fit_intercept=True):
        super().__init__(
            features, (targets, sample_weight), {"C": float(C), "epsilon": float(epsilon)}, fit_intercept
        )


def _row_priority(rows: np.ndarray, seed: int) -> np.ndarray:
    """Pseudo-random priority in [0, 1) of global row indices (same for any chunking)."""
    h = (rows.astype(np.uint64) + np.uint64(seed % 2**31) * np.uint64(0x9E3779B9)) * np.uint64(2654435761)
    return (h % np.uint64(2**32)).astype(np.float64) / 2.0**32


def _bottom_k(prio: np.ndarray, idx: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    if prio.size > k:
        keep = np.argpartition(prio, k - 1)[:k]
        prio, idx = prio[keep], idx[keep]
    order = np.lexsort((idx, prio))
    return prio[order], idx[order]


def _active_sample_block(F, rows, *rest):
    *aligned, active_fn, params_list, k, seed = rest
    rows = np.asarray(rows)
    active = np.zeros(F.shape[0], dtype=bool)
    for params in params_list:
        active |= active_fn(F, *aligned, params)
    prio = _row_priority(rows, seed)
    return {"active": _bottom_k(prio[active], rows[active], k), "other": _bottom_k(prio[~active], rows[~active], k),
            "n_active": int(active.sum()), "k": k}


def _merge_samples(parts):
    k = parts[0]["k"]
    out = {"n_active": sum(p["n_active"] for p in parts), "k": k}
    for key in ("active", "other"):
        prio = np.concatenate([p[key][0] for p in parts])
        idx = np.concatenate([p[key][1] for p in parts])
        out[key] = _bottom_k(prio, idx, k)
    return out


def active_row_sample(ops: list, xs: list[np.ndarray], rows: RowBlocks, k: int, seed: int) -> tuple[np.ndarray, np.ndarray, int]:
    """Up to ``k`` rows drawn uniformly from the rows active for any of the problems.

    ``ops`` are operators over the same features and aligned arrays (one per
    binary problem) and ``xs`` their solutions.  The sample is a bottom-k
    sketch of a hash of the row index: one pass, O(k) data back, the same rows
    for any chunking.  Returns up to ``k`` active rows, up to ``k`` inactive rows
    drawn the same way (to fill up with) and the number of active rows.
    """
    op0 = ops[0]
    params_list = [{**op.fixed_params, "x": np.asarray(x, dtype=np.float64)} for op, x in zip(ops, xs)]
    out = op0.features.map_reduce(
        _active_sample_block, aligned=(rows, *op0.aligned),
        shared=(type(op0)._active_fn, params_list, int(k), int(seed)), combine=_merge_samples,
    )
    return out["active"][1].astype(np.int64), out["other"][1].astype(np.int64), int(out["n_active"])


# ---------------------------------------------------------------------------
# The feature stage and block-wise prediction
# ---------------------------------------------------------------------------

FEATURE_STORES = ("auto", "memory", "zarr", "recompute")


def _feature_block(X_block, fmap, check_finite, offset=0):
    if check_finite:
        check_finite_block(X_block, offset)
    return fmap.transform_block(X_block)


def plan_feature_store(
    requested: str, X: RowBlocks, n_out: int, n_components: int, itemsize: int, sparse_density: float | None = None
) -> tuple[str, str]:
    """Where the feature blocks live during a fit: ``(store, reason)``.

    ``memory``
        persisted in the (cluster's) memory: when ``F`` takes at most
        ``dsvm.memory-fraction`` of it;
    ``zarr``
        written once to a scratch zarr store and streamed every pass;
    ``recompute``
        recomputed from ``X`` every pass: chosen over ``zarr`` when the
        kernel GEMMs (``2 n k (p + r)`` flops spread over all threads) plus
        reading ``X`` take less time than reading ``F`` back.
    """
    from . import config
    from .blockwise import cluster_memory

    if requested not in FEATURE_STORES:
        raise ValueError(f"feature_store={requested!r} is not supported; choose one of {FEATURE_STORES}")
    if not X.is_distributed:
        return "memory", "in-memory input"
    if requested != "auto":
        return requested, "requested"
    n = X.n_rows
    p = X.array.shape[1]
    f_bytes = float(n) * n_out * itemsize
    memory, threads = cluster_memory()
    if f_bytes <= config.get("memory-fraction") * memory:
        return "memory", f"F = {f_bytes / 2**30:.2f} GiB fits in {memory / 2**30:.2f} GiB of cluster memory"
    p_eff = p * (sparse_density if sparse_density is not None else 1.0)
    x_bytes = float(n) * max(p_eff, 1.0) * (12 if sparse_density is not None else itemsize)
    bandwidth = config.get("disk-bandwidth")
    read_s = f_bytes / bandwidth
    recompute_s = 2.0 * n * n_components * (p_eff + n_out) / (config.get("flops-per-thread") * threads) + x_bytes / bandwidth
    if recompute_s < read_s:
        return "recompute", f"F = {f_bytes / 2**30:.2f} GiB > memory; recomputing (~{recompute_s:.1f}s/pass) beats reading (~{read_s:.1f}s/pass)"
    return "zarr", f"F = {f_bytes / 2**30:.2f} GiB > memory; reading from scratch (~{read_s:.1f}s/pass) beats recomputing (~{recompute_s:.1f}s/pass)"


class FeatureStore:
    """The feature blocks ``F = K(X, L) · M`` of one fit, kept as :func:`plan_feature_store` says.

    Use as a context manager: a zarr scratch store is removed on exit, also
    when the fit fails or the process gets SIGTERM (:mod:`dsvm._signals`).
    The store is a folder ``dsvm-features-PID-*.zarr`` in ``dsvm.scratch-directory``
    with an owner marker; stores that killed runs left there are removed when
    the next one is made (:mod:`dsvm.scratch`).

    Attributes
    ----------
    blocks : RowBlocks
        The feature rows, aligned with ``X``.
    kind : str
        ``"memory"``, ``"zarr"`` or ``"recompute"``.
    """

    def __init__(self, X: RowBlocks, fmap, store: str = "auto", check_finite: bool = True, sparse_density=None):
        self.kind, reason = plan_feature_store(
            store, X, fmap.n_output, fmap.n_components, np.dtype(fmap.dtype).itemsize, sparse_density
        )
        logger.info("feature store: %s (%s)", self.kind, reason)
        self.scratch: str | None = None
        self._exit = ExitStack()
        lazy = X.map_blocks(_feature_block, fmap.n_output, fmap.dtype, shared=(fmap, check_finite), with_offset=True)
        if self.kind == "memory":
            self.blocks = lazy.persist()
        elif self.kind == "zarr":
            self._exit.enter_context(sigterm_cleanup())
            try:
                self.scratch = _scratch_directory()
                self.blocks = lazy.spill_to_zarr(self.scratch)
            except BaseException as exc:
                base = self.scratch or scratch_base()
                self.close()
                if is_disk_full(exc):
                    f_bytes = float(X.n_rows) * fmap.n_output * np.dtype(fmap.dtype).itemsize
                    raise disk_full_error(
                        exc, base, "the scratch feature store", needed=f_bytes,
                        hint="set dsvm.scratch-directory (DASK_DSVM__SCRATCH_DIRECTORY) to a disk with room, or "
                             "use feature_store='recompute'",
                    ) from None
                raise
        else:
            self.blocks = lazy

    def close(self) -> None:
        if self.scratch is not None:
            shutil.rmtree(self.scratch, ignore_errors=True)
            logger.info("feature store: removed scratch %s", self.scratch)
            self.scratch = None
        self._exit.close()

    def __enter__(self) -> "FeatureStore":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def _scratch_directory() -> str:
    return str(make_temporary_folder(scratch_base(), "features", suffix=".zarr"))


def feature_blocks(X: RowBlocks, fmap, *, check_finite: bool = True, store: str = "memory") -> RowBlocks:
    """Feature blocks kept in memory (``store="memory"``) or recomputed each pass.

    For the spilling policy use :class:`FeatureStore`.
    """
    if store not in ("memory", "recompute"):
        raise ValueError("feature_blocks() keeps features in memory or recomputes them; use FeatureStore for zarr")
    F = X.map_blocks(_feature_block, fmap.n_output, fmap.dtype, shared=(fmap, check_finite), with_offset=True)
    return F.persist() if store == "memory" else F


def _decision_block(X_block, fmap, coef, intercept, check_finite, offset=0):
    if check_finite:
        check_finite_block(X_block, offset)
    F = fmap.transform_block(X_block)
    return (F @ coef.T.astype(F.dtype)).astype(np.float64) + intercept


def decision_blocks(X: RowBlocks, fmap, coef: np.ndarray, intercept: np.ndarray, check_finite: bool = True) -> RowBlocks:
    """Decision values ``F(X) coefᵀ + intercept`` block by block, shape (n, n_problems)."""
    return X.map_blocks(
        _decision_block, coef.shape[0], np.float64, shared=(fmap, coef, intercept, check_finite), with_offset=True
    )
