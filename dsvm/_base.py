"""What every Nyström estimator shares: parameters, input checks, the feature
stage, the loop over (binary) problems, block-wise prediction.

Fitting runs the pipeline of the package in one direction::

    input (numpy / scipy.sparse / dask) → RowBlocks → landmarks → Nyström map
        → feature blocks F (FeatureStore) → operator (one problem each) → solver

and leaves only plain numpy arrays on the estimator, so a fitted model
pickles, saves and predicts without a cluster.
"""

from __future__ import annotations

import logging
import time
import warnings
from collections.abc import Callable, Sequence

import numpy as np
import scipy.sparse as sp
from sklearn.base import BaseEstimator
from sklearn.exceptions import ConvergenceWarning
from sklearn.utils.validation import _check_sample_weight, check_is_fitted, validate_data

from . import config
from ._validation import check_dask_X, check_n_rows, check_positive, check_positive_int, resolve_seed
from .blockwise import (
    InMemoryBlocks,
    RowBlocks,
    aligned_vector,
    as_row_blocks,
    available_threads,
    cluster_memory,
    is_dask_array,
    lazy_result,
    row_index_blocks,
    task_memory_budget,
)
from .checkpoint import Checkpoint, data_fingerprint, restore_done, restore_feature_map, restore_solver_state
from .kernels import KERNELS, make_kernel_spec
from .landmarks import LANDMARK_METHODS, Landmarks, dense_rows, first_unique, select_landmarks
from .nystroem import default_eig_rtol, fit_feature_map
from .operator import FEATURE_STORES, FeatureStore, active_row_sample, decision_blocks
from .solvers import choose_hessian, newton_from_subsample, semismooth_newton
from .solvers.dcd import dual_coordinate_descent
from .solvers.pegasos import PROGRESS_TOL as PEGASOS_PROGRESS_TOL
from .solvers.pegasos import WINDOW as PEGASOS_WINDOW
from .solvers.pegasos import pegasos
from .solvers.tron import trust_region_newton

logger = logging.getLogger(__name__)

SOLVERS = ("newton", "tron", "dcd", "pegasos")
SOLVER_OPTIONS = {
    "newton": {"cg_max_iter", "refresh_every", "warm_start", "warm_rows"},
    "tron": {"cg_max_iter", "cg_rtol"},
    "dcd": {"intercept_scaling"},
    "pegasos": {"epochs", "batch_size", "progress_tol"},
}
HESSIANS = ("auto", "gram", "cg")
BLOCK_BYTES = 64 * 2**20  # target size of one feature block when splitting in-memory input


def _task_sized_blocks(X, k: int) -> RowBlocks:
    """A dask array's row blocks, split small enough for one task's share of a worker's memory
    (a block of kernel values is rows x k float64) and into enough blocks to keep every thread busy.

    Fit and prediction alike: a dataset stored in one large chunk would otherwise
    need the kernel block of the whole chunk in one task.
    """
    budget = min(config.get("block-bytes"), task_memory_budget(config.get("task-memory-share")))
    max_rows = max(256, int(budget // (8 * max(1, k))))
    return as_row_blocks(X, 0).split_blocks(available_threads(), max_rows=max_rows)


def unpack_dataset(X, y=None):
    """Accept a :class:`dsvm.io.Dataset` (anything with ``.X`` and ``.y``) in place of ``X, y``."""
    if hasattr(X, "X") and hasattr(X, "y") and not hasattr(X, "shape"):
        if y is not None:
            raise ValueError("pass either a Dataset or X and y, not both")
        return X.X, X.y
    return X, y


def _moments_block(X_block):
    if sp.issparse(X_block):
        data = X_block.data.astype(np.float64)
        return np.array([data.sum(), (data * data).sum(), float(np.prod(X_block.shape))])
    Xd = np.asarray(X_block, dtype=np.float64)
    return np.array([Xd.sum(), (Xd * Xd).sum(), float(Xd.size)])


def warn_if_not_converged(res, tol: float, label: str = "") -> None:
    """A ``ConvergenceWarning`` saying why a solver stopped early and what to do."""
    if res.converged:
        return
    if res.method == "dcd":
        warnings.warn(f"{label}LIBLINEAR's DCD reached its iteration limit; increase max_iter",
                      ConvergenceWarning, stacklevel=4)
        return
    if res.method == "pegasos":
        objs = [h["objective"] for h in res.history]
        window = min(len(objs) - 1, PEGASOS_WINDOW)
        rate = (objs[-1 - window] - objs[-1]) / abs(objs[-1]) / window if window > 0 else float("nan")
        warnings.warn(
            f"{label}pegasos used its budget of {len(objs)} epochs while the hinge objective still changed by "
            f"{rate:.1e} per epoch (relative); raise solver_options['epochs'] or use solver='newton'",
            ConvergenceWarning, stacklevel=4,
        )
        return
    hint = (
        "; float32 features limit the attainable accuracy, use dtype='float64'"
        if res.stop_reason == "precision"
        else "; increase max_iter"
    )
    warnings.warn(
        f"{label}{res.method} solver stopped ({res.stop_reason}) after {res.n_iter} iterations with "
        f"|g|/|g0| = {res.grad_norm / res.grad_norm0:.2e} > tol = {tol:g}{hint}",
        ConvergenceWarning,
        stacklevel=4,
    )


def _subsample_weight_block(rows, sample_weight, fraction):
    """``1 / fraction`` (times the sample weight) for rows drawn by a hash of their index, else 0."""
    h = ((rows.astype(np.uint64) * np.uint64(2654435761)) % np.uint64(2**32)).astype(np.float64) / 2.0**32
    w = np.where(h < fraction, 1.0 / fraction, 0.0)
    return w if sample_weight is None else w * sample_weight


# the estimators' landmark methods: "active" needs the solver, so it lives here, not in dsvm.landmarks
ESTIMATOR_LANDMARKS = LANDMARK_METHODS + ("active",)


def subsample_size(n: int, r: int, mode: str = "auto", warm_rows: int | None = None, hessian: str = "gram",
                   distributed: bool = False) -> int | None:
    """Rows of the Newton solve's subsample warm start, or None for no warm start.

    See :meth:`NystroemBase._warm_start_rows` for the modes; ``warm_rows``
    defaults to ``max(10000, 4 r)``.
    """
    if mode not in ("auto", "subsample", "none"):
        raise ValueError(f"solver_options warm_start must be 'auto', 'subsample' or 'none', got {mode!r}")
    if mode == "none" or (mode == "auto" and (hessian != "gram" or distributed)):
        return None
    m = int(warm_rows) if warm_rows is not None else max(10_000, 4 * r)
    if m >= n or (mode == "auto" and 4 * m > n):
        return None
    return m


def subsample_problem(F: RowBlocks, warm_aligned):
    """``(features, aligned)`` of the subsample problem (``warm_aligned[1]``: its row weights,
    zero off the subsample): its rows copied out for in-memory blocks (passes over ``m`` rows),
    else all rows with the others weighted zero."""
    if F.is_distributed:
        return F, warm_aligned
    keep = InMemoryBlocks([np.asarray(w) > 0 for w in warm_aligned[1].blocks])
    return F.compress(keep), [None if a is None else a.compress(keep) for a in warm_aligned]


def problem_stats_label(label):
    return label.item() if hasattr(label, "item") else label


def problem_stats(res, label) -> dict:
    return {
        "class": problem_stats_label(label),
        "method": res.method,
        "n_iter": res.n_iter,
        "n_passes": res.n_passes,
        "seconds": res.seconds,
        "converged": res.converged,
        "stop_reason": res.stop_reason,
        "grad_norm_rel": res.grad_norm / res.grad_norm0,
        "history": res.history,
    }


class NystroemBase(BaseEstimator):
    """Shared machinery of :class:`~dsvm.NystroemSVC` and :class:`~dsvm.NystroemSVR`.

    Subclasses define ``__init__`` (their parameters), ``fit`` and the
    prediction methods; they call :meth:`_prepare_fit_input` and
    :meth:`_fit_problems`.
    """

    _solvers: tuple[str, ...] = SOLVERS

    def _solver_kwargs(self) -> dict:
        """``solver_options`` for the solver function itself (the warm-start keys are dsvm's own)."""
        return {k: v for k, v in (self.solver_options or {}).items() if k not in ("warm_start", "warm_rows")}

    def _solve(self, op, dim: int, hessian: str, label: str, resume=None, on_state=None, warm_op=None, x0=None):
        """Run the chosen solver on one problem's operator (from ``x0`` where the solver takes one).

        With ``warm_op`` (the same problem on a row subsample) the Newton
        solve starts from that problem's solution: its active set is close to
        the final one, so the first full Gram matrix covers the active rows
        only instead of every row (all rows are active at ``x = 0``).
        """
        options = self._solver_kwargs()
        if self.solver == "newton":
            if resume is not None or x0 is not None:
                warm_op = None
            return newton_from_subsample(op, warm_op, dim, tol=self.tol, max_iter=self.max_iter, hessian=hessian,
                                         x0=x0, label=label, resume=resume, on_state=on_state, **options)
        if self.solver == "tron":
            return trust_region_newton(op, dim, x0=x0, tol=self.tol, max_iter=self.max_iter, label=label, **options)
        if self.solver == "dcd":
            return dual_coordinate_descent(op, dim, tol=self.tol, max_iter=max(self.max_iter, 1000), label=label,
                                           random_state=resolve_seed(self.random_state), **options)
        return pegasos(op, dim, C=self.C, n_epochs=options.get("epochs"), batch_size=options.get("batch_size", 64),
                       progress_tol=options.get("progress_tol", PEGASOS_PROGRESS_TOL),
                       random_state=resolve_seed(self.random_state), label=label)

    # ------------------------------------------------------------------ checks
    def _check_params(self) -> None:
        if self.kernel not in KERNELS:
            raise ValueError(f"kernel={self.kernel!r} is not supported; choose one of {KERNELS}")
        check_positive("C", self.C)
        check_positive_int("n_components", self.n_components)
        if self.landmarks not in ESTIMATOR_LANDMARKS:
            raise ValueError(f"landmarks={self.landmarks!r} is not supported; choose one of {ESTIMATOR_LANDMARKS}")
        if self.solver not in self._solvers:
            raise ValueError(f"solver={self.solver!r} is not supported; choose one of {self._solvers}")
        options = self.solver_options or {}
        if not isinstance(options, dict):
            raise ValueError(f"solver_options must be a dict or None, got {options!r}")
        unknown = set(options) - SOLVER_OPTIONS[self.solver]
        if unknown:
            raise ValueError(
                f"solver_options {sorted(unknown)} do not apply to solver={self.solver!r}; "
                f"it takes {sorted(SOLVER_OPTIONS[self.solver])}"
            )
        if self.hessian not in HESSIANS:
            raise ValueError(f"hessian={self.hessian!r} is not supported; choose one of {HESSIANS}")
        check_positive("tol", self.tol)
        check_positive_int("max_iter", self.max_iter)
        if np.dtype(self.dtype) not in (np.dtype(np.float32), np.dtype(np.float64)):
            raise ValueError(f"dtype must be 'float32' or 'float64', got {self.dtype!r}")
        if self.eig_rtol is not None:
            check_positive("eig_rtol", self.eig_rtol)
        check_positive_int("kmeans_iter", self.kmeans_iter)
        if self.feature_store not in FEATURE_STORES:
            raise ValueError(f"feature_store={self.feature_store!r} is not supported; choose one of {FEATURE_STORES}")
        if self.block_rows is not None:
            check_positive_int("block_rows", self.block_rows)
        if not (isinstance(self.gamma, str) and self.gamma in ("scale", "auto")):
            check_positive("gamma", self.gamma)

    def _min_blocks(self) -> int | None:
        """An explicit ``block_rows`` is kept as given (``block_rows=n``: one block, one thread);
        the default size is split further so that every core gets a block."""
        return 1 if self.block_rows is not None else None

    def _block_rows(self, n_out: int) -> int:
        if self.block_rows is not None:
            return int(self.block_rows)
        itemsize = np.dtype(self.dtype).itemsize
        return max(1024, BLOCK_BYTES // (itemsize * max(1, n_out)))

    def _prepare_fit_input(
        self, X, y, sample_weight, check_y: Callable[[np.ndarray], np.ndarray]
    ) -> tuple[RowBlocks, object, RowBlocks | None, bool]:
        """``(X as RowBlocks, y, aligned sample weights or None, X checked already?)``.

        ``check_y`` validates an in-memory ``y`` (labels or targets).
        """
        X, y = unpack_dataset(X, y)
        if y is None:
            raise ValueError(
                f"{type(self).__name__} requires y to be passed, but the target y is None "
                "(or pass a Dataset holding labels)"
            )
        if is_dask_array(X):
            check_dask_X(X)
            if not is_dask_array(y):
                y = np.asarray(y)
                if y.ndim == 2 and y.shape[1] == 1:
                    y = y.ravel()
                y = check_y(y)
            check_n_rows(X.shape[0], y)
            self.n_features_in_ = int(X.shape[1])
            X_rb = _task_sized_blocks(X, min(self.n_components, X.shape[0]))
            # Landmarks, gamma and the feature stage each read X: keep it in the
            # cluster's memory when it is small next to that memory (it is far
            # smaller than F whenever p < k), instead of re-reading the store.
            memory, _ = cluster_memory()
            if X_rb.is_distributed and float(X.nbytes) <= 0.1 * memory:
                X_rb = X_rb.persist()
            sw = None
            if sample_weight is not None:
                if not is_dask_array(sample_weight):
                    sample_weight = np.asarray(sample_weight, dtype=np.float64)
                check_n_rows(X.shape[0], sample_weight, "sample_weight")
                sw = aligned_vector(sample_weight, X_rb)
            return X_rb, y, sw, False
        X, y = validate_data(self, X, y, accept_sparse="csr", dtype=[np.float64, np.float32])
        y = check_y(y)
        X_rb = as_row_blocks(X, self._block_rows(min(self.n_components, X.shape[0])), self._min_blocks())
        sw = None
        if sample_weight is not None:
            sample_weight = _check_sample_weight(sample_weight, X, dtype=np.float64)
            sw = aligned_vector(sample_weight, X_rb)
        return X_rb, y, sw, True

    def _resolve_gamma(self, X_rb: RowBlocks) -> float:
        if self.gamma == "auto":
            return 1.0 / self.n_features_in_
        if self.gamma == "scale":
            s, ss, count = X_rb.map_reduce(_moments_block)
            var = ss / count - (s / count) ** 2
            return 1.0 / (self.n_features_in_ * var) if var > 0 else 1.0
        return float(self.gamma)

    # ------------------------------------------------------------------ fit
    def _feature_map(self, X_rb: RowBlocks, stage1=None):
        """gamma, landmarks and the Nyström map: ``(fmap, landmarks, gamma, timing)``.

        ``stage1(spec, k)`` selects the landmarks of ``landmarks="active"``.
        """
        gamma = self._resolve_gamma(X_rb)
        spec = make_kernel_spec(self.kernel, gamma, self.degree, self.coef0)
        n = X_rb.n_rows
        k = int(self.n_components)
        if k > n:
            warnings.warn(
                f"n_components={k} is larger than the number of rows ({n}); using n_components={n}",
                UserWarning,
                stacklevel=4,
            )
            k = n
        t0 = time.perf_counter()
        if self.landmarks == "active":
            lm = stage1(spec, k)
        else:
            rtol = default_eig_rtol(self.dtype) if self.eig_rtol is None else float(self.eig_rtol)
            lm = select_landmarks(X_rb, k, self.landmarks, self.random_state, self.kmeans_iter, spec=spec, rtol=rtol)
        t_select = time.perf_counter() - t0
        fmap = fit_feature_map(lm.components, spec, dtype=np.dtype(self.dtype), eig_rtol=self.eig_rtol,
                               method=lm.feature_map)
        # landmark_seconds: choosing the landmarks and building their Nyström map
        timing = {"landmark_seconds": time.perf_counter() - t0, "landmark_select_seconds": t_select,
                  "landmark_passes": lm.n_passes}
        return fmap, lm, gamma, timing

    def _fit_problems(
        self,
        X_rb: RowBlocks,
        checked: bool,
        aligned: Sequence[RowBlocks | None],
        labels: Sequence,
        make_operator: Callable,
        t_start: float,
        prepare_problem: Callable | None = None,
        start: Callable | None = None,
    ) -> None:
        """The feature stage, then one Newton solve per problem; sets the fitted attributes.

        ``make_operator(feature_blocks, aligned, j)`` returns the operator of
        problem ``j``; ``labels[j]`` names it in logs and ``solver_stats_``.
        ``prepare_problem(feature_blocks, aligned, j)``, if given, runs on the
        final features before problem ``j`` is solved (Platt calibration).
        ``start(feature_map)``, if given, returns a starting point per problem
        (or None); ignored when resuming from a checkpoint.
        """
        ckpt, state = self._open_checkpoint(X_rb, aligned[0], aligned[1])
        if state is not None:
            fmap, lm_indices, gamma = restore_feature_map(state)
            timing = {"landmark_seconds": 0.0, "landmark_select_seconds": 0.0, "landmark_passes": 0}
            done, resume, first = restore_done(state), restore_solver_state(state), int(state["meta"]["problem"])
        else:
            fmap, lm, gamma, timing = self._feature_map(
                X_rb, lambda spec, k: self._active_landmarks(X_rb, checked, aligned, len(labels), make_operator, spec, k)
            )
            lm_indices, done, resume, first = lm.indices, [], None, 0
        r = fmap.n_output
        starts = start(fmap) if start is not None and state is None else None
        coef = np.zeros((len(labels), r))
        intercept = np.zeros(len(labels))
        t0 = time.perf_counter()
        with FeatureStore(X_rb, fmap, self.feature_store, check_finite=not checked) as store:
            if X_rb.is_distributed and store.kind == "memory":
                aligned = [a.persist() if a is not None else None for a in aligned]
            timing["feature_seconds"] = time.perf_counter() - t0
            hessian = self.hessian if self.hessian != "auto" else choose_hessian(X_rb.n_rows, r + 1, X_rb.is_distributed)
            warm_aligned = self._warm_start_rows(X_rb, aligned, hessian, r)
            warm_problem = None if warm_aligned is None else subsample_problem(store.blocks, warm_aligned)
            for j, label in enumerate(labels):
                if prepare_problem is not None:
                    prepare_problem(store.blocks, aligned, j)
                if j < len(done):  # solved before the interruption
                    continue
                op = make_operator(store.blocks, aligned, j)
                warm_op = make_operator(*warm_problem, j) if warm_problem is not None else None
                prefix = f"[class {problem_stats_label(label)!r}] " if len(labels) > 1 else ""
                on_state = None
                if ckpt is not None:
                    def on_state(st, j=j):
                        ckpt.save(fmap, lm_indices, gamma, done, j, st)
                res = self._solve(op, r + 1, hessian, prefix, resume=resume if j == first else None, on_state=on_state,
                                  warm_op=warm_op, x0=None if starts is None else starts[j])
                warn_if_not_converged(res, self.tol, prefix)
                done.append({"x": res.x, "objective": res.objective, "n_iter": res.n_iter,
                             "stats": {k: v for k, v in problem_stats(res, label).items() if k != "class"}})
                if ckpt is not None:
                    ckpt.save(fmap, lm_indices, gamma, done, j + 1, None)
            kind = store.kind
        for j, d in enumerate(done):
            coef[j], intercept[j] = d["x"][:-1], d["x"][-1]
        objectives = [d["objective"] for d in done]
        n_iters = [d["n_iter"] for d in done]
        stats = [dict(d["stats"], **{"class": problem_stats_label(label)}) for d, label in zip(done, labels)]
        if ckpt is not None:
            ckpt.remove()

        self.feature_map_ = fmap
        self.gamma_ = gamma
        self.components_ = fmap.components
        self.component_indices_ = lm_indices
        self.normalization_ = fmap.normalization
        self.coef_ = coef
        self.intercept_ = intercept
        self.objective_ = objectives[0] if len(objectives) == 1 else np.asarray(objectives)
        self.n_iter_ = int(max(n_iters))
        self.solver_stats_ = {
            **timing,
            "solve_seconds": float(sum(st["seconds"] for st in stats)),
            "fit_seconds": time.perf_counter() - t_start,
            "n_samples": X_rb.n_rows,
            "n_components": fmap.n_components,
            "n_features_out": r,
            "hessian": hessian,
            "feature_store": kind,
            "problems": stats,
        }
        logger.info(
            "fit: n=%d k=%d r=%d landmarks %.3fs features %.3fs solve %.3fs",
            X_rb.n_rows, fmap.n_components, r, timing["landmark_seconds"], timing["feature_seconds"],
            self.solver_stats_["solve_seconds"],
        )

    def _active_landmarks(self, X_rb, checked, aligned, n_problems, make_operator, spec, k) -> Landmarks:
        """Landmarks drawn from the rows that matter: ``landmarks="active"``.

        Stage 1 fits the same problem(s) cheaply on ``k / 4`` uniform landmarks
        (loose tolerance); stage 2 draws the ``k`` landmarks uniformly among the
        rows in that model's active set (margin below 1, or outside the ε-tube):
        the rows that become support vectors, near the decision boundary.  Where
        few rows are active (w8a, ijcnn1) uniform landmarks spend most of ``k``
        on rows far from the boundary.  Costs one small fit, one pass to draw
        the rows and one to fetch them.
        """
        k0 = max(min(k, 32), k // 4)
        lm0 = select_landmarks(X_rb, k0, "uniform", self.random_state)
        fmap0 = fit_feature_map(lm0.components, spec, dtype=np.dtype(self.dtype), eig_rtol=self.eig_rtol)
        seed = resolve_seed(self.random_state)
        with FeatureStore(X_rb, fmap0, self.feature_store, check_finite=not checked) as store:
            al = [a.persist() if a is not None else None for a in aligned] if X_rb.is_distributed else aligned
            ops = [make_operator(store.blocks, al, j) for j in range(n_problems)]
            xs = [semismooth_newton(op, fmap0.n_output + 1, tol=1e-2, max_iter=15, label="[landmarks stage 1] ").x
                  for op in ops]
            # twice the candidates: rows near the boundary repeat in binary data (w8a)
            active, other, n_active = active_row_sample(ops, xs, row_index_blocks(X_rb), 2 * k + 64, seed)
        idx = np.concatenate([active, other])
        rows = dense_rows(X_rb.take(idx))
        keep = first_unique(rows)[:k]  # active rows first, inactive ones only to fill up
        logger.info("active landmarks: %d of %d rows active under a k=%d model; %d landmarks drawn from them",
                    n_active, X_rb.n_rows, k0, min(k, n_active))
        if keep.size < k:
            warnings.warn(f"only {keep.size} distinct rows were found for {k} landmarks; using {keep.size}",
                          UserWarning, stacklevel=5)
        return Landmarks(components=rows[keep], indices=idx[keep], method="active", n_passes=lm0.n_passes + 3)

    def _warm_start_rows(self, X_rb: RowBlocks, aligned, hessian: str, r: int):
        """Aligned arrays of the subsample problem used as a warm start, or None.

        ``solver_options["warm_start"]``: ``"auto"`` (default: the subsample
        when the data is in memory, has at least four times as many rows and
        the Gram variant runs), ``"subsample"`` (a subsample of ``warm_rows``
        rows, default ``max(10000, 4 k)``) or ``"none"``.  Rows are drawn by a
        hash of their index (independent of chunking), with costs scaled by
        ``n / m`` so that the subsample's loss estimates the full one.  In
        memory the subsample's features are copied out (:func:`subsample_problem`),
        so its passes read ``m`` rows, not ``n``: on ijcnn1 (k = 1000, two
        threads) the Newton solve then took 1.2 s instead of 1.9 s, because
        the full problem's first Gram matrix covers the ~25 % of rows active
        at the subsample's solution instead of every row (all are active at
        zero).
        Dask input would pass over all rows with zero weights, which costs as
        many reads of ``F`` as the full solve saves, so ``"auto"`` skips it.
        """
        options = self.solver_options or {}
        if self.solver != "newton":
            return None
        n = X_rb.n_rows
        m = subsample_size(n, r, options.get("warm_start", "auto"), options.get("warm_rows"), hessian,
                           X_rb.is_distributed)
        if m is None:
            return None
        weights = row_index_blocks(X_rb).map_blocks(
            _subsample_weight_block, None, np.float64, aligned=(aligned[1],), shared=(m / n,)
        )
        if X_rb.is_distributed:
            weights = weights.persist()
        logger.info("warm start: Newton on a subsample of about %d of %d rows first", m, n)
        return [aligned[0], weights]

    def _open_checkpoint(self, X_rb: RowBlocks, y_rb: RowBlocks, sw_rb: RowBlocks | None):
        """``(Checkpoint, saved state or None)``, or ``(None, None)`` without ``checkpoint``."""
        path = getattr(self, "checkpoint", None)
        if path is None:
            return None, None
        if self.solver != "newton":
            raise ValueError(f"checkpoint needs solver='newton', got solver={self.solver!r}")
        params = {k: v for k, v in self.get_params(deep=False).items() if k != "checkpoint"}
        if not isinstance(params.get("random_state"), (int, np.integer, type(None))):
            raise ValueError("checkpoint needs random_state to be an int (or None): a resumed fit must draw the same landmarks")
        ckpt = Checkpoint(path, params, data_fingerprint(X_rb, y_rb, sw_rb))
        return ckpt, ckpt.load()

    # ------------------------------------------------------------------ predict
    def _validate_predict_input(self, X) -> tuple[RowBlocks, bool]:
        check_is_fitted(self)
        X, _ = unpack_dataset(X)
        if is_dask_array(X):
            check_dask_X(X)
            if X.shape[1] != self.n_features_in_:
                # a LIBSVM test file often lacks the training file's last feature columns
                hint = (f"; a sparse (LIBSVM) file read alone stops at its highest feature: ingest it with "
                        f"n_features={self.n_features_in_} (CLI: --n-features {self.n_features_in_})"
                        if X.shape[1] < self.n_features_in_ else "")
                raise ValueError(
                    f"X has {X.shape[1]} features, but {type(self).__name__} is expecting "
                    f"{self.n_features_in_} features as input{hint}"
                )
            return _task_sized_blocks(X, self.components_.shape[0]), False
        X = validate_data(self, X, accept_sparse="csr", dtype=[np.float64, np.float32], reset=False)
        return as_row_blocks(X, self._block_rows(self.coef_.shape[1]), self._min_blocks()), True

    def _decision(self, X):
        """``F(X) coefᵀ + intercept``, shape (n, n_problems); dask for dask input."""
        X_rb, checked = self._validate_predict_input(X)
        return lazy_result(decision_blocks(X_rb, self.feature_map_, self.coef_, self.intercept_, not checked))

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.sparse = True
        return tags
