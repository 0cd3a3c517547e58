"""A fitted model as the scikit-learn pipeline it is: ``[scaler →] Nystroem → LinearSVC / LinearSVR``.

An LA-SN model computes ``F = K(scale(X), components_) @ normalization_.T``
and the linear decision ``F @ coef_.T + intercept_``: exactly what
scikit-learn's ``Nystroem`` transformer (with the same kernel, ``gamma``,
``degree``, ``coef0``) followed by a ``LinearSVC`` (or ``LinearSVR``)
computes once their fitted attributes are set.  :func:`to_sklearn` builds
that pipeline, fitted, from plain copies of the model's arrays: it predicts
without dsvm, pickles with scikit-learn alone, and its scaler and
``Nystroem`` are what the ONNX export (:mod:`dsvm.svm._onnx_export`) hands to
skl2onnx.

dsvm computes the features in the model's ``dtype`` (float32 by default)
and scikit-learn in float64, so decision values agree to float32 round-off
(relative to the features' magnitude), exactly for ``dtype="float64"`` models.
"""

from __future__ import annotations

import numpy as np
from sklearn.kernel_approximation import Nystroem
from sklearn.pipeline import Pipeline
from sklearn.preprocessing import MaxAbsScaler, MinMaxScaler, StandardScaler
from sklearn.svm import LinearSVC, LinearSVR
from sklearn.utils.validation import check_is_fitted

__all__ = ["to_sklearn", "sklearn_scaler", "sklearn_nystroem"]


def sklearn_scaler(scaling, n_features: int):
    """The fitted scikit-learn scaler of a :class:`dsvm.approx.Scaling`."""
    stats = {name: np.array(values, dtype=np.float64) for name, values in scaling.stats.items()}
    if scaling.kind == "standard":
        scaler = StandardScaler(with_mean=scaling.center)
    elif scaling.kind == "minmax":
        scaler = MinMaxScaler()
    else:
        scaler = MaxAbsScaler()
    for name, values in stats.items():
        setattr(scaler, name, values)
    scaler.n_samples_seen_ = scaling.n_samples
    scaler.n_features_in_ = n_features
    return scaler


def sklearn_nystroem(model) -> Nystroem:
    """The fitted scikit-learn ``Nystroem`` transformer of a model's feature map."""
    spec = model.feature_map_.spec
    params = {"rbf": {"gamma": spec.gamma}, "poly": {"gamma": spec.gamma, "degree": spec.degree, "coef0": spec.coef0},
              "sigmoid": {"gamma": spec.gamma, "coef0": spec.coef0}, "linear": {}}[spec.name]
    nystroem = Nystroem(kernel=spec.name, n_components=int(model.components_.shape[0]), **params)
    nystroem.components_ = np.array(model.components_, dtype=np.float64)
    if model.component_indices_ is not None:
        nystroem.component_indices_ = np.array(model.component_indices_)
    nystroem.normalization_ = np.array(model.normalization_, dtype=np.float64)
    nystroem.n_features_in_ = int(model.n_features_in_)
    return nystroem


def _linear_model(model):
    r = int(model.coef_.shape[1])
    if hasattr(model, "classes_"):
        linear = LinearSVC(C=model.C, loss="squared_hinge", fit_intercept=model.fit_intercept,
                           class_weight=model.class_weight)
        linear.coef_ = np.array(model.coef_, dtype=np.float64)
        linear.intercept_ = np.array(model.intercept_, dtype=np.float64)
        linear.classes_ = np.array(model.classes_)
    else:
        linear = LinearSVR(C=model.C, epsilon=model.epsilon, loss="squared_epsilon_insensitive",
                           fit_intercept=model.fit_intercept)
        linear.coef_ = np.array(model.coef_[0], dtype=np.float64)
        linear.intercept_ = np.array(model.intercept_, dtype=np.float64)
    linear.n_features_in_ = r
    linear.n_iter_ = int(model.n_iter_)
    return linear


def to_sklearn(model) -> Pipeline:
    """The fitted scikit-learn pipeline that computes what ``model`` computes.

    Parameters
    ----------
    model : NystroemSVC or NystroemSVR
        A fitted model.

    Returns
    -------
    sklearn.pipeline.Pipeline
        Steps ``("scale", StandardScaler | MinMaxScaler | MaxAbsScaler)`` when
        the model has a ``scale`` step, ``("nystroem", Nystroem)`` and
        ``("svm", LinearSVC | LinearSVR)``, all fitted (``components_``,
        ``normalization_``, ``coef_``, ``intercept_``, ``classes_``, the
        scaler's statistics); ``feature_names_in_`` when the model has them.
        Its ``decision_function`` / ``predict`` match the model's (see the
        module docstring for the precision).
    """
    check_is_fitted(model)
    steps = []
    if getattr(model, "scaling_", None) is not None:
        steps.append(("scale", sklearn_scaler(model.scaling_, int(model.n_features_in_))))
    steps.append(("nystroem", sklearn_nystroem(model)))
    steps.append(("svm", _linear_model(model)))
    names = getattr(model, "feature_names_in_", None)
    if names is not None:
        steps[0][1].feature_names_in_ = np.asarray(names, dtype=object)
    return Pipeline(steps)
