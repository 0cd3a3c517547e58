"""The estimators: :class:`NystroemSVC`, :class:`NystroemSVR` (LA-SN) and :class:`PegasosSVC` (kernelized
Pegasos on the exact kernel), with what they share — input checks, the fit (landmarks, feature stage,
one solve per problem through :func:`dsvm.solvers.solve`), Platt calibration, checkpoints, model
files, evaluation, and the export to scikit-learn and ONNX.

The names are loaded on first use (PEP 562): Dask workers unpickle the block functions of single
modules here (label codes, Platt probabilities, folds) and should not pay for every estimator and
scikit-learn with them.
"""

from ..lazy import lazy_names

# module (relative to this package) -> the public names it defines
_MODULES = {
    "._auto_k": ("k_schedule",),
    "._base": ("block_rows_for", "check_params", "model_decisions", "param_names", "unpack_dataset"),
    "._calibration": ("platt_log_proba",),
    "._checkpoint": ("check_checkpoint_path", "kept_until_saved", "remove_checkpoint"),
    "._classifier": ("NystroemSVC", "fit_classifier"),
    "._sklearn_export": ("to_sklearn",),
    "._fitting": ("solve_with",),
    "._kernel_pegasos": ("PegasosSVC",),
    "._labels": ("class_weights", "encode_labels", "prepare_classification"),
    "._metrics": ("SCORINGS", "evaluate", "score_from_confusion"),
    "._model_files": ("load_model", "model_file_problem", "save_model"),
    "._onnx_export": ("export_onnx", "onnx_file_problem", "to_onnx"),
    "._opening": ("warm_start_problem",),
    "._regressor": ("NystroemSVR",),
}

__all__ = [name for names in _MODULES.values() for name in names]


__getattr__, __dir__ = lazy_names(__name__, _MODULES, globals())
