"""Feature maps over stored kernel columns, for sharing one kernel evaluation between several ``k``.

The CV search computes the kernel columns ``K(X, L_max)`` of the largest
landmark set once per ``gamma`` (:class:`KernelColumnsMap`) and the Nyström
features of every nested ``k`` from them, ``F_k = K[:, :k] · M_k``
(:class:`ProjectedMap`): one GEMM, no kernel evaluations.  Both quack like
:class:`~dsvm.approx.FeatureMap` where a feature store needs it
(``transform_block``, ``dtype``, ``n_output``, ``n_components``).
"""

from __future__ import annotations

import numpy as np

from ._kernels import PreparedLandmarks, kernel_block

__all__ = ["KernelColumnsMap", "ProjectedMap"]


class KernelColumnsMap:
    """The kernel columns ``K(X, L)`` as a feature map (``n_output`` = number of landmarks)."""

    def __init__(self, prep: PreparedLandmarks):
        self.prep = prep
        self.dtype = np.dtype(prep.dtype)
        self.n_output = self.n_components = int(prep.landmarks.shape[0])

    def transform_block(self, X_block, out: np.ndarray | None = None) -> np.ndarray:
        K = kernel_block(X_block, self.prep)
        if out is None:
            return K
        out[...] = K
        return out


class ProjectedMap:
    """``F_k = K[:, :k] · M_k`` from stored kernel columns ``K`` (``normalization = M_kᵀ``, shape ``(r, k)``)."""

    def __init__(self, normalization: np.ndarray, dtype):
        self.M = np.ascontiguousarray(normalization.T, dtype=dtype)  # (k, r)
        self.dtype = np.dtype(dtype)
        self.n_components, self.n_output = self.M.shape

    def transform_block(self, K_block, out: np.ndarray | None = None) -> np.ndarray:
        return np.matmul(K_block[:, : self.n_components], self.M, out=out)
