"""The kernel approximation: kernel blocks, landmark selection and the Nyström map ``F = K(X, L) · M``,
and the per-feature scaling of its input.

Pure numpy on row blocks; passes over the data go through :mod:`dsvm.blocks`.
"""

from ._kernel_columns import KernelColumnsMap, ProjectedMap
from ._kernels import (
    KernelSpec,
    check_kernel_params,
    gamma_for,
    kernel_matrix,
    make_kernel_spec,
    prepare_landmarks,
    resolve_gamma,
)
from ._landmarks import (
    Landmarks,
    check_dense_landmarks,
    clip_n_components,
    dense_rows,
    first_unique,
    select_landmarks,
    warn_if_few_distinct,
)
from ._normalization import default_eig_rtol, landmark_weights, nystroem_normalization
from ._nystroem import FeatureMap, check_expansion, check_features, fit_feature_map
from ._scaling import SCALINGS, Scaling, check_scale, fit_scaling

__all__ = [
    "FeatureMap", "KernelColumnsMap", "KernelSpec", "Landmarks", "ProjectedMap", "SCALINGS", "Scaling",
    "check_dense_landmarks", "check_expansion", "check_features", "check_kernel_params", "check_scale",
    "clip_n_components", "default_eig_rtol", "dense_rows", "first_unique", "fit_feature_map", "fit_scaling",
    "gamma_for", "kernel_matrix", "landmark_weights", "make_kernel_spec", "nystroem_normalization", "prepare_landmarks",
    "resolve_gamma", "select_landmarks", "warn_if_few_distinct",
]
