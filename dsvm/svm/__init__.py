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
    "..exceptions": ("CheckpointMismatchError", "ModelFileError", "NonFiniteError", "OneClassFitWarning",
                     "MixedScalesWarning", "DenseLandmarksError"),
    ".base": (
        "BLOCK_BYTES",
        "FitInput",
        "NystroemBase",
        "block_rows_for",
        "check_cost_scale",
        "check_dataset_input",
        "check_feature_names",
        "check_index_base",
        "check_params",
        "model_decision_blocks",
        "model_decisions",
        "param_names",
        "prediction_input",
        "prepare_fit_input",
        "unpack_dataset",
    ),
    ".calibration": ("MAX_PLATT_ROWS", "PlattCalibration", "fit_platt", "platt_log_proba"),
    ".checkpoint": (
        "Checkpoint",
        "check_checkpoint_path",
        "data_fingerprint",
        "kept_until_saved",
        "open_checkpoint",
        "remove_checkpoint",
    ),
    ".classifier": ("NystroemSVC", "fit_classifier"),
    ".export": ("sklearn_nystroem", "sklearn_scaler", "to_sklearn"),
    ".fitting": ("fit_problems", "problem_stats", "solve_with", "warn_if_not_converged"),
    ".kernel_pegasos": ("PegasosSVC",),
    ".labels": (
        "ClassificationInput",
        "check_classes",
        "check_labels",
        "check_sample_weight_blocks",
        "class_weights",
        "encode_codes",
        "encode_labels",
        "prepare_classification",
    ),
    ".metrics": (
        "SCORINGS",
        "class_scores",
        "evaluate",
        "regression_scores",
        "regression_sums",
        "score_from_confusion",
    ),
    ".model_files": ("load_model", "model_file_problem", "save_model"),
    ".onnx_export": ("export_onnx", "onnx_file_problem", "to_onnx"),
    ".regressor": ("NystroemSVR",),
    ".warm_start": (
        "WARM_START_OPTIONS",
        "subsample_problem",
        "subsample_size",
        "warm_start_problem",
        "warm_start_rows",
    ),
}

__all__ = [
    "NystroemSVC", "NystroemSVR", "PegasosSVC", "NystroemBase", "fit_classifier",
    "save_model", "load_model", "model_file_problem", "ModelFileError", "CheckpointMismatchError",
    "NonFiniteError", "OneClassFitWarning", "MixedScalesWarning", "DenseLandmarksError",
    "to_sklearn", "sklearn_scaler", "sklearn_nystroem", "to_onnx", "export_onnx", "onnx_file_problem",
    "evaluate", "class_scores", "score_from_confusion", "SCORINGS", "regression_sums", "regression_scores",
    "check_params", "check_cost_scale", "param_names", "FitInput",
    "prepare_fit_input", "prediction_input", "model_decisions",
    "model_decision_blocks", "check_feature_names", "check_dataset_input",
    "unpack_dataset", "check_index_base", "BLOCK_BYTES", "block_rows_for",
    "fit_problems", "solve_with", "warn_if_not_converged", "problem_stats",
    "encode_codes", "encode_labels", "check_labels", "check_classes", "class_weights", "check_sample_weight_blocks",
    "ClassificationInput", "prepare_classification",
    "PlattCalibration", "fit_platt", "platt_log_proba", "MAX_PLATT_ROWS",
    "Checkpoint", "open_checkpoint", "check_checkpoint_path", "remove_checkpoint", "kept_until_saved",
    "data_fingerprint",
    "WARM_START_OPTIONS", "subsample_size", "subsample_problem", "warm_start_rows", "warm_start_problem",
]


__getattr__, __dir__ = lazy_names(__name__, _MODULES, globals())
