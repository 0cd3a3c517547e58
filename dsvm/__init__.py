"""dsvm — large-scale kernel SVMs on Dask (LA-SN: Nyström features + semismooth Newton).

The public names below are loaded on first use (PEP 562), so that
``import dsvm`` and the ``dsvm`` command's ``--help`` do not pay for
scikit-learn and Dask arrays.  The layers are sub-packages (see
ARCHITECTURE.md): ``dsvm.blocks``, ``dsvm.approx``, ``dsvm.problems``,
``dsvm.solvers``, ``dsvm.svm``, ``dsvm.model_selection``, ``dsvm.io``,
``dsvm.experiments``, ``dsvm.app`` and the package ``dsvm.reference``.
"""

from .lazy import defer_sparse_chunk_type, lazy_names

defer_sparse_chunk_type()  # before anything imports dask.array: no pydata sparse and numba (dsvm.lazy)

from . import config  # noqa: E402, F401  (registers the dsvm.* defaults in dask.config)
from .version import __version__  # noqa: E402

# public name -> the sub-package that exports it
_PUBLIC = {
    "NystroemSVC": "dsvm.svm",
    "NystroemSVR": "dsvm.svm",
    "PegasosSVC": "dsvm.svm",
    "save_model": "dsvm.svm",
    "load_model": "dsvm.svm",
    "evaluate": "dsvm.svm",
    "export_onnx": "dsvm.svm",
    "NystroemSVCCV": "dsvm.model_selection",
    "KernelSpec": "dsvm.approx",
    "kernel_matrix": "dsvm.approx",
    "FeatureMap": "dsvm.approx",
    "fit_feature_map": "dsvm.approx",
    "Dataset": "dsvm.io",
    "ingest": "dsvm.io",
    "open_dataset": "dsvm.io",
    "write_dataset": "dsvm.io",
    "make_classification_zarr": "dsvm.io",
    "make_bumps_zarr": "dsvm.io",
    "CheckpointMismatchError": "dsvm.exceptions",
    "InvalidDatasetError": "dsvm.exceptions",
    "InputFileError": "dsvm.exceptions",
    "DiskFullError": "dsvm.exceptions",
    "NotDsvmOutputError": "dsvm.exceptions",
    "ModelFileError": "dsvm.exceptions",
    "NoWorkersError": "dsvm.exceptions",
    "NonFiniteError": "dsvm.exceptions",
    "DenseLandmarksError": "dsvm.exceptions",
    "MixedScalesWarning": "dsvm.exceptions",
    "OneClassFitWarning": "dsvm.exceptions",
    "show_progress": "dsvm.progress",
}
_SUBPACKAGES = ("app", "approx", "blocks", "experiments", "io", "model_selection", "problems", "reference",
                "solvers", "svm")

__all__ = list(_PUBLIC) + ["__version__"]


# one name table; the names load on first use through the one lazy mechanism (dsvm.lazy.lazy_names)
_BY_PACKAGE = {package: tuple(n for n, p in _PUBLIC.items() if p == package) for package in set(_PUBLIC.values())}

__getattr__, __dir__ = lazy_names(__name__, _BY_PACKAGE, globals(), subpackages=(*_SUBPACKAGES, "config"))
