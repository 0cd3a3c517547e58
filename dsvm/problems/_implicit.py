"""Implicit features (``feature_store="implicit"``): ``F = K(X, L) · M`` used without ever being formed.

A linear model on the features only ever needs ``F`` through products, and each
has a form on the kernel block ``K = K(X_b, L)`` (``k`` columns) that skips the
projection by ``M`` (``2 n k r`` flops, most of a feature stage):

* margins ``F w + b = K (M w) + b``;
* gradients ``Fᵀ g = Mᵀ (Kᵀ g)``;
* the Gram matrix of the active rows ``F_Aᵀ F_A = Mᵀ (K_Aᵀ K_A) M``.

The Gram matrix is summed in float64 from the float32 kernel values: ``M``
(``V_r Λ_r^{-1/2}``, or ``R⁻¹``) stretches the directions of ``K(L, L)`` by
up to ``(eig_rtol λ_max)^{-1/2}``, so a float32 sum carried through it on
both sides would have its rounding, relative to the Gram matrix, magnified
up to ``1/eig_rtol`` times (10⁶ by default in float32): enough to stall
Newton's method.  Margins and gradients, carried through ``M`` once, keep
float32 accuracy relative to the product's size.

So a pass over :class:`ImplicitFeatures` computes each block's kernel values
from ``X`` and hands them to the same block functions a pass over ``F`` uses,
with its points lifted to the kernel's coordinates (:meth:`ImplicitFeatures.lift`:
``(w, b) → (M w, b)``); the k-vectors and the ``(k+1)²`` Gram matrix that come
back are carried to the features' coordinates in this process
(:meth:`ImplicitFeatures.project`, :meth:`ImplicitFeatures.project_gram`).
The operators of :mod:`dsvm.problems._operators` do both, so a solver sees the
same problem as over stored features.  Nothing of size ``n x k`` outlives a
block's task, and no scratch disk is used.

Where the rows themselves are wanted in this process (``take``, ``compute``:
LIBLINEAR's DCD gathers ``F``) they are the real features, computed there.
"""

from __future__ import annotations

import hashlib

import numpy as np
import scipy.linalg

from ..blas import blas_for_order
from ..blocks import RowBlocks
from ._gram import GramDelta, unpack_symmetric

__all__ = ["ImplicitFeatures"]


#: the triangular product of the float64 map (a module name: an instance attribute would not pickle)
_TRMM = scipy.linalg.blas.dtrmm

#: bytes of kernel values one slab of :class:`KernelRows` holds: it stays in the CPU cache while a pass reads it
KERNEL_SLAB_BYTES = 4 * 2**20


class KernelRows:
    """The kernel values ``K(X_block, L)`` of one block, computed slab by slab as a pass reads them.

    The fused Newton pass (:func:`~dsvm.problems._losses.sqhinge_pass`) reads its features one slab of
    :attr:`slab_rows` rows at a time (``rows[a:b]``); given this, each slab is computed there and read
    from the CPU cache by the pass's products, and the ``n_b x k`` block is never held.  Other block
    functions get the whole block (``np.asarray``).
    """

    def __init__(self, X_block, kernel):
        self.X, self.kernel = X_block, kernel
        #: the input rows these kernel values are computed from: what the block's margin cache is keyed by
        self.source = X_block
        self.dtype = np.dtype(kernel.dtype)
        k = kernel.components.shape[0]
        self.shape = (X_block.shape[0], k)
        self.slab_rows = int(min(8192, max(256, KERNEL_SLAB_BYTES // (k * self.dtype.itemsize))))

    def __getitem__(self, rows) -> np.ndarray:
        """The kernel values of ``rows`` (a slice, or an index array of the rows wanted)."""
        return self.kernel.kernel_block(self.X[rows])

    def __array__(self, dtype=None, copy=None):
        K = self.kernel.kernel_block(self.X)
        return K if dtype is None else K.astype(dtype, copy=False)


def _on_kernel_block(X_block, *rest):
    """``fn(K(X_block, L), *aligned, *shared)``: ``rest`` is ``(*aligned, kernel, fn, *shared)``, the
    split told by ``kernel``'s position (aligned blocks are arrays or None, never a kernel; a fold's state
    comes last among them).  A function
    marked ``reads_slabs`` gets :class:`KernelRows`, the others the block's kernel values."""
    at = next(i for i, v in enumerate(rest) if isinstance(v, _KernelTag))
    aligned, tag, fn, shared = rest[:at], rest[at], rest[at + 1], rest[at + 2:]
    block = KernelRows(X_block, tag.kernel) if getattr(fn, "reads_slabs", False) else tag.kernel.kernel_block(X_block)
    return fn(block, *aligned, *shared)


class _KernelTag:
    """The landmark kernel as a shared argument, marked so that the block wrappers can find it."""

    def __init__(self, kernel):
        self.kernel = kernel


def _kernel_token(fmap) -> bytes:
    """16 bytes that differ between maps of different landmarks, kernel or dtype."""
    digest = hashlib.blake2b(digest_size=16)
    digest.update(repr((fmap.spec, np.dtype(fmap.dtype).str, fmap.components.shape)).encode())
    digest.update(np.ascontiguousarray(fmap.components).tobytes())
    return digest.digest()


class ImplicitFeatures(RowBlocks):
    """The features ``F = K(X, L) · M`` of a fit, never formed: passes see kernel blocks.

    Parameters
    ----------
    X : RowBlocks
        The (scaled) input rows.
    fmap : FeatureMap
        The Nyström map (:class:`dsvm.approx.FeatureMap`).

    Notes
    -----
    :meth:`map_reduce` and :meth:`fold` hand their function the *kernel* block
    ``K(X_b, L)`` (``k`` columns, the map's dtype); a function that takes a
    point must get it lifted (:meth:`lift`), and its sums carried back
    (:meth:`project`, :meth:`project_gram`).  :attr:`n_cols` is the number of
    features ``r``; :attr:`kernel_cols` that of kernel columns ``k``.
    """

    def __init__(self, X: RowBlocks, fmap):
        self.X = X
        self.fmap = fmap
        self.chunks = X.chunks
        self._tag = _KernelTag(fmap.landmark_kernel())
        self.M = np.ascontiguousarray(fmap.normalization.T, dtype=np.float64)  # k x r
        # a triangular M (r = k) as L = Mᵀ in Fortran order, a view of M, for the triangular products; else None
        self._lower = self.M.T if fmap.triangular else None
        #: the kernel's fingerprint: margins cached by input block (workers keep them across fits) are
        #: looked up with it, so another kernel's margins at the same point are never served
        self.cache_token = _kernel_token(fmap)

    @property
    def n_cols(self) -> int:
        return self.fmap.n_output

    @property
    def kernel_cols(self) -> int:
        return self.fmap.n_components

    @property
    def is_distributed(self) -> bool:
        return self.X.is_distributed

    def map_reduce(self, fn, aligned=(), shared=(), combine=None):
        extra = {} if combine is None else {"combine": combine}  # None: the blocks' own default (a sum)
        return self.X.map_reduce(_on_kernel_block, aligned=aligned, shared=(self._tag, fn, *shared), **extra)

    def fold(self, fn, state, aligned=(), shared=(), order=None):
        # a fold's step gets (*aligned, state, *shared): the state is the last of the arrays before the kernel
        return self.X.fold(_on_kernel_block, state, aligned=aligned, shared=(self._tag, fn, *shared), order=order)

    def take(self, indices):
        return self.fmap.transform_block(self.X.take(indices))

    def compute(self):
        return self.fmap.transform_block(self.X.compute())

    def iter_blocks(self, batch: int = 4):
        for block in self.X.iter_blocks(batch):
            yield self.fmap.transform_block(block)

    def lift(self, x: np.ndarray) -> np.ndarray:
        """A point (or points, one per row) ``(w, b)`` of the features as ``(M w, b)``, the kernel's coordinates."""
        x = np.asarray(x, dtype=np.float64)
        lifted = np.empty(x.shape[:-1] + (self.kernel_cols + 1,))
        lifted[..., :-1] = x[..., :-1] @ self.M.T
        lifted[..., -1] = x[..., -1]
        return lifted

    def project(self, g: np.ndarray) -> np.ndarray:
        """A sum over rows in the kernel's coordinates ``(Kᵀ v, Σ v)`` as the features' ``(Fᵀ v, Σ v)``."""
        g = np.asarray(g, dtype=np.float64)
        out = np.empty(g.shape[:-1] + (self.n_cols + 1,))
        out[..., :-1] = g[..., :-1] @ self.M
        out[..., -1] = g[..., -1]
        return out

    def project_gram(self, H: np.ndarray) -> np.ndarray:
        """``Pᵀ H P`` with ``P = diag(M, 1)``: a ``(k+1)²`` Gram matrix of kernel rows as that of feature rows.

        A triangular ``M`` (the Cholesky maps) takes two triangular products (TRMM, ``k³`` flops each)
        instead of two GEMMs.
        """
        k, M = self.kernel_cols, self.M
        out = np.empty((self.n_cols + 1,) * 2)
        with blas_for_order(k):
            if self._lower is None:
                out[:-1, :-1] = M.T @ (H[:k, :k] @ M)
            else:  # H M = H Lᵀ, then Mᵀ (H M) = L (H M); H[:k, :k].T is H's block in Fortran order (no copy)
                HM = _TRMM(1.0, self._lower, H[:k, :k].T, side=1, lower=1, trans_a=1)
                out[:-1, :-1] = _TRMM(1.0, self._lower, HM, side=0, lower=1, overwrite_b=1)
        out[:-1, -1] = out[-1, :-1] = H[:k, k] @ M
        out[-1, -1] = H[k, k]
        return 0.5 * (out + out.T)

    def project_delta(self, delta: GramDelta) -> np.ndarray:
        """A :class:`~dsvm.problems._gram.GramDelta` of kernel rows as the ``(r+1)²`` float64 change of the
        features' Gram matrix.

        The rows it still keeps are carried to the features first (``S M``: ``n_S k r`` flops, where the
        matrix they would make costs ``2 k³`` to project), so a pass that changes a few hundred rows does
        not pay for two ``k³`` products; only its part already summed into a matrix is projected whole.
        """
        out = delta.with_rows(self._times_map, self.n_cols).matrix()
        if delta.packed is not None:  # packed when it came from other processes (GramDelta.pack)
            summed = unpack_symmetric(delta.packed) if delta.packed.ndim == 1 else delta.packed
            out = out + self.project_gram(summed)
        return out

    def _times_map(self, S: np.ndarray) -> np.ndarray:
        """``S M`` for kernel rows ``S`` (float64)."""
        if self._lower is None:
            return S @ self.M
        # (S M)ᵀ = L Sᵀ, and Sᵀ of C-ordered rows is Fortran-ordered: no copy either way
        return _TRMM(1.0, self._lower, np.asarray(S, dtype=np.float64).T, side=0, lower=1).T
