"""Tables 3 and 4 of the paper: the linear solvers timed on the same features, and LA-SN against LIBSVM."""

from __future__ import annotations

import logging
import time

import numpy as np
from sklearn.svm import SVC

from ..svm import NystroemSVC
from ._datasets import C_PAPER, Split, signed_labels
from ._linear import NEWTON_LADDER, REACH_RTOL, SOLVERS, TOL_LADDER, LinearProblem, optimum, time_to_objective

logger = logging.getLogger(__name__)

__all__ = ["lasn_fits", "summary", "libsvm_fit", "table4", "table3"]


def lasn_fits(split: Split, *, gamma: float, k: int, C: float = C_PAPER, repeats: int = 10, seed0: int = 0,
              single_core: bool = True, landmarks: str = "uniform") -> list:
    """``NystroemSVC(...).fit`` once per landmark seed: ``[(model, row)]``, row = fit time, accuracy.

    ``single_core``: all rows in one block (``block_rows=n``), so the fit runs
    on one thread when BLAS is limited to one; otherwise NystroemSVC's default
    blocks, run in parallel threads.
    """
    block_rows = int(split.X_train.shape[0]) if single_core else None
    fits = []
    for r in range(repeats):
        model = NystroemSVC(C=C, gamma=gamma, n_components=k, landmarks=landmarks, random_state=seed0 + r,
                            block_rows=block_rows)
        t0 = time.perf_counter()
        model.fit(split.X_train, split.y_train)
        fit_seconds = time.perf_counter() - t0
        acc = float(model.score(split.X_test, split.y_test))
        s = model.solver_stats_
        row = {"seed": seed0 + r, "fit_seconds": fit_seconds, "accuracy": acc,
               "landmark_seconds": s["landmark_seconds"], "feature_seconds": s["feature_seconds"],
               "solve_seconds": s["solve_seconds"], "n_iter": int(model.n_iter_), "hessian": s["hessian"],
               "n_features_out": int(s["n_features_out"])}
        logger.info("%s LA-SN seed %d: fit %.3fs, accuracy %.4f", split.name, seed0 + r, fit_seconds, acc)
        fits.append((model, row))
    return fits


def summary(values) -> dict:
    """Mean, standard deviation (ddof 1), median, min and max of some figures."""
    v = np.asarray(values, dtype=np.float64)
    return {"mean": float(v.mean()), "std": float(v.std(ddof=1)) if v.size > 1 else 0.0,
            "median": float(np.median(v)), "min": float(v.min()), "max": float(v.max())}


def libsvm_fit(split: Split, *, gamma: float, C: float = C_PAPER) -> dict:
    """scikit-learn ``SVC`` (LIBSVM) fitted once: seconds, test accuracy, support vectors."""
    model = SVC(kernel="rbf", C=C, gamma=gamma, cache_size=2000)
    t0 = time.perf_counter()
    model.fit(split.X_train, split.y_train)
    seconds = time.perf_counter() - t0
    acc = float(model.score(split.X_test, split.y_test))
    logger.info("%s LIBSVM: fit %.2fs, accuracy %.4f", split.name, seconds, acc)
    return {"fit_seconds": seconds, "accuracy": acc, "n_support": int(model.n_support_.sum())}


def table4(name: str, fits: list, libsvm: dict, *, accuracy_tolerance: float = 0.002, dask_fit: dict | None = None) -> dict:
    """LA-SN (mean ± std over seeds) vs LIBSVM (once): time, accuracy, speed-up, verdict.

    ``equal_or_better`` compares the mean LA-SN accuracy with LIBSVM's;
    ``within_tolerance`` allows ``accuracy_tolerance`` (absolute) below it.
    """
    rows = [row for _, row in fits]
    fit_s = summary([r["fit_seconds"] for r in rows])
    acc = summary([r["accuracy"] for r in rows])
    speedup = libsvm["fit_seconds"] / fit_s["mean"]
    diff = acc["mean"] - libsvm["accuracy"]
    out = {
        "dataset": name, "repeats": len(rows), "lasn_fit_seconds": fit_s, "lasn_accuracy": acc,
        "lasn_stages": {k: summary([r[k] for r in rows])["mean"] for k in ("landmark_seconds", "feature_seconds",
                                                                            "solve_seconds")},
        "libsvm": libsvm, "speedup": speedup, "accuracy_difference": diff,
        "k": int(fits[0][0].n_components), "landmarks": str(fits[0][0].landmarks),
        "faster": speedup > 1.0, "equal_or_better": diff >= 0.0, "within_tolerance": diff >= -accuracy_tolerance,
        "accuracy_tolerance": accuracy_tolerance, "runs": rows,
    }
    if dask_fit is not None:
        out["dask_fit"] = dask_fit
    return out


def _time_solvers(model, split: Split, y_tr, y_te, start: dict[str, int], *, C: float, budget_s: float,
                  single_core: bool) -> tuple[dict, dict[str, int | None]]:
    """One repetition of Table 3: each solver of ``start`` timed on the features of ``model``'s landmarks.

    Each solver climbs its tolerance ladder from the index ``start`` gives it.
    Returns the repetition's row and, per solver, the ladder index at which it
    reached ``Φ*`` (None where it did not).
    """
    fmap = model.feature_map_
    problem = LinearProblem(fmap.transform_block(split.X_train), y_tr, C, single_core)
    F_test = fmap.transform_block(split.X_test).astype(np.float64)
    phi_star = optimum(problem)
    rep = {"seed": model.random_state, "k": int(fmap.n_components), "r": int(fmap.n_output),
           "phi_star": phi_star, "solvers": {}}
    reached_at = {}
    for solver, first in start.items():
        ladder = NEWTON_LADDER if solver == "LA-SN" else TOL_LADDER
        res = time_to_objective(problem, solver, phi_star, ladder=ladder, start=first, budget_s=budget_s)
        pred = np.where(F_test @ res["w"] + res["b"] > 0, 1.0, -1.0)
        entry = {k: res[k] for k in ("seconds", "tol", "objective", "rel_gap", "reached", "n_iter", "converged",
                                     "tried", "spent_seconds")}
        entry["accuracy"] = float(np.mean(pred == y_te))
        rep["solvers"][solver] = entry
        reached_at[solver] = res["ladder_index"] if res["reached"] else None
    # Φ* from the tight solve; if a solver went lower still, measure against that
    best = min([phi_star] + [e["objective"] for e in rep["solvers"].values()])
    if best < phi_star:
        rep["phi_star"] = best
        for e in rep["solvers"].values():
            e["rel_gap"] = (e["objective"] - best) / abs(best)
            e["reached"] = e["rel_gap"] <= REACH_RTOL
    return rep, reached_at


def _solver_summary(reps: list, solvers: tuple[str, ...]) -> dict:
    """Per solver that ran: its times, accuracies and objectives over the repetitions, and its time over LA-SN's."""
    by_solver = {}
    for solver in solvers:
        entries = [r["solvers"][solver] for r in reps if solver in r["solvers"]]
        if not entries:
            continue
        by_solver[solver] = {
            "seconds": summary([e["seconds"] for e in entries]),
            "accuracy": summary([e["accuracy"] for e in entries]),
            "objective": summary([e["objective"] for e in entries]),
            "rel_gap_max": float(max(e["rel_gap"] for e in entries)),
            "tols": sorted({e["tol"] for e in entries}, reverse=True),
            "reached_all": all(e["reached"] for e in entries),
            "n_runs": len(entries),
        }
    sn = by_solver["LA-SN"]["seconds"]["mean"]
    for s in by_solver.values():
        s["ratio_to_sn"] = s["seconds"]["mean"] / sn
        s["ratio_to_sn_median"] = s["seconds"]["median"] / by_solver["LA-SN"]["seconds"]["median"]
    return by_solver


def table3(
    split: Split,
    fits: list,
    *,
    C: float = C_PAPER,
    solvers: tuple[str, ...] = SOLVERS,
    budget_s: float = 120.0,
    single_core: bool = True,
) -> dict:
    """t_linear of every solver on the feature matrix of each fitted LA-SN model's landmarks.

    ``fits`` are the models of :func:`lasn_fits` (one landmark set each); for
    each, ``F`` is computed once and every solver is timed on it.  The first
    repetition runs the full tolerance ladder; later ones start at the
    tolerance the first one needed (and go tighter if that misses).  A solver
    that does not reach ``Φ*`` within ``budget_s`` in the first repetition is
    not run again (reported as not reached).
    """
    classes = fits[0][0].classes_
    y_tr, y_te = signed_labels(split.y_train, classes), signed_labels(split.y_test, classes)
    start = dict.fromkeys(solvers, 0)
    reps = []
    for model, _ in fits:
        rep, reached_at = _time_solvers(model, split, y_tr, y_te, start, C=C, budget_s=budget_s,
                                        single_core=single_core)
        if not reps:  # later repetitions start where the first reached Φ*, and drop the solvers that did not
            start = {solver: index for solver, index in reached_at.items() if index is not None}
        reps.append(rep)
        logger.info("%s rep seed=%s: %s", split.name, rep["seed"],
                    ", ".join(f"{s} {e['seconds']:.3f}s" for s, e in rep["solvers"].items()))
    return {"dataset": split.name, "n_train": int(split.X_train.shape[0]), "k": reps[0]["k"], "r": reps[0]["r"],
            "C": C, "repeats": len(reps), "budget_s": budget_s, "single_core": single_core,
            "summary": _solver_summary(reps, solvers), "runs": reps}
