"""scikit-learn compatible estimators: :class:`NystroemSVC`.

Fitting runs the pipeline of the package in one direction::

    input (numpy / scipy.sparse / dask) → RowBlocks → landmarks → Nyström map
        → feature blocks F → operator (one binary problem per class) → solver

and leaves only plain numpy arrays on the estimator, so a fitted model
pickles, saves and predicts without a cluster.
"""

from __future__ import annotations

import logging
import time
import warnings

import numpy as np
import scipy.sparse as sp
from sklearn.base import BaseEstimator, ClassifierMixin
from sklearn.exceptions import ConvergenceWarning
from sklearn.utils import compute_class_weight
from sklearn.utils.multiclass import check_classification_targets
from sklearn.utils.validation import _check_sample_weight, check_is_fitted, validate_data

from ._validation import (
    check_dask_X,
    check_n_rows,
    check_positive,
    check_positive_int,
    encode_labels,
)
from . import config
from .blockwise import (
    RowBlocks,
    aligned_vector,
    as_row_blocks,
    available_threads,
    is_dask_array,
    lazy_result,
    task_memory_budget,
)
from .kernels import KERNELS, make_kernel_spec
from .landmarks import LANDMARK_METHODS, select_landmarks
from .nystroem import FeatureMap, fit_feature_map
from .operator import FEATURE_STORES, FeatureStore, SquaredHingeOperator, decision_blocks
from .solvers import choose_hessian, semismooth_newton

logger = logging.getLogger(__name__)

SOLVERS = ("newton",)
HESSIANS = ("auto", "gram", "cg")
BLOCK_BYTES = 64 * 2**20  # target size of one feature block when splitting in-memory input


def _moments_block(X_block):
    if sp.issparse(X_block):
        data = X_block.data.astype(np.float64)
        return np.array([data.sum(), (data * data).sum(), float(np.prod(X_block.shape))])
    Xd = np.asarray(X_block, dtype=np.float64)
    return np.array([Xd.sum(), (Xd * Xd).sum(), float(Xd.size)])


def _correct_block(X_block, y_block, fmap, coef, intercept, classes):
    dec = fmap.transform_block(X_block) @ coef.T.astype(fmap.dtype) + intercept
    pred = classes[(dec[:, 0] > 0).astype(int)] if coef.shape[0] == 1 else classes[np.argmax(dec, axis=1)]
    return np.array([float(np.sum(pred == np.asarray(y_block))), float(len(pred))])


def unpack_dataset(X, y=None):
    """Accept a :class:`dsvm.io.Dataset` (anything with ``.X`` and ``.y``) in place of ``X, y``."""
    if hasattr(X, "X") and hasattr(X, "y") and not hasattr(X, "shape"):
        if y is not None:
            raise ValueError("pass either a Dataset or X and y, not both")
        return X.X, X.y
    return X, y


def _predict_labels(dec: np.ndarray, classes: np.ndarray) -> np.ndarray:
    if dec.ndim == 1:
        return classes[(dec > 0).astype(int)]
    return classes[np.argmax(dec, axis=1)]


def _warn_if_not_converged(res, tol: float, label: str = "") -> None:
    if res.converged:
        return
    hint = (
        "; float32 features limit the attainable accuracy, use dtype='float64'"
        if res.stop_reason == "precision"
        else "; increase max_iter"
    )
    warnings.warn(
        f"{label}Newton solver stopped ({res.stop_reason}) after {res.n_iter} iterations with "
        f"|g|/|g0| = {res.grad_norm / res.grad_norm0:.2e} > tol = {tol:g}{hint}",
        ConvergenceWarning,
        stacklevel=3,
    )


def _problem_stats(res, label) -> dict:
    return {
        "class": label.item() if hasattr(label, "item") else label,
        "method": res.method,
        "n_iter": res.n_iter,
        "n_passes": res.n_passes,
        "seconds": res.seconds,
        "converged": res.converged,
        "stop_reason": res.stop_reason,
        "grad_norm_rel": res.grad_norm / res.grad_norm0,
        "history": res.history,
    }


def _class_counts_block(codes_block, n_classes):
    return np.bincount(codes_block, minlength=n_classes).astype(np.float64)


class NystroemSVC(ClassifierMixin, BaseEstimator):
    """Kernel SVM classifier trained by LA-SN: Nyström features + semismooth Newton.

    The kernel SVM is linearised with ``n_components`` landmarks (features
    ``F = K(X, L) · M``) and the L2-loss linear SVM

        min_{w, b}  ½‖w‖² + C Σ_i c_i max(0, 1 − y_i (f_iᵀ w + b))²

    (bias not regularised) is solved on ``F`` by the semismooth Newton method.
    Works on numpy arrays, scipy.sparse matrices and row-chunked dask arrays
    (with the active Dask scheduler: a ``distributed.Client`` if one exists,
    else threads).  Multiclass problems are solved one-vs-rest on one shared
    feature matrix.

    Parameters
    ----------
    kernel : {"rbf", "poly", "sigmoid", "linear"}, default="rbf"
    gamma : float or {"scale", "auto"}, default="scale"
        Kernel coefficient. ``"scale"`` is ``1 / (n_features * X.var())`` and
        ``"auto"`` is ``1 / n_features``, as in scikit-learn's SVC.
    degree : int, default=3
        Degree of the polynomial kernel.
    coef0 : float, default=0.0
        Constant of the poly and sigmoid kernels.
    C : float, default=1.0
        Cost of the squared hinge loss.
    n_components : int, default=500
        Number of landmarks ``k``.  Clipped to the number of rows with a warning.
    landmarks : {"uniform", "kmeans"}, default="uniform"
    solver : {"newton"}, default="newton"
    hessian : {"auto", "gram", "cg"}, default="auto"
        How Newton systems are solved: Cholesky on the Gram matrix of the active
        rows (one pass per iteration), CG with distributed Hessian-vector
        products (one pass per CG step), or chosen by a cost model
        (:func:`dsvm.solvers.choose_hessian`).
    tol : float, default=1e-4
        Stop when ``‖∇Φ‖ ≤ tol · ‖∇Φ(0)‖``.
    max_iter : int, default=100
        Maximum Newton iterations per binary problem.
    fit_intercept : bool, default=True
        Fit an unregularised bias ``b``.
    class_weight : dict, "balanced" or None, default=None
        Multiplies ``C`` for the rows of each class (scikit-learn semantics).
    dtype : {"float32", "float64"}, default="float32"
        Precision of the feature matrix (reductions are float64 either way).
    eig_rtol : float or None, default=None
        Relative cut-off for eigenvalues of ``K(L, L)``; ``None`` picks
        ``1e-6`` for float32 and ``1e-10`` for float64 features.
    kmeans_iter : int, default=3
        Lloyd passes for ``landmarks="kmeans"``.
    feature_store : {"auto", "memory", "zarr", "recompute"}, default="auto"
        Where the feature blocks live during the fit (Dask input): in the
        cluster's memory, in a zarr scratch store streamed every pass
        (``dsvm.scratch-directory``), or recomputed from ``X`` every pass.
        ``"auto"`` keeps them in memory when they take at most
        ``dsvm.memory-fraction`` of it and otherwise picks the cheaper of the
        other two (:func:`dsvm.operator.plan_feature_store`).
    block_rows : int or None, default=None
        Rows per block when splitting in-memory input (``None``: about 64 MiB
        of features per block).  Dask input keeps its own chunks.
    random_state : int, RandomState or None, default=None

    Attributes
    ----------
    classes_ : ndarray of shape (n_classes,)
    coef_ : ndarray of shape (1 or n_classes, r)
        Weights in Nyström feature space.
    intercept_ : ndarray of shape (1 or n_classes,)
    components_ : ndarray of shape (k, n_features_in_)
        The landmarks.
    component_indices_ : ndarray of shape (k,) or None
        Rows of the training data used as landmarks (``None`` for k-means).
    normalization_ : ndarray of shape (r, k)
        ``F = K(X, components_) @ normalization_.T``.
    n_iter_ : int
        Newton iterations (maximum over the binary problems).
    objective_ : float or ndarray of shape (n_classes,)
        Final primal objective of each binary problem.
    n_features_in_ : int
    solver_stats_ : dict
        Per problem: iterations, passes over the data, seconds, stop reason;
        plus the timings of the landmark and feature stages.
    """

    def __init__(
        self,
        kernel="rbf",
        gamma="scale",
        degree=3,
        coef0=0.0,
        C=1.0,
        n_components=500,
        landmarks="uniform",
        solver="newton",
        hessian="auto",
        tol=1e-4,
        max_iter=100,
        fit_intercept=True,
        class_weight=None,
        dtype="float32",
        eig_rtol=None,
        kmeans_iter=3,
        feature_store="auto",
        block_rows=None,
        random_state=None,
    ):
        self.kernel = kernel
        self.gamma = gamma
        self.degree = degree
        self.coef0 = coef0
        self.C = C
        self.n_components = n_components
        self.landmarks = landmarks
        self.solver = solver
        self.hessian = hessian
        self.tol = tol
        self.max_iter = max_iter
        self.fit_intercept = fit_intercept
        self.class_weight = class_weight
        self.dtype = dtype
        self.eig_rtol = eig_rtol
        self.kmeans_iter = kmeans_iter
        self.feature_store = feature_store
        self.block_rows = block_rows
        self.random_state = random_state

    # ------------------------------------------------------------------ checks
    def _check_params(self) -> None:
        if self.kernel not in KERNELS:
            raise ValueError(f"kernel={self.kernel!r} is not supported; choose one of {KERNELS}")
        check_positive("C", self.C)
        check_positive_int("n_components", self.n_components)
        if self.landmarks not in LANDMARK_METHODS:
            raise ValueError(f"landmarks={self.landmarks!r} is not supported; choose one of {LANDMARK_METHODS}")
        if self.solver not in SOLVERS:
            raise ValueError(f"solver={self.solver!r} is not supported; choose one of {SOLVERS}")
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

    def _block_rows(self, n_out: int) -> int:
        if self.block_rows is not None:
            return int(self.block_rows)
        itemsize = np.dtype(self.dtype).itemsize
        return max(1024, BLOCK_BYTES // (itemsize * max(1, n_out)))

    def _validate_fit_input(self, X, y, sample_weight):
        """Returns (RowBlocks of X, y, sample weights or None, checked_on_input)."""
        if is_dask_array(X):
            check_dask_X(X)
            if not is_dask_array(y):
                y = np.asarray(y)
                if y.ndim == 2 and y.shape[1] == 1:
                    y = y.ravel()
                check_classification_targets(y)
            check_n_rows(X.shape[0], y)
            self.n_features_in_ = int(X.shape[1])
            # Blocks small enough for one task's share of a worker's memory (a
            # block of kernel values is rows x k float64), and enough of them to
            # keep every thread busy.
            budget = min(config.get("block-bytes"), task_memory_budget(config.get("task-memory-share")))
            max_rows = max(256, int(budget // (8 * max(1, min(self.n_components, X.shape[0])))))
            X_rb = as_row_blocks(X, 0).split_blocks(2 * available_threads(), max_rows=max_rows)
            sw = None
            if sample_weight is not None:
                if not is_dask_array(sample_weight):
                    sample_weight = np.asarray(sample_weight, dtype=np.float64)
                check_n_rows(X.shape[0], sample_weight, "sample_weight")
                sw = aligned_vector(sample_weight, X_rb)
            return X_rb, y, sw, False
        X, y = validate_data(self, X, y, accept_sparse="csr", dtype=[np.float64, np.float32])
        check_classification_targets(y)
        X_rb = as_row_blocks(X, self._block_rows(min(self.n_components, X.shape[0])))
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
    def fit(self, X, y=None, sample_weight=None):
        """Fit the model.

        Parameters
        ----------
        X : array-like, sparse matrix, dask array of shape (n_samples, n_features), or Dataset
            A :class:`dsvm.io.Dataset` (from :func:`dsvm.open_dataset`) carries its labels.
        y : array-like or dask array of shape (n_samples,), optional when X is a Dataset
        sample_weight : array-like of shape (n_samples,), optional
            Per-row weights multiplying ``C``.

        Returns
        -------
        self
        """
        self._check_params()
        t_start = time.perf_counter()
        X, y = unpack_dataset(X, y)
        if y is None:
            raise ValueError(
                f"{type(self).__name__} requires y to be passed, but the target y is None "
                "(or pass a Dataset holding labels)"
            )
        X_rb, y, sw, checked = self._validate_fit_input(X, y, sample_weight)
        classes, codes = encode_labels(y, X_rb)
        if classes.size < 2:
            raise ValueError(
                f"the training labels hold {classes.size} class ({classes.tolist()}); a classifier needs at least 2"
            )
        if classes.dtype.kind == "f" and not np.all(np.mod(classes, 1) == 0):
            raise ValueError("Unknown label type: y looks continuous (non-integer floats); use NystroemSVR for regression")
        self.classes_ = classes
        class_cost = self.C * self._class_weights(classes, codes)
        fmap, lm, gamma, timing = self._feature_map(X_rb)
        r = fmap.n_output
        problems = [1] if classes.size == 2 else list(range(classes.size))
        coef = np.zeros((len(problems), r))
        intercept = np.zeros(len(problems))
        objectives, n_iters, stats = [], [], []
        t0 = time.perf_counter()
        with FeatureStore(X_rb, fmap, self.feature_store, check_finite=not checked) as store:
            if X_rb.is_distributed and store.kind == "memory":
                codes = codes.persist()
                sw = sw.persist() if sw is not None else None
            timing["feature_seconds"] = time.perf_counter() - t0
            hessian = self.hessian if self.hessian != "auto" else choose_hessian(X_rb.n_rows, r + 1, X_rb.is_distributed)
            for j, positive in enumerate(problems):
                op = SquaredHingeOperator(store.blocks, codes, positive, class_cost, sw, self.fit_intercept)
                label = f"[class {classes[positive]!r}] " if len(problems) > 1 else ""
                res = semismooth_newton(op, r + 1, tol=self.tol, max_iter=self.max_iter, hessian=hessian, label=label)
                _warn_if_not_converged(res, self.tol, label)
                coef[j], intercept[j] = res.x[:-1], res.x[-1]
                objectives.append(res.objective)
                n_iters.append(res.n_iter)
                stats.append(_problem_stats(res, classes[positive]))
            feature_store = store.kind

        self.feature_map_ = fmap
        self.gamma_ = gamma
        self.components_ = fmap.components
        self.component_indices_ = lm.indices
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
            "feature_store": feature_store,
            "problems": stats,
        }
        logger.info(
            "fit: n=%d k=%d r=%d landmarks %.3fs features %.3fs solve %.3fs",
            X_rb.n_rows, fmap.n_components, r, timing["landmark_seconds"], timing["feature_seconds"],
            self.solver_stats_["solve_seconds"],
        )
        return self

    def _feature_map(self, X_rb: RowBlocks):
        """gamma, landmarks and the Nyström map: ``(fmap, landmarks, gamma, timing)``."""
        gamma = self._resolve_gamma(X_rb)
        spec = make_kernel_spec(self.kernel, gamma, self.degree, self.coef0)
        n = X_rb.n_rows
        k = int(self.n_components)
        if k > n:
            warnings.warn(
                f"n_components={k} is larger than the number of rows ({n}); using n_components={n}",
                UserWarning,
                stacklevel=3,
            )
            k = n
        t0 = time.perf_counter()
        lm = select_landmarks(X_rb, k, self.landmarks, self.random_state, self.kmeans_iter)
        fmap = fit_feature_map(lm.components, spec, dtype=np.dtype(self.dtype), eig_rtol=self.eig_rtol)
        timing = {"landmark_seconds": time.perf_counter() - t0, "landmark_passes": lm.n_passes}
        return fmap, lm, gamma, timing

    def _class_weights(self, classes: np.ndarray, codes: RowBlocks) -> np.ndarray:
        if self.class_weight is None:
            return np.ones(classes.size)
        if isinstance(self.class_weight, str) and self.class_weight == "balanced":
            counts = codes.map_reduce(_class_counts_block, shared=(classes.size,))
            if np.any(counts == 0):
                raise ValueError("class_weight='balanced' needs every class to be present")
            return counts.sum() / (classes.size * counts)
        if isinstance(self.class_weight, dict):
            unknown = set(self.class_weight) - set(classes.tolist())
            if unknown:
                raise ValueError(f"class_weight names labels {sorted(unknown)!r} that are not in y")
            return compute_class_weight(self.class_weight, classes=classes, y=classes)
        raise ValueError(f"class_weight must be None, 'balanced' or a dict, got {self.class_weight!r}")

    # ------------------------------------------------------------------ predict
    def _validate_predict_input(self, X):
        check_is_fitted(self)
        X, _ = unpack_dataset(X)
        if is_dask_array(X):
            check_dask_X(X)
            if X.shape[1] != self.n_features_in_:
                raise ValueError(
                    f"X has {X.shape[1]} features, but {type(self).__name__} is expecting "
                    f"{self.n_features_in_} features as input"
                )
            return as_row_blocks(X, 0), False
        X = validate_data(self, X, accept_sparse="csr", dtype=[np.float64, np.float32], reset=False)
        return as_row_blocks(X, self._block_rows(self.coef_.shape[1])), True

    def decision_function(self, X):
        """Signed distance to the separating hyperplane in feature space.

        Returns shape (n_samples,) for two classes, (n_samples, n_classes)
        otherwise; a dask array for dask input.
        """
        X_rb, checked = self._validate_predict_input(X)
        dec = lazy_result(decision_blocks(X_rb, self.feature_map_, self.coef_, self.intercept_, not checked))
        return dec[:, 0] if self.coef_.shape[0] == 1 else dec

    def predict(self, X):
        """Class labels; a dask array for dask input."""
        X_rb, checked = self._validate_predict_input(X)
        if not checked:
            dec = decision_blocks(X_rb, self.feature_map_, self.coef_, self.intercept_, True)
            return lazy_result(
                dec.map_blocks(_labels_from_decision, None, self.classes_.dtype, shared=(self.classes_,))
            )
        dec = lazy_result(decision_blocks(X_rb, self.feature_map_, self.coef_, self.intercept_, False))
        return _predict_labels(dec[:, 0] if dec.shape[1] == 1 else dec, self.classes_)

    def score(self, X, y=None, sample_weight=None):
        """Mean accuracy; for dask input computed block-wise (one pass)."""
        if y is None:
            X, y = unpack_dataset(X)
        if is_dask_array(X) and sample_weight is None:
            X_rb, _ = self._validate_predict_input(X)
            check_n_rows(X.shape[0], y)
            y_rb = aligned_vector(y, X_rb)
            correct, total = X_rb.map_reduce(
                _correct_block, aligned=(y_rb,),
                shared=(self.feature_map_, self.coef_, self.intercept_, self.classes_),
            )
            return correct / total
        return super().score(X, y, sample_weight=sample_weight)

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.sparse = True
        return tags


def _labels_from_decision(dec_block, classes):
    return _predict_labels(dec_block[:, 0] if dec_block.shape[1] == 1 else dec_block, classes)


__all__ = ["NystroemSVC", "FeatureMap"]
