"""Model files: plain arrays + JSON metadata in one ``.npz`` file, no pickle.

A model file is a NumPy ``.npz`` archive (a zip of ``.npy`` arrays) read with
``allow_pickle=False``, so loading never executes code from the file.  It
holds the fitted arrays of the estimator and one array ``__meta__`` with a
UTF-8 JSON document::

    {"format": "dsvm-model", "format_version": 1, "dsvm_version": "...",
     "estimator": "NystroemSVC", "params": {...}, "kernel": {...},
     "fitted": {...scalars and small lists...}, "classes_kind": "..."}

(``NystroemSVR`` files have no classes and ``"classes_kind": null``).

Optional members, absent from files written before they existed (such files
load as before): ``feature_names`` (strings, one per feature: the model's
``feature_names_in_``) and the statistics of the ``scale`` step
(``scaling_mean`` and ``scaling_var``, ``scaling_data_min`` and
``scaling_data_max``, or ``scaling_max_abs``; described by the metadata's
``fitted.scaling``: ``{"kind", "n_samples", "center"}``).  A file whose
model scales its input names ``scale`` among its parameters, which a dsvm
without scaling refuses instead of predicting from unscaled rows; a model
without the step leaves it out, so such files stay readable by those versions.

Files are written through :mod:`dsvm.io._replace` (a private temporary file,
moved into place when complete; an existing file is replaced only with
``overwrite=True`` and only if it is a dsvm model).  Reading is bounded
(:mod:`dsvm.io._archive`): only a regular file, only the members the format
names, every member's declared shape and size checked against the metadata
before any data is decompressed.  The metadata's fields are type-checked and
the arrays checked for consistency; a model whose decision values cannot be
finite is refused.  A corrupted, truncated, crafted or foreign file raises
:class:`ModelFileError` naming the file and the problem.
"""

from __future__ import annotations

import inspect
import logging
import math
import numbers
import os
from pathlib import Path
from typing import Any

import numpy as np
from sklearn.utils.validation import check_is_fitted

from ..approx import SCALINGS, FeatureMap, KernelSpec, Scaling
from ..exceptions import ModelFileError
from ..io import (
    SUPPORTED_VERSION,
    MemberRules,
    meta_array,
    npz_problem,
    read_npz,
    write_npz,
)
from ..version import __version__
from ._base import check_params
from ._classifier import NystroemSVC
from ._regressor import NystroemSVR

logger = logging.getLogger(__name__)

__all__ = ["ModelFileError", "save_model", "load_model", "model_file_problem", "FORMAT"]

FORMAT = "dsvm-model"
FORMAT_VERSION = SUPPORTED_VERSION
ESTIMATORS = ("NystroemSVC", "NystroemSVR")
CLASSES_KINDS = ("numeric", "str", "object-str")
# the statistics of the scale step, by their scikit-learn names, and the members holding them
SCALING_MEMBERS = {"mean_": "scaling_mean", "var_": "scaling_var", "data_min_": "scaling_data_min",
                   "data_max_": "scaling_data_max", "max_abs_": "scaling_max_abs"}
SCALING_STATS = {"standard": ("mean_", "var_"), "minmax": ("data_min_", "data_max_"), "maxabs": ("max_abs_",)}
# kernels whose values lie in [-1, 1]: a bound on the weights bounds every decision value
BOUNDED_KERNELS = ("rbf", "sigmoid")


def _encode_classes(classes: np.ndarray) -> tuple[np.ndarray, str]:
    if classes.dtype.kind in "biuf":
        return classes, "numeric"
    if classes.dtype.kind == "U":
        return classes, "str"
    if classes.dtype.kind == "O" and all(isinstance(c, str) for c in classes):
        return classes.astype(str), "object-str"
    raise ModelFileError(f"class labels of dtype {classes.dtype} cannot be saved without pickle; use numbers or strings")


def _decode_classes(arr: np.ndarray, kind: str) -> np.ndarray:
    if kind == "object-str":
        return arr.astype(object)
    return arr


def _saved_params(model) -> dict:
    """The estimator parameters a model file stores, as JSON values."""
    params = model.get_params(deep=False)
    # where a fit kept its checkpoint is not part of the model: a loaded model's refit must not write there
    params.pop("checkpoint", None)
    seed = params.get("random_state")
    if isinstance(seed, np.integer):
        params["random_state"] = int(seed)
    elif seed is not None and not isinstance(seed, int):  # a RandomState: its state is not part of the model
        del params["random_state"]
    params["dtype"] = np.dtype(params["dtype"]).name
    # a model that does not use these stays readable by versions without them
    defaults = inspect.signature(type(model)).parameters
    for name in ("scale", "time_budget", "k_tol"):
        if name in params and params[name] == defaults[name].default:
            del params[name]
    if isinstance(params.get("class_weight"), dict):
        params["class_weight"] = {"keys": list(params["class_weight"].keys()), "values": list(params["class_weight"].values())}
    return params


def _model_meta(model, classes_kind: str | None) -> dict:
    """The metadata document of a model file (its ``__meta__`` member)."""
    meta = {
        "format": FORMAT,
        "format_version": FORMAT_VERSION,
        "dsvm_version": __version__,
        "estimator": type(model).__name__,
        "params": _saved_params(model),
        "kernel": model.feature_map_.spec.to_dict(),
        "dtype": np.dtype(model.feature_map_.dtype).name,
        "classes_kind": classes_kind,
        "fitted": {
            "n_features_in_": int(model.n_features_in_),
            "zero_based_": getattr(model, "zero_based_", None),
            "n_iter_": int(model.n_iter_),
            "gamma_": float(model.gamma_),
            "objective_": np.asarray(model.objective_).tolist(),
            # null where a solver gave none (Pegasos); absent from files written before dsvm recorded it
            "duality_gap_": _gaps_json(getattr(model, "duality_gap_", float("nan"))),
            "n_components_": int(model.components_.shape[0]),
            "k_path_": getattr(model, "k_path_", None),
            "solver_stats": {k: v for k, v in model.solver_stats_.items() if k not in ("problems", "calibration")},
            "problems": [{k: v for k, v in p.items() if k != "history"} for p in model.solver_stats_["problems"]],
        },
    }
    scaling = getattr(model, "scaling_", None)
    if scaling is not None:
        meta["fitted"]["scaling"] = {"kind": scaling.kind, "n_samples": scaling.n_samples, "center": scaling.center}
    return meta


def _model_arrays(model, classes: np.ndarray | None) -> dict[str, np.ndarray]:
    """The fitted arrays of a model file, by member name; the optional members only where the model has them."""
    arrays = {
        "components": model.components_,
        "normalization": model.normalization_,
        "eigenvalues": model.feature_map_.eigenvalues,
        "coef": model.coef_,
        "intercept": model.intercept_,
    }
    if classes is not None:
        arrays["classes"] = classes
    if model.component_indices_ is not None:
        arrays["component_indices"] = np.asarray(model.component_indices_)
    if hasattr(model, "probA_"):
        arrays["probA"] = np.asarray(model.probA_, dtype=np.float64)
        arrays["probB"] = np.asarray(model.probB_, dtype=np.float64)
    if getattr(model, "feature_names_in_", None) is not None:
        arrays["feature_names"] = np.asarray(model.feature_names_in_, dtype=str)
    scaling = getattr(model, "scaling_", None)
    if scaling is not None:
        arrays.update({SCALING_MEMBERS[name]: values for name, values in scaling.primary_stats().items()})
    return arrays


def save_model(model, path: str | os.PathLike, overwrite: bool = False) -> Path:
    """Save a fitted dsvm estimator to ``path`` (``.npz``; no pickle).

    Parameters
    ----------
    model : NystroemSVC or NystroemSVR
        A fitted estimator.
    path : str or path-like
        Target file; written to a temporary file and moved into place when complete.
    overwrite : bool, default=False
        Replace an existing model file (only a dsvm model file is ever replaced).

    Raises
    ------
    FileExistsError
        ``path`` exists and ``overwrite`` is False, or it is not a dsvm model file.
    dsvm.DiskFullError
        The disk filled up; an old file at ``path`` is unchanged.

    Returns
    -------
    pathlib.Path
        The written file.

    Examples
    --------
    >>> import os, tempfile
    >>> from sklearn.datasets import make_moons
    >>> from dsvm import NystroemSVC, load_model, save_model
    >>> X, y = make_moons(n_samples=200, noise=0.1, random_state=0)
    >>> clf = NystroemSVC(n_components=50, random_state=0).fit(X, y)
    >>> path = save_model(clf, os.path.join(tempfile.mkdtemp(), "moons.npz"))
    >>> path.name
    'moons.npz'
    >>> bool((load_model(path).predict(X) == clf.predict(X)).all())
    True
    """
    if type(model).__name__ not in ESTIMATORS:
        raise TypeError(f"save_model saves {' and '.join(ESTIMATORS)} models, got {type(model).__name__}")
    check_is_fitted(model)
    is_classifier = hasattr(model, "classes_")
    classes, classes_kind = _encode_classes(np.asarray(model.classes_)) if is_classifier else (None, None)
    arrays = {"__meta__": meta_array(_model_meta(model, classes_kind)), **_model_arrays(model, classes)}
    write_npz(path, arrays, overwrite=overwrite, what="model", expected_format=FORMAT)
    return Path(path)


def model_file_problem(path: str | os.PathLike) -> str | None:
    """None if ``path`` is a dsvm model file (by its metadata), else why it is not (e.g. before replacing it)."""
    return npz_problem(Path(path), FORMAT)


# the arrays every model file holds: the Nyström map and the linear model on its features
REQUIRED_ARRAYS = ("components", "normalization", "eigenvalues", "coef", "intercept")


def _arrays_error(path: Path, msg: str) -> ModelFileError:
    """The error for a model file whose arrays are missing or do not fit together."""
    return ModelFileError(f"{path}: inconsistent model arrays: {msg}")


def _check_arrays(path: Path, a: dict[str, np.ndarray], n_problems: int, n_features_in: int) -> None:
    """Every array present, of a float dtype, with consistent shapes and finite values."""
    _check_required_dtypes(path, a)
    k = _check_required_shapes(path, a, n_problems, n_features_in)
    _check_optional_arrays(path, a, n_problems, k)
    _check_required_values(path, a)


def _check_required_dtypes(path: Path, a: dict[str, np.ndarray]) -> None:
    """Every required array present and of a floating-point dtype."""
    for name in REQUIRED_ARRAYS:
        if name not in a:
            raise _arrays_error(path, f"missing array {name!r}")
        if a[name].dtype.kind != "f":
            raise _arrays_error(path, f"array {name!r} has dtype {a[name].dtype}, expected floating point")


def _check_required_shapes(path: Path, a: dict[str, np.ndarray], n_problems: int, n_features_in: int) -> int:
    """The required arrays' shapes agree with each other and with the metadata; returns k, the landmarks' count."""
    if a["components"].ndim != 2:
        raise _arrays_error(path, "components must be 2-d")
    k, p = a["components"].shape
    if p != n_features_in:
        raise _arrays_error(path, f"components have {p} columns but n_features_in_ is {n_features_in}")
    if a["normalization"].ndim != 2 or a["normalization"].shape[1] != k:
        raise _arrays_error(path, f"normalization has shape {a['normalization'].shape}, expected (r, {k})")
    r = a["normalization"].shape[0]
    if a["eigenvalues"].shape != (r,):
        raise _arrays_error(path, f"eigenvalues have shape {a['eigenvalues'].shape}, expected ({r},)")
    m = n_problems
    if a["coef"].shape != (m, r):
        raise _arrays_error(path, f"coef has shape {a['coef'].shape}, expected ({m}, {r})")
    if a["intercept"].shape != (m,):
        raise _arrays_error(path, f"intercept has shape {a['intercept'].shape}, expected ({m},)")
    return k


def _check_optional_arrays(path: Path, a: dict[str, np.ndarray], m: int, k: int) -> None:
    """``component_indices`` (k integers) and ``probA``/``probB`` (together, m finite floats each), where present."""
    if "component_indices" in a and (a["component_indices"].shape != (k,)
                                     or a["component_indices"].dtype.kind not in "iu"):
        raise _arrays_error(path, f"component_indices have shape {a['component_indices'].shape} and dtype "
                                  f"{a['component_indices'].dtype}, expected ({k},) integers")
    if ("probA" in a) != ("probB" in a):
        raise _arrays_error(path, "probA and probB must be stored together")
    for name in ("probA", "probB"):
        if name in a and (a[name].shape != (m,) or a[name].dtype.kind != "f" or not np.all(np.isfinite(a[name]))):
            raise _arrays_error(path, f"{name} has shape {a[name].shape}, dtype {a[name].dtype} or non-finite values, "
                                      f"expected ({m},) finite")


def _check_required_values(path: Path, a: dict[str, np.ndarray]) -> None:
    """The required arrays finite and the eigenvalues positive."""
    for name in REQUIRED_ARRAYS:
        if not np.all(np.isfinite(a[name])):
            raise _arrays_error(path, f"array {name!r} holds NaN or infinity")
    if np.any(a["eigenvalues"] <= 0):
        raise _arrays_error(path, "eigenvalues must be positive (the Nyström map keeps only positive ones)")


def _check_classes(path: Path, a: dict[str, np.ndarray], kind) -> np.ndarray:
    """The stored labels: 1-d, at least two, sorted and distinct (predictions index into them)."""
    if kind not in CLASSES_KINDS:
        raise ModelFileError(f"{path}: classes_kind {kind!r} is not one of {CLASSES_KINDS}")
    if "classes" not in a:
        raise ModelFileError(f"{path}: inconsistent model arrays: missing array 'classes'")
    classes = a["classes"]
    if classes.dtype.kind not in ("biuf" if kind == "numeric" else "U"):
        raise ModelFileError(f"{path}: classes have dtype {classes.dtype}, which does not match classes_kind {kind!r}")
    if classes.ndim != 1 or classes.size < 2:
        raise ModelFileError(f"{path}: classes must be a 1-d array of at least two labels, got shape {classes.shape}")
    if not np.array_equal(np.unique(classes), classes):
        raise ModelFileError(f"{path}: classes must be sorted and distinct, got {classes.tolist()[:10]}")
    return _decode_classes(classes, kind)


def _finite_number(x: Any) -> bool:
    return isinstance(x, numbers.Real) and not isinstance(x, bool) and math.isfinite(x)


def _count(x: Any, minimum: int) -> bool:
    return isinstance(x, int) and not isinstance(x, bool) and x >= minimum


def _meta_value(meta: dict, field: str) -> Any:
    """The value of a dotted metadata field (``fitted.gamma_``), None where a level is missing or not a mapping."""
    node: Any = meta
    for part in field.split("."):
        node = node.get(part) if isinstance(node, dict) else None
    return node


def _meta_error(path: Path, meta: dict, field: str, expected: str) -> ModelFileError:
    """The error for a metadata field of the wrong type, quoting (the start of) its value."""
    value = repr(_meta_value(meta, field))
    return ModelFileError(f"{path}: metadata field {field} is {value[:60]}, expected {expected}")


def _check_meta(path: Path, meta: dict) -> None:
    """Every metadata field load_model uses has the type it must have (the JSON is the user's file)."""
    if meta.get("estimator") not in ESTIMATORS:
        raise ModelFileError(f"{path}: estimator {meta.get('estimator')!r} is not supported by this dsvm version")
    for field in ("params", "kernel", "fitted"):
        if not isinstance(meta.get(field), dict):
            raise _meta_error(path, meta, field, "a mapping")
    if not isinstance(meta.get("dtype"), str):
        raise _meta_error(path, meta, "dtype", "'float32' or 'float64'")
    _check_fitted_scalars(path, meta)
    _check_fitted_problems(path, meta)
    if not (_count(meta["params"].get("n_components"), 1) or meta["params"].get("n_components") == "auto"):
        raise _meta_error(path, meta, "params.n_components", "a positive integer or 'auto'")
    chosen = meta["fitted"].get("n_components_")
    if (chosen is not None or meta["params"]["n_components"] == "auto") and not _count(chosen, 1):
        raise _meta_error(path, meta, "fitted.n_components_", "a positive integer")
    k_path = meta["fitted"].get("k_path_")
    if k_path is not None and not (isinstance(k_path, list) and all(
            isinstance(p, dict) and _count(p.get("k"), 1) and _finite_number(p.get("score"))
            and _finite_number(p.get("seconds")) for p in k_path)):
        raise _meta_error(path, meta, "fitted.k_path_", "null or a list of {k, score, seconds}")


def _check_fitted_scalars(path: Path, meta: dict) -> None:
    """The fitted model's feature count, iteration count and kernel width."""
    fitted = meta["fitted"]
    if not _count(fitted.get("n_features_in_"), 1):
        raise _meta_error(path, meta, "fitted.n_features_in_", "a positive integer")
    if not _count(fitted.get("n_iter_"), 0):
        raise _meta_error(path, meta, "fitted.n_iter_", "a non-negative integer")
    if not (_finite_number(fitted.get("gamma_")) and fitted["gamma_"] > 0):
        raise _meta_error(path, meta, "fitted.gamma_", "a positive finite number")


def _check_fitted_problems(path: Path, meta: dict) -> None:
    """The fitted model's binary problems, their objective values and the solver's statistics."""
    fitted = meta["fitted"]
    problems = fitted.get("problems")
    if not (isinstance(problems, list) and problems and all(isinstance(p, dict) for p in problems)):
        raise _meta_error(path, meta, "fitted.problems", "a non-empty list of mappings")
    objective = fitted.get("objective_")
    if not (_finite_number(objective) or (isinstance(objective, list) and len(objective) == len(problems)
                                         and all(_finite_number(v) for v in objective))):
        raise _meta_error(path, meta, "fitted.objective_", "a finite number or one per problem")
    if not isinstance(fitted.get("solver_stats", {}), dict):
        raise _meta_error(path, meta, "fitted.solver_stats", "a mapping")
    gap = fitted.get("duality_gap_")
    if not (_gap_value(gap) or (isinstance(gap, list) and len(gap) == len(problems) and all(map(_gap_value, gap)))):
        raise _meta_error(path, meta, "fitted.duality_gap_", "a number ≥ 0 or null, or one per problem")


def _gap_value(v) -> bool:
    return v is None or (_finite_number(v) and v >= 0)


def _gaps_json(gap):
    """``duality_gap_`` as the metadata holds it: a number, or one per problem, null for nan."""
    values = [None if not np.isfinite(v) else float(v) for v in np.atleast_1d(np.asarray(gap, dtype=np.float64))]
    return values if np.ndim(gap) else values[0]


def _gaps_loaded(gap):
    """``duality_gap_`` of a model file's metadata (nan for null, or for a file that has none)."""
    if isinstance(gap, list):
        return np.array([np.nan if v is None else v for v in gap], dtype=np.float64)
    return float("nan") if gap is None else float(gap)


def _model_params(path: Path, params: dict) -> dict:
    """The estimator parameters of a model file, less ``checkpoint`` (files of earlier versions carried it):
    a file's content never chooses a path a later fit writes to or deletes."""
    params = dict(params)
    checkpoint = params.pop("checkpoint", None)
    if checkpoint is not None:
        logger.warning("%s: the model file names a checkpoint path (%.80s); ignored, a refit of the loaded model "
                       "writes no checkpoint unless given one", path, str(checkpoint))
    return params


def _model_rules(path: Path, meta: dict) -> MemberRules:
    """The arrays of a model file and the shapes the metadata allows them (see dsvm.io._archive)."""
    _check_meta(path, meta)
    fitted = meta["fitted"]
    k_max = fitted.get("n_components_") or meta["params"]["n_components"]
    return MemberRules(
        shapes={"components": ("k", "p"), "normalization": ("r", "k"), "eigenvalues": ("r",), "coef": ("m", "r"),
                "intercept": ("m",), "component_indices": ("k",), "probA": ("m",), "probB": ("m",),
                "classes": None,  # its shape is checked with the labels (_check_classes)
                "feature_names": ("p",), **{member: ("p",) for member in SCALING_MEMBERS.values()}},
        known={"p": fitted["n_features_in_"], "m": len(fitted["problems"])},
        at_most={"k": k_max, "r": k_max},
        kinds={"components": "f", "normalization": "f", "eigenvalues": "f", "coef": "f", "intercept": "f",
               "component_indices": "iu", "probA": "f", "probB": "f", "classes": "biufU", "feature_names": "U",
               **{member: "f" for member in SCALING_MEMBERS.values()}},
    )


def _load_scaling(path: Path, meta: dict, a: dict[str, np.ndarray]) -> Scaling | None:
    """The model's fitted scale step, checked against its ``scale`` parameter; None without one."""
    info = meta["fitted"].get("scaling")
    scale = meta["params"].get("scale")
    if info is None:
        if scale is not None:
            raise ModelFileError(f"{path}: the model scales its input (scale={scale!r}) but the file holds no "
                                 "scaling statistics")
        return None
    if not (isinstance(info, dict) and info.get("kind") in SCALINGS and info.get("kind") == scale
            and _count(info.get("n_samples"), 1) and isinstance(info.get("center"), bool)):
        raise ModelFileError(f"{path}: metadata field fitted.scaling is {str(info)[:80]}, expected "
                             f"{{kind: {scale!r}, n_samples: a positive integer, center: true or false}}")
    stats = {}
    for name in SCALING_STATS[info["kind"]]:
        member = SCALING_MEMBERS[name]
        if member not in a:
            raise ModelFileError(f"{path}: inconsistent model arrays: missing array {member!r}")
        if not np.all(np.isfinite(a[member])):
            raise ModelFileError(f"{path}: array {member!r} holds NaN or infinity")
        stats[name] = a[member]
    scaling = Scaling.from_stats(info["kind"], info["n_samples"], info["center"], **stats)
    if not (np.all(np.isfinite(scaling.factor)) and np.all(np.isfinite(scaling.offset))):
        raise ModelFileError(f"{path}: the scaling statistics give a non-finite transform; they are corrupted")
    return scaling


def _check_decision_bound(path: Path, a: dict[str, np.ndarray], kernel: str, dtype: np.dtype) -> None:
    """Refuse weights that make decision values overflow the feature dtype.

    A decision value is ``K(x, landmarks) @ normalizationᵀ @ coefᵀ + intercept``;
    with kernel values in [-1, 1] (rbf, sigmoid) it is at most
    ``Σ_j |coef @ normalization|_j + |intercept|`` in magnitude, which must be
    finite in ``dtype`` (the features' dtype, in which the product is taken).
    For the unbounded kernels (linear, poly) the same bound per unit kernel
    value must be finite.
    """
    with np.errstate(over="ignore", invalid="ignore"):
        weights = np.abs(a["coef"].astype(np.float64)) @ np.abs(a["normalization"].astype(np.float64))
        bound = weights.sum(axis=1) + np.abs(a["intercept"].astype(np.float64))
    limit = float(np.finfo(dtype).max)
    if not np.all(np.isfinite(bound)) or np.any(bound >= limit) or np.abs(a["coef"]).max() >= limit:
        per = "" if kernel in BOUNDED_KERNELS else " per unit kernel value"
        raise ModelFileError(f"{path}: coef, normalization and intercept make decision values overflow {dtype} "
                             f"(bound {float(np.max(bound)):.3g}{per}); the weights are corrupted")


def load_model(path: str | os.PathLike):
    """Load a model saved by :func:`save_model` (never executes code from the file).

    Returns
    -------
    NystroemSVC or NystroemSVR
        The estimator the file was saved from, fitted.

    Raises
    ------
    ModelFileError
        If the file is missing, not a regular file, corrupted, foreign, or its
        arrays or metadata are inconsistent.

    Examples
    --------
    >>> import os, tempfile
    >>> from sklearn.datasets import make_moons
    >>> from dsvm import ModelFileError, NystroemSVC, load_model, save_model
    >>> X, y = make_moons(n_samples=200, noise=0.1, random_state=0)
    >>> folder = tempfile.mkdtemp()
    >>> path = save_model(NystroemSVC(n_components=50, random_state=0).fit(X, y),
    ...                   os.path.join(folder, "moons.npz"))
    >>> model = load_model(path)
    >>> type(model).__name__, model.n_features_in_
    ('NystroemSVC', 2)
    >>> try:
    ...     load_model(os.path.join(folder, "missing.npz"))
    ... except ModelFileError:
    ...     print("refused")
    refused
    """
    path = Path(path)
    meta, a = read_npz(path, FORMAT, _model_rules)
    is_classifier = meta["estimator"] == "NystroemSVC"
    fitted = meta["fitted"]
    try:
        classes = _check_classes(path, a, meta.get("classes_kind")) if is_classifier else None
        n_problems = 1 if not is_classifier or classes.size == 2 else classes.size
        _check_arrays(path, a, n_problems, fitted["n_features_in_"])
        params = _model_params(path, meta["params"])
        if isinstance(params.get("class_weight"), dict) and "keys" in params["class_weight"]:
            cw = params["class_weight"]
            params["class_weight"] = dict(zip(cw["keys"], cw["values"]))
        model = (NystroemSVC if is_classifier else NystroemSVR)(**params)
        check_params(model)
        if meta["dtype"] not in ("float32", "float64"):
            raise ValueError(f"dtype {meta['dtype']!r} is not float32 or float64")
        spec = KernelSpec.from_dict(meta["kernel"])
        _check_decision_bound(path, a, spec.name, np.dtype(meta["dtype"]))
        fmap = FeatureMap(
            spec=spec,
            components=a["components"].astype(np.float64),
            normalization=a["normalization"].astype(np.float64),
            eigenvalues=a["eigenvalues"].astype(np.float64),
            dtype=np.dtype(meta["dtype"]),
        )
    except ModelFileError:
        raise
    except (KeyError, TypeError, ValueError) as exc:
        raise ModelFileError(f"{path}: metadata is incomplete or invalid ({exc})") from None
    model.feature_map_ = fmap
    if is_classifier:
        model.classes_ = classes
    model.components_ = fmap.components
    model.normalization_ = fmap.normalization
    model.component_indices_ = a.get("component_indices")
    model.coef_ = a["coef"].astype(np.float64)
    model.intercept_ = a["intercept"].astype(np.float64)
    model.n_features_in_ = fitted["n_features_in_"]
    model.scaling_ = _load_scaling(path, meta, a)
    if "feature_names" in a:
        model.feature_names_in_ = a["feature_names"].astype(object)
    model.zero_based_ = fitted.get("zero_based_")  # absent from older files: no base to check
    if model.zero_based_ is not None and not isinstance(model.zero_based_, bool):
        raise ModelFileError(f"{path}: metadata zero_based_ must be true, false or null, got {model.zero_based_!r}")
    model.n_iter_ = fitted["n_iter_"]
    model.gamma_ = float(fitted["gamma_"])
    obj = fitted["objective_"]
    model.objective_ = float(obj) if not isinstance(obj, list) else np.asarray(obj, dtype=np.float64)
    model.duality_gap_ = _gaps_loaded(fitted.get("duality_gap_"))
    model.n_components_ = int(model.components_.shape[0])
    model.k_path_ = fitted.get("k_path_")
    model.solver_stats_ = dict(fitted.get("solver_stats", {}), problems=fitted["problems"])
    if "probA" in a:
        model.probA_, model.probB_ = a["probA"], a["probB"]
    return model
