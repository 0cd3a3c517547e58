"""The LA-SN kernel SVM classifier :class:`NystroemSVC`."""

from __future__ import annotations

import logging
import time
import warnings

import numpy as np
from sklearn.base import ClassifierMixin
from sklearn.exceptions import NotFittedError
from sklearn.utils.metaestimators import available_if
from sklearn.utils.validation import check_is_fitted

from ..blocks import aligned_vector, is_dask_array, lazy_result
from ..checks import check_n_rows, resolve_seed
from ..exceptions import OneClassFitWarning
from ..problems import SquaredHingeOperator, labels_from_decision
from ..progress import stage
from ..signals import sigterm_cleanup
from ._auto_k import fit_or_choose, held_accuracy
from ._base import (
    NystroemBase,
    check_cost_scale,
    check_dataset_input,
    model_decisions,
    plain_label,
    set_fitted,
    unpack_dataset,
)
from ._block_tasks import correct_from_decision
from ._calibration import PlattCalibration, proba_block
from ._labels import check_sample_weight_blocks, class_weights, prepare_classification

logger = logging.getLogger(__name__)

__all__ = ["NystroemSVC", "fit_classifier", "warn_if_one_class"]


class NystroemSVC(ClassifierMixin, NystroemBase):
    """Kernel SVM classifier trained by LA-SN: Nyström features + semismooth Newton.

    The kernel SVM is linearised with ``n_components`` landmarks (features
    ``F = K(X, L) · M``) and the L2-loss linear SVM::

        min_{w, b}  ½‖w‖² + C Σ_i c_i max(0, 1 − y_i (f_iᵀ w + b))²

    (bias not regularised) is solved on ``F`` by the semismooth Newton method.
    Works on numpy arrays, scipy.sparse matrices and row-chunked dask arrays
    (with the active Dask scheduler: a ``distributed.Client`` if one exists,
    else threads).  Multiclass problems are solved one-vs-rest on one shared
    feature matrix.

    Parameters
    ----------
    kernel : {"rbf", "poly", "sigmoid", "linear"}, default="rbf"
    gamma : float or {"scale", "auto"}, default="scale"
        Kernel coefficient. ``"scale"`` is ``1 / (n_features * X.var())`` and
        ``"auto"`` is ``1 / n_features``, as in scikit-learn's SVC.
    degree : int, default=3
        Degree of the polynomial kernel.
    coef0 : float, default=0.0
        Constant of the poly and sigmoid kernels.
    C : float, default=1.0
        Cost of the squared hinge loss.
    n_components : int or "auto", default=500
        Number of landmarks ``k``.  Clipped to the number of rows with a warning.
        ``"auto"``: chosen by the fit, on nested landmarks grown 250, 500,
        1000, … up to 8000, each fit scored on held-out training rows (a
        fixed hash of the row index: the same rows for any chunking), until a
        doubling gains less than ``k_tol`` or would pass ``time_budget``.  The
        path's last k is chosen, unless it scored more than ``k_tol`` below
        the best, which is then chosen; the model is fitted on every row at
        that k (``n_components_``, ``k_path_``).
    landmarks : {"uniform", "kmeans", "active", "pivoted"}, default="uniform"
        ``"active"`` draws the landmarks from the active set of a first, cheap
        model on ``k/4`` uniform landmarks (rows near the decision boundary).
        ``"pivoted"`` picks them by greedy pivoted Cholesky of the kernel
        matrix of a uniform pool of ``10 k`` rows (each the row the others
        approximate worst), and maps them by ``R⁻¹`` of ``K(L, L) = RᵀR``
        (see the user guide's landmarks page): fewer landmarks for the same accuracy
        where the data are dense and low-dimensional (ijcnn1), a cheaper
        Nyström map at any ``k``.
    solver : {"newton", "tron", "dcd", "pegasos"}, default="newton"
        ``"newton"``: the semismooth Newton method (LA-SN); ``"tron"``:
        LIBLINEAR's trust-region Newton-CG on the same distributed operator;
        ``"dcd"``: LIBLINEAR's dual coordinate descent (LA-DCD) on the feature
        matrix gathered in memory, bias regularised as ``½(b/s)²``;
        ``"pegasos"``: mini-batch Pegasos for the *hinge* (L1) loss, streaming
        over blocks one at a time:
        for when the hinge loss itself is wanted or ``k`` is too large for
        Newton's ``k x k`` systems.  It needs hundreds of passes where Newton needs
        10–20 and converges sublinearly, so at ``k`` up to a few thousand
        Newton is faster and more accurate.  ``objective_`` is each solver's
        own objective.
    hessian : {"auto", "gram", "cg"}, default="auto"
        How Newton systems are solved: Cholesky on the Gram matrix of the active
        rows (one pass per iteration), CG with distributed Hessian-vector
        products (one pass per CG step, preconditioned by the Gram matrix of
        the row subsample the fit opens from), or chosen by a cost model
        (``"auto"``: CG over implicit features when the fit opens from a
        subsample; otherwise the Gram matrix while its passes and
        factorisations are estimated to cost less than CG's passes, CG always
        above ``k = 8192``).
    tol : float, default=1e-4
        Stop when ``‖∇Φ‖ ≤ tol · ‖∇Φ(0)‖``.
    max_iter : int, default=100
        Maximum Newton iterations per binary problem.
    fit_intercept : bool, default=True
        Fit an unregularised bias ``b``.
    class_weight : dict, "balanced" or None, default=None
        Multiplies ``C`` for the rows of each class (scikit-learn semantics).
    probability : bool, default=False
        Also fit Platt sigmoids on held-out decision values (an internal
        5-fold cross-validation on the fit's feature matrix) and enable :meth:`predict_proba` /
        :meth:`predict_log_proba`.  Makes ``fit`` slower (five more solves
        per binary problem, warm-started).  Multiclass: one-vs-rest sigmoids,
        normalised to sum to one.
    dtype : {"float32", "float64"}, default="float32"
        Precision of the feature matrix (reductions are float64 either way).
    eig_rtol : float or None, default=None
        Relative cut-off for eigenvalues of ``K(L, L)``; ``None`` picks
        ``1e-6`` for float32 and ``1e-10`` for float64 features.  Pivoted
        landmarks get the Cholesky map instead, and more than 2048 landmarks
        the pivoted Cholesky map, which keeps those farther than it from the
        span of the others (all of them where none is that close).
    kmeans_iter : int, default=1
        Lloyd passes over all rows for ``landmarks="kmeans"``, after k-means++
        seeds drawn on a sample of ``10 k`` rows.
    feature_store : {"auto", "memory", "disk", "implicit", "recompute"}, default="auto"
        Where the features ``F = K(X, L) M`` live during the fit: in the
        cluster's memory, on the scratch disk as raw files read with
        ``O_DIRECT`` every pass (``dsvm.scratch-directory``), nowhere
        (``"implicit"``: every pass computes the kernel blocks and works
        through ``M`` on k-vectors, so no feature matrix is formed and no
        scratch disk is used), or recomputed with their projection every pass.
        ``"auto"`` keeps them in memory when they take at most
        ``dsvm.memory-fraction`` of it (in-memory input always) and otherwise
        weighs ``"implicit"`` against ``"disk"`` by their cost over a fit;
        ``"implicit"`` is honoured for in-memory input too.
    block_rows : int or None, default=None
        Rows per block when splitting in-memory input (``None``: about 64 MiB
        of features per block, split further so that every core gets blocks;
        an explicit value is kept, e.g. ``block_rows=n`` for one thread).
        Dask input keeps its own chunks (split further when a block would not
        fit a task's share of worker memory).
    solver_options : dict or None, default=None
        Extra solver settings: newton ``cg_max_iter``, ``refresh_every``,
        ``gap_tol`` (also stop once the relative duality gap, ``duality_gap_``,
        is at most this: ``tol`` stated as a bound on the suboptimality),
        ``warm_start`` (``"auto"`` default, ``"subsample"``, ``"columns"``,
        ``"none"``: open the Newton solve from a row subsample's solution, or
        where rows are too few for one, from the solution on the leading
        quarter of the feature columns; see the user guide's estimators page;
        on Dask input the subsample is solved in this process),
        ``warm_rows`` (rows of that subsample);
        tron ``cg_max_iter``, ``cg_rtol``; dcd ``intercept_scaling`` (default
        1, as LIBLINEAR); pegasos ``epochs`` (the budget; default ``C ·
        batch_size`` epochs, i.e. ``1/λ`` steps, within [20, 1000]),
        ``batch_size`` (default 64), ``progress_tol`` (default 1e-3: converged
        when the hinge objective falls by less than this per epoch; a budget
        used up first gives ``converged=False`` and a ``ConvergenceWarning``).
        ``max_iter`` bounds Newton/TRON iterations and LIBLINEAR's epochs (at
        least 1000 for dcd).
    checkpoint : str, path or None, default=None
        With ``solver="newton"``: write the fit's state to this file after every
        Newton iteration and resume from it when fitting again (the file
        records the data and parameters it belongs to, and a checkpoint of
        another fit is refused with ``CheckpointMismatchError``); removed
        once the fit completes.
    random_state : int, RandomState or None, default=None
    scale : {None, "standard", "minmax", "maxabs"}, default=None
        Scale every feature before the kernel, as scikit-learn's
        ``StandardScaler`` / ``MinMaxScaler`` / ``MaxAbsScaler`` would (RBF
        kernels need features on one scale).  The statistics are fitted in
        one pass over the training rows (out of core, block by block), kept
        in the model (``scaling_``, saved in model files) and applied to
        every row at prediction.  Sparse input is not centred by
        ``"standard"`` (``with_mean=False``); ``"minmax"`` refuses sparse
        input whose zeros it would move.
    time_budget : float or None, default=None
        Seconds the fit should take at most: Newton begins no iteration that,
        as long as the last, would end later (stop reason ``"time_budget"``,
        with a ``ConvergenceWarning``; one-vs-rest problems share the time
        left equally), and ``n_components="auto"`` fits no further k whose
        expected time would not fit.  The landmark and feature stages, the
        subsample opening and probability calibration are not cut short, and
        other solvers ignore it.
    k_tol : float, default=0.002
        ``n_components="auto"``: the held-out accuracy (R² for
        :class:`NystroemSVR`) a doubling of k must gain for the path to go on.

    Attributes
    ----------
    classes_ : ndarray of shape (n_classes,)
    coef_ : ndarray of shape (1 or n_classes, r)
        Weights in Nyström feature space.
    intercept_ : ndarray of shape (1 or n_classes,)
    components_ : ndarray of shape (k, ``n_features_in_``)
        The landmarks.
    component_indices_ : ndarray of shape (k,) or None
        Rows of the training data used as landmarks (``None`` for k-means).
    normalization_ : ndarray of shape (r, k)
        ``F = K(X, components_) @ normalization_.T``.
    n_iter_ : int
        Newton iterations (maximum over the binary problems).
    objective_ : float or ndarray of shape (n_classes,)
        Final primal objective of each binary problem.
    duality_gap_ : float or ndarray of shape (n_classes,)
        Relative duality gap of each binary problem at the returned model, ``(objective_ − D) /
        objective_`` for a dual objective ``D`` below the optimum: a bound on how far ``objective_`` is
        from the optimum of the problem the solver solved (nan for Pegasos, which solves the hinge loss).
    n_features_in_ : int
    probA_, probB_ : ndarray of shape (1 or n_classes,)
        Platt sigmoid ``P = 1 / (1 + exp(probA_ * f + probB_))`` of each binary
        problem (only with ``probability=True``).
    n_components_ : int
        The number of landmarks of the fitted model (the chosen one for ``"auto"``);
        below ``n_components`` where more than 2048 landmarks were dependent and
        the pivoted Cholesky map dropped some (the user guide's landmarks page).
    k_path_ : list of dict or None
        ``n_components="auto"``: the path's fits, ``{"k", "score", "seconds"}``
        (k: the landmarks drawn; score: accuracy on the held-out rows); None for a fixed k.
    solver_stats_ : dict
        Per problem: iterations, passes over the data, seconds, stop reason;
        plus the timings of the landmark and feature stages (and, with
        ``probability=True``, ``"calibration"``).
    scaling_ : dsvm.approx.Scaling or None
        The fitted scaling (``scale``): its ``stats`` carry scikit-learn's
        attribute names (``mean_``, ``var_``, ``scale_``, ...).
    feature_names_in_ : ndarray of shape (``n_features_in_``,)
        Names of the features, when the training data had string column
        names (a pandas or Dask DataFrame, or a dataset from a CSV header,
        Parquet or a DataFrame).  Input with other names is refused.
    zero_based_ : bool or None
        Whether the LIBSVM file of the training dataset numbered its features
        from 0; None when the training data was not a dataset ingested from a
        LIBSVM file.  A dataset read with the other base is refused at
        prediction (its features would be shifted by one column).

    Examples
    --------
    >>> from sklearn.datasets import make_moons
    >>> from dsvm import NystroemSVC
    >>> X, y = make_moons(n_samples=200, noise=0.1, random_state=0)
    >>> clf = NystroemSVC(n_components=50, random_state=0).fit(X, y)
    >>> clf.predict(X[:3])
    array([0, 1, 1])
    >>> clf.score(X, y) > 0.95
    True
    """

    def __init__(
        self,
        *,
        kernel="rbf",
        gamma="scale",
        degree=3,
        coef0=0.0,
        C=1.0,
        n_components=500,
        landmarks="uniform",
        solver="newton",
        hessian="auto",
        tol=1e-4,
        max_iter=100,
        fit_intercept=True,
        class_weight=None,
        probability=False,
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
        self.n_components = n_components
        self.landmarks = landmarks
        self.solver = solver
        self.hessian = hessian
        self.tol = tol
        self.max_iter = max_iter
        self.fit_intercept = fit_intercept
        self.class_weight = class_weight
        self.probability = probability
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
        """Fit the model.

        Parameters
        ----------
        X : array-like, sparse matrix, dask array of shape (n_samples, n_features), or Dataset
            A :class:`dsvm.io.Dataset` (from :func:`dsvm.open_dataset`) carries its labels.
        y : array-like or dask array of shape (n_samples,), optional when X is a Dataset
        sample_weight : array-like of shape (n_samples,), optional
            Per-row weights multiplying ``C``.

        Returns
        -------
        self
        """
        return fit_classifier(self, X, y, sample_weight)

    # ------------------------------------------------------------------ predict
    def decision_function(self, X):
        """Signed distance to the separating hyperplane in feature space.

        Returns shape (n_samples,) for two classes, (n_samples, n_classes)
        otherwise; a dask array for dask input.
        """
        dec = self._decision(X)
        return dec[:, 0] if self.coef_.shape[0] == 1 else dec

    def predict(self, X):
        """Class labels; a dask array for dask input."""
        dec = model_decisions(self, X)
        if dec.is_distributed:
            return lazy_result(dec.map_blocks(labels_from_decision, None, self.classes_.dtype, shared=(self.classes_,)))
        return labels_from_decision(lazy_result(dec), self.classes_)

    def _check_proba(self):
        if not self.probability:
            raise AttributeError("predict_proba is not available when probability=False")
        return True

    def _proba(self, X, log: bool):
        check_is_fitted(self)
        if not hasattr(self, "probA_"):
            raise NotFittedError(
                "predict_proba is not available: the model was fitted with probability=False "
                "(or loaded from a file without its Platt sigmoids); refit with probability=True"
            )
        dec = model_decisions(self, X)
        proba = dec.map_blocks(proba_block, len(self.classes_), np.float64, shared=(self.probA_, self.probB_, log))
        return lazy_result(proba)

    @available_if(_check_proba)
    def predict_proba(self, X):
        """Class probabilities from the Platt sigmoids, shape (n_samples, n_classes).

        Columns follow ``classes_``; rows sum to one.  Only with
        ``probability=True``.  A dask array for dask input (block-wise).  As
        with LIBSVM, ``argmax`` of the probabilities may disagree with
        :meth:`predict` for points near the decision boundary.
        """
        return self._proba(X, log=False)

    @available_if(_check_proba)
    def predict_log_proba(self, X):
        """Logarithm of :meth:`predict_proba`, computed in the log domain (never ``-inf``)."""
        return self._proba(X, log=True)

    def score(self, X, y=None, sample_weight=None):
        """Mean accuracy; for dask input computed block-wise (one pass)."""
        if y is None:
            check_dataset_input(self, X)
            X, y = unpack_dataset(X)
        if is_dask_array(X) and sample_weight is None:
            dec = model_decisions(self, X)
            check_n_rows(X.shape[0], y)
            correct, total = dec.map_reduce(correct_from_decision, aligned=(aligned_vector(y, dec),),
                                            shared=(self.classes_,))
            return correct / total
        return super().score(X, y, sample_weight=sample_weight)


def fit_classifier(est: NystroemSVC, X, y=None, sample_weight=None, *, start=None) -> NystroemSVC:
    """:meth:`NystroemSVC.fit`, optionally from a starting point: ``start(feature_map)`` returns one
    ``(w, b)`` vector per binary problem in that map's feature space, or None (the CV search's refit
    starts from its fold models, see :mod:`dsvm.model_selection`)."""
    t_start = time.perf_counter()
    with stage("input checks"):
        data = prepare_classification(est, X, y, sample_weight)
    X_rb, codes, classes, sw, checked = data.X, data.codes, data.classes, data.sample_weight, data.checked
    class_cost = est.C * class_weights(est.class_weight, classes, codes)
    # every class needs some weight, or its problem has nothing to fit
    mass = np.ones(classes.size) if sw is None else check_sample_weight_blocks(sw, codes, classes.size)
    weightless = classes[mass * class_cost <= 0]
    if weightless.size:
        raise ValueError(
            f"class {weightless.tolist()[0]!r} has zero total weight (sample_weight x class_weight); "
            "every class in y needs a positive weight somewhere"
        )
    check_cost_scale(float(class_cost.max()), float(mass.sum()) if sw is not None else float(X_rb.n_rows),
                     "the sum of sample_weight" if sw is not None else "its number of rows")
    positives = [1] if classes.size == 2 else list(range(classes.size))
    calib = []

    def make_operator(F, aligned, j):
        return SquaredHingeOperator(F, aligned[0], positives[j], class_cost, aligned[1], est.fit_intercept)

    def calibrate(F, aligned, j, hessian, prefix):
        # Platt's held-out folds run on this fit's feature blocks (see dsvm.svm._calibration).
        if not calib:
            calib.append(PlattCalibration(est, len(positives), seed=resolve_seed(est.random_state)))
        t0 = time.perf_counter()
        calib[0].fit_problem(F, aligned[0], aligned[1], positives[j], class_cost, j, hessian, prefix)
        calib[0].stats[-1]["seconds"] = time.perf_counter() - t0

    with sigterm_cleanup():  # SIGTERM removes the scratch store and checkpoint temporaries, as an error does
        result = fit_or_choose(est, X_rb, checked, [codes, sw], [classes[p] for p in positives], make_operator,
                               t_start, held_accuracy(X_rb, codes), prepare_problem=calibrate if est.probability else None,
                               start=start)
    attributes = result.attributes()
    if calib:
        attributes.update(probA_=calib[0].probA, probB_=calib[0].probB)
        attributes["solver_stats_"]["calibration"] = calib[0].stats
    set_fitted(est, attributes, dropped=("probA_", "probB_"))
    warn_if_one_class(est)
    return est


def warn_if_one_class(est: NystroemSVC) -> None:
    """A :class:`~dsvm.exceptions.OneClassFitWarning` when a fitted binary classifier predicts one class for
    every training row of positive weight.

    The counts come from the solver's last pass at the solution (``solver_stats_["problems"][0]
    ["train_positive"]``): no pass of its own.  Checked for two classes, where the sign of the one
    problem's margin is the prediction (one-vs-rest predictions need every problem's margins at once),
    and where that pass was made (Newton and TRON solves).
    """
    counted = est.solver_stats_["problems"][0].get("train_positive") if len(est.classes_) == 2 else None
    if counted is None:
        return
    n, positive = counted
    if n == 0 or 0 < positive < n:
        return
    label = plain_label(est.classes_[1 if positive else 0])
    warnings.warn(
        f"the fitted model predicts class {label!r} for all {n} training rows: it has learnt only which class is "
        f"more frequent. Likely causes: columns on very different scales (pass scale='standard'), a gamma far from "
        f"the data's scale (gamma_={est.gamma_:.3g}), or too small a C (C={est.C:g})",
        OneClassFitWarning, stacklevel=3,
    )
