"""The kernel approximation: kernel blocks, landmark selection and the Nyström map ``F = K(X, L) · M``,
and the per-feature scaling of its input.

Pure numpy on row blocks; passes over the data go through :mod:`dsvm.blocks`.
"""

from ..exceptions import DenseLandmarksError, MixedScalesWarning, NonFiniteError
from .kernel_columns import KernelColumnsMap, ProjectedMap
from .kernels import (
    DENSIFY_MAX_FEATURES,
    DENSIFY_SLAB_ROWS,
    KERNELS,
    KernelSpec,
    PreparedLandmarks,
    check_kernel_params,
    gamma_for,
    kernel_block,
    kernel_diagonal,
    kernel_matrix,
    make_kernel_spec,
    prepare_landmarks,
    resolve_gamma,
    row_sq_norms,
    sq_distances,
)
from .landmarks import (
    Landmarks,
    check_dense_landmarks,
    clip_n_components,
    dense_rows,
    first_unique,
    kmeans_landmarks,
    pivoted_landmarks,
    select_landmarks,
    uniform_landmarks,
    warn_if_few_distinct,
)
from .nystroem import (
    DEFAULT_EIG_RTOL,
    FeatureMap,
    check_features,
    default_eig_rtol,
    fit_feature_map,
    nystroem_normalization,
)
from .scaling import SCALINGS, Scaling, check_scale, fit_scaling

__all__ = [
    "KERNELS", "KernelSpec", "make_kernel_spec", "check_kernel_params", "resolve_gamma", "gamma_for",
    "MixedScalesWarning", "NonFiniteError",
    "DenseLandmarksError", "check_features",
    "row_sq_norms", "PreparedLandmarks", "prepare_landmarks", "sq_distances", "kernel_block", "kernel_diagonal",
    "kernel_matrix",
    "DENSIFY_MAX_FEATURES", "DENSIFY_SLAB_ROWS",
    "Landmarks", "check_dense_landmarks", "dense_rows", "first_unique", "clip_n_components",
    "uniform_landmarks",
    "kmeans_landmarks", "pivoted_landmarks", "select_landmarks", "warn_if_few_distinct",
    "DEFAULT_EIG_RTOL", "default_eig_rtol", "nystroem_normalization", "FeatureMap", "fit_feature_map",
    "KernelColumnsMap", "ProjectedMap",
    "SCALINGS", "Scaling", "check_scale", "fit_scaling",
]
