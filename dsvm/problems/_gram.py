"""The Gram matrix sums of the Newton pass, ``Σ ± c_i [f_i 1]ᵀ[f_i 1]`` over active rows — pure numpy.

:class:`_GramSum` sums a block's rows by symmetric products (SYRK) in the
features' dtype into a float64 total; :class:`GramDelta` is the change of that
sum from one active set to the next, kept as rows while they are few.  Sums
travel between processes packed (:func:`pack_symmetric`).  Products ``Fᵀ v``
are taken over slabs of :data:`SLAB_ROWS` rows whose partial sums are
accumulated in float64 (:func:`tdot`), as the pass's gradient is
(:mod:`dsvm.problems._losses`).
"""

from __future__ import annotations

import functools

import numpy as np

from ..blocks import thread_buffer

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

    def result(self, pack: bool, dtype, rows_ok: bool = False):
        """The sum — packed by :func:`pack_symmetric` when ``pack`` (to travel between
        processes), else the matrix itself — or ``0.0`` when no row was pushed.  The sum's last use: a total
        larger than :data:`SCRATCH_KEEP_BYTES` is handed out without a copy.

        With ``rows_ok`` and not ``pack``, rows that never made a product and are no more than a
        :class:`GramDelta` keeps come back as that change from zero, their rows: a block of a few active
        rows then makes no ``(r+1)²`` matrix, and the reduction joins its rows with the other blocks'."""
        if rows_ok and not pack and self.total is None:
            rows = self._as_rows()
            if rows is not None:
                return rows
        self._flush_rows()
        self._flush()
        if self.total is None:
            return 0.0
        if pack:
            return pack_symmetric(self.total, dtype)
        if self.total.nbytes > SCRATCH_KEEP_BYTES:  # made for this sum alone (_thread_scratch): handed out as it is
            return self.total
        return self.total.copy()  # the thread's scratch, which its next sum reuses

    def _as_rows(self) -> GramDelta | None:
        """The rows pushed so far as a :class:`GramDelta` (in this process), or None where there are none or
        more than it keeps as rows."""
        n = self._n_rows + self.n_buffered
        if not n or n > rows_kept(self.r, self.dtype, False):
            return None
        delta = GramDelta(self.r, self.dtype, pack=False)
        for sign, parts in self.parts.items():
            if parts:
                delta.add_parts(parts, sign)
        if self._n_rows:
            root = np.sqrt(self._cost)
            S = self._rows[: self._n_rows] * self.dtype.type(root)  # a copy: the buffer is the thread's scratch
            delta.add_parts([(S, np.full(self._n_rows, root))], 1.0)
            self._n_rows = 0
        self.parts, self.n_buffered = {1.0: [], -1.0: []}, 0
        return delta


def rows_kept(r: int, dtype, pack: bool) -> int:
    """How many rows of ``r`` features a :class:`GramDelta` keeps as rows: ``r / 2`` where it travels between
    processes, else as many as fill two float64 ``(r+1)²`` matrices."""
    if pack:
        return max(1, r // 2)
    return max(1, 16 * (r + 1) ** 2 // (r * np.dtype(dtype).itemsize))


class GramDelta:
    """The change ``Σ ± c_i [f_i 1]ᵀ[f_i 1]`` of the Gram matrix over the rows that entered (+) or left (−)
    the active set: the rows themselves while they are few, their Gram matrix once they are many.

    A pass near the solution changes a handful of rows per block; forming an
    ``(r+1)²`` matrix for them would cost ``r²`` work per block whatever their
    number (and ``(r+1)²`` numbers to move).  Blocks return their rows
    (``sqrt(c)``-scaled, in the features' dtype) while there are at most
    :attr:`max_rows` of them; sums (:meth:`__add__`, in the tree reduction) join
    the rows and turn them into a matrix only when they outnumber that.  When
    ``pack`` (the sum travels between processes, as the full Gram's partial
    sums do) that is ``r / 2`` rows, and the matrix is a packed upper triangle
    (:func:`pack_symmetric`) in the features' dtype.  In this process rows are
    kept while their bytes are at most those of two float64 matrices (``4 r``
    float32 rows, ``2 r`` float64 ones: a matrix per block, made, copied and
    added, costs more than its product at large ``r``), and the matrix is a
    dense float64 one.
    """

    def __init__(self, r: int, dtype, pack: bool):
        self.r, self.dtype, self.pack = int(r), np.dtype(dtype), bool(pack)
        self.parts: dict[float, list[tuple[np.ndarray, np.ndarray]]] = {1.0: [], -1.0: []}
        self.n_rows = 0
        # the rows' Gram matrix so far: packed when self.pack, else dense float64
        self.packed: np.ndarray | None = None

    @property
    def max_rows(self) -> int:
        """Rows kept as rows; beyond, their Gram matrix."""
        return rows_kept(self.r, self.dtype, self.pack)

    def push(self, F: np.ndarray, rows: np.ndarray, c: np.ndarray, sign: float) -> None:
        """Add (``sign`` +1) or subtract the rows ``F[rows]`` with costs ``c[rows]``."""
        if rows.any():
            self.add_parts([scaled_rows(F, rows, c, self.dtype)], 1.0 if sign > 0 else -1.0)

    def add_parts(self, parts: list, sign: float) -> None:
        """Add (``sign`` +1) or subtract rows already scaled, ``(sqrt(c) F[rows], sqrt(c))`` pairs."""
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
        part = gram.result(self.pack, self.dtype if self.pack else np.float64)
        if isinstance(part, np.ndarray):  # not the 0.0 of rows that cancelled to nothing
            self.packed = part if self.packed is None else self.packed + part
        self.parts, self.n_rows = {1.0: [], -1.0: []}, 0

    # numpy defers ``matrix + delta`` to __radd__ instead of adding elementwise
    __array_ufunc__ = None

    def __add__(self, other):
        if isinstance(other, np.ndarray) and not self.pack:  # a block's own float64 sum, in this process
            other = GramDelta.summed(other, self.r, self.dtype)
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

    @classmethod
    def summed(cls, matrix: np.ndarray, r: int, dtype) -> GramDelta:
        """A dense float64 ``(r+1) x (r+1)`` sum as a change held in this process (shared, not copied)."""
        out = cls(r, dtype, pack=False)
        out.packed = matrix
        return out

    def with_rows(self, fn, r: int) -> GramDelta:
        """The rows this change still keeps, each batch mapped by ``fn`` to ``r`` columns, as a change of its
        own (without the part already summed into a matrix)."""
        out = GramDelta(r, self.dtype, self.pack)
        for sign, parts in self.parts.items():
            if parts:
                out.add_parts([(fn(S), sc) for S, sc in parts], sign)
        return out

    def matrix(self) -> np.ndarray:
        """The change as an ``(r+1) x (r+1)`` float64 matrix (in this process the sum itself, which a sum
        of deltas may share with its terms: not to be changed in place)."""
        self.materialize()
        if self.packed is None:
            return np.zeros((self.r + 1, self.r + 1))
        return unpack_symmetric(self.packed) if self.packed.ndim == 1 else self.packed
