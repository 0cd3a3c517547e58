"""ONNX export of a fitted model, through skl2onnx (``pip install 'dsvm[onnx]'``).

The model is first the scikit-learn pipeline it is (:func:`dsvm.svm.export.to_sklearn`);
skl2onnx converts its scaler and ``LinearSVC`` / ``LinearSVR``.  skl2onnx has
no converter for ``Nystroem``: this module registers one (only where none is
registered) that computes the four kernels of dsvm exactly as their
definitions say: ``rbf`` as ``exp(-gamma ||x - c||²)`` with the squared
distance expanded around the landmarks' mean (one GEMM, as dsvm does),
``poly`` ``(gamma <x, c> + coef0) ** degree``, ``sigmoid``
``tanh(gamma <x, c> + coef0)``, ``linear`` ``<x, c>``; then the product with
``normalization_.T``.  A kernel other than these is refused.

The graph takes one input ``X`` (float32 by default, float64 with
``dtype="float64"``) of shape ``(n, n_features_in_)``.  A classifier gives
``label`` (the class labels, strings included) and ``probabilities`` (despite
skl2onnx's name, the decision values: shape ``(n, 1)`` for two classes,
``(n, n_classes)`` otherwise); a regressor gives ``variable`` (the predicted
values, shape ``(n, 1)``).
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
from sklearn.kernel_approximation import Nystroem

from ..io import regular_file_problem, write_file
from .export import to_sklearn

__all__ = ["to_onnx", "export_onnx", "onnx_file_problem", "ONNX_MARKER"]

# metadata entry dsvm writes into its ONNX files (recognises them before replacing one)
ONNX_MARKER = ("dsvm_format", "dsvm-onnx")
MAX_ONNX_BYTES = 2**31  # protobuf's limit


def _skl2onnx():
    try:
        import skl2onnx
    except ImportError:
        raise ImportError("ONNX export needs skl2onnx: pip install 'dsvm[onnx]'") from None
    return skl2onnx


def _nystroem_shape(operator) -> None:
    op = operator.raw_operator
    n = operator.inputs[0].get_first_dimension()
    operator.outputs[0].type = operator.inputs[0].type.__class__([n, int(op.normalization_.shape[0])])


def _nystroem_converter(scope, operator, container) -> None:
    """``pairwise_kernels(X, components_) @ normalization_.T`` as ONNX operators."""
    from skl2onnx.algebra.onnx_ops import (
        OnnxAdd,
        OnnxExp,
        OnnxMatMul,
        OnnxMax,
        OnnxMul,
        OnnxPow,
        OnnxReduceSumSquareApi18,
        OnnxSub,
        OnnxTanh,
    )
    from skl2onnx.common.data_types import guess_numpy_type

    op = operator.raw_operator
    opv = container.target_opset
    X = operator.inputs[0]
    dtype = guess_numpy_type(X.type)
    kernel = op.kernel
    components = np.asarray(op.components_, dtype=np.float64)

    def const(value):
        return np.array([value], dtype=dtype)

    if kernel == "rbf":
        # ||x - c||² = ||x - m||² + ||c - m||² - 2 (x - m)·(c - m), m the landmarks' mean: accurate in float32
        mean = components.mean(axis=0)
        shifted = (components - mean).astype(dtype)
        Xs = OnnxSub(X, mean.astype(dtype), op_version=opv)
        x_sq = OnnxReduceSumSquareApi18(Xs, axes=[1], keepdims=1, op_version=opv)
        c_sq = (shifted.astype(np.float64) ** 2).sum(axis=1).astype(dtype)[None, :]
        cross = OnnxMatMul(Xs, (-2.0 * shifted.T).astype(dtype), op_version=opv)
        dist = OnnxMax(OnnxAdd(OnnxAdd(cross, x_sq, op_version=opv), c_sq, op_version=opv), const(0.0),
                       op_version=opv)
        K = OnnxExp(OnnxMul(dist, const(-op.gamma), op_version=opv), op_version=opv)
    elif kernel in ("poly", "sigmoid", "linear"):
        dot = OnnxMatMul(X, components.T.astype(dtype), op_version=opv)
        if kernel == "linear":
            K = dot
        else:
            inner = OnnxAdd(OnnxMul(dot, const(op.gamma), op_version=opv), const(op.coef0), op_version=opv)
            K = (OnnxPow(inner, np.array([op.degree], dtype=np.int64), op_version=opv) if kernel == "poly"
                 else OnnxTanh(inner, op_version=opv))
    else:
        raise ValueError(f"ONNX export supports the kernels rbf, poly, sigmoid and linear; this Nystroem uses "
                         f"{kernel!r}")
    out = OnnxMatMul(K, np.asarray(op.normalization_, dtype=np.float64).T.astype(dtype), op_version=opv,
                     output_names=operator.outputs[:1])
    out.add_to(scope, container)


def _register_nystroem() -> None:
    """Give skl2onnx a ``Nystroem`` converter, unless it has one already (a newer skl2onnx, or the user's)."""
    skl2onnx = _skl2onnx()
    from skl2onnx._supported_operators import sklearn_operator_name_map

    if Nystroem not in sklearn_operator_name_map:
        skl2onnx.update_registered_converter(Nystroem, "DsvmNystroem", _nystroem_shape, _nystroem_converter,
                                             overwrite=False)


def to_onnx(model, dtype="float32", target_opset: int | None = None):
    """The fitted model as an ONNX graph (``onnx.ModelProto``); see the module docstring.

    Parameters
    ----------
    model : NystroemSVC or NystroemSVR
        A fitted model.
    dtype : {"float32", "float64"}, default="float32"
        Element type of the input ``X`` and of the computation.
    target_opset : int, optional
        ONNX opset (default: skl2onnx's choice).

    Raises
    ------
    ImportError
        skl2onnx is not installed.
    """
    skl2onnx = _skl2onnx()
    from skl2onnx.common.data_types import DoubleTensorType, FloatTensorType

    if np.dtype(dtype) not in (np.dtype(np.float32), np.dtype(np.float64)):
        raise ValueError(f"dtype must be 'float32' or 'float64', got {dtype!r}")
    _register_nystroem()
    pipeline = to_sklearn(model)
    tensor = FloatTensorType if np.dtype(dtype) == np.float32 else DoubleTensorType
    # an option set for the classifier keeps skl2onnx's pipeline parser from giving it a "zipmap" option,
    # which LinearSVC's converter then refuses
    options = {id(pipeline.steps[-1][1]): {"nocl": False}} if hasattr(model, "classes_") else None
    onx = skl2onnx.convert_sklearn(pipeline, initial_types=[("X", tensor([None, int(model.n_features_in_)]))],
                                   target_opset=target_opset, options=options)
    entry = onx.metadata_props.add()
    entry.key, entry.value = ONNX_MARKER
    onx.doc_string = f"dsvm {type(model).__name__} exported through skl2onnx"
    return onx


def onnx_file_problem(path: str | os.PathLike) -> str | None:
    """None if ``path`` is an ONNX file dsvm wrote (its metadata marker), else why it is not."""
    import onnx

    path = Path(path)
    reason = regular_file_problem(path)
    if reason is not None:
        return reason
    if path.stat().st_size > MAX_ONNX_BYTES:
        return "it is larger than an ONNX file can be"
    try:
        props = {p.key: p.value for p in onnx.load(str(path), load_external_data=False).metadata_props}
    except Exception:  # protobuf's DecodeError and friends: not an ONNX model
        return "it is not an ONNX model"
    return None if props.get(ONNX_MARKER[0]) == ONNX_MARKER[1] else "it is not an ONNX file dsvm wrote"


def export_onnx(model, path: str | os.PathLike, *, overwrite: bool = False, dtype="float32",
                target_opset: int | None = None) -> Path:
    """Write the model as an ONNX file (see :func:`to_onnx`), safely (:mod:`dsvm.io.replace`).

    An existing ``path`` is replaced only with ``overwrite=True`` and only if
    it is an ONNX file dsvm wrote.  Returns the path written.
    """
    onx = to_onnx(model, dtype=dtype, target_opset=target_opset)
    data = onx.SerializeToString()
    return write_file(path, lambda f: f.write(data), overwrite=overwrite, ours=onnx_file_problem,
                      what="model file in ONNX format", needed=len(data))
