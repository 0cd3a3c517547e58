"""What every Nyström estimator shares: parameters and their checks, input as row blocks, block-wise
prediction.

Fitting runs the pipeline of the package in one direction::

    input (numpy / scipy.sparse / dask) → RowBlocks → landmarks → Nyström map
        → feature blocks F (FeatureStore) → operator (one problem each) → solver

(:mod:`dsvm.svm._fitting`) and leaves only plain numpy arrays on the estimator,
so a fitted model pickles, saves and predicts without a cluster.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from sklearn.base import BaseEstimator
from sklearn.utils.validation import (
    _check_sample_weight,
    check_is_fitted,
    validate_data,
)

from ..approx import check_kernel_params, check_scale, fit_scaling
from ..blocks import (
    RowBlocks,
    aligned_vector,
    as_row_blocks,
    check_dask_X,
    cluster_memory,
    dask_frame_input,
    is_dask_array,
    is_dask_frame,
    lazy_result,
    probe_workers,
    task_sized_blocks,
)
from ..checks import check_n_rows, check_positive, check_positive_int
from ..io import check_numeric_columns
from ..options import FEATURE_STORES, HESSIANS, LANDMARK_METHODS, SOLVERS
from ..problems import decision_blocks
from ..solvers import REGISTRY
from ._onnx_export import to_onnx
from ._sklearn_export import to_sklearn

# solver_options keys of the estimators' Newton solve that are not the solver's own
WARM_START_OPTIONS = ("warm_start", "warm_rows")

__all__ = ["WARM_START_OPTIONS", "NystroemBase", "set_fitted", "check_params", "check_cost_scale", "MAX_LOSS_SCALE", "MAX_FLOAT32_COST", "param_names",
           "FitInput", "prepare_fit_input", "prediction_input",
           "model_decisions", "model_decision_blocks", "check_feature_names", "check_dataset_input", "BLOCK_BYTES",
           "block_rows_for", "unpack_dataset", "is_dataset", "dataset_zero_based", "stored_chunk_bytes",
           "check_index_base"]

BLOCK_BYTES = 64 * 2**20  # target size of one feature block when splitting in-memory input
# what the tasks of a fit or a prediction import on Dask workers (loaded there before their memory is measured)
TASK_MODULES = ("dsvm.problems",)


def plain_label(label):
    """A problem's label as a plain Python value (numpy scalars unwrapped), for logs and stats."""
    return label.item() if hasattr(label, "item") else label


def problem_log_prefix(labels, j: int) -> str:
    """``"[class 'a'] "`` before problem ``j``'s log lines where the fit has several problems, else ``""``."""
    return f"[class {plain_label(labels[j])!r}] " if len(labels) > 1 else ""


def block_rows_for(n_out: int, dtype, block_rows: int | None = None) -> int:
    """Rows per in-memory block: ``block_rows`` if given, else about :data:`BLOCK_BYTES` of features
    (``n_out`` columns of ``dtype``), at least 1024."""
    if block_rows is not None:
        return int(block_rows)
    return max(1024, BLOCK_BYTES // (np.dtype(dtype).itemsize * max(1, n_out)))


#: the k that sizes the input's blocks of an ``n_components="auto"`` fit (its fits run at several k)
AUTO_LAYOUT_K = 2000


def layout_k(est) -> int:
    """The number of landmarks the input's blocks are sized for."""
    return AUTO_LAYOUT_K if est.n_components == "auto" else est.n_components


def _block_layout(est, n_out: int) -> tuple[int, int | None]:
    """``(block_rows, min_blocks)`` of an estimator's in-memory input: an explicit ``block_rows`` is kept
    as given (``block_rows=n``: one block, one thread); the default size is split further so that every
    core gets a block."""
    return block_rows_for(n_out, est.dtype, est.block_rows), (1 if est.block_rows is not None else None)


def param_names(cls) -> list[str]:
    """The constructor parameters of an estimator class, sorted (what ``get_params`` returns)."""
    return sorted(cls().get_params(deep=False))


def stored_chunk_bytes(X) -> float | None:
    """Bytes of one stored row chunk of a dataset, decompressed (an average for a sparse one); None
    for other input."""
    if not is_dataset(X) or not isinstance(getattr(X, "attrs", None), dict):
        return None
    attrs = X.attrs
    rows, itemsize = attrs["chunk_rows"], np.dtype(attrs["dtype"]).itemsize
    if attrs["sparse"]:
        return attrs["nnz"] / max(1, attrs["n_chunks"]) * (itemsize + 4) + 8.0 * (rows + 1)
    return float(rows) * attrs["n_features"] * itemsize


def is_dataset(X) -> bool:
    """True for a :class:`dsvm.io.Dataset` (anything with ``.X`` and ``.y`` that is not an array)."""
    return hasattr(X, "X") and hasattr(X, "y") and not hasattr(X, "shape")


def dataset_zero_based(X) -> bool | None:
    """Whether a dataset's LIBSVM file numbered its features from 0; None if not a LIBSVM dataset."""
    attrs = getattr(X, "attrs", None) if is_dataset(X) else None
    value = attrs.get("zero_based") if isinstance(attrs, dict) else None
    return value if isinstance(value, bool) else None


def _base_name(zero_based: bool) -> str:
    return "zero-based" if zero_based else "one-based"


def check_index_base(model, X) -> None:
    """Refuse a dataset whose LIBSVM indices were read with another base than the model's training data.

    A file read with the wrong base has every feature shifted by one column:
    the model would predict from the wrong features without any other error.
    """
    data_zb = dataset_zero_based(X)
    model_zb = getattr(model, "zero_based_", None)
    if data_zb is None or model_zb is None or data_zb == model_zb:
        return
    guessed = " (guessed: the file has no feature index 0)" if X.attrs.get("zero_based_from") == "no index 0" else ""
    raise ValueError(
        f"{X.path}: its LIBSVM feature indices were read as {_base_name(data_zb)}{guessed}, but the model was "
        f"trained on a file with {_base_name(model_zb)} indices: every feature would be shifted by one column. "
        f"Ingest it again with zero_based={model_zb} or like=<the model or its training dataset> "
        "(CLI: dsvm ingest FILE DATASET --like MODEL)"
    )


def unpack_dataset(X, y=None, *, labels_needed: bool = True):
    """Accept a :class:`dsvm.io.Dataset` (anything with ``.X`` and ``.y``) in place of ``X, y``.

    A dataset read without a label column (``ingest(..., label_column=False)``) holds placeholder
    labels: refused unless ``labels_needed`` is False (prediction).
    """
    if is_dataset(X):
        if y is not None:
            raise ValueError("pass either a Dataset or X and y, not both")
        attrs = getattr(X, "attrs", None)
        if labels_needed and isinstance(attrs, dict) and attrs.get("unlabelled"):
            raise ValueError(f"{getattr(X, 'path', 'the dataset')} has no labels (it was read without a label "
                             "column, to predict on): fitting or evaluating needs labelled data")
        return X.X, X.y
    return X, y


# The loss at w = 0, C times the rows' total weight, bounds the objective and gradient a solver squares
# (norms, inner products) in float64, whose squares overflow above 1.3e154.
MAX_LOSS_SCALE = 1e150
# With float32 features the per-row costs meet the features in float32 products (the gradient's GEMV,
# the Gram matrix's scaled rows), summed over slabs of thousands of rows: float32 ends at 3.4e38.
MAX_FLOAT32_COST = 1e30


def _check_k_params(est) -> None:
    """``n_components`` (a positive integer or ``"auto"``), ``time_budget`` and ``k_tol``."""
    if est.n_components != "auto":
        check_positive_int("n_components", est.n_components)
    elif getattr(est, "checkpoint", None) is not None:
        raise ValueError("checkpoint cannot be used with n_components='auto' (its fits run at several k); "
                         "fix n_components to the k an earlier auto fit chose (n_components_) to checkpoint")
    if est.time_budget is not None:
        check_positive("time_budget", est.time_budget)
    check_positive("k_tol", est.k_tol, allow_zero=True)


def check_params(est) -> None:
    """Validate a Nystroem estimator's parameters as fit does (``ValueError`` naming the parameter)."""
    check_kernel_params(est.kernel, est.gamma)
    check_positive("C", est.C)
    _check_k_params(est)
    if est.landmarks not in LANDMARK_METHODS:
        raise ValueError(f"landmarks={est.landmarks!r} is not supported; choose one of {LANDMARK_METHODS}")
    if est.solver not in est.SUPPORTED_SOLVERS:
        raise ValueError(f"solver={est.solver!r} is not supported; choose one of {est.SUPPORTED_SOLVERS}")
    options = est.solver_options or {}
    if not isinstance(options, dict):
        raise ValueError(f"solver_options must be a dict or None, got {options!r}")
    allowed = REGISTRY[est.solver].options | (set(WARM_START_OPTIONS) if est.solver == "newton" else set())
    unknown = set(options) - allowed
    if unknown:
        raise ValueError(
            f"solver_options {sorted(unknown)} do not apply to solver={est.solver!r}; it takes {sorted(allowed)}"
        )
    if est.hessian not in HESSIANS:
        raise ValueError(f"hessian={est.hessian!r} is not supported; choose one of {HESSIANS}")
    check_positive("tol", est.tol)
    check_positive_int("max_iter", est.max_iter)
    if np.dtype(est.dtype) not in (np.dtype(np.float32), np.dtype(np.float64)):
        raise ValueError(f"dtype must be 'float32' or 'float64', got {est.dtype!r}")
    if est.eig_rtol is not None:
        check_positive("eig_rtol", est.eig_rtol)
    check_positive_int("kmeans_iter", est.kmeans_iter)
    if est.feature_store not in FEATURE_STORES:
        raise ValueError(f"feature_store={est.feature_store!r} is not supported; choose one of {FEATURE_STORES}")
    if est.block_rows is not None:
        check_positive_int("block_rows", est.block_rows)
    check_scale(getattr(est, "scale", None))
    _check_magnitudes(est)
    _check_class_weight(getattr(est, "class_weight", None))
    _check_random_state(est.random_state)


def _check_class_weight(class_weight) -> None:
    """The form of ``class_weight`` (its labels are checked against the classes when the fit knows them)."""
    if class_weight is None or (isinstance(class_weight, str) and class_weight == "balanced"):
        return
    if not isinstance(class_weight, dict):
        raise ValueError(f"class_weight must be None, 'balanced' or a dict, got {class_weight!r}")
    for label, weight in class_weight.items():
        if isinstance(weight, bool) or not isinstance(weight, (int, float, np.number)) or not np.isfinite(weight) \
                or weight < 0:
            raise ValueError(f"class_weight must be finite and non-negative; label {label!r} has {weight!r}")


def _check_random_state(random_state) -> None:
    """What seeds the fit's generators: None, a seed NumPy takes (0 to 2**32 - 1) or a ``RandomState``."""
    if random_state is None or isinstance(random_state, np.random.RandomState):
        return
    if isinstance(random_state, (bool, np.bool_)) or not isinstance(random_state, (int, np.integer)) \
            or not 0 <= random_state < 2**32:
        raise ValueError(f"random_state must be None, an integer from 0 to 2**32 - 1 or a numpy RandomState, "
                         f"got {random_state!r}")


def _check_magnitudes(est) -> None:
    """Parameters too large for any finite problem in the features' dtype (ValueError, before any data)."""
    dtype = np.dtype(est.dtype)
    top = float(np.finfo(dtype).max)
    if est.C > MAX_LOSS_SCALE or (dtype == np.float32 and est.C > MAX_FLOAT32_COST):
        where = (f"beyond C={MAX_FLOAT32_COST:g} the solvers' sums overflow with float32 features (dtype='float64' "
                 f"allows up to {MAX_LOSS_SCALE:g})" if dtype == np.float32 and est.C <= MAX_LOSS_SCALE
                 else f"beyond C={MAX_LOSS_SCALE:g} the solvers' sums overflow float64")
        raise ValueError(f"C={est.C:g} is too large: {where}; choose a smaller C")
    for name in ("gamma", "coef0"):
        value = getattr(est, name, None)
        if isinstance(value, (int, float, np.number)) and not isinstance(value, bool) and abs(value) > top:
            raise ValueError(f"{name}={value:g} is beyond the largest {dtype.name} number ({top:.3g}): the kernel "
                             f"cannot be computed in {dtype.name}; choose a smaller {name}")


def check_cost_scale(C_max: float, total_weight: float, what: str) -> None:
    """Refuse costs whose loss at ``w = 0`` (``C_max`` times the rows' ``total_weight``) the solvers cannot square.

    ``C_max`` is C times the largest class weight; ``what`` says what the total weight is.

    Raises
    ------
    ValueError
        Above :data:`MAX_LOSS_SCALE`, naming the product and its parts.
    """
    scale = float(C_max) * float(total_weight)
    if scale > MAX_LOSS_SCALE:
        raise ValueError(
            f"C times the class weight ({C_max:.3g}) times the rows' total weight ({total_weight:.3g}, {what}) is "
            f"{scale:.3g}: the loss at w = 0 and its gradient cannot be squared in float64 beyond "
            f"{MAX_LOSS_SCALE:g}; choose a smaller C (or smaller weights)"
        )


def _dataset_feature_names(X) -> np.ndarray | None:
    names = getattr(X, "feature_names", None) if is_dataset(X) else None
    return None if names is None else np.asarray(names, dtype=object)


def _set_feature_names(est, names) -> None:
    """``feature_names_in_`` as scikit-learn keeps it: the column names, or no attribute without names."""
    if names is None:
        est.__dict__.pop("feature_names_in_", None)
    else:
        est.feature_names_in_ = np.asarray(names, dtype=object)


def check_feature_names(model, names, what: str = "X") -> None:
    """Refuse columns named differently (or in another order) than the model's training columns.

    Unnamed input is accepted (a LIBSVM file, an array): only names that are
    there and differ show that the columns are not the model's features.
    """
    fitted = getattr(model, "feature_names_in_", None)
    if fitted is None or names is None:
        return
    names = np.asarray(names, dtype=object)
    if names.shape == fitted.shape and np.array_equal(names, fitted):
        return
    unseen = [n for n in names if n not in set(fitted)][:5]
    missing = [n for n in fitted if n not in set(names)][:5]
    detail = (f"; not seen at fit: {unseen}" if unseen else "") + (f"; missing: {missing}" if missing else "")
    raise ValueError(f"the feature names of {what} differ from those {type(model).__name__} was fitted with "
                     f"(or come in another order){detail or '; same names, another order'}")


def check_dataset_input(model, X) -> None:
    """A dataset given to a fitted model: read with the model's LIBSVM indexing base, its columns named as the
    model's (when both have names)."""
    check_index_base(model, X)
    if is_dataset(X):
        check_feature_names(model, _dataset_feature_names(X), getattr(X, "path", "the dataset"))


def _scaled(est, X_rb: RowBlocks, checked: bool, dtype) -> RowBlocks:
    """``X_rb`` through the estimator's ``scale`` step, fitted here in one pass (sets ``scaling_``)."""
    kind = getattr(est, "scale", None)
    if kind is None:
        est.scaling_ = None
        return X_rb
    est.scaling_ = fit_scaling(X_rb, kind, check_finite=not checked)
    return X_rb.map_blocks(est.scaling_.transform_block, X_rb.n_cols, dtype)


@dataclass
class FitInput:
    """What fit works on: ``X`` as row blocks, ``y`` (numpy or dask), aligned sample weights or None, and
    whether X's rows were checked finite already (in-memory input is checked whole)."""

    X: RowBlocks
    y: object
    sample_weight: RowBlocks | None
    checked: bool


def prepare_fit_input(est, X, y, sample_weight, check_y: Callable[[np.ndarray], np.ndarray]) -> FitInput:
    """Fit's input checks of a Nystroem estimator: X as row blocks, y, the aligned sample weights.

    ``check_y`` validates an in-memory ``y`` (labels or targets).  Sets
    ``n_features_in_`` and ``zero_based_`` on ``est``.
    """
    # a LIBSVM dataset's indexing base travels with the model: test files must be read the same way
    est.zero_based_ = dataset_zero_based(X)
    chunk_bytes = stored_chunk_bytes(X)
    names = _dataset_feature_names(X)
    X, y = unpack_dataset(X, y)
    if y is None:
        raise ValueError(
            f"{type(est).__name__} requires y to be passed, but the target y is None "
            "(or pass a Dataset holding labels)"
        )
    if is_dask_frame(X):  # rows stay on the cluster: never through __array__
        X, y, names = dask_frame_input(X, y)
    if is_dask_array(X):
        check_dask_X(X)
        if not is_dask_array(y):
            y = np.asarray(y)
            if y.ndim == 2 and y.shape[1] == 1:
                y = y.ravel()
            y = check_y(y)
        check_n_rows(X.shape[0], y)
        est.n_features_in_ = int(X.shape[1])
        _set_feature_names(est, names)
        # Landmarks, gamma and the feature stage each read X: keep it in the
        # cluster's memory when it is small next to that memory (it is far
        # smaller than F whenever p < k), instead of re-reading the store.
        workers = probe_workers(TASK_MODULES)  # one round trip to the workers serves both questions
        memory, _ = cluster_memory(workers)
        persist = float(X.nbytes) <= 0.1 * memory
        X_rb = task_sized_blocks(X, min(layout_k(est), X.shape[0]), chunk_bytes,
                                 itemsize=np.dtype(est.dtype).itemsize, persisted_bytes=float(X.nbytes) if persist else 0.0,
                                 worker_modules=TASK_MODULES, workers=workers)
        X_rb = _scaled(est, X_rb, False, X.dtype)
        if X_rb.is_distributed and persist:
            X_rb = X_rb.persist()
        sw = None
        if sample_weight is not None:
            if not is_dask_array(sample_weight):
                sample_weight = np.asarray(sample_weight, dtype=np.float64)
            check_n_rows(X.shape[0], sample_weight, "sample_weight")
            sw = aligned_vector(sample_weight, X_rb)
        return FitInput(X_rb, y, sw, False)
    check_numeric_columns(X, "the DataFrame")  # numpy would name a value, not its column
    X, y = validate_data(est, X, y, accept_sparse="csr", dtype=[np.float64, np.float32])
    y = check_y(y)
    X_rb = as_row_blocks(X, *_block_layout(est, min(layout_k(est), X.shape[0])))
    X_rb = _scaled(est, X_rb, True, X.dtype)
    sw = None
    if sample_weight is not None:
        sample_weight = _check_sample_weight(sample_weight, X, dtype=np.float64)
        sw = aligned_vector(sample_weight, X_rb)
    return FitInput(X_rb, y, sw, True)


def prediction_input(model, X) -> tuple[RowBlocks, bool]:
    """X checked against a fitted model, as row blocks, and whether its rows were already checked finite."""
    check_is_fitted(model)
    check_dataset_input(model, X)
    chunk_bytes = stored_chunk_bytes(X)
    X, _ = unpack_dataset(X, labels_needed=False)
    if is_dask_frame(X):
        X, _, names = dask_frame_input(X)
        check_feature_names(model, names, "the DataFrame")
    if is_dask_array(X):
        check_dask_X(X)
        if X.shape[1] != model.n_features_in_:
            # a LIBSVM test file often lacks the training file's last feature columns
            hint = (f"; a sparse (LIBSVM) file read alone stops at its highest feature: ingest it with "
                    f"n_features={model.n_features_in_} or like=<the model or its training dataset> "
                    f"(CLI: --n-features {model.n_features_in_} or --like MODEL)"
                    if X.shape[1] < model.n_features_in_ else "")
            raise ValueError(
                f"X has {X.shape[1]} features, but {type(model).__name__} is expecting "
                f"{model.n_features_in_} features as input{hint}"
            )
        return task_sized_blocks(X, model.components_.shape[0], chunk_bytes,
                                 itemsize=np.dtype(model.feature_map_.dtype).itemsize, fit=False,
                                 worker_modules=TASK_MODULES), False
    check_numeric_columns(X, "the DataFrame")
    X = validate_data(model, X, accept_sparse="csr", dtype=[np.float64, np.float32], reset=False)
    return as_row_blocks(X, *_block_layout(model, model.coef_.shape[1])), True


def model_decision_blocks(model, X_rb: RowBlocks, checked: bool) -> RowBlocks:
    """Decision values of a fitted model on input rows already checked against it (:func:`prediction_input`):
    its scaling, then ``F(X) coefᵀ + intercept``, block-wise, shape (n, n_problems).

    Computed as ``K(X, L) α + intercept`` with the coefficients folded into the landmarks once,
    ``α = M coefᵀ`` (:func:`dsvm.problems.decision_blocks`): the features ``F`` are never formed."""
    return decision_blocks(X_rb, model.feature_map_, model.coef_, model.intercept_, not checked,
                           scaling=getattr(model, "scaling_", None))


def model_decisions(model, X) -> RowBlocks:
    """Decision values ``F(X) coefᵀ + intercept`` of a fitted model, block-wise, shape (n, n_problems), computed
    as ``K(X, L) α + intercept`` (:func:`model_decision_blocks`)."""
    X_rb, checked = prediction_input(model, X)
    return model_decision_blocks(model, X_rb, checked)


def set_fitted(est, attributes: dict, dropped: tuple[str, ...] = ()) -> None:
    """Set a fit's learnt attributes on ``est``, the one place a Nystroem fit writes them; ``dropped`` names
    attributes of an earlier fit that this one does not have (a model refitted without ``probability``)."""
    for name in dropped:
        est.__dict__.pop(name, None)
    for name, value in attributes.items():
        setattr(est, name, value)


class NystroemBase(BaseEstimator):
    """Shared machinery of :class:`~dsvm.NystroemSVC` and :class:`~dsvm.NystroemSVR`.

    Subclasses define ``__init__`` (their parameters), ``fit`` (on
    :func:`prepare_fit_input` and :func:`dsvm.svm._fitting.fit_problems`) and
    the prediction methods.
    """

    #: the solvers the estimator takes (read by ``check_params``)
    SUPPORTED_SOLVERS: tuple[str, ...] = SOLVERS

    def _decision(self, X):
        """``F(X) coefᵀ + intercept``, shape (n, n_problems); dask for dask input."""
        return lazy_result(model_decisions(self, X))

    def to_sklearn(self):
        """The equivalent fitted scikit-learn ``Pipeline`` (``[scaler →] Nystroem → LinearSVC | LinearSVR``).

        Its predictions are the model's; its decision values agree with the
        model's to float32 round-off for a float32 model (scikit-learn
        computes in float64), exactly for a ``dtype="float64"`` one.
        """
        return to_sklearn(self)

    def to_onnx(self, dtype="float32", target_opset: int | None = None):
        """The model as an ONNX graph (an ``onnx.ModelProto``), through skl2onnx (``pip install 'dsvm[onnx]'``).

        The graph's input and outputs are those of :func:`dsvm.export_onnx`,
        which writes it to a file.
        """
        return to_onnx(self, dtype=dtype, target_opset=target_opset)

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.sparse = True
        return tags
