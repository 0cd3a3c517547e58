"""ONNX export of a fitted model, through skl2onnx (``pip install 'dsvm[onnx]'``).

The model is first the scikit-learn pipeline it is (:func:`dsvm.svm._sklearn_export.to_sklearn`);
skl2onnx converts its scaler and its ``Nystroem`` map.  skl2onnx has no
converter for ``Nystroem``: this module registers one (only where none is
registered) that computes the four kernels of dsvm exactly as their
definitions say: ``rbf`` as ``exp(-gamma ||x - c||²)`` with the squared
distance expanded around the landmarks' mean (one GEMM, as dsvm does),
``poly`` ``(gamma <x, c> + coef0) ** degree``, ``sigmoid``
``tanh(gamma <x, c> + coef0)``, ``linear`` ``<x, c>``; then the product with
``normalization_.T``.  A kernel other than these is refused.

The graph predicts as dsvm does, through the coefficients folded into the
landmarks (:meth:`dsvm.approx.FeatureMap.expansion`): the ``Nystroem`` handed
to skl2onnx carries ``α = normalization_.T @ coef_.T`` as its
``normalization_`` (transposed), so its output is ``K(X, L) α``, one column per
problem, and the graph never forms the ``n x r`` features.  The rest is
written here, in the graph's element type, as dsvm computes it (skl2onnx's
``LinearClassifier`` has no float64 form and names its decision values
``probabilities``): ``decision = K(X, L) α + intercept_``, the label by
dsvm's rule (:func:`dsvm.problems.predicted_codes`: above 0 with one column,
else the first largest) looked up in ``classes_``, and the probabilities by
the model's Platt sigmoids (:func:`dsvm.svm.platt_log_proba`).

The graph takes one input ``X`` (float32 by default, float64 with
``dtype="float64"``) of shape ``(n, n_features_in_)``.  A classifier gives
``label`` (shape ``(n,)``: strings for string classes, int64 for integer or
boolean ones, float64 for float ones) and ``decision`` (the decision values,
shape ``(n, 1)`` for two classes, ``(n, n_classes)`` otherwise), and, when it
was fitted with ``probability=True``, ``probabilities`` (``predict_proba``,
shape ``(n, n_classes)``, columns in the order of ``classes_``); a regressor
gives ``variable`` (the predicted values, shape ``(n, 1)``, skl2onnx's name
for a regressor's output).
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
from sklearn.kernel_approximation import Nystroem
from sklearn.pipeline import Pipeline

from ..io import regular_file_problem, write_file
from ._sklearn_export import to_sklearn

__all__ = ["to_onnx", "export_onnx", "onnx_file_problem", "ONNX_MARKER", "ONNX_DTYPES"]

# metadata entry dsvm writes into its ONNX files (recognises them before replacing one)
ONNX_MARKER = ("dsvm_format", "dsvm-onnx")
MAX_ONNX_BYTES = 2**31  # protobuf's limit
#: the element types the graph can compute in
ONNX_DTYPES = ("float32", "float64")
_PRODUCT = "dsvm_kernel_alpha"  # K(X, L) α inside the graph


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


def _dtype_name(dtype) -> str | None:
    try:
        return np.dtype(dtype).name
    except TypeError:
        return None


def _class_table(classes: np.ndarray) -> np.ndarray:
    """``classes_`` as an ONNX constant: strings, int64 for integers and booleans, float64 for floats."""
    classes = np.asarray(classes)
    if classes.dtype.kind in "biu":
        return classes.astype(np.int64)
    if classes.dtype.kind == "f":
        return classes.astype(np.float64)
    return np.array([str(c) for c in classes], dtype=object)


def _label_nodes(n_problems: int, dtype: np.dtype, make_node) -> tuple[list, dict]:
    """Nodes (and their constants) from ``decision`` to the class index by :func:`dsvm.problems.predicted_codes`:
    with one column 1 where the value is above 0, else 0; with several the first largest (``ArgMax``'s rule)."""
    from onnx import TensorProto

    if n_problems == 1:
        return [make_node("Greater", ["decision", "dsvm_zero"], ["dsvm_positive"]),
                make_node("Cast", ["dsvm_positive"], ["dsvm_code_column"], to=TensorProto.INT64),
                make_node("Reshape", ["dsvm_code_column", "dsvm_flat"], ["dsvm_code"])], \
            {"dsvm_zero": np.zeros(1, dtype), "dsvm_flat": np.array([-1], np.int64)}
    return [make_node("ArgMax", ["decision"], ["dsvm_code"], axis=1, keepdims=0)], {}


def _proba_nodes(n_problems: int, make_node) -> list:
    """Nodes from ``decision`` to ``probabilities``: :func:`dsvm.svm.platt_log_proba`, in its log domain.

    ``z = A f + B``; two classes: ``[σ(z), σ(−z)]`` (that is ``[1 − p, p]``, ``p = σ(−z)``); several:
    the softmax of ``log σ(−z) = −softplus(z) = −(max(z, 0) + log(1 + exp(−|z|)))`` (onnxruntime has no
    float64 ``Softplus``), so no row's probabilities underflow to 0/0.
    """
    nodes = [make_node("Mul", ["decision", "dsvm_probA"], ["dsvm_az"]),
             make_node("Add", ["dsvm_az", "dsvm_probB"], ["dsvm_z"])]
    if n_problems == 1:
        return nodes + [make_node("Neg", ["dsvm_z"], ["dsvm_neg_z"]),
                        make_node("Sigmoid", ["dsvm_z"], ["dsvm_p0"]),
                        make_node("Sigmoid", ["dsvm_neg_z"], ["dsvm_p1"]),
                        make_node("Concat", ["dsvm_p0", "dsvm_p1"], ["probabilities"], axis=1)]
    return nodes + [make_node("Relu", ["dsvm_z"], ["dsvm_relu"]),
                    make_node("Abs", ["dsvm_z"], ["dsvm_abs"]),
                    make_node("Neg", ["dsvm_abs"], ["dsvm_neg_abs"]),
                    make_node("Exp", ["dsvm_neg_abs"], ["dsvm_exp"]),
                    make_node("Add", ["dsvm_exp", "dsvm_one"], ["dsvm_one_plus"]),
                    make_node("Log", ["dsvm_one_plus"], ["dsvm_log"]),
                    make_node("Add", ["dsvm_relu", "dsvm_log"], ["dsvm_softplus"]),
                    make_node("Neg", ["dsvm_softplus"], ["dsvm_log_p"]),
                    make_node("Softmax", ["dsvm_log_p"], ["probabilities"], axis=1)]


def _rename(graph, old: str, new: str) -> None:
    """Rename a value of ``graph`` wherever it is made or used."""
    for node in graph.node:
        node.input[:] = [new if name == old else name for name in node.input]
        node.output[:] = [new if name == old else name for name in node.output]
    for value in [*graph.initializer, *graph.output]:
        if value.name == old:
            value.name = new


def _take_names(graph, names: set[str]) -> None:
    """Free ``names`` in ``graph`` (skl2onnx names values ``variable``, ``variable1``, ...) and call its one
    output, ``K(X, L) α``, :data:`_PRODUCT`."""
    used = {value.name for value in [*graph.initializer, *graph.input, *graph.output]}
    used |= {name for node in graph.node for name in [*node.input, *node.output]}
    for name in sorted((names | {_PRODUCT}) & used):
        fresh = next(f"{name}_{i}" for i in range(1, len(used) + 2) if f"{name}_{i}" not in used | names)
        _rename(graph, name, fresh)
        used.add(fresh)
    _rename(graph, graph.output[0].name, _PRODUCT)


def _folded_steps(model) -> list:
    """The steps of :func:`dsvm.svm._sklearn_export.to_sklearn`'s pipeline up to its ``Nystroem``, whose
    ``normalization_`` becomes ``αᵀ`` (``α = normalization_.T @ coef_.T``): its output is ``K(X, L) α``."""
    steps = to_sklearn(model).steps[:-1]
    name, nystroem = steps[-1]
    alpha = model.feature_map_.expansion(model.coef_).alpha
    nystroem.normalization_ = np.ascontiguousarray(alpha.T)
    return [*steps[:-1], (name, nystroem)]


def _add_linear_part(onx, model, dtype: np.dtype) -> None:
    """Append ``decision = K(X, L) α + intercept`` and the outputs (see the module docstring) to the graph
    of the folded feature map, whose one output is ``K(X, L) α``."""
    from onnx import helper, numpy_helper

    graph = onx.graph
    classifier = hasattr(model, "classes_")
    n_problems = int(model.coef_.shape[0])
    consts = {"dsvm_intercept": np.asarray(model.intercept_, dtype=np.float64).astype(dtype)}
    nodes = [helper.make_node("Add", [_PRODUCT, "dsvm_intercept"], ["decision" if classifier else "variable"])]
    outputs = [("decision", dtype, [None, n_problems])] if classifier else [("variable", dtype, [None, 1])]
    if classifier:
        classes = _class_table(model.classes_)
        codes, code_consts = _label_nodes(n_problems, dtype, helper.make_node)
        nodes += codes + [helper.make_node("Gather", ["dsvm_classes", "dsvm_code"], ["label"], axis=0)]
        consts.update(code_consts, dsvm_classes=classes)
        outputs.insert(0, ("label", classes.dtype, [None]))
    if classifier and hasattr(model, "probA_"):
        consts.update(dsvm_probA=np.asarray(model.probA_, dtype=np.float64).astype(dtype),
                      dsvm_probB=np.asarray(model.probB_, dtype=np.float64).astype(dtype))
        if n_problems > 1:
            consts["dsvm_one"] = np.ones(1, dtype)
        nodes += _proba_nodes(n_problems, helper.make_node)
        outputs.append(("probabilities", dtype, [None, len(model.classes_)]))
    _take_names(graph, set(consts) | {name for node in nodes for name in node.output})
    graph.initializer.extend(numpy_helper.from_array(value, name) for name, value in consts.items())
    graph.node.extend(nodes)
    del graph.output[:]
    graph.output.extend(helper.make_tensor_value_info(name, helper.np_dtype_to_tensor_dtype(np.dtype(kind)), shape)
                        for name, kind, shape in outputs)


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
    ValueError
        ``dtype`` is not one of :data:`ONNX_DTYPES`.
    """
    skl2onnx = _skl2onnx()
    from skl2onnx.common.data_types import DoubleTensorType, FloatTensorType

    if _dtype_name(dtype) not in ONNX_DTYPES:
        raise ValueError(f"dtype must be 'float32' or 'float64', got {dtype!r}")
    dtype = np.dtype(dtype)
    _register_nystroem()
    feature_map = Pipeline(_folded_steps(model))
    tensor = FloatTensorType if dtype == np.float32 else DoubleTensorType
    onx = skl2onnx.convert_sklearn(feature_map, initial_types=[("X", tensor([None, int(model.n_features_in_)]))],
                                   target_opset=target_opset)
    _add_linear_part(onx, model, dtype)
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
    """Write a fitted model as an ONNX file (``pip install 'dsvm[onnx]'``).

    The graph computes what the model computes (the scaling, the Nyström
    map, the decision values and dsvm's labelling rule) and takes one input
    ``X`` of shape ``(n, n_features_in)`` in ``dtype``.  A classifier gives
    ``label`` and ``decision`` (and ``probabilities`` when fitted with
    ``probability=True``, columns in the order of ``classes_``); a regressor
    gives ``variable``, shape ``(n, 1)``.  The file is written under a
    temporary name and moved into place when complete, so ``path`` never
    holds half a model.

    Parameters
    ----------
    model : NystroemSVC or NystroemSVR
        A fitted model.
    path : str or path-like
        The ONNX file to write.
    overwrite : bool, default=False
        Replace an existing ``path``; only an ONNX file dsvm wrote is ever replaced.
    dtype : {"float32", "float64"}, default="float32"
        Element type of the input ``X`` and of the computation.
    target_opset : int, optional
        ONNX opset (default: skl2onnx's choice).

    Returns
    -------
    pathlib.Path
        The path written.

    Raises
    ------
    ImportError
        skl2onnx is not installed.
    FileExistsError
        ``path`` exists and ``overwrite`` is False, or it is not an ONNX file dsvm wrote.

    Examples
    --------
    >>> import os, tempfile
    >>> import onnxruntime
    >>> from sklearn.datasets import make_moons
    >>> from dsvm import NystroemSVC, export_onnx
    >>> X, y = make_moons(n_samples=200, noise=0.1, random_state=0)
    >>> clf = NystroemSVC(n_components=50, random_state=0).fit(X, y)
    >>> path = export_onnx(clf, os.path.join(tempfile.mkdtemp(), "moons.onnx"))
    >>> session = onnxruntime.InferenceSession(str(path))
    >>> [o.name for o in session.get_outputs()]
    ['label', 'decision']
    >>> label, decision = session.run(None, {"X": X.astype("float32")})
    >>> bool((label == clf.predict(X)).all())
    True
    """
    onx = to_onnx(model, dtype=dtype, target_opset=target_opset)
    data = onx.SerializeToString()
    return write_file(path, lambda f: f.write(data), overwrite=overwrite, ours=onnx_file_problem,
                      what="model file in ONNX format", needed=len(data))
