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

import functools

import numpy as np

from ..blocks import thread_buffer
from ._margin_cache import MarginCache

SLAB_ROWS = 8192

#: scratch arrays up to this size are kept by their thread (at r = 1000 all three of a Gram sum: 45 MB in
#: all); larger ones, whose page faults are small next to their products, are made afresh each time
SCRATCH_KEEP_BYTES = 32 * 2**20


def _thread_scratch(name: str, shape: tuple[int, ...], dtype) -> np.ndarray:
    """A scratch array of this thread's (:func:`~dsvm.blocks.thread_buffer`), reused by its next pass; its
    content is left as it was.

    Fresh arrays of megabytes per block are page-faulted in again every time: glibc maps large arrays
    afresh and unmaps them when freed (from 16 MiB on the workers dsvm starts, from 128 KiB under Dask's
    own malloc setting), and a fault or unmap stalls the worker's other threads.  Arrays over
    :data:`SCRATCH_KEEP_BYTES` are not kept.
    """
    dtype = np.dtype(dtype)
    need = int(np.prod(shape)) * dtype.itemsize
    if need > SCRATCH_KEEP_BYTES:
        return np.empty(shape, dtype=dtype)
    return thread_buffer(need, f"scratch-{name}")[:need].view(dtype).reshape(shape)


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


def tdot(F: np.ndarray, v: np.ndarray) -> np.ndarray:
    """``Fᵀ v`` accumulated in float64 over row slabs (v float64, length n)."""
    n = F.shape[0]
    out = np.zeros(F.shape[1], dtype=np.float64)
    vv = v.astype(F.dtype, copy=False)
    for s in range(0, n, SLAB_ROWS):
        out += F[s : s + SLAB_ROWS].T @ vv[s : s + SLAB_ROWS]
    return out


@functools.lru_cache(maxsize=2)
def _triangle_positions(n: int) -> tuple[np.ndarray, np.ndarray]:
    """Flat positions in an ``n x n`` C-ordered matrix of its upper triangle (row by row) and of the
    mirrored lower entries; cached because every pass of a solve packs matrices of the same size."""
    rows, cols = np.triu_indices(n)
    dtype = np.int32 if n * n < 2**31 else np.int64
    upper, lower = (rows * n + cols).astype(dtype), (cols * n + rows).astype(dtype)
    upper.setflags(write=False)
    lower.setflags(write=False)
    return upper, lower


def pack_symmetric(A: np.ndarray, dtype) -> np.ndarray:
    """The upper triangle of a symmetric matrix, row by row, in ``dtype``.

    Partial Gram matrices travel from the workers in this form: half the
    entries, and in the features' precision (a float32 block's Gram holds no
    more than float32 accuracy anyway) — a quarter of the bytes for float32.
    """
    upper, _ = _triangle_positions(A.shape[0])
    return np.ascontiguousarray(A).reshape(-1).take(upper).astype(dtype, copy=False)


def unpack_symmetric(packed: np.ndarray) -> np.ndarray:
    """Inverse of :func:`pack_symmetric`, in float64."""
    n = int((np.sqrt(8 * packed.size + 1) - 1) / 2)
    upper, lower = _triangle_positions(n)
    A = np.zeros((n, n))
    flat = A.reshape(-1)
    flat[upper] = packed
    flat[lower] = packed
    return A


def scaled_rows(F: np.ndarray, rows: np.ndarray, c: np.ndarray, dtype=None) -> tuple[np.ndarray, np.ndarray]:
    """``(sqrt(c) F[rows], sqrt(c))`` for the rows of a Gram update (a copy, in ``dtype``: default F's)."""
    sc = np.sqrt(c[rows])
    S = F[rows]
    if dtype is not None and np.dtype(dtype) != S.dtype:
        S = S.astype(dtype)
    S *= sc[:, None].astype(S.dtype)
    return S, sc


class _GramSum:
    """Signed sum ``Σ ± c_i [f_i 1]ᵀ[f_i 1]`` over the rows pushed: products in the features' dtype, summed in float64.

    Rows are scaled by ``sqrt(c_i)`` and buffered; each batch of up to
    :data:`SLAB_ROWS` rows becomes at most two symmetric products (SYRK), one
    for the rows added and one for the rows removed, so an update by a
    handful of rows that entered or left the active set costs a small
    product per block, not two ``(r+1)²`` float64 temporaries per slab.  Two
    SYRKs do half the flops of one signed GEMM (which would also need a scaled
    copy of the rows).  Each product is added in place to a float64 total.

    Rows added with one cost (no sample weights, one cost per class: the
    common case) are copied once, unscaled, into a buffer of
    :data:`SLAB_ROWS` rows that is reused (one per thread, kept across
    passes), and their product is scaled by the cost afterwards: the SYRK of
    the opening's full Gram matrix then costs one copy of the active rows,
    not three (gather, scale, join).  The buffer, the product and the total
    are the thread's scratch arrays (:func:`_thread_scratch`), so one sum per
    thread at a time; :meth:`result` hands out a copy.
    """

    def __init__(self, r: int, dtype):
        self.r, self.dtype = r, np.dtype(dtype)
        # buffered (sqrt(c)-scaled rows, sqrt(c)) per sign: rows added (+1) and removed (-1)
        self.parts: dict[float, list[tuple[np.ndarray, np.ndarray]]] = {1.0: [], -1.0: []}
        self.n_buffered = 0
        self.total = None
        # unscaled rows added with the one cost self._cost, gathered into self._rows
        self._rows: np.ndarray | None = None
        self._n_rows = 0
        self._cost = 0.0

    def push(self, F: np.ndarray, rows: np.ndarray, c: np.ndarray, sign: float = 1.0) -> None:
        """Add (``sign`` +1) or subtract the rows ``F[rows]`` with costs ``c[rows]``."""
        if not rows.any():
            return
        if sign > 0:
            idx = np.flatnonzero(rows)
            cost = c[idx]
            if (cost == cost[0]).all():
                self._gather(F, idx, float(cost[0]))
                return
        self.add_scaled(*scaled_rows(F, rows, c, self.dtype), sign)

    def _gather(self, F: np.ndarray, idx: np.ndarray, cost: float) -> None:
        """Copy the rows ``F[idx]`` (all of cost ``cost``) into the buffer, taking its product when it is full."""
        if self._rows is None:
            self._rows = _thread_scratch("gram_rows", (SLAB_ROWS, self.r), self.dtype)
        if self._n_rows and cost != self._cost:
            # rows of the earlier cost join the scaled batch (a copy: the buffer is reused), so that a cost
            # changing from slab to slab does not cost one (r+1)² product per change
            n, root = self._n_rows, np.sqrt(self._cost)
            self.add_scaled(self._rows[:n] * self.dtype.type(root), np.full(n, root))
            self._n_rows = 0
        self._cost = cost
        while idx.size:
            take = min(idx.size, SLAB_ROWS - self._n_rows)
            into = self._rows[self._n_rows : self._n_rows + take]
            if F.dtype == self.dtype:
                # mode="clip": out is written directly (mode="raise" would buffer it); idx is in range
                F.take(idx[:take], axis=0, out=into, mode="clip")
            else:
                into[...] = F[idx[:take]]
            self._n_rows += take
            idx = idx[take:]
            if self._n_rows == SLAB_ROWS:
                self._flush_rows()

    def _flush_rows(self) -> None:
        """``cost · [B 1]ᵀ[B 1]`` of the gathered rows ``B``, added to the total."""
        n = self._n_rows
        if not n:
            return
        self._add_product([(self._rows[:n], np.ones(n))], self._cost)
        self._n_rows = 0

    def add_scaled(self, S: np.ndarray, sc: np.ndarray, sign: float = 1.0) -> None:
        """Add or subtract rows already scaled: ``S = sqrt(c) F[rows]``, ``sc = sqrt(c)``."""
        if not S.shape[0]:
            return
        self.parts[1.0 if sign > 0 else -1.0].append((S, sc))
        self.n_buffered += S.shape[0]
        if self.n_buffered >= SLAB_ROWS:
            self._flush()

    def _add_product(self, parts: list, scale: float) -> None:
        """``total += scale · Σ [s_i f_i  s_i]ᵀ[s_i f_i  s_i]`` over the buffered rows ``parts``."""
        r = self.r
        S = parts[0][0] if len(parts) == 1 else np.concatenate([p[0] for p in parts])
        sc = parts[0][1] if len(parts) == 1 else np.concatenate([p[1] for p in parts])
        if self.total is None:
            self.total = _thread_scratch("gram_total", (r + 1, r + 1), np.float64)
            self.total.fill(0.0)
        T = self.total
        P = np.matmul(S.T, S, out=_thread_scratch("gram_product", (r, r), self.dtype))  # numpy runs Sᵀ S as a SYRK
        if scale == -1.0:
            np.subtract(T[:r, :r], P, out=T[:r, :r])
        else:
            if scale != 1.0:
                P *= self.dtype.type(scale)  # in place: one rounding of F's dtype, as the product's own
            np.add(T[:r, :r], P, out=T[:r, :r])
        col = tdot(S, sc)  # a GEMV: faster than a float64 sum of the rows where sc is 1
        col *= scale
        T[:r, r] += col
        T[r, :r] += col
        T[r, r] += scale * float(np.dot(sc, sc))

    def _flush(self) -> None:
        for sign, parts in self.parts.items():
            if parts:
                self._add_product(parts, sign)
        self.parts, self.n_buffered = {1.0: [], -1.0: []}, 0

    def result(self, pack: bool, dtype):
        """The sum — packed by :func:`pack_symmetric` when ``pack`` (to travel between
        processes), else the matrix itself — or ``0.0`` when no row was pushed."""
        self._flush_rows()
        self._flush()
        if self.total is None:
            return 0.0
        return pack_symmetric(self.total, dtype) if pack else self.total.copy()  # the total is the thread's


class GramDelta:
    """The change ``Σ ± c_i [f_i 1]ᵀ[f_i 1]`` of the Gram matrix over the rows that entered (+) or left (−)
    the active set: the rows themselves while they are few, their Gram matrix once they are many.

    A pass near the solution changes a handful of rows per block; forming an
    ``(r+1)²`` matrix for them would cost ``r²`` work per block whatever their
    number (and ``(r+1)²`` numbers to move).  Blocks return their rows
    (``sqrt(c)``-scaled, in the features' dtype) while there are at most
    ``r / 2`` of them; sums (:meth:`__add__`, in the tree reduction) join
    the rows and turn them into a matrix only when they outnumber that.  The
    matrix is kept as a packed upper triangle (:func:`pack_symmetric`), in the
    features' dtype when ``pack`` (to travel between processes, as the full
    Gram's partial sums do), else in float64.
    """

    def __init__(self, r: int, dtype, pack: bool):
        self.r, self.dtype, self.pack = int(r), np.dtype(dtype), bool(pack)
        self.parts: dict[float, list[tuple[np.ndarray, np.ndarray]]] = {1.0: [], -1.0: []}
        self.n_rows = 0
        self.packed: np.ndarray | None = None

    @property
    def max_rows(self) -> int:
        """Rows kept as rows; beyond, their Gram matrix."""
        return max(1, self.r // 2)

    def push(self, F: np.ndarray, rows: np.ndarray, c: np.ndarray, sign: float) -> None:
        """Add (``sign`` +1) or subtract the rows ``F[rows]`` with costs ``c[rows]``."""
        if rows.any():
            self._add_parts([scaled_rows(F, rows, c, self.dtype)], 1.0 if sign > 0 else -1.0)

    def _add_parts(self, parts: list, sign: float) -> None:
        self.parts[sign].extend(parts)
        self.n_rows += sum(S.shape[0] for S, _ in parts)
        if self.n_rows > self.max_rows:
            self.materialize()

    def materialize(self) -> None:
        """Turn the rows kept so far into (a term of) the packed Gram matrix."""
        if not self.n_rows:
            return
        gram = _GramSum(self.r, self.dtype)
        for sign, parts in self.parts.items():
            for S, sc in parts:
                gram.add_scaled(S, sc, sign)
        packed = gram.result(True, self.dtype if self.pack else np.float64)
        self.packed = packed if self.packed is None else self.packed + packed
        self.parts, self.n_rows = {1.0: [], -1.0: []}, 0

    def __add__(self, other):
        if not isinstance(other, GramDelta):  # the 0.0 or None of an empty reduction
            return self
        out = GramDelta(self.r, self.dtype, self.pack)
        for part in (self, other):
            if part.packed is not None:
                out.packed = part.packed if out.packed is None else out.packed + part.packed
        for sign in (1.0, -1.0):
            out.parts[sign] = self.parts[sign] + other.parts[sign]
        out.n_rows = self.n_rows + other.n_rows
        if out.n_rows > out.max_rows:
            out.materialize()
        return out

    __radd__ = __add__

    def matrix(self) -> np.ndarray:
        """The change as an ``(r+1) x (r+1)`` float64 matrix."""
        self.materialize()
        if self.packed is None:
            return np.zeros((self.r + 1, self.r + 1))
        return unpack_symmetric(self.packed)


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
    cache = MarginCache(params.get("margin_cache"), F)
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
        # full: 0.0 (not a matrix) when no row entered the sum, which adds like a zero matrix in the reduction
        "hess": gram if isinstance(gram, GramDelta) else gram.result(pack, gram_dtype) if gram is not None else None,
    }


def _active_hvp(F, c, x, V, residual):
    """``[F 1]_Aᵀ C [F 1]_A V`` for the rows active at ``x`` (``residual(m, sl) > 0`` and positive cost).

    One slab at a time: its margins at ``x``, its products with ``V`` and the
    sum back through ``Fsᵀ`` read the slab from cache (kernel rows computed
    slab by slab, :class:`~dsvm.problems._implicit.KernelRows`, are computed once).
    """
    V2 = V[:, None] if V.ndim == 1 else V
    out = np.zeros(V2.shape, dtype=np.float64)
    w, W = x[:-1].astype(F.dtype, copy=False), V2[:-1].astype(F.dtype, copy=False)
    step = getattr(F, "slab_rows", SLAB_ROWS)
    for s in range(0, F.shape[0], step):
        sl = slice(s, min(s + step, F.shape[0]))
        Fs, cs = F[sl], c[sl]
        weights = np.where((residual((Fs @ w).astype(np.float64) + x[-1], sl) > 0.0) & (cs > 0.0), cs, 0.0)
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
    return _active_hvp(F, c, params["x"], params["V"], lambda m, sl: _hinge_residual(m, y[sl])[0])


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
    return _active_hvp(F, c, params["x"], params["V"], lambda m, sl: _eps_residual(m, y[sl], eps)[0])


sqeps_hvp.reads_slabs = True
