"""The feature stage of a fit: ``F = K(X, L) · M`` kept in memory, on a scratch disk, recomputed, or never
formed (implicit: every pass computes kernel blocks, :mod:`dsvm.problems._implicit`).

:func:`plan_feature_store` decides which by a small cost model
(``feature_store="auto"``); :class:`FeatureStore` holds the feature blocks
for the length of a fit and removes its scratch store afterwards.  On disk
the blocks are raw files read with ``O_DIRECT`` (:func:`dsvm.blocks.spill_blocks`);
a reduction the fit needs over the new features (the solver's first
evaluations) runs on each block while it is written, so it costs no read.
"""

from __future__ import annotations

import logging
import os
from contextlib import ExitStack

import numpy as np

from .. import config
from ..approx import check_expansion, check_features
from ..blocks import (
    BlockReduction,
    RowBlocks,
    cluster_memory,
    make_temporary_folder,
    remove_temporary_folder,
    row_index_blocks,
    spill_blocks,
)
from ..checks import check_finite_block
from ..exceptions import disk_full_error, is_disk_full
from ..options import FEATURE_STORES
from ..signals import sigterm_cleanup
from ._implicit import ImplicitFeatures

logger = logging.getLogger(__name__)

__all__ = ["FEATURE_STORES", "STORE_DTYPES", "plan_feature_store", "plan_store_dtype", "FeatureStore"]

#: values of ``dsvm.feature-store-dtype``
STORE_DTYPES = ("float32", "int16", "auto")
#: seconds one thread takes to decode one 16-bit value (a multiply at memory speed: 10 ms per 64 MB of float32)
DECODE_SECONDS = 1e-9


def _feature_block(X_block, fmap, check_finite, offset=0, out=None):
    """Features of one block; its input checked finite when ``check_finite``, its features always (a kernel or a
    map that overflows the features' dtype is named with the row, never stored)."""
    if check_finite:
        check_finite_block(X_block, offset)
    with np.errstate(over="ignore", invalid="ignore"):  # an overflow is named just below, with its row
        F = fmap.transform_block(X_block) if out is None else fmap.transform_block(X_block, out=out)
    check_features(F, X_block, fmap, offset)
    return F


#: passes a fit is expected to make over its features (a Newton solve with the subsample opening), for weighing
#: a feature stage made once against per-pass costs
EXPECTED_PASSES = 6
#: float32 exps one thread computes per second (numpy's vectorised loop), for the kernel's cost
EXP_RATE = 1e9


def plan_feature_store(
    requested: str, X: RowBlocks, n_out: int, n_components: int, itemsize: int, sparse_density: float | None = None
) -> tuple[str, str]:
    """Where the feature blocks live during a fit: ``(store, reason)``.

    ``memory``
        persisted in the (cluster's) memory: when ``F`` takes at most
        ``dsvm.memory-fraction`` of it;
    ``implicit``
        never formed: every pass computes the kernel blocks ``K(X_b, L)`` and
        works through ``M`` on k-vectors (:mod:`dsvm.problems._implicit`);
        chosen over ``disk`` when :data:`EXPECTED_PASSES` kernel passes
        (the distance GEMM ``2 n k (p + 2)`` flops, ``n k`` exps, reading ``X``)
        and summing a Gram matrix in float64 rather than float32 (half the
        rows, ``n k² / 2`` flops more) cost less than the feature stage (which adds the projection,
        ``2 n k r`` flops, and writing ``F``) plus as many reads of ``F``;
    ``disk`` (also requested as ``zarr``)
        written once to raw files in the scratch directory and read every pass;
    ``recompute``
        ``F`` recomputed, projection included, from ``X`` every pass (only on request:
        ``implicit`` does the same passes without the projection).

    In-memory input keeps ``F`` in memory unless ``implicit`` is requested.
    """
    if requested not in FEATURE_STORES:
        raise ValueError(f"feature_store={requested!r} is not supported; choose one of {FEATURE_STORES}")
    if requested == "implicit":
        return requested, "requested"
    if not X.is_distributed:
        return "memory", "in-memory input"
    if requested != "auto":
        return requested, "requested"
    n = X.n_rows
    f_bytes = float(n) * n_out * itemsize
    memory, threads = cluster_memory()
    if f_bytes <= config.get("memory-fraction") * memory:
        return "memory", f"F = {f_bytes / 2**30:.2f} GiB fits in {memory / 2**30:.2f} GiB of cluster memory"
    bandwidth, rate = config.get("disk-bandwidth"), config.get("flops-per-thread") * threads
    kernel_s = _kernel_pass_seconds(X, n_components, itemsize, sparse_density, threads)
    # plus the float64 Gram matrix's extra over a float32 one, for the rows active at the start (taken as half)
    implicit_s = EXPECTED_PASSES * kernel_s + 0.5 * n * float(n_components) ** 2 / rate
    disk_s = kernel_s + 2.0 * n * n_components * n_out / rate + (EXPECTED_PASSES + 1) * f_bytes / bandwidth
    sizes = f"F = {f_bytes / 2**30:.2f} GiB > memory; ~{EXPECTED_PASSES} passes"
    if implicit_s < disk_s:
        return "implicit", f"{sizes}: computing kernel blocks every pass (~{implicit_s:.0f}s) beats the feature stage and reading F from scratch (~{disk_s:.0f}s)"
    return "disk", f"{sizes}: the feature stage and reading F from scratch (~{disk_s:.0f}s) beat computing kernel blocks every pass (~{implicit_s:.0f}s)"


def _kernel_pass_seconds(X: RowBlocks, k: int, itemsize: int, sparse_density: float | None, threads: int) -> float:
    """One pass computing every block's kernel values: the distance GEMM, the exps and reading ``X``."""
    n = float(X.n_rows)
    p_eff = X.n_cols * (sparse_density if sparse_density is not None else 1.0)
    x_bytes = n * max(p_eff, 1.0) * (12 if sparse_density is not None else itemsize)
    rate = config.get("flops-per-thread") * threads
    return 2.0 * n * k * (p_eff + 2) / rate + n * k / (EXP_RATE * threads) + x_bytes / config.get("disk-bandwidth")


def plan_store_dtype(requested: str, fmap, n_rows: int) -> tuple[str | None, str]:
    """How the disk store keeps the features: ``(None or "int16", reason)`` (``dsvm.feature-store-dtype``).

    16-bit fixed point needs features of known bound (RBF: within [-1, 1]) in
    float32.  ``"auto"`` takes it where reading the two bytes it saves per
    value (``dsvm.disk-bandwidth``) takes longer than decoding it, spread
    over the cluster's threads.
    """
    if requested not in STORE_DTYPES:
        raise ValueError(f"dsvm.feature-store-dtype={requested!r} is not supported; choose one of {STORE_DTYPES}")
    if requested == "float32":
        return None, "float32"
    bound = getattr(fmap, "feature_bound", None)
    if bound is None or np.dtype(fmap.dtype) != np.float32:
        return None, "float32: 16-bit fixed point is for float32 features of a bounded kernel (RBF)"
    if requested == "int16":
        return "int16", "int16, requested"
    values = float(n_rows) * fmap.n_output
    saved = 2.0 * values / float(config.get("disk-bandwidth"))
    decode = values * DECODE_SECONDS / cluster_memory()[1]
    if saved > decode:
        return "int16", f"int16: reading 2 bytes less per value saves ~{saved:.1f}s a pass, decoding costs ~{decode:.1f}s"
    return None, f"float32: decoding int16 (~{decode:.1f}s a pass) costs more than the reading it saves (~{saved:.1f}s)"


class FeatureStore:
    """The feature blocks ``F = K(X, L) · M`` of one fit, kept as :func:`plan_feature_store` says.

    Use as a context manager: a scratch store on disk is removed on exit, also
    when the fit fails or the process gets SIGTERM (:mod:`dsvm.signals`).
    The store is a folder ``dsvm-features-PID-*`` in ``dsvm.scratch-directory``
    with an owner marker; stores that killed runs left there are removed when
    the next one is made (:mod:`dsvm.blocks._scratch`).

    Parameters
    ----------
    X : RowBlocks
    fmap : feature map
        Anything with ``transform_block(X_block, out=None)``, ``n_output``,
        ``n_components`` and ``dtype`` (:class:`~dsvm.approx.FeatureMap`).
    store : str
        One of :data:`FEATURE_STORES`.
    check_finite : bool
        Check every block of ``X`` for NaN and infinity (naming the row).
    sparse_density : float or None
        Non-zeros per cell of sparse ``X`` (for the cost model).
    reduction : BlockReduction, optional
        A reduction over the feature blocks (with blocks aligned with ``X``):
        run on each block while it is written to disk, else in one pass over
        the new store.  Its result is :attr:`reduction_result`.
    plan : (str, str), optional
        ``(store, reason)`` from :func:`plan_feature_store` for these
        arguments, when the caller has just made it (it asks the workers).

    Attributes
    ----------
    features : RowBlocks
        The feature rows, aligned with ``X``.
    kind : str
        ``"memory"``, ``"disk"``, ``"recompute"`` or ``"implicit"`` (``features`` is then an
        :class:`~dsvm.problems._implicit.ImplicitFeatures`: its passes compute kernel blocks).
    reduction_result
        The result of ``reduction`` (None without).
    """

    def __init__(self, X: RowBlocks, fmap, store: str = "auto", check_finite: bool = True, sparse_density=None,
                 reduction: BlockReduction | None = None, plan: tuple[str, str] | None = None):
        self.kind, reason = plan or plan_feature_store(
            store, X, fmap.n_output, fmap.n_components, np.dtype(fmap.dtype).itemsize, sparse_density
        )
        logger.info("feature store: %s (%s)", self.kind, reason)
        self._fmap = fmap
        self.scratch: str | None = None
        self.reduction_result = None
        self._exit = ExitStack()
        shared = (fmap, check_finite)
        if self.kind == "disk":
            stored, why = plan_store_dtype(config.get("feature-store-dtype"), fmap, X.n_rows)
            logger.info("feature store on disk: %s", why)
            self._exit.enter_context(sigterm_cleanup())
            try:
                self.scratch = _scratch_directory()
                self.features, self.reduction_result = spill_blocks(
                    X, _feature_block, fmap.n_output, fmap.dtype, self.scratch, shared=shared, with_offset=True,
                    reduction=reduction, direct=bool(config.get("direct-io")), stored=stored,
                    bound=getattr(fmap, "feature_bound", None) or 1.0)
            except BaseException as exc:
                base = self.scratch or config.scratch_base()
                self.close()
                if is_disk_full(exc):
                    f_bytes = float(X.n_rows) * fmap.n_output * np.dtype(stored or fmap.dtype).itemsize
                    raise disk_full_error(
                        exc, base, "the scratch feature store", needed=f_bytes,
                        hint="set dsvm.scratch-directory (DASK_DSVM__SCRATCH_DIRECTORY) to a disk with room, or "
                             "use feature_store='implicit'",
                    ) from None
                raise
            return
        if self.kind == "implicit":
            self.features = ImplicitFeatures(X, fmap)
            self.reduction_result = _first_implicit_pass(X, fmap, check_finite, reduction)
            return
        lazy = X.map_blocks(_feature_block, fmap.n_output, fmap.dtype, shared=shared, with_offset=True)
        # with a reduction to run on one worker, it starts on each block as soon as that block is in
        # memory (it waits for them all): no barrier between the two
        self.features = lazy.persist(wait=True if reduction is None else None) if self.kind == "memory" else lazy
        if reduction is not None:
            self.reduction_result = self.features.map_reduce(
                reduction.fn, aligned=reduction.aligned, shared=reduction.shared, combine=reduction.combine)

    def leading_columns(self, r0: int) -> RowBlocks:
        """The first ``r0`` feature columns, aligned with ``X``: views of each block for features held or
        read, the leading map's kernel blocks (:meth:`~dsvm.approx.FeatureMap.leading`) for implicit ones."""
        if self.kind == "implicit":
            return ImplicitFeatures(self.features.X, self._fmap.leading(r0))
        return self.features.map_blocks(_leading_columns, r0, self._fmap.dtype, shared=(r0,))

    @staticmethod
    def pass_seconds(kind: str, X: RowBlocks, fmap) -> float:
        """About what one pass costs beyond its products with the features, as the cost model sees it:
        reading ``F`` back (``"disk"``), computing the kernel blocks (``"implicit"``), else 0."""
        itemsize = np.dtype(fmap.dtype).itemsize
        if kind == "disk":
            return float(X.n_rows) * fmap.n_output * itemsize / float(config.get("disk-bandwidth"))
        if kind == "implicit":
            threads = cluster_memory()[1] if X.is_distributed else os.cpu_count() or 1
            return _kernel_pass_seconds(X, fmap.n_components, itemsize, None, threads)
        return 0.0

    @staticmethod
    def request_rows(X: RowBlocks, fmap, kind: str) -> RowBlocks:
        """What operators built before the store (to prepare passes it will run, as the opening's) take as
        their features: :class:`~dsvm.problems._implicit.ImplicitFeatures` for ``kind="implicit"`` (their
        points must be lifted), else ``X`` itself (only the aligned arrays and the parameters count)."""
        return ImplicitFeatures(X, fmap) if kind == "implicit" else X

    def close(self) -> None:
        if self.scratch is not None:
            if remove_temporary_folder(self.scratch):  # the marker last: running tasks may still write blocks
                logger.info("feature store: removed scratch %s", self.scratch)
            self.scratch = None
        self._exit.close()

    def __enter__(self) -> FeatureStore:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def _checked_kernel_block(X_block, rows, *rest):
    """The first implicit pass on one block: ``X`` (when ``check``) and its kernel values checked finite,
    naming the row, then the reduction's function on the kernel block (None without one).

    ``rest`` is ``(*reduction_aligned, kernel, check, fn, *reduction_shared)``.
    """
    at = next(i for i, v in enumerate(rest) if isinstance(v, _FirstPass))  # aligned blocks come first
    aligned, first, shared = rest[:at], rest[at], rest[at + 1:]
    offset = int(rows[0]) if len(rows) else 0
    if first.check:
        check_finite_block(X_block, offset)
    with np.errstate(over="ignore", invalid="ignore"):  # an overflow is named just below, with its row
        K = first.kernel.kernel_block(X_block)
    check_expansion(K, X_block, first.kernel, offset)  # the kernel's own values: an expansion without α
    return None if first.fn is None else first.fn(K, *aligned, *shared)


class _FirstPass:
    """What the first implicit pass does besides its reduction (a marked shared argument)."""

    def __init__(self, kernel, check: bool, fn):
        self.kernel, self.check, self.fn = kernel, check, fn


def _first_implicit_pass(X: RowBlocks, fmap, check_finite: bool, reduction: BlockReduction | None):
    """The feature stage of implicit features: one pass that checks every block (its input when
    ``check_finite``, its kernel values always) and runs ``reduction`` on the kernel blocks; its result."""
    first = _FirstPass(fmap.landmark_kernel(), check_finite, None if reduction is None else reduction.fn)
    aligned = () if reduction is None else tuple(reduction.aligned)
    shared = () if reduction is None else tuple(reduction.shared)
    combine = _no_result if reduction is None else reduction.combine
    return X.map_reduce(_checked_kernel_block, aligned=(row_index_blocks(X), *aligned), shared=(first, *shared),
                        combine=combine)


def _no_result(parts):
    return None


def _leading_columns(F, r0: int):
    return F[:, :r0]


def _scratch_directory() -> str:
    return str(make_temporary_folder(config.scratch_base(), "features"))
