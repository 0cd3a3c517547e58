"""Per-block pieces of the L2-loss SVM objectives — pure numpy.

Both problems have the form, over ``x = (w, b)``::

    Φ(x) = ½‖w‖² + Σ_i c_i ρ_i(f_iᵀ w + b)²

with a piecewise-linear residual ρ_i(m) ≥ 0:

* classification (squared hinge):            ρ_i(m) = max(0, 1 − y_i m)
* regression (squared ε-insensitive, SVR):   ρ_i(m) = max(0, |m − y_i| − ε)

and per-row costs ``c_i = C · class_weight[y_i] · sample_weight_i``.  The rows
with ρ_i > 0 form the active set A; the generalized Hessian of the loss is
``2 [F 1]_Aᵀ diag(c) [F 1]_A`` for both.

Every function below sees one block of feature rows ``F`` (float32 or
float64) and returns *sums over rows*, so the results of all blocks are
simply added (see :func:`dsvm.blocks._interface.tree_sum`).  Vectors ``x`` are float64
with the bias last.  Products ``Fᵀ v`` are taken over slabs of
:data:`SLAB_ROWS` rows whose float32 partial sums are accumulated in float64,
so that the gradient keeps about float64-slab accuracy without ever copying
``F`` to float64.

The block functions compute under ``np.errstate(over="ignore", invalid="ignore")``:
at a point far out (a huge ``C``, a diverging step) a sum may overflow, and the
infinity or NaN it leaves in the result is what the solvers' non-finite checks
(:mod:`dsvm.solvers._finite`) name, with the iteration; numpy's RuntimeWarning
would only repeat it, from a worker process, in Python's two-line form.
"""

from __future__ import annotations

import numpy as np

from ._gram import SLAB_ROWS, GramDelta, _GramSum, rows_kept
from ._margin_cache import MarginCache


def labels_pm1(codes: np.ndarray, positive: int) -> np.ndarray:
    """±1 labels for the one-vs-rest problem of class code ``positive``."""
    return np.where(codes == positive, 1.0, -1.0)


def row_costs(codes: np.ndarray, sample_weight: np.ndarray | None, class_cost: np.ndarray) -> np.ndarray:
    """``c_i = class_cost[code_i] * sample_weight_i`` (``class_cost`` already includes C)."""
    c = class_cost[codes]
    if sample_weight is not None:
        c = c * sample_weight
    return c


def margins(F: np.ndarray, x: np.ndarray) -> np.ndarray:
    """``F w + b`` in float64 (the GEMV runs in F's dtype)."""
    w = x[:-1].astype(F.dtype, copy=False)
    return (F @ w).astype(np.float64) + x[-1]



# --------------------------------------------------------------------------
# The two residual models: (residual, d residual²/dm factor, active) of margins


def _hinge_residual(m: np.ndarray, y: np.ndarray):
    """ρ = max(0, 1 − y m); dρ²/dm = −2 y ρ."""
    rho = np.maximum(0.0, 1.0 - y * m)
    return rho, -2.0 * y * rho


def _hinge_residual_grid(m0, dm, t, y):
    return np.maximum(0.0, 1.0 - y[:, None] * (m0[:, None] + dm[:, None] * t[None, :]))


def _eps_residual(m: np.ndarray, y: np.ndarray, eps: float):
    """ρ = max(0, |m − y| − ε); dρ²/dm = 2 sign(m − y) ρ."""
    e = m - y
    rho = np.maximum(0.0, np.abs(e) - eps)
    return rho, 2.0 * np.sign(e) * rho


def _eps_residual_grid(m0, dm, t, y, eps):
    return np.maximum(0.0, np.abs(m0[:, None] + dm[:, None] * t[None, :] - y[:, None]) - eps)


#: rows of a slab whose two gradient products run back to back: the second GEMV reads them from cache
#: (two GEMVs over a slab larger than the cache cost two trips through memory; a GEMM of two columns, more)
GRAD_ROWS = 512


def _two_sums(Fs, g, g_pos, grad, pos_grad) -> None:
    """Add ``Fsᵀ g`` and ``Fsᵀ g_pos`` to ``grad[:-1]`` and ``pos_grad[:-1]`` (float64 accumulators of the pass)."""
    for s in range(0, Fs.shape[0], GRAD_ROWS):
        part = Fs[s : s + GRAD_ROWS].T
        grad[:-1] += part @ g[s : s + GRAD_ROWS]
        pos_grad[:-1] += part @ g_pos[s : s + GRAD_ROWS]


def _slab_margins(Fs, sl, w, w_zero, bias, known, new):
    """Margins ``Fs w + bias`` of one slab: from the cache, the bias alone at ``w = 0``, or a GEMV
    (stored into ``new`` when the cache keeps them)."""
    if known is not None:
        return known[sl]
    m = np.full(Fs.shape[0], bias) if w_zero else (Fs @ w).astype(np.float64) + bias
    if new is not None:
        new[sl] = m
    return m


# Over 60 lines on purpose: one loop whose every step reads the same slab while it is in cache; split, the
# steps would pass a dozen per-slab accumulators between them.
def _fused_pass(F, c, params, residual, residual_grid):
    """Shared body of the fused Newton pass (see :func:`sqhinge_pass`).

    Runs over slabs of :data:`SLAB_ROWS` rows so that the two GEMVs, the
    line-search grid, the gradient product and the Gram update of a slab all
    read it from cache: one trip through memory per pass, and temporaries of a
    slab's size only.  ``residual(m, sl)`` and ``residual_grid(m0, dm, t, sl)``
    evaluate the loss model on the rows ``sl``.
    """
    x0, x1 = params["x0"], params["x1"]
    t_grid = np.asarray(params.get("t_grid", ()), dtype=np.float64)
    hessian = params.get("hessian", "none")
    n, r = F.shape
    w1 = x1[:-1].astype(F.dtype, copy=False)
    need0 = t_grid.size > 0 or hessian == "delta"
    w0 = x0[:-1].astype(F.dtype, copy=False) if need0 else None
    # at w = 0 (a solve's first pass, the reference gradient) the margins are the bias: no GEMV
    w1_zero, w0_zero = not w1.any(), w0 is not None and not w0.any()
    cache = _block_cache(params, F)
    known1 = cache.get(params.get("x1_key"))
    known0 = cache.get(params.get("x0_key")) if need0 else None
    new1 = cache.blank(n) if known1 is None else None
    new0 = cache.blank(n) if need0 and known0 is None else None
    loss, n_active, n_changed, n_positive, n_costed = 0.0, 0, 0, 0, 0
    grad, pos_grad, dual = np.zeros(r + 1), np.zeros(r + 1), np.zeros(3)
    loss_grid = np.zeros(t_grid.size)
    pack = params.get("pack", True)
    gram_dtype = np.dtype(params.get("gram_dtype") or F.dtype)  # float64 over kernel blocks (see _implicit)
    gram = _GramSum(r, gram_dtype) if hessian == "full" else GramDelta(r, gram_dtype, pack) if hessian == "delta" else None
    step = getattr(F, "slab_rows", SLAB_ROWS)  # kernel rows computed slab by slab (_implicit.KernelRows)
    for s in range(0, n, step):
        sl = slice(s, min(s + step, n))
        Fs, cs = F[sl], c[sl]
        m1 = _slab_margins(Fs, sl, w1, w1_zero, x1[-1], known1, new1)
        rho1, slope1 = residual(m1, sl)
        costed = cs > 0.0
        active = (rho1 > 0.0) & costed  # rows of zero cost (held-out folds) are never active
        n_costed += int(np.count_nonzero(costed))
        n_positive += int(np.count_nonzero((m1 > 0.0) & costed))
        loss += float(np.dot(cs, rho1 * rho1))
        g = cs * slope1
        pos = g < 0.0  # rows whose dual variable -g is positive (see dsvm.problems._duality)
        g_pos = np.where(pos, g, 0.0)
        _two_sums(Fs, g.astype(F.dtype, copy=False), g_pos.astype(F.dtype, copy=False), grad, pos_grad)
        grad[-1] += float(g.sum())
        pos_grad[-1] += float(g_pos.sum())
        dual += (-float(g @ m1), float(cs[pos] @ np.square(rho1[pos])), -float(g_pos @ m1))
        n_active += int(active.sum())
        if need0:
            m0 = _slab_margins(Fs, sl, w0, w0_zero, x0[-1], known0, new0)
            before = (residual(m0, sl)[0] > 0.0) & (cs > 0.0)
            n_changed += int(np.count_nonzero(active != before))
        if t_grid.size:
            R = residual_grid(m0, m1 - m0, t_grid, sl)
            loss_grid += cs @ (R * R)
        if hessian == "full":
            gram.push(Fs, active, cs)
        elif hessian == "delta":
            gram.push(Fs, active & ~before, cs, 1.0)
            gram.push(Fs, before & ~active, cs, -1.0)
    if need0:
        cache.keep({params.get("x0_key"): known0 if known0 is not None else new0,
                    params.get("x1_key"): known1 if known1 is not None else new1})
    else:
        cache.keep({params.get("x1_key"): known1 if known1 is not None else new1})
    return {
        "loss": loss,
        "grad": grad,
        "n_active": n_active,
        "n_changed": n_changed,
        # rows of positive cost, and those of them with a margin above 0 at x1 (predicted positive)
        "n_costed": n_costed,
        "n_positive": n_positive,
        "loss_grid": loss_grid,
        # the dual bound's sums: the gradient over rows of positive dual variable, and dual_sums()'s scalars
        "pos_grad": pos_grad,
        "dual_sums": dual,
        # full: 0.0 (not a matrix) when no row entered the sum, which adds like a zero matrix in the reduction;
        # in this process a GramDelta of the block's rows where they are few (see _GramSum.result)
        "hess": _block_gram(gram, pack, gram_dtype, n_active * params.get("blocks", 1)),
    }


def _block_gram(gram, pack: bool, dtype, pass_rows: int):
    """What a block's pass hands on of its Gram sum: a change as it is, nothing without one, a full sum as
    :meth:`_GramSum.result` gives it: its rows (in this process) where the pass's active rows, estimated as
    ``pass_rows`` (this block's times the blocks), stay few enough to be joined as rows to the end.  A sum
    that outgrows them would be made into matrices by the reduction, which runs while the pass's blocks
    hold BLAS to one thread: there the blocks' own matrices, made in parallel, cost less."""
    if gram is None or isinstance(gram, GramDelta):
        return gram
    return gram.result(pack, dtype, rows_ok=pass_rows <= rows_kept(gram.r, dtype, pack))


def _block_cache(params: dict, F) -> MarginCache:
    """Block ``F``'s margin cache.  Over implicit features (``params["implicit"]``) it is keyed by the input
    rows a :class:`~dsvm.problems._implicit.KernelRows` computes from (its ``source``); a kernel block handed
    whole (the feature stage's opening passes) is made for one pass and is not cached."""
    store = params.get("margin_cache")
    if params.get("implicit"):
        source = getattr(F, "source", None)
        return MarginCache(None if source is None else store, source)
    return MarginCache(store, F)


def _active_hvp(F, c, x, V, residual, known=None):
    """``[F 1]_Aᵀ C [F 1]_A V`` for the rows active at ``x`` (``residual(m, sl) > 0`` and positive cost).

    One slab at a time: its margins at ``x``, its products with ``V`` and the
    sum back through ``Fsᵀ`` read the slab from cache (kernel rows computed
    slab by slab, :class:`~dsvm.problems._implicit.KernelRows`, are computed once).
    ``known``: the block's margins at ``x`` from the cache, which spare the GEMV, and over kernel rows
    computed on demand the kernel values of the inactive rows, which add nothing.
    """
    V2 = V[:, None] if V.ndim == 1 else V
    out = np.zeros(V2.shape, dtype=np.float64)
    w, W = x[:-1].astype(F.dtype, copy=False), V2[:-1].astype(F.dtype, copy=False)
    step = getattr(F, "slab_rows", SLAB_ROWS)
    if known is not None and getattr(F, "source", None) is not None:
        active = np.flatnonzero((residual(known, slice(None)) > 0.0) & (c > 0.0))
        slabs = [(active[s : s + step], known) for s in range(0, active.size, step)]
    else:
        slabs = [(slice(s, min(s + step, F.shape[0])), known) for s in range(0, F.shape[0], step)]
    for sl, margins in slabs:
        Fs, cs = F[sl], c[sl]
        m = margins[sl] if margins is not None else (Fs @ w).astype(np.float64) + x[-1]
        weights = np.where((residual(m, sl) > 0.0) & (cs > 0.0), cs, 0.0)
        U = ((Fs @ W).astype(np.float64) + V2[-1]) * weights[:, None]
        out[:-1] += Fs.T @ U.astype(F.dtype, copy=False)
        out[-1] += U.sum(axis=0)
    return out[:, 0] if V.ndim == 1 else out


# --------------------------------------------------------------------------
# Classification: squared hinge, one-vs-rest over integer class codes


@np.errstate(over="ignore", invalid="ignore")  # see the module docstring
def sqhinge_pass(F, codes, sample_weight, params):
    """One fused pass over a block for the semismooth Newton method.

    ``params`` (a dict, shared by all blocks):

    ``x0``, ``x1``
        current point and trial point (float64, bias last);
    ``t_grid``
        step sizes ``t`` at which to evaluate the loss on the segment
        ``x0 + t (x1 − x0)`` (for a batched Armijo line search);
    ``hessian``
        ``"none"``, ``"full"`` (``[F 1]_Aᵀ C [F 1]_A`` at ``x1``) or ``"delta"``
        (the change of that matrix from the active set at ``x0`` to the one at
        ``x1``);
    ``positive``, ``class_cost``
        the one-vs-rest positive class code and the per-class costs.

    Returns a dict of additive quantities, all evaluated at ``x1`` except
    ``loss_grid``: ``loss``, ``grad`` (of the loss), ``n_active``,
    ``n_changed``, ``n_costed`` and ``n_positive`` (rows of positive cost, and
    those of them with margin above 0), ``loss_grid``, ``hess`` (without
    the factor 2), and ``pos_grad`` and ``dual_sums``, from which
    :mod:`dsvm.problems._duality` bounds the optimum from below.
    """
    y = labels_pm1(codes, params["positive"])
    c = row_costs(codes, sample_weight, params["class_cost"])
    return _fused_pass(
        F, c, params, lambda m, sl: _hinge_residual(m, y[sl]),
        lambda m0, dm, t, sl: _hinge_residual_grid(m0, dm, t, y[sl]),
    )


sqhinge_pass.reads_slabs = True  # F may be rows computed slab by slab (dsvm.problems._implicit.KernelRows)


@np.errstate(over="ignore", invalid="ignore")  # see the module docstring
def sqhinge_hvp(F, codes, sample_weight, params):
    """``[F 1]_Aᵀ C [F 1]_A V`` for the active set at ``params["x"]``.

    ``params["V"]`` has shape (r+1,) or (r+1, m) (several vectors at once).
    """
    y = labels_pm1(codes, params["positive"])
    c = row_costs(codes, sample_weight, params["class_cost"])
    return _active_hvp(F, c, params["x"], params["V"], lambda m, sl: _hinge_residual(m, y[sl])[0],
                       _block_cache(params, F).get(params.get("x_key")))


sqhinge_hvp.reads_slabs = True


@np.errstate(over="ignore", invalid="ignore")  # see the module docstring
def sqhinge_active(F, codes, sample_weight, params):
    """Rows in the active set at ``params["x"]`` (margin below 1, positive cost)."""
    y = labels_pm1(codes, params["positive"])
    c = row_costs(codes, sample_weight, params["class_cost"])
    return (_hinge_residual(margins(F, params["x"]), y)[0] > 0.0) & (c > 0.0)


@np.errstate(over="ignore", invalid="ignore")  # see the module docstring
def hinge_loss_block(F, codes, sample_weight, params):
    """``Σ c_i max(0, 1 − y_i m_i)`` (the L1 hinge loss, for Pegasos's objective)."""
    y = labels_pm1(codes, params["positive"])
    c = row_costs(codes, sample_weight, params["class_cost"])
    return float(np.dot(c, np.maximum(0.0, 1.0 - y * margins(F, params["x"]))))


# --------------------------------------------------------------------------
# Regression: squared epsilon-insensitive loss


def _svr_costs(y, sample_weight, params):
    c = np.full(y.shape[0], params["C"], dtype=np.float64)
    return c * sample_weight if sample_weight is not None else c


@np.errstate(over="ignore", invalid="ignore")  # see the module docstring
def sqeps_pass(F, y, sample_weight, params):
    """The fused pass of :func:`sqhinge_pass` for the SVR loss (``params["C"]``, ``params["epsilon"]``)."""
    y = np.asarray(y, dtype=np.float64)
    eps = float(params["epsilon"])
    c = _svr_costs(y, sample_weight, params)
    return _fused_pass(
        F, c, params, lambda m, sl: _eps_residual(m, y[sl], eps),
        lambda m0, dm, t, sl: _eps_residual_grid(m0, dm, t, y[sl], eps),
    )


sqeps_pass.reads_slabs = True


@np.errstate(over="ignore", invalid="ignore")  # see the module docstring
def sqeps_active(F, y, sample_weight, params):
    """Rows outside the ε-tube at ``params["x"]`` (with positive cost)."""
    y = np.asarray(y, dtype=np.float64)
    c = _svr_costs(y, sample_weight, params)
    return (_eps_residual(margins(F, params["x"]), y, float(params["epsilon"]))[0] > 0.0) & (c > 0.0)


@np.errstate(over="ignore", invalid="ignore")  # see the module docstring
def sqeps_hvp(F, y, sample_weight, params):
    """Generalized Hessian-vector product of the SVR loss (without the factor 2)."""
    y = np.asarray(y, dtype=np.float64)
    c = _svr_costs(y, sample_weight, params)
    eps = float(params["epsilon"])
    return _active_hvp(F, c, params["x"], params["V"], lambda m, sl: _eps_residual(m, y[sl], eps)[0],
                       _block_cache(params, F).get(params.get("x_key")))


sqeps_hvp.reads_slabs = True
