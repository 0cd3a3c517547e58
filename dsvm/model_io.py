"""Model files: plain arrays + JSON metadata in one ``.npz`` file, no pickle.

A model file is a NumPy ``.npz`` archive (a zip of ``.npy`` arrays) read with
``allow_pickle=False``, so loading never executes code from the file.  It
holds the fitted arrays of the estimator and one array ``__meta__`` with a
UTF-8 JSON document::

    {"format": "dsvm-model", "format_version": 1, "dsvm_version": "...",
     "estimator": "NystroemSVC", "params": {...}, "kernel": {...},
     "fitted": {...scalars and small lists...}, "classes_kind": "..."}

(``NystroemSVR`` files have no classes and ``"classes_kind": null``).

Files are written to a temporary name next to the target and renamed, so a
crash never leaves a half-written model under the target name.  Every array
is checked for shape consistency on load; a corrupted, truncated or foreign
file raises :class:`ModelFileError` naming the file and the problem.
"""

from __future__ import annotations

import json
import os
import zipfile
from pathlib import Path
from typing import Any

import numpy as np

FORMAT = "dsvm-model"
FORMAT_VERSION = 1
ESTIMATORS = ("NystroemSVC", "NystroemSVR")
CLASSES_KINDS = ("numeric", "str", "object-str")


class ModelFileError(ValueError):
    """A model file is missing, corrupted, foreign or inconsistent."""


def _json_default(obj: Any):
    if isinstance(obj, np.generic):
        return obj.item()
    if isinstance(obj, np.ndarray):
        return obj.tolist()
    raise TypeError(f"cannot store {type(obj).__name__} in model metadata")


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


def atomic_write_npz(path: Path, arrays: dict[str, np.ndarray]) -> None:
    """Write an ``.npz`` archive under a temporary name, then rename it into place."""
    path = Path(path)
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    try:
        with open(tmp, "wb") as f:
            np.savez(f, **arrays)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    finally:
        if tmp.exists():
            tmp.unlink()


def read_npz(path: Path, expected_format: str) -> tuple[dict, dict[str, np.ndarray]]:
    """Read an archive written by :func:`atomic_write_npz`: ``(meta, arrays)``."""
    path = Path(path)
    if not path.exists():
        raise ModelFileError(f"{path}: no such file")
    if path.is_dir() or not zipfile.is_zipfile(path):
        # np.load would try anything else as a pickle (and suggest allowing it)
        raise ModelFileError(f"{path}: not a dsvm {expected_format.split('-')[-1]} file (not an .npz archive)")
    try:
        with np.load(path, allow_pickle=False) as z:
            arrays = {name: z[name] for name in z.files}
    except (zipfile.BadZipFile, OSError, EOFError) as exc:
        raise ModelFileError(f"{path}: not a dsvm file or corrupted ({exc})") from None
    except ValueError as exc:  # e.g. an object array that would need pickle
        raise ModelFileError(f"{path}: refused to load ({exc})") from None
    if "__meta__" not in arrays:
        raise ModelFileError(f"{path}: not a dsvm file (no __meta__ entry)")
    try:
        meta = json.loads(bytes(arrays.pop("__meta__")).decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ModelFileError(f"{path}: metadata is corrupted ({exc})") from None
    if not isinstance(meta, dict) or meta.get("format") != expected_format:
        raise ModelFileError(f"{path}: not a {expected_format} file (format={meta.get('format') if isinstance(meta, dict) else None!r})")
    if meta.get("format_version") != FORMAT_VERSION:
        raise ModelFileError(
            f"{path}: format version {meta.get('format_version')!r} is not supported (this dsvm reads version {FORMAT_VERSION})"
        )
    return meta, arrays


def meta_array(meta: dict) -> np.ndarray:
    return np.frombuffer(json.dumps(meta, default=_json_default).encode("utf-8"), dtype=np.uint8)


def save_model(model, path: str | os.PathLike) -> Path:
    """Save a fitted dsvm estimator to ``path`` (``.npz``; no pickle).

    Parameters
    ----------
    model : NystroemSVC or NystroemSVR
        A fitted estimator.
    path : str or path-like
        Target file; written atomically.

    Returns
    -------
    Path of the written file.
    """
    from sklearn.utils.validation import check_is_fitted

    from . import __version__

    if type(model).__name__ not in ESTIMATORS:
        raise TypeError(f"save_model saves {' and '.join(ESTIMATORS)} models, got {type(model).__name__}")
    check_is_fitted(model)
    spec = model.feature_map_.spec
    is_classifier = hasattr(model, "classes_")
    classes, classes_kind = _encode_classes(np.asarray(model.classes_)) if is_classifier else (None, None)
    params = model.get_params(deep=False)
    seed = params.get("random_state")
    if isinstance(seed, np.integer):
        params["random_state"] = int(seed)
    elif seed is not None and not isinstance(seed, int):  # a RandomState: its state is not part of the model
        del params["random_state"]
    params["dtype"] = np.dtype(params["dtype"]).name
    if isinstance(params.get("class_weight"), dict):
        params["class_weight"] = {"keys": list(params["class_weight"].keys()), "values": list(params["class_weight"].values())}
    meta = {
        "format": FORMAT,
        "format_version": FORMAT_VERSION,
        "dsvm_version": __version__,
        "estimator": type(model).__name__,
        "params": params,
        "kernel": spec.to_dict(),
        "dtype": np.dtype(model.feature_map_.dtype).name,
        "classes_kind": classes_kind,
        "fitted": {
            "n_features_in_": int(model.n_features_in_),
            "zero_based_": getattr(model, "zero_based_", None),
            "n_iter_": int(model.n_iter_),
            "gamma_": float(model.gamma_),
            "objective_": np.asarray(model.objective_).tolist(),
            "solver_stats": {k: v for k, v in model.solver_stats_.items() if k not in ("problems", "calibration")},
            "problems": [{k: v for k, v in p.items() if k != "history"} for p in model.solver_stats_["problems"]],
        },
    }
    arrays = {
        "__meta__": meta_array(meta),
        "components": model.components_,
        "normalization": model.normalization_,
        "eigenvalues": model.feature_map_.eigenvalues,
        "coef": model.coef_,
        "intercept": model.intercept_,
    }
    if is_classifier:
        arrays["classes"] = classes
    if model.component_indices_ is not None:
        arrays["component_indices"] = np.asarray(model.component_indices_)
    if hasattr(model, "probA_"):
        arrays["probA"] = np.asarray(model.probA_, dtype=np.float64)
        arrays["probB"] = np.asarray(model.probB_, dtype=np.float64)
    path = Path(path)
    atomic_write_npz(path, arrays)
    return path


def _check_arrays(path: Path, a: dict[str, np.ndarray], n_problems: int, n_features_in: int) -> None:
    """Every array present, of a float dtype, with consistent shapes and finite values."""
    def bad(msg: str):
        raise ModelFileError(f"{path}: inconsistent model arrays: {msg}")

    for name in ("components", "normalization", "eigenvalues", "coef", "intercept"):
        if name not in a:
            bad(f"missing array {name!r}")
        if a[name].dtype.kind != "f":
            bad(f"array {name!r} has dtype {a[name].dtype}, expected floating point")
    k, p = a["components"].shape if a["components"].ndim == 2 else bad("components must be 2-d")
    if p != n_features_in:
        bad(f"components have {p} columns but n_features_in_ is {n_features_in}")
    if a["normalization"].ndim != 2 or a["normalization"].shape[1] != k:
        bad(f"normalization has shape {a['normalization'].shape}, expected (r, {k})")
    r = a["normalization"].shape[0]
    if a["eigenvalues"].shape != (r,):
        bad(f"eigenvalues have shape {a['eigenvalues'].shape}, expected ({r},)")
    m = n_problems
    if a["coef"].shape != (m, r):
        bad(f"coef has shape {a['coef'].shape}, expected ({m}, {r})")
    if a["intercept"].shape != (m,):
        bad(f"intercept has shape {a['intercept'].shape}, expected ({m},)")
    if "component_indices" in a and (a["component_indices"].shape != (k,)
                                     or a["component_indices"].dtype.kind not in "iu"):
        bad(f"component_indices have shape {a['component_indices'].shape} and dtype "
            f"{a['component_indices'].dtype}, expected ({k},) integers")
    if ("probA" in a) != ("probB" in a):
        bad("probA and probB must be stored together")
    for name in ("probA", "probB"):
        if name in a and (a[name].shape != (m,) or a[name].dtype.kind != "f" or not np.all(np.isfinite(a[name]))):
            bad(f"{name} has shape {a[name].shape}, dtype {a[name].dtype} or non-finite values, expected ({m},) finite")
    for name in ("components", "normalization", "eigenvalues", "coef", "intercept"):
        if not np.all(np.isfinite(a[name])):
            bad(f"array {name!r} holds NaN or infinity")
    if np.any(a["eigenvalues"] <= 0):
        bad("eigenvalues must be positive (the Nyström map keeps only positive ones)")


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


def load_model(path: str | os.PathLike):
    """Load a model saved by :func:`save_model` (never executes code from the file).

    Returns
    -------
    NystroemSVC or NystroemSVR
        The estimator the file was saved from, fitted.

    Raises
    ------
    ModelFileError
        If the file is missing, corrupted, foreign or its arrays or metadata are inconsistent.
    """
    from .estimator import NystroemSVC
    from .kernels import KernelSpec
    from .nystroem import FeatureMap
    from .svr import NystroemSVR

    path = Path(path)
    meta, a = read_npz(path, FORMAT)
    if meta.get("estimator") not in ESTIMATORS:
        raise ModelFileError(f"{path}: estimator {meta.get('estimator')!r} is not supported by this dsvm version")
    is_classifier = meta["estimator"] == "NystroemSVC"
    try:
        fitted = meta["fitted"]
        classes = _check_classes(path, a, meta.get("classes_kind")) if is_classifier else None
        n_problems = 1 if not is_classifier or classes.size == 2 else classes.size
        _check_arrays(path, a, n_problems, int(fitted["n_features_in_"]))
        params = dict(meta["params"])
        if isinstance(params.get("class_weight"), dict) and "keys" in params["class_weight"]:
            cw = params["class_weight"]
            params["class_weight"] = dict(zip(cw["keys"], cw["values"]))
        model = (NystroemSVC if is_classifier else NystroemSVR)(**params)
        model._check_params()
        if np.dtype(meta["dtype"]) not in (np.dtype(np.float32), np.dtype(np.float64)):
            raise ValueError(f"dtype {meta['dtype']!r} is not float32 or float64")
        spec = KernelSpec.from_dict(meta["kernel"])
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
    model.n_features_in_ = int(fitted["n_features_in_"])
    model.zero_based_ = fitted.get("zero_based_")  # absent from older files: no base to check
    if model.zero_based_ is not None and not isinstance(model.zero_based_, bool):
        raise ModelFileError(f"{path}: metadata zero_based_ must be true, false or null, got {model.zero_based_!r}")
    model.n_iter_ = int(fitted["n_iter_"])
    model.gamma_ = float(fitted["gamma_"])
    obj = fitted["objective_"]
    model.objective_ = float(obj) if np.ndim(obj) == 0 else np.asarray(obj, dtype=np.float64)
    model.solver_stats_ = dict(fitted.get("solver_stats", {}), problems=fitted.get("problems", []))
    if "probA" in a:
        model.probA_, model.probB_ = a["probA"], a["probB"]
    return model
