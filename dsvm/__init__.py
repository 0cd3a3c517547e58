"""dsvm — large-scale kernel SVMs on Dask (LA-SN: Nyström features + semismooth Newton)."""

from .estimator import NystroemSVC
from .kernels import KernelSpec, kernel_matrix
from .nystroem import FeatureMap, fit_feature_map

__version__ = "0.1.0"

__all__ = ["NystroemSVC", "KernelSpec", "kernel_matrix", "FeatureMap", "fit_feature_map", "__version__"]
