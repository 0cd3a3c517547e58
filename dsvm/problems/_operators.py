"""The loss operators a solver works on: one L2-loss SVM problem over row-blocked features.

A :class:`SquaredHingeOperator` binds the feature blocks ``F``, the label codes
and optional sample weights (all aligned :class:`~dsvm.blocks.RowBlocks`)
to one binary (one-vs-rest) problem and exposes it to the solvers through the
contract of :mod:`dsvm.solvers._contract`, plain methods on float64 k-vectors:

* :meth:`~LossOperator.evaluate` — one fused pass: loss on a batch of step
  sizes, loss, gradient, active-set size and (optionally) the generalized
  Hessian ``[F 1]_Aᵀ C [F 1]_A`` or its change since the last point, all in
  one round trip;
* :meth:`~LossOperator.hess_vec` — generalized Hessian-vector products for CG;
* :meth:`~SquaredHingeOperator.gather` — ``(F, y, c)`` in this process (DCD);
* :meth:`~SquaredHingeOperator.fold` — a step function run block by block with
  each block's ±1 labels and row costs (minibatch Pegasos).

Every method that reads the rows adds one to ``n_passes``.  Solvers never see
Dask; only sums over rows come back (scalars, k-vectors, a ``k x k`` matrix).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from ..blocks import BlockReduction, RowBlocks, available_memory, row_uniform
from ._duality import dual_bound
from ._gram import GramDelta, unpack_symmetric
from ._implicit import ImplicitFeatures
from ._losses import (
    hinge_loss_block,
    labels_pm1,
    row_costs,
    sqeps_active,
    sqeps_hvp,
    sqeps_pass,
    sqhinge_active,
    sqhinge_hvp,
    sqhinge_pass,
)
from ._margin_cache import IN_PROCESS

logger = logging.getLogger(__name__)

#: the points whose prediction counts an operator keeps (a solve's last point is among the last passes)
PREDICTED_KEPT = 4


@dataclass
class PassResult:
    """Sums over all rows returned by :meth:`SquaredHingeOperator.evaluate`."""

    loss: float
    grad: np.ndarray
    n_active: int
    n_changed: int
    loss_grid: np.ndarray
    hess: np.ndarray | None
    # rows of positive cost and those of them with margin above 0 (predicted positive); -1: not counted
    n_costed: int = -1
    n_positive: int = -1
    # the dual bound's sums (dsvm.problems._duality): the loss gradient over rows of positive dual variable
    # and three scalars; None where the pass did not make them
    pos_grad: np.ndarray | None = None
    dual_sums: np.ndarray | None = None

    def dual_bound(self, x: np.ndarray, fit_intercept: bool = True) -> float:
        """A lower bound on the optimum from this pass's sums at ``x`` (nan where it made none)."""
        if self.pos_grad is None or self.dual_sums is None:
            return float("nan")
        return dual_bound(x, self.loss, self.grad, self.pos_grad, self.dual_sums, fit_intercept)

    def scaled(self, factor: float) -> PassResult:
        """The pass result for costs multiplied by ``factor`` (loss, gradient and Hessian are linear in C)."""
        return replace(self, loss=self.loss * factor, grad=self.grad * factor, loss_grid=self.loss_grid * factor,
                       hess=None if self.hess is None else self.hess * factor,
                       pos_grad=None if self.pos_grad is None else self.pos_grad * factor,
                       dual_sums=None if self.dual_sums is None else self.dual_sums * factor)

    def exchanged(self, plus: PassResult, minus: PassResult) -> PassResult:
        """``self + plus − minus`` of additive pass results: rows added to and removed from a problem.

        The Hessian is kept only when all three have one.
        """
        hess = None
        if self.hess is not None and plus.hess is not None and minus.hess is not None:
            hess = self.hess + plus.hess - minus.hess
        return replace(self, loss=self.loss + plus.loss - minus.loss, grad=self.grad + plus.grad - minus.grad,
                       n_active=self.n_active + plus.n_active - minus.n_active, n_changed=0,
                       loss_grid=np.zeros(0), hess=hess, n_costed=-1, n_positive=-1,
                       pos_grad=_exchanged(self.pos_grad, plus.pos_grad, minus.pos_grad),
                       dual_sums=_exchanged(self.dual_sums, plus.dual_sums, minus.dual_sums))


def _exchanged(kept, plus, minus):
    """``kept + plus − minus`` of one additive sum, None unless all three have it."""
    return None if kept is None or plus is None or minus is None else kept + plus - minus


class LossOperator:
    """One L2-loss problem on row-blocked features (base of the concrete operators).

    Subclasses set ``_pass_fn`` / ``_hvp_fn`` (block functions of
    :mod:`dsvm.problems._losses`), the aligned row arrays they read and the
    parameters they share.

    Over :class:`~dsvm.problems._implicit.ImplicitFeatures` the block
    functions see kernel blocks: every point is lifted to the kernel's
    coordinates before a pass (:meth:`block_point`) and the pass's sums are
    carried back to the features' (gradient, Gram matrix, Hessian products),
    so solvers see the same problem either way.

    Attributes
    ----------
    n_passes : int
        Passes over the rows so far.
    margin_cache : dict, str or None
        Where the margins at the last points evaluated are kept
        (:class:`~dsvm.problems._margin_cache.MarginCache`): this dict for
        in-process blocks, each worker process for distributed ones
        (:data:`~dsvm.problems._margin_cache.IN_PROCESS`); None turns caching off.
        Over implicit features they are kept by the input block (a kernel block is new every pass), and a
        Hessian product at a point whose margins are known computes the kernel rows of the active rows only.
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
        self.implicit = features if isinstance(features, ImplicitFeatures) else None
        self.margin_cache: dict | str | None = IN_PROCESS if features.is_distributed else {}
        # (rows of positive cost, predicted positive) at the last points evaluated, by the point's bytes
        self._predicted: dict[bytes, tuple[int, int]] = {}
        self._bounds: dict[bytes, float] = {}  # dual bounds at the same points

    @property
    def n_rows(self) -> int:
        """Rows of the problem (held-out rows of zero cost included)."""
        return self.features.n_rows

    @property
    def n_blocks(self) -> int:
        return self.features.n_blocks

    @property
    def is_distributed(self) -> bool:
        """True when the passes run on a Dask cluster (a round trip costs more)."""
        return self.features.is_distributed

    def evaluate(self, x0: np.ndarray, x1: np.ndarray, t_grid=(), hessian: str = "none") -> PassResult:
        """Loss, gradient and Hessian data at ``x1``; loss along ``x0 → x1`` at ``t_grid``."""
        fn, aligned, params = self.pass_request(x0, x1, t_grid, hessian)
        out = self.features.map_reduce(fn, aligned=aligned, shared=(params,))
        self.n_passes += 1
        return self.pass_result(out, params)

    def pass_request(self, x0, x1, t_grid=(), hessian: str = "none") -> tuple[Callable, tuple, dict]:
        """``(block function, aligned arrays, parameters)`` of :meth:`evaluate`'s pass, for running it
        elsewhere (e.g. on feature blocks as they are made); :meth:`pass_result` reads its sum."""
        params = {
            **self.fixed_params,
            "x0": self.block_point(x0),
            "x1": self.block_point(x1),
            "point": np.asarray(x1, dtype=np.float64),
            "t_grid": np.asarray(t_grid, dtype=np.float64),
            "hessian": hessian,
            # partial Gram matrices are packed only to travel between processes
            "pack": self.features.is_distributed,
            # a block estimates the pass's active rows as its own times the number of blocks (_losses._block_gram)
            "blocks": len(self.features.chunks),
        }
        if self.implicit is not None:
            params["gram_dtype"] = "float64"  # see dsvm.problems._implicit: M amplifies a Gram's rounding
        if self.margin_cache is not None:
            params.update(margin_cache=self.margin_cache, implicit=self.implicit is not None,
                          x0_key=self._cache_key(params["x0"]), x1_key=self._cache_key(params["x1"]))
        return type(self)._pass_fn, self.aligned, params

    def _cache_key(self, point: np.ndarray) -> bytes:
        """What a block's margins at ``point`` (as :meth:`block_point` gives it) are cached by: over implicit
        features the kernel's fingerprint too, since they are kept by input block."""
        return (b"" if self.implicit is None else self.implicit.cache_token) + point.tobytes()

    def block_point(self, x: np.ndarray) -> np.ndarray:
        """The point ``x = (w, b)`` (or points, one per row) as the block functions take it: lifted to the
        kernel's coordinates over implicit features, else as it is (float64)."""
        return np.asarray(x, dtype=np.float64) if self.implicit is None else self.implicit.lift(x)

    def pass_result(self, out: dict, params: dict) -> PassResult:
        """The :class:`PassResult` of the summed block results ``out`` of :meth:`pass_request`'s pass."""
        grad, pos_grad = out["grad"], out.get("pos_grad")
        if self.implicit is not None and isinstance(out["hess"], GramDelta):
            hess = 2.0 * self.implicit.project_delta(out["hess"])  # its rows carried to the features, not its matrix
        else:
            hess = _gram_matrix(out["hess"], params["x1"].size)
            if self.implicit is not None and hess is not None:
                hess = self.implicit.project_gram(hess)
        if self.implicit is not None:
            grad = self.implicit.project(grad)
            pos_grad = None if pos_grad is None else self.implicit.project(pos_grad)
        if not self.fit_intercept:
            grad = grad.copy()
            grad[-1] = 0.0
            if hess is not None:
                hess[-1, :] = 0.0
                hess[:, -1] = 0.0
        result = PassResult(
            loss=float(out["loss"]),
            grad=grad,
            n_active=int(out["n_active"]),
            n_changed=int(out["n_changed"]),
            loss_grid=np.asarray(out["loss_grid"], dtype=np.float64),
            hess=hess,
            n_costed=int(out.get("n_costed", -1)),
            n_positive=int(out.get("n_positive", -1)),
            pos_grad=pos_grad,
            dual_sums=None if out.get("dual_sums") is None else np.asarray(out["dual_sums"], dtype=np.float64),
        )
        point = params["point"]
        if result.n_costed >= 0:
            self._predicted[point.tobytes()] = (result.n_costed, result.n_positive)
        self._bounds[point.tobytes()] = result.dual_bound(point, self.fit_intercept)
        for kept in (self._predicted, self._bounds):
            while len(kept) > PREDICTED_KEPT:
                del kept[next(iter(kept))]
        return result

    def dual_bound(self, x: np.ndarray) -> float | None:
        """A lower bound on the problem's optimum from a pass made at ``x`` among the last few
        (:mod:`dsvm.problems._duality`; no pass of its own), nan where that pass made no dual sums; None
        when no recent pass was made there."""
        return self._bounds.get(np.asarray(x, dtype=np.float64).tobytes())

    def predicted_positive(self, x: np.ndarray) -> tuple[int, int] | None:
        """``(rows of positive cost, those of them with margin above 0)`` at ``x``, as counted by a pass
        made at ``x`` among the last few (no pass of its own); None when no recent pass was made there."""
        return self._predicted.get(np.asarray(x, dtype=np.float64).tobytes())

    def hess_vec(self, x: np.ndarray, v: np.ndarray) -> np.ndarray:
        """``2 [F 1]_Aᵀ C [F 1]_A v`` (the loss part of the generalized Hessian)."""
        v = np.asarray(v, dtype=np.float64)
        params = {**self.fixed_params, "x": self.block_point(x), "V": self.block_point(v.T).T}
        if self.margin_cache is not None:  # the margins at x, kept by the pass made there
            params.update(margin_cache=self.margin_cache, implicit=self.implicit is not None,
                          x_key=self._cache_key(params["x"]))
        out = 2.0 * self.features.map_reduce(type(self)._hvp_fn, aligned=self.aligned, shared=(params,))
        self.n_passes += 1
        if self.implicit is not None:
            out = self.implicit.project(out.T).T
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
        params = {**self.fixed_params, "x": self.block_point(x)}
        loss = self.features.map_reduce(hinge_loss_block, aligned=self.aligned, shared=(params,))
        self.n_passes += 1
        return 0.5 * float(x[:-1] @ x[:-1]) + float(loss)

    @property
    def class_cost(self) -> np.ndarray:
        """Cost ``C · class_weight`` per class code."""
        return self.fixed_params["class_cost"]

    def gather(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(F, y in ±1, c)`` in this process, for in-memory solvers (LIBLINEAR's DCD); one pass.

        Raises
        ------
        MemoryError
            If ``F`` would take more than half of this machine's available memory.
        """
        n, r = self.features.n_rows, self.features.n_cols
        need = float(n) * r * 8  # LIBLINEAR works in float64
        avail = available_memory()
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
        self.n_passes += 1
        return F, y, c

    def fold(self, step: Callable, state: Any, params: Any, order=None) -> Any:
        """``state = step(F_i, y_i, c_i, state, params)`` for the blocks in ``order`` (default: all, in
        order), with each block's features, ±1 labels and row costs; one pass, on Dask a chain of tasks."""
        fixed = self.fixed_params
        if self.implicit is not None:  # the step works on feature blocks: each kernel block projected here
            fixed = {**fixed, "projection": self.implicit.M.astype(self.implicit.fmap.dtype)}
        out = self.features.fold(_labelled_step, state, aligned=self.aligned, shared=(fixed, step, params),
                                 order=order)
        self.n_passes += 1
        return out

    def max_sample_weight(self) -> float:
        """The largest sample weight (1.0 without sample weights)."""
        sw = self.aligned[1]
        return 1.0 if sw is None else float(sw.map_reduce(_max_block, combine=max))


def _gram_matrix(hess, dim: int) -> np.ndarray | None:
    """A pass's Gram sum (without the factor 2) as a float64 matrix times 2, or None without one."""
    if isinstance(hess, GramDelta):
        return 2.0 * hess.matrix()
    if hess is None:
        return None
    # packed (1-d) from other processes, a matrix in this one, or a scalar 0.0
    # when no block had a row to add (see losses._GramSum.result)
    if np.ndim(hess) == 1:
        return 2.0 * unpack_symmetric(hess)
    if np.ndim(hess) == 2:
        return np.multiply(hess, 2.0, dtype=np.float64)
    return np.zeros((dim, dim))


def _labelled_step(F, codes, sample_weight, state, fixed, step, params):
    if "projection" in fixed:
        F = F @ fixed["projection"]
    return step(F, labels_pm1(codes, fixed["positive"]), row_costs(codes, sample_weight, fixed["class_cost"]),
                state, params)


def _max_block(v):
    return float(np.max(v)) if len(v) else 0.0


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
    prio = row_uniform(rows, seed)
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
    params_list = [{**op.fixed_params, "x": op.block_point(x)} for op, x in zip(ops, xs)]
    out = op0.features.map_reduce(
        _active_sample_block, aligned=(rows, *op0.aligned),
        shared=(type(op0)._active_fn, params_list, int(k), int(seed)), combine=_merge_samples,
    )
    return out["active"][1].astype(np.int64), out["other"][1].astype(np.int64), int(out["n_active"])


def _evaluations_block(F, *rest):
    *aligned, requests = rest
    return [fn(F, *aligned, params) for fn, params in requests]


def opening_evaluations(ops: list, xs: list[np.ndarray], hessian: str) -> BlockReduction:
    """The passes a Newton solve of each problem from ``xs[j]`` opens with, as one reduction over feature blocks.

    For every problem: the pass at 0 (the stopping rule's ``‖∇Φ(0)‖``) and the
    pass at ``xs[j]`` (with the Gram matrix of its active rows for
    ``hessian="gram"``).  The pass at 0 needs no product with ``w``.  Run it
    on the feature blocks as they are made
    (:class:`~dsvm.problems.FeatureStore` ``reduction=``) and read the sum with
    :func:`opening_results`.  ``ops`` are operators over the same aligned arrays.
    """
    aligned = ops[0].aligned
    if any(tuple(op.aligned) != tuple(aligned) for op in ops):
        raise ValueError("opening_evaluations() needs problems over the same aligned arrays")
    zero = np.zeros_like(np.asarray(xs[0], dtype=np.float64))
    requests = [op.pass_request(zero, zero, (), "none") for op in ops]
    requests += [op.pass_request(x, x, (), "full" if hessian == "gram" else "none") for op, x in zip(ops, xs)]
    return BlockReduction(_evaluations_block, aligned=aligned, shared=([(fn, params) for fn, _, params in requests],))


def opening_results(ops: list, reduction: BlockReduction, out: list) -> list[tuple[PassResult, float]]:
    """``(pass at xs[j], ‖∇Φ(0)‖)`` per problem from the sum ``out`` of :func:`opening_evaluations`."""
    requests = reduction.shared[0]
    n = len(ops)
    results = []
    for j, op in enumerate(ops):
        at_zero = op.pass_result(out[j], requests[j][1])
        results.append((op.pass_result(out[n + j], requests[n + j][1]), float(np.linalg.norm(at_zero.grad))))
    return results


__all__ = ["PassResult", "LossOperator", "SquaredHingeOperator", "SquaredEpsilonOperator", "active_row_sample",
           "opening_evaluations", "opening_results"]
