"""The values dsvm's parameters may take, in one place and free of imports.

The estimators check their parameters against these tuples and the
command line offers them as choices; keeping them import-free lets the
``dsvm`` command build its parser without loading scikit-learn or Dask.
"""

KERNELS = ("rbf", "poly", "sigmoid", "linear")
GAMMA_STRINGS = ("scale", "auto")
# "active" draws from the rows a first, cheap model leaves active (it needs a solver: see dsvm.svm)
LANDMARK_METHODS = ("uniform", "kmeans", "pivoted", "active")
SOLVERS = ("newton", "tron", "dcd", "pegasos")
HESSIANS = ("auto", "gram", "cg")
FEATURE_STORES = ("auto", "memory", "disk", "recompute", "implicit")
DTYPES = ("float32", "float64")
# per-feature scaling of the input (scikit-learn's StandardScaler, MinMaxScaler, MaxAbsScaler); None: none
SCALINGS = ("standard", "minmax", "maxabs")

__all__ = ["KERNELS", "GAMMA_STRINGS", "LANDMARK_METHODS", "SOLVERS", "HESSIANS", "FEATURE_STORES", "DTYPES",
           "SCALINGS"]
