"""L2-loss support vector regression on Nyström features: :class:`NystroemSVR`."""

from __future__ import annotations

import time

import numpy as np
from sklearn.base import RegressorMixin

from ..blocks import aligned_vector, is_dask_array
from ..checks import check_n_rows, check_positive
from ..problems import SquaredEpsilonOperator
from ..progress import stage
from ..signals import sigterm_cleanup
from ._auto_k import fit_or_choose, held_r2
from ._base import (
    NystroemBase,
    check_cost_scale,
    check_dataset_input,
    check_params,
    model_decisions,
    prepare_fit_input,
    set_fitted,
    unpack_dataset,
)
from ._block_tasks import as_float_block, finite_targets_block
from ._labels import check_sample_weight_blocks
from ._metrics import regression_scores, regression_sums

__all__ = ["NystroemSVR"]


def _check_targets(y: np.ndarray) -> np.ndarray:
    y = np.asarray(y, dtype=np.float64)
    if y.ndim != 1:
        raise ValueError(f"y must be 1-dimensional, got shape {y.shape}")
    if not np.all(np.isfinite(y)):
        raise ValueError("y contains NaN or infinity")
    return y


class NystroemSVR(RegressorMixin, NystroemBase):
    """Kernel support vector regression by LA-SN (Nyström features + semismooth Newton).

    Solves the ε-insensitive L2-loss SVR primal on the Nyström features::

        min_{w, b}  ½‖w‖² + C Σ_i s_i max(0, |f_iᵀ w + b − y_i| − ε)²

    (bias not regularised) by the same semismooth Newton method as
    :class:`~dsvm.NystroemSVC`: the generalized Hessian is
    ``I + 2C [F 1]_Aᵀ [F 1]_A`` on the rows outside the ε-tube.  ``solver``
    may be ``"newton"`` or ``"tron"``.

    Parameters
    ----------
    epsilon : float, default=0.0
        Half-width of the insensitive tube (scikit-learn's ``LinearSVR`` default).
    kernel, gamma, degree, coef0, C, n_components, landmarks, solver, hessian,
    tol, max_iter, fit_intercept, dtype, eig_rtol, kmeans_iter, feature_store,
    block_rows, solver_options, checkpoint, random_state, scale, time_budget, k_tol
        As in :class:`~dsvm.NystroemSVC` (``"auto"`` scores the path by R² on the held-out rows).

    Attributes
    ----------
    coef_ : ndarray of shape (1, r)
    intercept_ : ndarray of shape (1,)
    components_, component_indices_, normalization_, n_iter_, objective_, duality_gap_,
    n_components_, k_path_, n_features_in_, feature_names_in_, scaling_, solver_stats_, zero_based_
        As in :class:`~dsvm.NystroemSVC`.

    Examples
    --------
    >>> import numpy as np
    >>> from dsvm import NystroemSVR
    >>> X = np.linspace(-3, 3, 200).reshape(-1, 1)
    >>> y = np.sin(X).ravel()
    >>> reg = NystroemSVR(n_components=30, C=10, random_state=0).fit(X, y)
    >>> reg.score(X, y) > 0.99
    True
    >>> bool(abs(reg.predict([[1.0]])[0] - np.sin(1.0)) < 0.05)
    True
    """

    SUPPORTED_SOLVERS = ("newton", "tron")

    def __init__(
        self,
        *,
        kernel="rbf",
        gamma="scale",
        degree=3,
        coef0=0.0,
        C=1.0,
        epsilon=0.0,
        n_components=500,
        landmarks="uniform",
        solver="newton",
        hessian="auto",
        tol=1e-4,
        max_iter=100,
        fit_intercept=True,
        dtype="float32",
        eig_rtol=None,
        kmeans_iter=1,
        feature_store="auto",
        block_rows=None,
        solver_options=None,
        checkpoint=None,
        random_state=None,
        scale=None,
        time_budget=None,
        k_tol=0.002,
    ):
        self.kernel = kernel
        self.gamma = gamma
        self.degree = degree
        self.coef0 = coef0
        self.C = C
        self.epsilon = epsilon
        self.n_components = n_components
        self.landmarks = landmarks
        self.solver = solver
        self.hessian = hessian
        self.tol = tol
        self.max_iter = max_iter
        self.fit_intercept = fit_intercept
        self.dtype = dtype
        self.eig_rtol = eig_rtol
        self.kmeans_iter = kmeans_iter
        self.feature_store = feature_store
        self.block_rows = block_rows
        self.solver_options = solver_options
        self.checkpoint = checkpoint
        self.random_state = random_state
        self.scale = scale
        self.time_budget = time_budget
        self.k_tol = k_tol

    def fit(self, X, y=None, sample_weight=None):
        """Fit the regression model (numpy, sparse, dask or Dataset input); returns ``self``."""
        check_params(self)
        check_positive("epsilon", self.epsilon, allow_zero=True)
        t_start = time.perf_counter()
        with stage("input checks"):
            data = prepare_fit_input(self, X, y, sample_weight, _check_targets)
        X_rb, y, sw, checked = data.X, data.y, data.sample_weight, data.checked
        targets = aligned_vector(y, X_rb)
        if is_dask_array(y):
            targets = targets.map_blocks(as_float_block, None, np.float64)
            if targets.map_reduce(finite_targets_block)[0] > 0:
                raise ValueError("y contains NaN or infinity")
        total = float(check_sample_weight_blocks(sw)[0]) if sw is not None else float(X_rb.n_rows)
        if sw is not None and total <= 0:
            raise ValueError("sample_weight is zero for every row; at least one row needs a positive weight")
        check_cost_scale(self.C, total, "the sum of sample_weight" if sw is not None else "its number of rows")

        def make_operator(F, aligned, j):
            return SquaredEpsilonOperator(F, aligned[0], self.C, self.epsilon, aligned[1], self.fit_intercept)

        with sigterm_cleanup():  # SIGTERM removes the scratch store and checkpoint temporaries, as an error does
            result = fit_or_choose(self, X_rb, checked, [targets, sw], ["target"], make_operator, t_start,
                                   held_r2(X_rb, targets))
        set_fitted(self, result.attributes())
        return self

    def predict(self, X):
        """Predicted targets, shape (n_samples,); a dask array for dask input."""
        return self._decision(X)[:, 0]

    def score(self, X, y=None, sample_weight=None):
        """Coefficient of determination R²; for dask input computed in one pass."""
        if y is None:
            check_dataset_input(self, X)
            X, y = unpack_dataset(X)
        if is_dask_array(X) and sample_weight is None:
            dec = model_decisions(self, X)
            check_n_rows(X.shape[0], y)
            return regression_scores(dec.map_reduce(regression_sums, aligned=(aligned_vector(y, dec),)))["r2"]
        return super().score(X, y, sample_weight=sample_weight)
