"""Cross-validated selection of ``C``, ``gamma`` and ``n_components`` that reuses work.

:class:`NystroemSVCCV` returns what ``GridSearchCV(NystroemSVC(), param_grid)``
returns (``cv_results_``, ``best_params_``, ``best_score_``,
``best_estimator_``) but does not refit from scratch for every grid point and
fold:

* **landmarks once, nested.**  Uniform landmarks are drawn once for the
  largest ``k`` of the grid; a smaller ``k`` uses the first ``k`` of them,
  which are exactly the landmarks ``NystroemSVC(n_components=k)`` draws with
  the same seed (``dsvm.landmarks.uniform_landmarks`` is nested).  k-means
  landmarks are not nested: they are computed once per ``k`` (and shared by
  all ``gamma``).
* **kernel columns once per gamma.**  ``K(X, L_max)`` (``n x k_max``) is
  computed once per ``gamma`` and *stored* (a :class:`~dsvm.operator.FeatureStore`:
  persisted, spilled to zarr or recomputed, as for a fit); the Nyström
  features of each ``k`` are the projection ``F_k = K[:, :k] · M_k`` of its
  first ``k`` columns with ``M_k`` from the eigendecomposition of
  ``K(L_k, L_k)`` (one ``n k r`` GEMM, no kernel evaluations).
* **one feature matrix per (gamma, k)** shared by every ``C`` and every fold.
  A fold model is the model of the fold's training rows *in the feature space
  of the landmarks of all rows* (which have seen the held-out rows' inputs,
  never their labels) — the one deliberate difference from ``GridSearchCV``,
  whose fold models draw landmarks from the training rows.  In-memory data
  split by a k-fold splitter is reordered once into blocks that never straddle
  two folds, so a fold's training rows are the other folds' blocks (views, no
  copy); otherwise (Dask input, overlapping splits) held-out rows get cost
  zero, which for the L2-loss objective gives exactly the same model.
* **warm starts and reused passes** (semismooth Newton, Gram variant).  Per
  fold the ``C`` values are solved in increasing order, each from the
  previous solution; there the loss, gradient and Gram matrix are the
  previous solve's times ``C_new / C_old`` (same rows, same active set), so
  the next solve opens without a pass over the data.  The first fold at the
  smallest ``C`` starts from zero (smallest ``k``) or from the solution of the
  next smaller nested ``k`` mapped into the larger feature space (same
  decision function: :func:`_map_to_larger_k`); the other folds start from
  the first fold's solution, their opening Gram matrices obtained from the
  first fold's by exchanging the rows of the two held-out folds (passes over
  those two folds' rows instead of one over all training rows), and at each
  further ``C`` continue their own path or restart from the first fold's
  solution for that ``C``, whichever has the lower objective.  Other solvers
  (``tron``, ``dcd``, ``pegasos``) or ``hessian="cg"`` get the same order and
  starting points where they take one.
* **one scoring pass** per (gamma, k): held-out confusion matrices of all
  folds and all ``C`` at once.
* **a warm-started refit.**  ``best_estimator_`` is fitted like
  ``NystroemSVC(**best_params_).fit(X, y)`` — same landmarks, same model to
  the solver's tolerance — but its Newton solve starts from the mean of the
  best candidate's fold models, mapped into its feature space
  (:func:`_refit_start`; only when the refit draws the same landmarks as the
  search, i.e. an integer ``random_state``).

Measured on a9a (18 grid points x 5 folds, ``benchmarks/bench_search.py``, a
shared 2-core machine): 5.6x less wall time and 5.9x less CPU time than
``GridSearchCV(NystroemSVC())`` with the same folds, both refitting.

Distribution: every pass (solver iterations, scoring) runs block-wise on the
active Dask scheduler like a fit does; with ``n_jobs > 1`` the folds of a
(gamma, k) after the first are solved concurrently from client threads, so
their passes overlap on the cluster (no gain on an in-memory fit, whose
blocks already run in parallel threads).  The fold assignment lives on the
client: the labels (4 bytes per row, to stratify) and one packed role vector
(8 bytes per row for up to 32 splits) — the same order of memory as
scikit-learn's splitters need; the fold-block layout of in-memory data holds
one reordered copy of ``X``.

Memory: per gamma the kernel columns ``n x k_max`` and per (gamma, k) the
features ``n x r``, each kept where ``feature_store`` says (as in a fit).

Other parameters in ``param_grid`` (``class_weight``, ``kernel``, ...) are
searched too: each combination of them is a separate search of the kind
above.

The module also holds the helpers of the ``dsvm train --search`` command and
the pipeline step: :func:`parse_search_args` and :func:`write_cv_report`.
"""

from __future__ import annotations

import csv
import json
import logging
import os
import time
import warnings
from collections import defaultdict
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np
from scipy.stats import rankdata
from sklearn.base import BaseEstimator, ClassifierMixin, clone
from sklearn.exceptions import ConvergenceWarning
from sklearn.model_selection import ParameterGrid, check_cv
from sklearn.utils.metaestimators import available_if
from sklearn.utils.validation import check_is_fitted

from ._base import unpack_dataset
from ._validation import encode_labels
from .blockwise import InMemoryBlocks, RowBlocks, aligned_vector
from .calibration import n_columns, warm_solve
from .estimator import NystroemSVC, _check_labels, check_classes
from .kernels import kernel_block, kernel_matrix, make_kernel_spec, prepare_landmarks
from .landmarks import select_landmarks, uniform_landmarks
from .nystroem import default_eig_rtol, nystroem_normalization
from .operator import FeatureStore, SquaredHingeOperator
from .solvers import choose_hessian

logger = logging.getLogger(__name__)

SEARCH_KEYS = ("C", "gamma", "n_components")
SCORINGS = (
    "accuracy", "balanced_accuracy", "f1", "precision", "recall", "f1_macro", "precision_macro", "recall_macro",
)
MAX_SPLITS_PER_WORD = 32
FOLD_MIN_BLOCK_ROWS = 1024  # held-out views smaller than this gain nothing from a second thread
DEFAULT_GRID = {"C": [0.1, 1.0, 10.0, 100.0]}


# ---------------------------------------------------------------------------
# Block functions (pure numpy)


class _KernelColumns:
    """Feature-map stand-in for :class:`FeatureStore`: the kernel columns ``K(X, L)``."""

    def __init__(self, prep):
        self.prep = prep
        self.dtype = np.dtype(prep.dtype)
        self.n_output = self.n_components = int(prep.landmarks.shape[0])

    def transform_block(self, X_block):
        return kernel_block(X_block, self.prep)


class _Projection:
    """Feature-map stand-in: ``F_k = K[:, :k] · M_k`` from stored kernel columns."""

    def __init__(self, normalization: np.ndarray, dtype):
        self.M = np.ascontiguousarray(normalization.T, dtype=dtype)  # (k, r)
        self.dtype = np.dtype(dtype)
        self.n_components, self.n_output = self.M.shape

    def transform_block(self, K_block):
        return K_block[:, : self.n_components] @ self.M


class _WarmOperator:
    """A :class:`SquaredHingeOperator` that answers a warm-started Newton solve's opening passes.

    Along a fold's C path the next solve starts at the previous solution
    ``x``.  There the loss, its gradient and its generalized Hessian are the
    previous solve's last values times ``C_new / C_old`` (same rows, same
    active set, costs linear in C), so the solver's opening pass (loss,
    gradient and Gram matrix at ``x``) and its reference pass at ``x = 0``
    (for the relative tolerance) need no pass over the data at all — exact,
    not an approximation.  The wrapper remembers the pass results at the
    points the solver evaluates, with the Gram matrix tracked through the
    ``"full"`` and ``"delta"`` passes, so the final point's can be handed on.
    """

    KEEP = 4

    def __init__(self, op, start=None, zero=None):
        self.op = op
        self.fit_intercept = op.fit_intercept
        self.zero = zero
        self._results: dict[bytes, Any] = {}
        if start is not None:
            self._remember(start[0], start[1])

    @property
    def n_passes(self) -> int:
        return self.op.n_passes

    @staticmethod
    def _key(x) -> bytes:
        return np.asarray(x, dtype=np.float64).tobytes()

    def _remember(self, x, res):
        self._results[self._key(x)] = res
        while len(self._results) > self.KEEP:
            self._results.pop(next(iter(self._results)))

    def result_at(self, x):
        """The pass result (loss, gradient, Gram matrix in ``hess``) at ``x``, if known."""
        return self._results.get(self._key(x))

    def evaluate(self, x0, x1, t_grid=(), hessian="none"):
        from dataclasses import replace

        same = len(t_grid) == 0 and np.array_equal(x0, x1)
        if same and hessian == "none" and not np.any(x1) and self.zero is not None:
            return self.zero
        if same:
            known = self.result_at(x1)
            if known is not None and (hessian == "none" or known.hess is not None):
                return replace(known, hess=None if hessian == "none" else known.hess.copy(), n_changed=0)
        res = self.op.evaluate(x0, x1, t_grid, hessian)
        if same and not np.any(x1):
            self.zero = replace(res, hess=None)
        gram = None
        if hessian == "full":
            gram = res.hess
        elif hessian == "delta":
            before = self.result_at(x0)
            if before is not None and before.hess is not None:
                gram = before.hess + res.hess
        self._remember(x1, replace(res, hess=gram, loss_grid=np.zeros(0), n_changed=0))
        return res

    def hess_vec(self, x, v):
        return self.op.hess_vec(x, v)


def _scaled_pass(res, factor: float):
    """A pass result for costs multiplied by ``factor`` (loss, gradient and Hessian are linear in C)."""
    from dataclasses import replace

    return replace(res, loss=res.loss * factor, grad=res.grad * factor,
                   loss_grid=res.loss_grid * factor, hess=None if res.hess is None else res.hess * factor)


def _combine_passes(base, plus, minus):
    """``base + plus − minus`` of additive pass results (rows added to / removed from a problem)."""
    from dataclasses import replace

    hess = None
    if base.hess is not None and plus.hess is not None and minus.hess is not None:
        hess = base.hess + plus.hess - minus.hess
    return replace(base, loss=base.loss + plus.loss - minus.loss, grad=base.grad + plus.grad - minus.grad,
                   n_active=base.n_active + plus.n_active - minus.n_active, n_changed=0, loss_grid=np.zeros(0),
                   hess=hess)


def _role_block(packed, s):
    return ((packed >> np.uint64(2 * s)) & np.uint64(3)).astype(np.int8)


def _train_weight_block(packed, sample_weight, s):
    w = (_role_block(packed, s) == 1).astype(np.float64)
    return w if sample_weight is None else w * sample_weight


def _cv_confusion_block(F, codes, packed, W, splits, n_classes, train):
    """Confusion matrices ``(len(splits), n_C, 2, m, m)`` (test, train) of every fold model."""
    S, nC, nP, dim = W.shape
    m = n_classes
    out = np.zeros((S, nC, 2, m, m))
    if F.shape[0] == 0:
        return out
    dec = (F @ W[..., :-1].reshape(-1, dim - 1).T.astype(F.dtype)).astype(np.float64) + W[..., -1].ravel()
    dec = dec.reshape(F.shape[0], S, nC, nP)
    pred = (dec[..., 0] > 0).astype(np.int64) if nP == 1 else np.argmax(dec, axis=-1)
    codes = np.asarray(codes, dtype=np.int64)
    for i, s in enumerate(splits):
        role = _role_block(packed, s)
        for which, value in ((0, 2), (1, 1)) if train else ((0, 2),):
            rows = role == value
            if not rows.any():
                continue
            t = codes[rows] * m
            for c in range(nC):
                out[i, c, which] = np.bincount(t + pred[rows, i, c], minlength=m * m).reshape(m, m)
    return out


def score_from_confusion(cm: np.ndarray, scoring: str) -> float:
    """A classification score from a confusion matrix (rows true, columns predicted).

    The positive class of the binary scores ``f1``/``precision``/``recall`` is
    the second class (``classes_[1]``), as scikit-learn's ``pos_label=1`` for
    0/1 or -1/1 labels.
    """
    cm = np.asarray(cm, dtype=np.float64)
    n = cm.sum()
    if n == 0:
        return float("nan")
    tp = np.diag(cm)
    support, predicted = cm.sum(axis=1), cm.sum(axis=0)
    with np.errstate(invalid="ignore", divide="ignore"):
        recall = np.where(support > 0, tp / support, 0.0)
        precision = np.where(predicted > 0, tp / predicted, 0.0)
        f1 = np.where(precision + recall > 0, 2 * precision * recall / (precision + recall), 0.0)
    if scoring == "accuracy":
        return float(tp.sum() / n)
    if scoring == "balanced_accuracy":
        return float(recall[support > 0].mean())
    if scoring in ("f1", "precision", "recall"):
        if cm.shape[0] != 2:
            raise ValueError(f"scoring={scoring!r} is for binary problems; use {scoring}_macro")
        return float({"f1": f1, "precision": precision, "recall": recall}[scoring][1])
    if scoring.endswith("_macro"):
        base = {"f1_macro": f1, "precision_macro": precision, "recall_macro": recall}[scoring]
        present = (support > 0) | (predicted > 0)
        return float(base[present].mean())
    raise ValueError(f"scoring={scoring!r} is not supported; choose one of {SCORINGS}")


# ---------------------------------------------------------------------------
# The estimator


def _estimator_has(attr: str):
    """``available_if`` check: the (best or to-be-fitted) NystroemSVC has ``attr``."""

    def check(self):
        if hasattr(self, "best_estimator_"):
            getattr(self.best_estimator_, attr)
        else:
            getattr(self._base_estimator(), attr)
        return True

    return check


class NystroemSVCCV(ClassifierMixin, BaseEstimator):
    """:class:`~dsvm.NystroemSVC` with ``C``, ``gamma`` and ``n_components`` chosen by cross-validation.

    Equivalent to ``GridSearchCV(NystroemSVC(**params), param_grid, cv=cv,
    scoring=scoring)`` but shares the landmarks, the kernel columns and the
    feature matrix between grid points and folds and warm-starts the ``C``
    path (see :mod:`dsvm.search`).  The one difference in what is computed: a
    fold model uses the landmarks (and Nyström map) of *all* rows, where
    ``GridSearchCV`` would draw them from the fold's training rows.

    Parameters
    ----------
    param_grid : dict or list of dicts, default=None
        Lists of values to try for any of NystroemSVC's parameters, as for
        ``GridSearchCV``; the cheap axes are ``C``, ``gamma`` and
        ``n_components``.  ``None`` searches ``C`` in ``[0.1, 1, 10, 100]``.
    cv : int, cross-validation generator or iterable, default=5
        As in scikit-learn (an int means ``StratifiedKFold(cv)``).
    scoring : str, default="accuracy"
        One of ``accuracy``, ``balanced_accuracy``, ``f1``, ``precision``,
        ``recall`` (binary; positive class ``classes_[1]``), ``f1_macro``,
        ``precision_macro``, ``recall_macro`` — scores computed from held-out
        confusion matrices, block-wise.  For other scorers use
        ``GridSearchCV(NystroemSVC(), ...)``.
    refit : bool, default=True
        Refit ``best_estimator_`` on all rows with the best parameters.
    return_train_score : bool, default=False
        Also score every fold model on its training rows (same pass).
    n_jobs : int or None, default=None
        Folds solved concurrently (client threads) after the first fold of
        every (gamma, k); ``None`` or 1 solves them one after another.
    kernel, gamma, degree, coef0, C, n_components, landmarks, solver, hessian, tol, max_iter, \
fit_intercept, class_weight, probability, dtype, eig_rtol, kmeans_iter, feature_store, block_rows, \
solver_options, random_state
        Parameters of every :class:`~dsvm.NystroemSVC` fitted; those named in
        ``param_grid`` are searched.  ``probability`` only affects the refit
        ``best_estimator_``.

    Attributes
    ----------
    cv_results_ : dict of arrays
        As ``GridSearchCV.cv_results_``: ``params``, ``param_<name>``,
        ``split<i>_test_score``, ``mean_test_score``, ``std_test_score``,
        ``rank_test_score``, ``mean_fit_time``, ``std_fit_time``,
        ``mean_score_time``, ``std_score_time`` (and train scores if asked).
        ``fit_time`` of a (candidate, fold) is its solve time plus an equal
        share of the landmark / kernel / feature stages it reuses.
    best_index_, best_params_, best_score_
    best_estimator_ : NystroemSVC
        Refitted on all rows (``refit=True``).
    refit_time_ : float
    n_iter_ : int
        Newton iterations of ``best_estimator_`` (without refit: the most of any fold solve).
    n_splits_ : int
    classes_, n_features_in_
    search_stats_ : dict
        Seconds spent per stage, number of solves, Newton iterations, passes.
    """

    def __init__(
        self,
        param_grid=None,
        *,
        cv=5,
        scoring="accuracy",
        refit=True,
        return_train_score=False,
        n_jobs=None,
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
    ):
        self.param_grid = param_grid
        self.cv = cv
        self.scoring = scoring
        self.refit = refit
        self.return_train_score = return_train_score
        self.n_jobs = n_jobs
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

    # ------------------------------------------------------------------ helpers
    def _base_estimator(self) -> NystroemSVC:
        names = NystroemSVC._get_param_names()
        return NystroemSVC(**{name: getattr(self, name) for name in names})

    def _candidates(self) -> list[dict]:
        grid = DEFAULT_GRID if self.param_grid is None else self.param_grid
        if isinstance(grid, dict):
            grid = [grid]
        allowed = set(NystroemSVC._get_param_names())
        for g in grid:
            if not isinstance(g, dict):
                raise ValueError(f"param_grid must be a dict or a list of dicts, got {self.param_grid!r}")
            unknown = set(g) - allowed
            if unknown:
                raise ValueError(
                    f"param_grid names {sorted(unknown)} which are not NystroemSVC parameters "
                    f"(use 'n_components' for k); valid: {sorted(allowed)}"
                )
        candidates = list(ParameterGrid(grid))
        if not candidates:
            raise ValueError("param_grid holds no parameter combination")
        return candidates

    def _check_search_params(self) -> None:
        if self.scoring is None:
            return
        if not isinstance(self.scoring, str) or self.scoring not in SCORINGS:
            raise ValueError(
                f"scoring={self.scoring!r} is not supported by NystroemSVCCV; choose one of {SCORINGS} "
                "(for any other scorer use sklearn's GridSearchCV(NystroemSVC(), ...))"
            )
        if self.n_jobs is not None and (not isinstance(self.n_jobs, (int, np.integer)) or self.n_jobs == 0):
            raise ValueError(f"n_jobs must be None or a non-zero integer, got {self.n_jobs!r}")

    @property
    def _scoring(self) -> str:
        return self.scoring or "accuracy"

    # ------------------------------------------------------------------ fit
    def fit(self, X, y=None, sample_weight=None, groups=None):
        """Run the search; refit the best model on all rows.

        Parameters
        ----------
        X : array-like, sparse matrix, dask array or Dataset
        y : array-like or dask array, optional when X is a Dataset
        sample_weight : array-like, optional
            Per-row weights of the training objective (not of the scores).
        groups : array-like, optional
            Group labels for a group splitter (``cv=GroupKFold(...)``).
        """
        t_start = time.perf_counter()
        self._check_search_params()
        candidates = self._candidates()
        base = self._base_estimator()
        base._check_params()
        if not isinstance(self.probability, (bool, np.bool_)):
            raise ValueError(f"probability must be True or False, got {self.probability!r}")
        known_classes = getattr(X, "classes", None) if y is None and hasattr(X, "X") else None
        X_in, y_in = X, y
        X_rb, y, sw, checked = base._prepare_fit_input(X, y, sample_weight, _check_labels)
        classes, codes = encode_labels(y, X_rb, known_classes)
        check_classes(classes)
        self.classes_ = classes
        self.n_features_in_ = base.n_features_in_
        if X_rb.is_distributed:
            codes = codes.persist()
            sw = sw.persist() if sw is not None else None

        # Folds: decided on the client from the labels, as scikit-learn does.
        y_codes = np.asarray(codes.compute())
        n = X_rb.n_rows
        cv = check_cv(self.cv, y_codes, classifier=True)
        splits = list(cv.split(np.zeros((n, 1)), y_codes, groups))
        if not splits:
            raise ValueError("the cross-validation splitter produced no split")
        self.n_splits_ = len(splits)
        ctx = _SearchContext.build(X_rb, checked, codes, y_codes, classes, sw, splits, base)

        S = len(splits)
        test_scores = np.full((len(candidates), S), np.nan)
        train_scores = np.full((len(candidates), S), np.nan)
        fit_times = np.zeros((len(candidates), S))
        score_times = np.zeros((len(candidates), S))
        groups_of = defaultdict(list)
        for i, cand in enumerate(candidates):
            other = tuple(sorted((k, _hashable(v)) for k, v in cand.items() if k not in SEARCH_KEYS))
            groups_of[other].append(i)
        stats = defaultdict(float)
        fold_functions: dict[int, Any] = {}
        for other, idxs in groups_of.items():
            est = clone(base).set_params(**{k: candidates[idxs[0]][k] for k, _ in other})
            est._check_params()
            cms, ft, st, funcs = self._search_group(est, ctx, [candidates[i] for i in idxs], stats)
            for row, i in enumerate(idxs):
                fold_functions[i] = funcs.get(row)
                test_scores[i] = [score_from_confusion(cms[row, s, 0], self._scoring) for s in range(S)]
                if self.return_train_score:
                    train_scores[i] = [score_from_confusion(cms[row, s, 1], self._scoring) for s in range(S)]
                fit_times[i], score_times[i] = ft[row], st[row]
        if stats["not_converged"]:
            warnings.warn(
                f"{int(stats['not_converged'])} of {int(stats['n_solves'])} fold solves did not converge; "
                "increase max_iter", ConvergenceWarning, stacklevel=2,
            )
        self.cv_results_ = _format_results(candidates, test_scores, train_scores if self.return_train_score else None,
                                           fit_times, score_times)
        self.best_index_ = int(np.argmin(self.cv_results_["rank_test_score"]))
        self.best_params_ = candidates[self.best_index_]
        self.best_score_ = float(self.cv_results_["mean_test_score"][self.best_index_])
        self.search_stats_ = dict(stats, search_seconds=time.perf_counter() - t_start)
        logger.info("search: best %s %s=%.5f (%d candidates x %d folds in %.2fs)", self.best_params_,
                    self._scoring, self.best_score_, len(candidates), S, self.search_stats_["search_seconds"])
        self.n_iter_ = int(stats["max_newton_iter"])
        if self.refit:
            t0 = time.perf_counter()
            best = clone(base).set_params(**self.best_params_)
            start = _refit_start(fold_functions.get(self.best_index_))
            self.best_estimator_ = best._fit(X_in, y_in, sample_weight, start=start)
            self.refit_time_ = time.perf_counter() - t0
            self.n_iter_ = int(self.best_estimator_.n_iter_)
        self.search_stats_["fit_seconds"] = time.perf_counter() - t_start
        return self

    def _search_group(self, est: NystroemSVC, ctx: "_SearchContext", cands: list[dict], stats):
        """All candidates sharing their non-(C, gamma, k) parameters: ``(confusions, fit times, score times)``."""
        X_rb = ctx.X_rb  # features are computed on these rows (fold-ordered for in-memory data)
        n, S = X_rb.n_rows, ctx.n_splits
        m = ctx.classes.size
        cms = np.zeros((len(cands), S, 2, m, m))
        funcs = {}  # row -> (landmarks, fold-mean landmark coefficients, fold-mean intercepts)
        fit_t = np.zeros((len(cands), S))
        score_t = np.zeros((len(cands), S))
        # Resolve gamma ("scale"/"auto") and clip k like NystroemSVC.fit does.
        gamma_of = {}
        plan: dict[Any, dict[int, list[tuple[float, int]]]] = defaultdict(lambda: defaultdict(list))
        for row, cand in enumerate(cands):
            g = cand.get("gamma", est.gamma)
            key = _hashable(g)
            if key not in gamma_of:
                probe = clone(est).set_params(gamma=g)
                probe._check_params()
                probe.n_features_in_ = self.n_features_in_
                gamma_of[key] = probe._resolve_gamma(X_rb)
            k = int(cand.get("n_components", est.n_components))
            if k > n:
                warnings.warn(f"n_components={k} is larger than the number of rows ({n}); using {n}",
                              UserWarning, stacklevel=3)
                k = n
            plan[key][k].append((float(cand.get("C", est.C)), row))
        class_w = est._class_weights(ctx.classes, ctx.codes)
        positives = [1] if m == 2 else list(range(m))
        dtype = np.dtype(est.dtype)
        rtol = default_eig_rtol(dtype) if est.eig_rtol is None else float(est.eig_rtol)
        k_max = max(k for ks in plan.values() for k in ks)
        n_pairs = sum(len(ks) for ks in plan.values())

        t0 = time.perf_counter()
        nested = est.landmarks == "uniform"
        landmarks = {}
        if nested:
            L_max = uniform_landmarks(ctx.X_orig, k_max, est.random_state).components
            if L_max.shape[0] < k_max:
                logger.info("search: %d distinct landmark rows for k_max=%d", L_max.shape[0], k_max)
        else:
            for k in sorted({k for ks in plan.values() for k in ks}):
                landmarks[k] = select_landmarks(ctx.X_orig, k, est.landmarks, est.random_state,
                                                est.kmeans_iter).components
        stats["landmark_seconds"] += time.perf_counter() - t0
        landmark_share = (time.perf_counter() - t0) / n_pairs

        for gkey, ks in plan.items():
            spec = make_kernel_spec(est.kernel, gamma_of[gkey], est.degree, est.coef0)
            if nested:
                t0 = time.perf_counter()
                with FeatureStore(X_rb, _KernelColumns(prepare_landmarks(L_max, spec, dtype)), est.feature_store,
                                  check_finite=not ctx.checked) as kstore:
                    K_LL = kernel_matrix(L_max, L_max, spec)
                    t_kernel = time.perf_counter() - t0
                    stats["kernel_seconds"] += t_kernel
                    stats["kernel_stores"] += 1
                    prev = None
                    for k, c_rows in sorted(ks.items()):
                        k_eff = min(k, L_max.shape[0])
                        t1 = time.perf_counter()
                        normalization, lam = nystroem_normalization(K_LL[:k_eff, :k_eff], rtol)
                        with FeatureStore(kstore.blocks, _Projection(normalization, dtype), est.feature_store,
                                          check_finite=False) as fstore:
                            t_feat = time.perf_counter() - t1
                            stats["feature_seconds"] += t_feat
                            stats["feature_stores"] += 1
                            shared = t_feat + t_kernel / len(ks) + landmark_share
                            start = None if prev is None else _map_to_larger_k(prev, normalization, lam, c_rows)
                            W, Cs = self._cv_pair(est, ctx, fstore.blocks, c_rows, class_w, positives, shared,
                                                  cms, fit_t, score_t, stats, f"[gamma={spec.gamma:g} k={k_eff}] ",
                                                  x_start=start)
                        prev = (normalization, W, Cs)
                        _record_functions(funcs, L_max[:k_eff], normalization, W, Cs, c_rows)
            else:
                from .nystroem import fit_feature_map

                for k, c_rows in sorted(ks.items()):
                    t1 = time.perf_counter()
                    fmap = fit_feature_map(landmarks[k], spec, dtype=dtype, eig_rtol=est.eig_rtol)
                    with FeatureStore(X_rb, fmap, est.feature_store, check_finite=not ctx.checked) as fstore:
                        t_feat = time.perf_counter() - t1
                        stats["feature_seconds"] += t_feat
                        stats["feature_stores"] += 1
                        W, Cs = self._cv_pair(est, ctx, fstore.blocks, c_rows, class_w, positives,
                                              t_feat + landmark_share, cms, fit_t, score_t, stats,
                                              f"[gamma={spec.gamma:g} k={k}] ")
                    _record_functions(funcs, landmarks[k], fmap.normalization, W, Cs, c_rows)
        return cms, fit_t, score_t, funcs

    def _cv_pair(self, est, ctx, F: RowBlocks, c_rows, class_w, positives, shared_seconds,
                 cms, fit_t, score_t, stats, label, x_start=None):
        """Every fold and every C of one (gamma, k) on its feature blocks ``F``: ``(W, Cs)``.

        The first fold runs the C path first, starting at the smallest C from
        ``x_start[0]`` (one row per problem; the solution of a smaller nested k,
        see :func:`_map_to_larger_k`) or from zero.  The other folds start from
        the first fold's solution at the smallest C; at every further C they
        continue their own path or, with the fold-block layout, restart from the
        first fold's solution for that C, whichever has the lower objective.
        """
        S = ctx.n_splits
        Cs = sorted({c for c, _ in c_rows})
        dim = n_columns(F) + 1
        hessian = est.hessian if est.hessian != "auto" else choose_hessian(F.n_rows, dim, F.is_distributed)
        W = np.zeros((S, len(Cs), len(positives), dim))
        seconds = np.zeros((S, len(Cs)))

        def run_split(s, starts):
            """Fold ``s``'s C path.  ``starts[ci] = (x per problem, opening)`` restarts the path at
            ``Cs[ci]`` from ``x``; ``opening[j] = (pass result at x[j] with its Gram matrix, pass result
            at 0 or None)`` spares the solver its opening passes."""
            x = [None] * len(positives)
            last = [None] * len(positives)  # (pass result at x[j] with Gram, C it belongs to)
            zeros = [None] * len(positives)  # (pass result at 0, C): per fold, linear in C
            local = defaultdict(float)
            for ci, C in enumerate(Cs):
                if ci in starts:
                    xs, opening = starts[ci]
                    x = [None if v is None else np.array(v) for v in xs]
                    last = [None] * len(positives)
                    if opening is not None:
                        last = [(o[0], C) for o in opening]
                        zeros = [(o[1], C) if o[1] is not None else z for o, z in zip(opening, zeros)]
                t0 = time.perf_counter()
                F_s, codes_s, w_s = ctx.training_rows(F, s)
                for j, pos in enumerate(positives):
                    if s > 0 and ci > 0 and ci not in starts and last[j] is not None and zeros[j] is not None:
                        # continue the C path or restart from the first fold's solution for this C,
                        # whichever starts with the lower objective (closer to the optimum: the
                        # objective is 1-strongly convex in w)
                        reg = np.r_[np.ones(dim - 1), 0.0]
                        ratio = C / last[j][1]
                        g_cont = np.linalg.norm(reg * x[j] + last[j][0].grad * ratio)
                        g_ref = np.linalg.norm(zeros[j][0].grad * (C / zeros[j][1]))
                        if g_cont > est.tol * g_ref:
                            alt = exchange_result(s, ci, j)
                            f_cont = 0.5 * float(x[j][:-1] @ x[j][:-1]) + last[j][0].loss * ratio
                            xa = W[0, ci, j]
                            if alt is not None and 0.5 * float(xa[:-1] @ xa[:-1]) + alt.loss < f_cont:
                                x[j], last[j] = np.array(xa), (alt, C)
                                local["restarts"] += 1
                    op = SquaredHingeOperator(F_s, codes_s, pos, C * class_w, w_s, est.fit_intercept)
                    if est.solver == "newton":
                        g, z = last[j], zeros[j]
                        op = _WarmOperator(op, start=None if g is None else (x[j], _scaled_pass(g[0], C / g[1])),
                                           zero=None if z is None else _scaled_pass(z[0], C / z[1]))
                    prefix = f"{label}[fold {s} C={C:g}{' class ' + str(j) if len(positives) > 1 else ''}] "
                    res = warm_solve(est, op, dim, hessian, x[j], prefix)
                    x[j] = res.x
                    if isinstance(op, _WarmOperator):
                        known = op.result_at(res.x)
                        last[j] = None if known is None or known.hess is None else (known, C)
                        if op.zero is not None:
                            zeros[j] = (op.zero, C)
                    local["n_solves"] += 1
                    local["newton_iter"] += res.n_iter
                    local["max_newton_iter"] = max(local["max_newton_iter"], res.n_iter)
                    local["solver_passes"] += res.n_passes
                    local["not_converged"] += not res.converged
                W[s, ci] = np.stack(x)
                seconds[s, ci] = time.perf_counter() - t0
                if s == 0:
                    first_results[ci] = list(last), list(zeros)
            return local

        first_results: dict[int, tuple] = {}
        exchange: dict = {}
        local_passes = [0]

        def exchange_result(s, ci, j):
            """Fold ``s``'s pass result (with Gram matrix) at the first fold's solution for ``Cs[ci]``, from
            the first fold's by exchanging the rows of the two held-out folds (fold-block layout): passes
            over those two folds' rows instead of one over all training rows.  ``None`` if not available."""
            if est.solver != "newton" or ctx.fold_blocks is None or ci not in first_results:
                return None
            last0 = first_results[ci][0][j]
            if last0 is None or (ci, j) not in exchange:
                return None
            x0 = W[0, ci, j]
            Fs, cs, ws = ctx.held_out_rows(F, s)
            minus = SquaredHingeOperator(Fs, cs, positives[j], Cs[ci] * class_w, ws, est.fit_intercept)
            local_passes[0] += 1
            return _combine_passes(_scaled_pass(last0[0], Cs[ci] / last0[1]), exchange[(ci, j)],
                                   minus.evaluate(x0, x0, (), "full"))

        zero_plus: dict = {}

        def zero_result(s, j):
            """Fold ``s``'s pass result at 0 for ``Cs[0]``, likewise from the first fold's."""
            z0 = first_results[0][1][j] if 0 in first_results else None
            if est.solver != "newton" or ctx.fold_blocks is None or z0 is None:
                return None
            zero = np.zeros(dim)
            cost = Cs[0] * class_w
            if j not in zero_plus:  # the first fold's held-out rows: the same for every other fold
                F0, c0, w0 = ctx.held_out_rows(F, 0)
                zero_plus[j] = SquaredHingeOperator(F0, c0, positives[j], cost, w0, est.fit_intercept).evaluate(zero, zero)
                local_passes[0] += 1
            Fs, cs, ws = ctx.held_out_rows(F, s)
            minus = SquaredHingeOperator(Fs, cs, positives[j], cost, ws, est.fit_intercept).evaluate(zero, zero)
            local_passes[0] += 1
            return _combine_passes(_scaled_pass(z0[0], Cs[0] / z0[1]), zero_plus[j], minus)

        t0 = time.perf_counter()
        parts = [run_split(0, {0: (list(x_start[0]) if x_start is not None else [None] * len(positives), None)})]
        if ctx.fold_blocks is not None and est.solver == "newton":
            # the first fold's held-out rows at its solutions: shared by every other fold's exchange
            for ci in first_results:
                for j, pos in enumerate(positives):
                    F0, c0, w0 = ctx.held_out_rows(F, 0)
                    x0 = W[0, ci, j]
                    op0 = SquaredHingeOperator(F0, c0, pos, Cs[ci] * class_w, w0, est.fit_intercept)
                    exchange[(ci, j)] = op0.evaluate(x0, x0, (), "full")
                    local_passes[0] += 1
        starts = {}
        for s in range(1, S):
            opening = [exchange_result(s, 0, j) for j in range(len(positives))]
            if any(o is None for o in opening):
                starts[s] = {0: (list(W[0, 0]), None)}
            else:
                starts[s] = {0: (list(W[0, 0]), [(o, zero_result(s, j)) for j, o in enumerate(opening)])}
        rest = range(1, S)
        if self.n_jobs is not None and self.n_jobs != 1 and len(rest) > 1:
            workers = len(rest) if self.n_jobs < 0 else min(int(self.n_jobs), len(rest))
            with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="dsvm-cv") as pool:
                parts += list(pool.map(lambda s: run_split(s, starts[s]), rest))
        else:
            parts += [run_split(s, starts[s]) for s in rest]
        stats["exchange_passes"] += local_passes[0]
        for p in parts:
            for key, v in p.items():
                if key.startswith("max_"):
                    stats[key] = max(stats[key], v)
                else:
                    stats[key] += v
        stats["solve_seconds"] += time.perf_counter() - t0

        t0 = time.perf_counter()
        cm = np.zeros((S, len(Cs), 2, ctx.classes.size, ctx.classes.size))
        for word, packed in enumerate(ctx.packed):
            ids = list(range(word * MAX_SPLITS_PER_WORD, min(S, (word + 1) * MAX_SPLITS_PER_WORD)))
            local = [s - word * MAX_SPLITS_PER_WORD for s in ids]
            cm[ids] = F.map_reduce(
                _cv_confusion_block, aligned=(ctx.codes, packed),
                shared=(W[ids], local, ctx.classes.size, bool(self.return_train_score)),
            )
        t_score = time.perf_counter() - t0
        stats["score_seconds"] += t_score
        c_index = {c: i for i, c in enumerate(Cs)}
        for C, row in c_rows:
            ci = c_index[C]
            cms[row] = cm[:, ci]
            fit_t[row] = seconds[:, ci] + shared_seconds / (S * len(Cs))
            score_t[row] = t_score / (S * len(Cs))
        logger.info("%s%d folds x %d C: solves %.2fs, scoring %.3fs", label, S, len(Cs), seconds.sum(), t_score)
        return W, Cs

    # ------------------------------------------------------------------ delegation
    def _check_refit(self):
        check_is_fitted(self)
        if not self.refit or not hasattr(self, "best_estimator_"):
            raise AttributeError("this NystroemSVCCV was fitted with refit=False; there is no best_estimator_")

    def decision_function(self, X):
        """``best_estimator_.decision_function(X)``."""
        self._check_refit()
        return self.best_estimator_.decision_function(X)

    def predict(self, X):
        """``best_estimator_.predict(X)``."""
        self._check_refit()
        return self.best_estimator_.predict(X)

    @available_if(_estimator_has("predict_proba"))
    def predict_proba(self, X):
        """``best_estimator_.predict_proba(X)`` (needs ``probability=True``)."""
        self._check_refit()
        return self.best_estimator_.predict_proba(X)

    @available_if(_estimator_has("predict_log_proba"))
    def predict_log_proba(self, X):
        """``best_estimator_.predict_log_proba(X)`` (needs ``probability=True``)."""
        self._check_refit()
        return self.best_estimator_.predict_log_proba(X)

    def score(self, X, y=None, sample_weight=None):
        """The search's ``scoring`` of ``best_estimator_`` on ``(X, y)`` (block-wise for dask input)."""
        self._check_refit()
        if sample_weight is not None or self._scoring == "accuracy":
            return self.best_estimator_.score(X, y, sample_weight=sample_weight)
        from .metrics import evaluate

        X, y = unpack_dataset(X, y)
        result = evaluate(self.best_estimator_, X, y)
        return score_from_confusion(np.asarray(result["confusion"]), self._scoring)

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.sparse = True
        return tags


def _landmark_coefs(w: np.ndarray, normalization: np.ndarray) -> np.ndarray:
    """``α = normalizationᵀ w``: feature-space weights (last axis) as the coefficients of the
    landmarks' kernel functions, ``Σ_i α_i K(·, l_i)``."""
    return w @ normalization


def _weights_from_landmark_coefs(alpha: np.ndarray, normalization: np.ndarray, lam: np.ndarray) -> np.ndarray:
    """Inverse of :func:`_landmark_coefs` for a map ``V Λ^{-1/2}`` over the same landmarks or a
    nested superset (``alpha`` then covers its first landmarks): ``w = Λ^{1/2} Vᵀ α``."""
    return (alpha @ normalization[:, : alpha.shape[-1]].T) * lam


def _map_to_larger_k(prev, normalization: np.ndarray, lam: np.ndarray, c_rows) -> np.ndarray:
    """Starting points for a larger k from the solutions of a smaller (nested) k.

    A solution ``w`` on the first ``k_s`` landmarks is the function
    ``Σ_i α_i K(·, l_i)`` with ``α = M_s w = normalization_sᵀ w`` (zero for the
    other landmarks), which the larger map ``M = V Λ^{-1/2}`` represents by
    ``w' = M⁺ α = Λ^{1/2} Vᵀ α = lam * (normalization @ α)`` — the same
    decision function and the same norm (up to the eigenvalue cut-off), so the
    larger problem starts where the smaller one ended.  Taken for the first
    fold, at the smaller k's C nearest to the first C.
    """
    norm_s, W_s, Cs_s = prev
    C0 = min(c for c, _ in c_rows)
    ci = int(np.argmin([abs(np.log(c) - np.log(C0)) for c in Cs_s]))
    w_small = W_s[:1, ci]  # (1, n_problems, r_s + 1): the first fold
    alpha = _landmark_coefs(w_small[..., :-1], norm_s)  # (1, P, k_s)
    w_big = _weights_from_landmark_coefs(alpha, normalization, lam)
    return np.concatenate([w_big, w_small[..., -1:]], axis=-1)


def _record_functions(funcs: dict, landmarks: np.ndarray, normalization: np.ndarray, W: np.ndarray, Cs, c_rows) -> None:
    """Per candidate row: the fold models' mean decision function as landmark coefficients.

    A fold solution ``w`` is ``Σ_i α_i K(·, l_i) + b`` with ``α = normalizationᵀ w``;
    the mean over folds of ``(α, b)`` is the refit's starting point (:func:`_refit_start`).
    """
    c_index = {c: i for i, c in enumerate(Cs)}
    for C, row in c_rows:
        w = W[:, c_index[C]].mean(axis=0)  # (problems, r + 1)
        funcs[row] = (landmarks, _landmark_coefs(w[:, :-1], normalization), w[:, -1].copy())


def _refit_start(function):
    """``start`` for the refit (see ``NystroemSVC._fit``): the fold models' mean function mapped
    into the refit's feature space, when the refit draws the same landmarks (same seed, nested
    uniform or the same k-means) — a few Newton iterations fewer than starting from zero."""
    if function is None:
        return None
    landmarks, alpha, intercept = function

    def start(fmap):
        if fmap.components.shape != landmarks.shape or not np.array_equal(fmap.components, landmarks):
            return None
        w = _weights_from_landmark_coefs(alpha, fmap.normalization, fmap.eigenvalues)
        return [np.r_[w[j], intercept[j]] for j in range(w.shape[0])]

    return start


class _SearchContext:
    """What every group of a search shares: rows, labels, fold roles and the training rows of each fold.

    In-memory data whose splits partition the rows (k-fold splitters) is
    reordered once, fold after fold, into blocks that never straddle two
    folds: the training rows of a fold are then the other folds' blocks —
    numpy views, no copy, no pass over held-out rows.  Otherwise (Dask
    arrays, or splits that overlap or leave rows out) a fold's training rows
    are all rows with the held-out ones weighted zero.
    """

    def __init__(self, X_rb, X_orig, checked, codes, classes, sample_weight, packed, n_splits,
                 fold_blocks=None, train_w=None):
        self.X_rb = X_rb
        self.X_orig = X_orig
        self.checked = checked
        self.codes = codes
        self.classes = classes
        self.sample_weight = sample_weight
        self.packed = packed
        self.n_splits = n_splits
        self.fold_blocks = fold_blocks
        self.train_w = train_w

    @classmethod
    def build(cls, X_rb, checked, codes, y_codes, classes, sw, splits, base):
        n, S = X_rb.n_rows, len(splits)
        tests = [np.asarray(test, dtype=np.int64) for _, test in splits]
        partition = (
            not X_rb.is_distributed
            and sum(t.size for t in tests) == n
            and all(np.asarray(train).size + t.size == n for (train, _), t in zip(splits, tests))
            and np.all(np.bincount(np.concatenate(tests), minlength=n) == 1)
        )
        if partition:
            order = np.concatenate(tests)
            X = X_rb.compute()[order]
            block_rows = max(X_rb.chunks)
            bounds, fold_blocks, start = [], [], 0
            for t in tests:
                first = len(bounds)
                for a in range(start, start + t.size, block_rows):
                    bounds.append((a, min(a + block_rows, start + t.size)))
                fold_blocks.append(set(range(first, len(bounds))))
                start += t.size
            X_fold = InMemoryBlocks([X[a:b] for a, b in bounds])
            codes_f = aligned_vector(y_codes[order].astype(np.int32), X_fold)
            sw_f = None if sw is None else aligned_vector(np.asarray(sw.compute(), dtype=np.float64)[order], X_fold)
            packed = [aligned_vector(p[order], X_fold) for p in _pack_roles(splits, n)]
            return cls(X_fold, X_rb, checked, codes_f, classes, sw_f, packed, S, fold_blocks=fold_blocks)
        packed = [aligned_vector(p, X_rb).persist() for p in _pack_roles(splits, n)]
        train_w = [
            packed[s // MAX_SPLITS_PER_WORD].map_blocks(
                _train_weight_block, None, np.float64, aligned=(sw,), shared=(s % MAX_SPLITS_PER_WORD,)
            ).persist()
            for s in range(S)
        ]
        return cls(X_rb, X_rb, checked, codes, classes, sw, packed, S, train_w=train_w)

    def held_out_rows(self, F: RowBlocks, s: int):
        """``(features, label codes, weights)`` of the rows fold ``s`` holds out (fold-block layout only)."""
        keep = sorted(self.fold_blocks[s])
        # A fold is often a single block: cut it into one view per thread so that the passes over
        # held-out rows (fold exchanges) use every core.  (Smaller blocks everywhere would slow
        # the training passes, whose per-block costs grow with the number of blocks.)
        parts = max(1, min((os.cpu_count() or 1) // len(keep),
                           sum(self.X_rb.chunks[i] for i in keep) // (FOLD_MIN_BLOCK_ROWS * len(keep))))

        def sub(rb):
            if rb is None:
                return None
            views = []
            for i in keep:
                b = rb.blocks[i]
                step = -(-b.shape[0] // parts)
                views += [b[a : a + step] for a in range(0, b.shape[0], step)]
            return InMemoryBlocks(views)

        return sub(F), sub(self.codes), sub(self.sample_weight)

    def training_rows(self, F: RowBlocks, s: int):
        """``(features, label codes, weights)`` of fold ``s``'s training problem."""
        if self.fold_blocks is None:
            return F, self.codes, self.train_w[s]
        keep = [i for i in range(F.n_blocks) if i not in self.fold_blocks[s]]

        def sub(rb):
            return None if rb is None else InMemoryBlocks([rb.blocks[i] for i in keep])

        return sub(F), sub(self.codes), sub(self.sample_weight)


def _pack_roles(splits, n: int) -> list[np.ndarray]:
    """Per row and split: 0 unused, 1 train, 2 test — two bits per split, 32 splits per uint64."""
    words = []
    for start in range(0, len(splits), MAX_SPLITS_PER_WORD):
        packed = np.zeros(n, dtype=np.uint64)
        for s, (train, test) in enumerate(splits[start : start + MAX_SPLITS_PER_WORD]):
            shift = np.uint64(2 * s)
            packed[np.asarray(train)] |= np.uint64(1) << shift
            packed[np.asarray(test)] |= np.uint64(2) << shift
        words.append(packed)
    return words


def _hashable(v):
    if isinstance(v, dict):
        return ("__dict__", tuple(sorted((k, _hashable(x)) for k, x in v.items())))
    if isinstance(v, list):
        return tuple(_hashable(x) for x in v)
    return v


def _format_results(candidates, test, train, fit_times, score_times) -> dict:
    """``cv_results_`` in scikit-learn's layout."""
    n_cand, S = test.shape
    res: dict[str, Any] = {}

    def add(name, values, rank=False):
        for s in range(S):
            res[f"split{s}_{name}"] = values[:, s]
        means = values.mean(axis=1)
        res[f"mean_{name}"] = means
        res[f"std_{name}"] = values.std(axis=1)
        if rank:
            if np.isnan(means).all():
                res[f"rank_{name}"] = np.ones(n_cand, dtype=np.int32)
            else:
                filled = np.where(np.isnan(means), np.nanmin(means) - 1, means)
                res[f"rank_{name}"] = rankdata(-filled, method="min").astype(np.int32)

    for name, values in (("fit_time", fit_times), ("score_time", score_times)):
        res[f"mean_{name}"] = values.mean(axis=1)
        res[f"std_{name}"] = values.std(axis=1)
    keys = sorted({k for c in candidates for k in c})
    for key in keys:
        col = np.ma.MaskedArray(np.empty(n_cand, dtype=object), mask=True)
        for i, c in enumerate(candidates):
            if key in c:
                col[i] = c[key]
        res[f"param_{key}"] = col
    res["params"] = candidates
    add("test_score", test, rank=True)
    if train is not None:
        add("train_score", train)
    return res


# ---------------------------------------------------------------------------
# CLI / pipeline helpers


ALIASES = {"k": "n_components", "c": "C", "g": "gamma"}


def _parse_value(key: str, text: str):
    t = text.strip()
    low = t.lower()
    if low in ("none", "null"):
        return None
    if low in ("true", "false"):
        return low == "true"
    if key == "n_components" or key in ("degree", "max_iter", "kmeans_iter", "block_rows"):
        try:
            value = float(t)
        except ValueError:
            raise ValueError(f"--search {key}: {t!r} is not an integer") from None
        if not value.is_integer():
            raise ValueError(f"--search {key}: {t!r} is not an integer")
        return int(value)
    try:
        return float(t)
    except ValueError:
        pass
    if key in ("C", "tol", "coef0"):
        raise ValueError(f"--search {key}: {t!r} is not a number")
    return t


def parse_search_args(items) -> dict[str, list]:
    """``["C=1,10,100", "gamma=0.01,0.05", "k=500,1000"]`` → a ``param_grid``.

    ``k`` is ``n_components``; values are comma-separated; ``gamma`` takes
    numbers or ``scale`` / ``auto``; ``none``, ``true``, ``false`` are parsed;
    any other NystroemSVC parameter may be named (e.g. ``class_weight=none,balanced``).
    A single string is split at whitespace.

    Raises
    ------
    ValueError
        Naming the offending item, for an unknown parameter, a malformed item
        or a value of the wrong type.
    """
    if isinstance(items, str):
        items = items.split()
    allowed = set(NystroemSVC._get_param_names())
    grid: dict[str, list] = {}
    for item in items:
        if "=" not in item:
            raise ValueError(f"--search item {item!r} is not NAME=V1,V2,... (e.g. C=1,10,100)")
        name, _, values = item.partition("=")
        name = name.strip()
        key = ALIASES.get(name, name)
        if key not in allowed:
            raise ValueError(f"--search {name!r} is not a NystroemSVC parameter; valid: k, {', '.join(sorted(allowed))}")
        parts = [v for v in values.split(",") if v.strip()]
        if not parts:
            raise ValueError(f"--search {name}: no values given")
        parsed = [_parse_value(key, v) for v in parts]
        if key == "C" and any(v is None or v <= 0 for v in parsed):
            raise ValueError(f"--search C: values must be positive, got {values!r}")
        if key == "n_components" and any(v is None or v < 1 for v in parsed):
            raise ValueError(f"--search k: values must be positive integers, got {values!r}")
        if key in grid:
            raise ValueError(f"--search names {key!r} twice")
        grid[key] = list(dict.fromkeys(parsed))
    if not grid:
        raise ValueError("--search needs at least one NAME=V1,V2,... item")
    return grid


def search_and_report(X, y=None, *, param_grid, out_dir, cv=5, scoring="accuracy", prefix="cv",
                      sample_weight=None, **params):
    """Fit a :class:`NystroemSVCCV` and write its report: ``(fitted search, {kind: path})``.

    The entry point for ``dsvm train DATA --search C=1,10 gamma=0.01,0.05 k=500,1000 --cv 5``
    and for a pipeline's search step: ``param_grid`` from :func:`parse_search_args`
    (or a dict from YAML), ``params`` the NystroemSVC parameters of the command
    line / the pipeline's ``model.params`` (those in the grid are searched);
    ``X`` may be a :class:`dsvm.io.Dataset`.  The refitted model is
    ``search.best_estimator_`` (save it with :func:`dsvm.save_model`).
    """
    params = {k: v for k, v in params.items() if k not in param_grid}
    search = NystroemSVCCV(param_grid, cv=cv, scoring=scoring, refit=True, **params)
    search.fit(X, y, sample_weight=sample_weight)
    paths = write_cv_report(search, out_dir, prefix=prefix)
    logger.info("search: best %s (%s %.5f); report in %s", search.best_params_, search._scoring,
                search.best_score_, out_dir)
    return search, paths


def cv_table(search) -> list[dict]:
    """The rows of ``search.cv_results_`` (any scikit-learn search) as plain dicts, by rank."""
    r = search.cv_results_
    n_splits = sum(1 for key in r if key.startswith("split") and key.endswith("_test_score"))
    rows = []
    for i, params in enumerate(r["params"]):
        row = {"rank": int(r["rank_test_score"][i])}
        row.update({k: _plain(v) for k, v in params.items()})
        row["mean_test_score"] = float(r["mean_test_score"][i])
        row["std_test_score"] = float(r["std_test_score"][i])
        for s in range(n_splits):
            row[f"split{s}_test_score"] = float(r[f"split{s}_test_score"][i])
        if "mean_train_score" in r:
            row["mean_train_score"] = float(r["mean_train_score"][i])
        row["mean_fit_time"] = float(r["mean_fit_time"][i])
        row["mean_score_time"] = float(r["mean_score_time"][i])
        rows.append(row)
    rows.sort(key=lambda row: (row["rank"], -row["mean_test_score"]))
    return rows


def _plain(v):
    if isinstance(v, np.generic):
        return v.item()
    if isinstance(v, (str, int, float, bool)) or v is None:
        return v
    return str(v)


def _fmt(v) -> str:
    if isinstance(v, float):
        return f"{v:.5g}"
    return str(v)


def write_cv_report(search, out_dir, prefix: str = "cv") -> dict[str, Path]:
    """Write the CV table (Markdown, CSV, JSON) and a heat map; return ``{kind: path}``.

    Works for :class:`NystroemSVCCV` and for scikit-learn's ``GridSearchCV``
    over :class:`~dsvm.NystroemSVC`.  Files: ``<prefix>_results.md``,
    ``.csv``, ``.json`` and ``<prefix>_heatmap.png`` — mean test score over
    ``C`` (rows) x ``gamma`` (columns) at the best values of the other
    parameters (``n_components`` …).  Without matplotlib the plot is skipped
    with a warning.
    """
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    rows = cv_table(search)
    columns = list(dict.fromkeys(k for row in rows for k in row))
    paths: dict[str, Path] = {}

    p = out / f"{prefix}_results.csv"
    with open(p, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=columns)
        w.writeheader()
        for row in rows:
            w.writerow({k: row.get(k, "") for k in columns})
    paths["csv"] = p

    scoring = getattr(search, "scoring", None) or "accuracy"
    best = {k: _plain(v) for k, v in search.best_params_.items()}
    p = out / f"{prefix}_results.json"
    p.write_text(json.dumps({
        "scoring": scoring, "best_params": best, "best_score": float(search.best_score_),
        "n_splits": int(getattr(search, "n_splits_", 0)), "refit_time": getattr(search, "refit_time_", None),
        "search_stats": {k: v for k, v in getattr(search, "search_stats_", {}).items()},
        "results": rows,
    }, indent=2, default=_plain))
    paths["json"] = p

    shown = [c for c in columns if not c.startswith("split") and c != "mean_score_time"]
    lines = [
        f"# Cross-validation ({scoring}, {getattr(search, 'n_splits_', '?')} folds)",
        "",
        f"Best: {', '.join(f'{k}={_fmt(v)}' for k, v in best.items())} — {scoring} {search.best_score_:.5f}",
        "",
        "| " + " | ".join(shown) + " |",
        "|" + "---|" * len(shown),
    ]
    lines += ["| " + " | ".join(_fmt(row.get(c, "")) for c in shown) + " |" for row in rows]
    p = out / f"{prefix}_results.md"
    p.write_text("\n".join(lines) + "\n")
    paths["markdown"] = p

    png = _plot_heatmap(search, out / f"{prefix}_heatmap.png", scoring)
    if png is not None:
        paths["heatmap"] = png
    return paths


def _plot_heatmap(search, path: Path, scoring: str) -> Path | None:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        warnings.warn("matplotlib is not installed; skipping the CV heat map (pip install matplotlib)",
                      UserWarning, stacklevel=3)
        return None
    r = search.cv_results_
    best = search.best_params_
    # Candidates that agree with the best on everything but C and gamma.
    fixed = {k: v for k, v in best.items() if k not in ("C", "gamma")}
    sel = [i for i, p in enumerate(r["params"]) if all(_hashable(p.get(k)) == _hashable(v) for k, v in fixed.items())]
    Cs = sorted({r["params"][i].get("C") for i in sel}, key=_sort_key)
    gammas = sorted({_hashable(r["params"][i].get("gamma")) for i in sel}, key=_sort_key)
    M = np.full((len(Cs), len(gammas)), np.nan)
    for i in sel:
        p = r["params"][i]
        M[Cs.index(p.get("C")), gammas.index(_hashable(p.get("gamma")))] = r["mean_test_score"][i]
    fig, ax = plt.subplots(figsize=(1.6 + 1.3 * len(gammas), 1.2 + 0.8 * len(Cs)))
    im = ax.imshow(M, cmap="viridis", aspect="auto")
    ax.set_xticks(range(len(gammas)), [_fmt(g) for g in gammas])
    ax.set_yticks(range(len(Cs)), [_fmt(c) for c in Cs])
    ax.set_xlabel("gamma")
    ax.set_ylabel("C")
    title = ", ".join(f"{k}={_fmt(v)}" for k, v in fixed.items())
    ax.set_title(f"mean CV {scoring}" + (f" ({title})" if title else ""), fontsize=9)
    finite = M[np.isfinite(M)]
    mid = (finite.min() + finite.max()) / 2 if finite.size else 0
    for a in range(M.shape[0]):
        for b in range(M.shape[1]):
            if np.isfinite(M[a, b]):
                is_best = Cs[a] == best.get("C") and gammas[b] == _hashable(best.get("gamma"))
                ax.text(b, a, f"{M[a, b]:.4f}" + ("*" if is_best else ""), ha="center", va="center", fontsize=8,
                        color="black" if M[a, b] > mid else "white", fontweight="bold" if is_best else "normal")
    fig.colorbar(im, ax=ax)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def _sort_key(v):
    return (0, float(v), "") if isinstance(v, (int, float)) and v is not None else (1, 0.0, str(v))


__all__ = ["NystroemSVCCV", "parse_search_args", "search_and_report", "write_cv_report", "cv_table",
           "score_from_confusion", "SCORINGS"]
