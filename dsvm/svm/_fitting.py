"""Fitting a Nystroem estimator: landmarks, the Nyström map, the feature stage, one solve per problem.

:func:`fit_problems` is the fit both estimators run; :func:`solve_with` maps
an estimator's parameters onto :func:`dsvm.solvers.solve` (also for
calibration folds and the CV search's fold models).
"""

from __future__ import annotations

import dataclasses
import logging
import time
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from sklearn.exceptions import ConvergenceWarning

from .. import config
from ..approx import (
    Landmarks,
    check_dense_landmarks,
    clip_n_components,
    default_eig_rtol,
    dense_rows,
    first_unique,
    fit_feature_map,
    gamma_for,
    make_kernel_spec,
    select_landmarks,
    warn_if_few_distinct,
)
from ..blocks import RowBlocks, cluster_memory, row_index_blocks
from ..checks import resolve_seed
from ..problems import FeatureStore, active_row_sample, plan_feature_store
from ..progress import stage
from ..solvers import REGISTRY, SolverResult, Start, pegasos_progress, resolve_hessian, solve
from ._base import WARM_START_OPTIONS, plain_label, problem_log_prefix
from ._checkpoint import open_checkpoint, restore_done, restore_feature_map, restore_solver_state
from ._opening import Opening, column_opening, column_opening_size, opening_size, subsample_opening

logger = logging.getLogger(__name__)

__all__ = ["fit_problems", "solve_with", "warn_if_not_converged", "problem_stats"]


def solve_with(est, op, dim: int, hessian: str, *, start: Start | None = None, label: str = "") -> SolverResult:
    """Solve one problem with the estimator's solver, tolerance, iteration limit, ``solver_options`` and seed.

    ``start`` (:class:`dsvm.solvers.Start`) is where the solve begins: a starting point, a checkpoint to resume,
    and the opening passes at ``x0`` made with the features (:mod:`dsvm.svm._opening`); default: from zero.
    """
    spec = REGISTRY[est.solver]
    options = {k: v for k, v in (est.solver_options or {}).items() if k not in WARM_START_OPTIONS}
    # resolving the seed of a RandomState draws from it: only for the solvers that use one
    seed = resolve_seed(est.random_state) if spec.seeded else None
    return solve(est.solver, op, dim, tol=est.tol, max_iter=est.max_iter, hessian=hessian, start=start, C=est.C,
                 random_state=seed, label=label, options=options)


def warn_if_not_converged(res, tol: float, label: str = "") -> None:
    """A ``ConvergenceWarning`` saying why a solver stopped early and what to do."""
    if res.converged:
        return
    if res.method == "dcd":
        warnings.warn(f"{label}LIBLINEAR's DCD reached its iteration limit at a relative duality gap of "
                      f"{res.duality_gap:.2e}; increase max_iter", ConvergenceWarning, stacklevel=4)
        return
    if res.method == "pegasos":
        objs = [h["objective"] for h in res.history]
        warnings.warn(
            f"{label}pegasos used its budget of {len(objs)} epochs while the hinge objective still changed by "
            f"{pegasos_progress(objs):.1e} per epoch (relative); raise solver_options['epochs'] or use solver='newton'",
            ConvergenceWarning, stacklevel=4,
        )
        return
    hints = {"precision": "; float32 features limit the attainable accuracy, use dtype='float64'",
             "time_budget": "; it used its time_budget, raise it"}
    hint = hints.get(res.stop_reason, "; increase max_iter")
    warnings.warn(
        f"{label}{res.method} solver stopped ({res.stop_reason}) after {res.n_iter} iterations with "
        f"|g|/|g0| = {res.grad_norm / res.grad_norm0:.2e} > tol = {tol:g} (relative duality gap "
        f"{res.duality_gap:.2e}){hint}",
        ConvergenceWarning,
        stacklevel=4,
    )


def problem_stats(res, label, op=None) -> dict:
    """What ``solver_stats_["problems"]`` records of one solve.

    ``train_positive``: ``[rows of positive cost, those predicted positive]`` at the solution, as the
    solver's last pass over ``op`` counted them (no pass of its own); None where no pass was made there.
    """
    counted = getattr(op, "predicted_positive", None)
    counted = counted(res.x) if counted is not None else None
    return {
        "class": plain_label(label),
        "method": res.method,
        "n_iter": res.n_iter,
        "n_passes": res.n_passes,
        "seconds": res.seconds,
        "converged": res.converged,
        "stop_reason": res.stop_reason,
        "grad_norm_rel": res.grad_norm / res.grad_norm0,
        "duality_gap": res.duality_gap,
        "train_positive": None if counted is None else [int(counted[0]), int(counted[1])],
        "history": res.history,
    }


def _feature_map(est, X_rb: RowBlocks, stage1=None):
    """gamma, landmarks and the Nyström map: ``(fmap, landmarks, gamma, timing)``.

    ``stage1(spec, k)`` selects the landmarks of ``landmarks="active"``.
    """
    # a fit on the user's columns as they are: say so when their scales are orders of magnitude apart
    with stage("column statistics"):
        gamma = gamma_for(est.gamma, X_rb, est.n_features_in_, warn_scales=getattr(est, "scale", None) is None,
                          stacklevel=6)
    spec = make_kernel_spec(est.kernel, gamma, est.degree, est.coef0)
    k = clip_n_components(int(est.n_components), X_rb.n_rows, stacklevel=5)
    t0 = time.perf_counter()
    with stage(f"landmarks ({est.landmarks}, k={k})"):
        if est.landmarks == "active":
            lm = stage1(spec, k)
        else:
            rtol = default_eig_rtol(est.dtype) if est.eig_rtol is None else float(est.eig_rtol)
            lm = select_landmarks(X_rb, k, est.landmarks, est.random_state, est.kmeans_iter, spec=spec, rtol=rtol)
    t_select = time.perf_counter() - t0
    fmap = fit_feature_map(lm.components, spec, dtype=np.dtype(est.dtype), eig_rtol=est.eig_rtol,
                           method=lm.feature_map)
    # landmark_seconds: choosing the landmarks and building their Nyström map
    timing = {"landmark_seconds": time.perf_counter() - t0, "landmark_select_seconds": t_select,
              "landmark_passes": lm.n_passes}
    return fmap, lm, gamma, timing


@dataclass
class FitResult:
    """What a Nystroem fit learnt; :meth:`attributes` are the estimator's fitted attributes, which the
    estimator sets in one place (``dsvm.svm._base.set_fitted``)."""

    feature_map: Any
    gamma: float
    component_indices: np.ndarray
    coef: np.ndarray
    intercept: np.ndarray
    objective: float | np.ndarray
    n_iter: int
    solver_stats: dict
    duality_gap: float | np.ndarray = float("nan")
    k_path: list[dict] | None = None  # n_components="auto": the fits that chose k (dsvm.svm._auto_k)

    def attributes(self) -> dict[str, Any]:
        return {"feature_map_": self.feature_map, "gamma_": self.gamma, "components_": self.feature_map.components,
                "component_indices_": self.component_indices, "normalization_": self.feature_map.normalization,
                "coef_": self.coef, "intercept_": self.intercept, "objective_": self.objective,
                "duality_gap_": self.duality_gap, "n_iter_": self.n_iter, "solver_stats_": self.solver_stats,
                "n_components_": self.feature_map.n_components, "k_path_": self.k_path}


@dataclass
class _Begun:
    """Where a fit begins: its Nyström map, and the problems already solved when it resumes a checkpoint."""

    fmap: Any
    lm_indices: np.ndarray
    gamma: float
    timing: dict
    done: list
    resume: dict | None = None
    first: int = 0


def _begin(est, X_rb, checked, aligned, labels, make_operator, state, feature_map_of=None) -> _Begun:
    """The Nyström map from the checkpoint's ``state`` (resuming), from an earlier fit's result
    ``feature_map_of`` (its landmarks, gamma and map), or from new landmarks."""
    if feature_map_of is not None and state is None:
        timing = {"landmark_seconds": 0.0, "landmark_select_seconds": 0.0, "landmark_passes": 0}
        r = feature_map_of
        return _Begun(r.feature_map, r.component_indices, r.gamma, timing, [])
    if state is not None:
        fmap, lm_indices, gamma = restore_feature_map(state)
        timing = {"landmark_seconds": 0.0, "landmark_select_seconds": 0.0, "landmark_passes": 0}
        return _Begun(fmap, lm_indices, gamma, timing, restore_done(state), restore_solver_state(state),
                      int(state["meta"]["problem"]))
    fmap, lm, gamma, timing = _feature_map(
        est, X_rb, lambda spec, k: _active_landmarks(est, X_rb, checked, aligned, len(labels), make_operator, spec, k)
    )
    indices = lm.indices if lm.indices is None or fmap.kept is None else np.asarray(lm.indices)[fmap.kept]
    return _Begun(fmap, indices, gamma, timing, [])


def fit_problems(
    est,
    X_rb: RowBlocks,
    checked: bool,
    aligned: Sequence[RowBlocks | None],
    labels: Sequence,
    make_operator: Callable,
    t_start: float,
    prepare_problem: Callable | None = None,
    start: Callable | None = None,
    feature_map_of: FitResult | None = None,
    then: Callable | None = None,
) -> FitResult:
    """The feature stage, then one solve per problem: what the fit learnt, for the estimator to set.

    ``make_operator(feature_blocks, aligned, j)`` returns the operator of
    problem ``j``; ``labels[j]`` names it in logs and ``solver_stats_``.
    ``prepare_problem(feature_blocks, aligned, j, hessian, label)``, if given,
    runs on the final features before problem ``j`` is solved (Platt
    calibration), with the fit's Newton system method and log prefix.
    ``start(feature_map)``, if given, returns a starting point per problem
    (or None); ignored when resuming from a checkpoint.  ``feature_map_of``, an
    earlier fit's result on the same rows, gives the landmarks, gamma and map
    (no landmark stage).  ``then(result, solve_again)``, if given, runs while
    the features are still kept and returns the fit's result: ``result``, or
    ``solve_again(est, aligned, start, prepare_problem)`` — the problems solved
    once more on the same features (other row weights, say), as this fit would.
    """
    ckpt, state = open_checkpoint(est, X_rb, aligned[0], aligned[1])
    begun = _begin(est, X_rb, checked, aligned, labels, make_operator, state, feature_map_of)
    fmap, r = begun.fmap, begun.fmap.n_output
    starts = start(fmap) if start is not None and state is None else None
    plan = plan_feature_store(est.feature_store, X_rb, r, fmap.n_components, np.dtype(fmap.dtype).itemsize)
    newton_from_zero = est.solver == "newton" and starts is None and state is None
    columns = _columns_to_open(est, X_rb, fmap, plan[0]) if newton_from_zero else None
    opens = newton_from_zero and columns is None and opening_size(
        X_rb.n_rows, X_rb.n_cols, fmap.n_components, r, est.solver_options or {}) is not None
    hessian = _newton_system(est, X_rb, fmap, plan[0], opens)
    # solves that start elsewhere (Platt's folds, a solve again, a resume) have no subsample to precondition CG
    unopened = _newton_system(est, X_rb, fmap, plan[0], False)
    if state is not None:
        hessian = unopened  # the interrupted problem itself resumes with its checkpoint's (_problem_hessian)
    if prepare_problem is not None and unopened != hessian:
        prepare_problem = _with_hessian(prepare_problem, unopened)
    opening = None
    if X_rb.is_distributed:
        X_rb, aligned = _persist_for_passes(X_rb, aligned, plan[0])
    if newton_from_zero and columns is None:
        with stage("opening (a fit on a subsample)"):
            opening = _opening(est, X_rb, aligned, fmap, hessian, make_operator, labels, checked, plan[0])
        if opening is not None:
            begun.timing["opening"] = opening.stats
    t0 = time.perf_counter()
    with stage(f"features (n={X_rb.n_rows}, r={r})"):
        store = FeatureStore(X_rb, fmap, est.feature_store, check_finite=not checked,
                             reduction=None if opening is None else opening.reduction, plan=plan)
    with store:
        begun.timing["feature_seconds"] = time.perf_counter() - t0
        opened = None if opening is None else opening.starts(store.reduction_result)
        if columns is not None:
            starts = _column_starts(est, store, aligned, make_operator, labels, begun, columns, t_start)
        problem_starts = [_problem_start(j, starts, opening, opened, begun) for j in range(len(labels))]
        if getattr(est, "time_budget", None) is not None:
            problem_starts = _within_budget(problem_starts, est.time_budget, t_start)
        if opened is not None:
            begun.timing["opening"] = dict(opening.stats, first_gram_rows=[initial.n_active for initial, _ in opened])
        opening = None  # its Hessian estimates now live in problem_starts only (each dropped once used)
        done = _solve_problems(est, store.features, aligned, labels, make_operator, hessian, prepare_problem,
                               problem_starts, begun, ckpt)
        if ckpt is not None:
            ckpt.complete()
        result = _fit_result(begun, done, labels, X_rb.n_rows, hessian, store.kind, t_start)
        if then is not None:
            result = then(result, _solver_again(store, begun, labels, make_operator, unopened))
    return result


def _columns_to_open(est, X_rb: RowBlocks, fmap, kind: str) -> int | None:
    """Columns of the opening from the leading columns, or None (:func:`~dsvm.svm._opening.column_opening_size`);
    the full solve then opens from no subsample, so its Newton variant is the unopened one."""
    return column_opening_size(X_rb.n_rows, fmap.n_output, est.solver_options or {}, kind, X_rb.is_distributed,
                               gram=_newton_system(est, X_rb, fmap, kind, False) == "gram", triangular=fmap.triangular)


def _column_starts(est, store, aligned, make_operator, labels, begun: _Begun, r0: int,
                   t_start: float) -> list[np.ndarray]:
    """Per problem, the column opening's start on the first ``r0`` feature columns
    (:func:`~dsvm.svm._opening.column_opening`); its stats go to ``begun.timing["opening"]``."""
    deadline = None if getattr(est, "time_budget", None) is None else t_start + est.time_budget
    with stage(f"opening (the first {r0} feature columns)"):
        xs, begun.timing["opening"] = column_opening(est, store, aligned, make_operator, labels, r0, deadline)
    return xs


def _solver_again(store, begun: _Begun, labels, make_operator, hessian: str) -> Callable:
    """``solve_again(est, aligned, start, prepare_problem)``: the fit's problems solved again on its kept
    features, from ``start(feature_map)``, within the estimator's ``time_budget`` (no checkpoint)."""
    def solve_again(est, aligned, start, prepare_problem=None) -> FitResult:
        t_start = time.perf_counter()
        timing = {"landmark_seconds": 0.0, "landmark_select_seconds": 0.0, "landmark_passes": 0,
                  "feature_seconds": 0.0}
        again = _Begun(begun.fmap, begun.lm_indices, begun.gamma, timing, [])
        starts = start(begun.fmap)
        deadline = None if getattr(est, "time_budget", None) is None else t_start + est.time_budget
        problem_starts = [Start(x0=None if starts is None else starts[j], deadline=deadline)
                          for j in range(len(labels))]
        done = _solve_problems(est, store.features, aligned, labels, make_operator, hessian, prepare_problem,
                               problem_starts, again, None)
        return _fit_result(again, done, labels, store.features.n_rows, hessian, store.kind, t_start)

    return solve_again


def _persist_for_passes(X_rb: RowBlocks, aligned, kind: str):
    """``(X, aligned)`` as the fit's passes read them: the aligned arrays kept in cluster memory (unless every
    pass recomputes F, reading them with X anyway), and for implicit features X too where it takes at most
    half of ``dsvm.memory-fraction`` (every pass reads it)."""
    if kind == "recompute":
        return X_rb, aligned
    if kind == "implicit":
        x_bytes = float(X_rb.n_rows) * X_rb.n_cols * 8  # float64 at most per cell (sparse: taken as dense)
        if x_bytes <= 0.5 * config.get("memory-fraction") * cluster_memory()[0]:
            X_rb = X_rb.persist()
    return X_rb, [a.persist() if a is not None else None for a in aligned]


#: from this many landmarks ``"auto"`` takes preconditioned CG over implicit features; below it the Gram
#: matrix costs fewer passes (the performance page's design measurements)
CG_MIN_ORDER = 1000


def _newton_system(est, X_rb: RowBlocks, fmap, kind: str, opens: bool) -> str:
    """How Newton's systems are solved: ``est.hessian``, or for ``"auto"`` the cost model's choice.

    Over implicit features a solve that opens from a subsample (``opens``) with at least
    :data:`CG_MIN_ORDER` landmarks runs preconditioned CG (its passes are Hessian products, the subsample's
    Gram matrix preconditions them: :mod:`dsvm.svm._opening`): the full Gram matrix would be summed in
    float64 over the active rows (``n_A k²`` flops) and projected by ``M`` (``4 k³``) at every refresh.
    The store the cost model plans may differ on another cluster, so a resumed problem takes its
    checkpoint's variant (:func:`_problem_hessian`).
    """
    if est.hessian == "auto" and kind == "implicit" and opens and fmap.n_components >= CG_MIN_ORDER:
        return "cg"
    # implicit features sum (k+1)² Gram matrices in float64: the "auto" choice weighs that size
    gram_order = fmap.n_components + 1 if kind == "implicit" else fmap.n_output + 1
    return resolve_hessian(est.hessian, X_rb.n_rows, gram_order, X_rb.is_distributed)


def _problem_hessian(begun: _Begun, j: int, hessian: str) -> str:
    """Problem ``j``'s Newton variant: the one its checkpoint was made with when it resumes (``"auto"`` may
    choose otherwise on another machine), else ``hessian``."""
    saved = None if begun.resume is None or j != begun.first else begun.resume.get("hessian")
    return saved if saved in ("gram", "cg") else hessian


def _with_hessian(prepare_problem: Callable, hessian: str) -> Callable:
    """``prepare_problem`` run with the Newton variant ``hessian`` whatever the fit's."""
    def prepare(features, aligned, j, _fits_hessian, label):
        return prepare_problem(features, aligned, j, hessian, label)

    return prepare


def _problem_start(j, starts, opening, opened, begun: _Begun) -> Start:
    """Problem ``j``'s start: the checkpoint's state, the subsample opening, or the caller's point (or zero)."""
    if opened is not None:
        initial, g_ref = opened[j]
        estimate = opening.hessian_estimates[j] if opening.hessian_estimates else None
        return Start(x0=opening.xs[j], initial=initial, g_ref=g_ref, hessian_estimate=estimate)
    return Start(x0=None if starts is None else starts[j], resume=begun.resume if j == begun.first else None)


def _solve_problems(est, features, aligned, labels, make_operator, hessian, prepare_problem, problem_starts,
                    begun: _Begun, ckpt) -> list[dict]:
    """Solve every problem not yet done (saving a checkpoint after each iteration and problem, if asked).

    ``problem_starts`` is consumed: each entry is dropped once its solve has it (a Hessian estimate that
    preconditions CG is ``(k+1)²`` numbers per problem).
    """
    done = list(begun.done)
    r = begun.fmap.n_output
    for j, label in enumerate(labels):
        prefix = problem_log_prefix(labels, j)
        if prepare_problem is not None:
            with stage(f"{prefix}calibration"):
                prepare_problem(features, aligned, j, hessian, prefix)
        if j < len(done):  # solved before the interruption
            continue
        op = make_operator(features, aligned, j)
        on_state = None
        if ckpt is not None:
            def on_state(st, j=j, done=done):
                ckpt.save(begun.fmap, begun.lm_indices, begun.gamma, done, j, st)
        with stage(f"{prefix}{est.solver} solve"):
            start = dataclasses.replace(problem_starts[j], on_state=on_state,
                                        deadline=_share_of(problem_starts[j].deadline, len(labels) - j))
            problem_starts[j] = None  # consumed: a Hessian estimate is (k+1)² numbers
            res = solve_with(est, op, r + 1, _problem_hessian(begun, j, hessian), start=start, label=prefix)
        warn_if_not_converged(res, est.tol, prefix)
        done.append({"x": res.x, "objective": res.objective, "n_iter": res.n_iter,
                     "stats": {k: v for k, v in problem_stats(res, label, op).items() if k != "class"}})
        if ckpt is not None:
            ckpt.save(begun.fmap, begun.lm_indices, begun.gamma, done, j + 1, None)
    return done


def _within_budget(problem_starts: list[Start], budget: float, t_start: float) -> list[Start]:
    """The starts with the fit's deadline; a warning when the stages before the solve have already spent the
    budget (they are not cut short: the fit ends after it, from the starting points)."""
    spent = time.perf_counter() - t_start
    if spent >= budget:
        logger.warning("time_budget=%gs was spent before the solve began (%.1fs: landmarks, opening, features); "
                       "the solve makes no iteration and the model is where it starts: raise time_budget or lower "
                       "n_components", budget, spent)
    return [dataclasses.replace(st, deadline=t_start + budget) for st in problem_starts]


def _share_of(deadline: float | None, problems_left: int) -> float | None:
    """A problem's own deadline: an equal share of the time left before ``deadline`` among the problems left
    (what one leaves unused passes to the next), so no later class of one-vs-rest is left with none."""
    if deadline is None:
        return None
    now = time.perf_counter()
    return now + max(deadline - now, 0.0) / problems_left


def _fit_result(begun: _Begun, done, labels, n_rows: int, hessian: str, kind: str, t_start: float) -> FitResult:
    """The fit's coefficients, objectives and ``solver_stats_`` from the problems' results."""
    fmap, timing = begun.fmap, begun.timing
    coef = np.array([d["x"][:-1] for d in done])
    intercept = np.array([d["x"][-1] for d in done], dtype=np.float64)
    objectives = [d["objective"] for d in done]
    gaps = [d["stats"].get("duality_gap", float("nan")) for d in done]
    stats = [dict(d["stats"], **{"class": plain_label(label)}) for d, label in zip(done, labels)]
    solver_stats = {
        **timing,
        "solve_seconds": float(sum(st["seconds"] for st in stats)),
        "fit_seconds": time.perf_counter() - t_start,
        "n_samples": n_rows,
        "n_components": fmap.n_components,
        "n_features_out": fmap.n_output,
        "hessian": hessian,
        "feature_store": kind,
        "problems": stats,
    }
    logger.info("fit: n=%d k=%d r=%d landmarks %.3fs features %.3fs solve %.3fs", n_rows, fmap.n_components,
                fmap.n_output, timing["landmark_seconds"], timing["feature_seconds"], solver_stats["solve_seconds"])
    return FitResult(feature_map=fmap, gamma=begun.gamma, component_indices=begun.lm_indices, coef=coef,
                     intercept=intercept, objective=objectives[0] if len(objectives) == 1 else np.asarray(objectives),
                     n_iter=int(max(d["n_iter"] for d in done)), solver_stats=solver_stats,
                     duality_gap=gaps[0] if len(gaps) == 1 else np.asarray(gaps))


def _opening(est, X_rb, aligned, fmap, hessian, make_operator, labels, checked, kind) -> Opening | None:
    """The subsample warm start of a Newton fit, in-memory or Dask input alike (:mod:`dsvm.svm._opening`), or
    None where there is none; ``kind``: where the features will be kept
    (:func:`~dsvm.problems.plan_feature_store`)."""
    read_seconds = FeatureStore.pass_seconds(kind, X_rb, fmap)  # what a pass saved is worth beyond its products
    m = opening_size(X_rb.n_rows, X_rb.n_cols, fmap.n_components, fmap.n_output, est.solver_options or {},
                     read_seconds, hessian)
    if m is None:
        return None
    return subsample_opening(est, X_rb, aligned, fmap, hessian, make_operator, labels, m, checked, kind)


def _active_landmarks(est, X_rb, checked, aligned, n_problems, make_operator, spec, k) -> Landmarks:
    """Landmarks drawn from the rows that matter: ``landmarks="active"``.

    Stage 1 fits the same problem(s) cheaply on ``k / 4`` uniform landmarks
    (loose tolerance); stage 2 draws the ``k`` landmarks uniformly among the
    rows in that model's active set (margin below 1, or outside the ε-tube):
    the rows that become support vectors, near the decision boundary.  Where
    few rows are active (w8a, ijcnn1) uniform landmarks spend most of ``k``
    on rows far from the boundary.  Costs one small fit, one pass to draw
    the rows and one to fetch them.
    """
    k0 = max(min(k, 32), k // 4)
    check_dense_landmarks(2 * (2 * k + 64), X_rb.n_cols, k)  # the rows drawn below are held dense
    lm0 = select_landmarks(X_rb, k0, "uniform", est.random_state)
    fmap0 = fit_feature_map(lm0.components, spec, dtype=np.dtype(est.dtype), eig_rtol=est.eig_rtol)
    seed = resolve_seed(est.random_state)
    with FeatureStore(X_rb, fmap0, est.feature_store, check_finite=not checked) as store:
        al = [a.persist() if a is not None else None for a in aligned] if X_rb.is_distributed else aligned
        ops = [make_operator(store.features, al, j) for j in range(n_problems)]
        xs = [solve("newton", op, fmap0.n_output + 1, tol=1e-2, max_iter=15, hessian="gram",
                    label="[landmarks stage 1] ").x for op in ops]
        # twice the candidates: rows near the boundary repeat in binary data (w8a)
        active, other, n_active = active_row_sample(ops, xs, row_index_blocks(X_rb), 2 * k + 64, seed)
    idx = np.concatenate([active, other])
    rows = dense_rows(X_rb.take(idx))
    keep = first_unique(rows)[:k]  # active rows first, inactive ones only to fill up
    logger.info("active landmarks: %d of %d rows active under a k=%d model; %d landmarks drawn from them",
                n_active, X_rb.n_rows, k0, min(k, n_active))
    warn_if_few_distinct(keep.size, k, stacklevel=6)
    return Landmarks(components=rows[keep], indices=idx[keep], method="active", n_passes=lm0.n_passes + 3)
