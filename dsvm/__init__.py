"""dsvm — large-scale kernel SVMs on Dask (LA-SN: Nyström features + semismooth Newton)."""

from . import config  # noqa: F401  (registers the dsvm.* defaults in dask.config)
from .checkpoint import CheckpointMismatchError
from .estimator import NystroemSVC
from .io import (
    Dataset,
    DiskFullError,
    InputFileError,
    InvalidDatasetError,
    ingest,
    make_classification_zarr,
    open_dataset,
    write_dataset,
)
from .kernels import KernelSpec, kernel_matrix
from .model_io import load_model, save_model
from .nystroem import FeatureMap, fit_feature_map
from .pegasos import PegasosSVC
from .search import NystroemSVCCV
from .svr import NystroemSVR

__version__ = "0.1.0"

__all__ = [
    "NystroemSVC",
    "NystroemSVR",
    "NystroemSVCCV",
    "PegasosSVC",
    "KernelSpec",
    "kernel_matrix",
    "FeatureMap",
    "fit_feature_map",
    "save_model",
    "CheckpointMismatchError",
    "Dataset",
    "InvalidDatasetError",
    "InputFileError",
    "DiskFullError",
    "ingest",
    "open_dataset",
    "write_dataset",
    "make_classification_zarr",
    "load_model",
    "__version__",
]
