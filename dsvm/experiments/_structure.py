"""What structure is worth: a generic QP solver (SLSQP) on the hinge-loss SVM dual against LIBSVM (SMO)
and dsvm (LA-SN), with Clarabel's exact dual optimum as the oracle."""

from __future__ import annotations

import copy
import logging
import time
import warnings

import numpy as np
from scipy.optimize import minimize
from sklearn.svm import SVC

from ..approx import kernel_matrix, make_kernel_spec
from ..reference import dual_bias, dual_qp
from ..svm import NystroemSVC
from ._datasets import C_PAPER, signed_labels

logger = logging.getLogger(__name__)

__all__ = ["slsqp_dual", "structure_benchmark"]


def _dual_objective(alpha, y_pm, K) -> float:
    coef = alpha * y_pm
    return float(alpha.sum() - 0.5 * coef @ K @ coef)


def slsqp_dual(K, y_pm, C: float, *, cap_s: float = 300.0, ftol: float = 1e-8, max_iter: int = 2000) -> dict:
    """The hinge-loss SVM dual QP solved by SciPy's SLSQP (a generic solver), stopped after ``cap_s``."""
    n = len(y_pm)
    Q = (y_pm[:, None] * y_pm[None, :]) * K
    t0 = time.perf_counter()
    state = {"capped": False, "iters": 0}

    def callback(intermediate_result):
        state["iters"] += 1
        if time.perf_counter() - t0 > cap_s:
            state["capped"] = True
            raise StopIteration

    res = minimize(lambda a: 0.5 * a @ Q @ a - a.sum(), np.zeros(n), jac=lambda a: Q @ a - 1.0, method="SLSQP",
                   bounds=[(0.0, C)] * n, constraints=[{"type": "eq", "fun": lambda a: y_pm @ a, "jac": lambda a: y_pm}],
                   options={"ftol": ftol, "maxiter": max_iter}, callback=callback)
    seconds = time.perf_counter() - t0
    alpha = np.clip(res.x, 0.0, C)
    return {"seconds": seconds, "alpha": alpha, "capped": state["capped"], "n_iter": int(state["iters"]),
            "success": bool(res.success) and not state["capped"], "message": str(res.message),
            "equality_violation": float(abs(y_pm @ alpha))}


def _bias_from(alpha, y_pm, K, C) -> float:
    return dual_bias(alpha, y_pm, K @ (alpha * y_pm), C, 1e-6)[0]


def _dense(X) -> np.ndarray:
    """``X`` as a dense array (a sparse matrix converted)."""
    return X.toarray() if hasattr(X, "toarray") else np.asarray(X)


def _extrapolated_seconds(fit_pts: list, N: int) -> float | None:
    """The time at ``N`` rows of a power law fitted to ``(rows, seconds)`` points; None below two points."""
    if len(fit_pts) < 2:
        return None
    p = np.polyfit(np.log([a for a, _ in fit_pts]), np.log([t for _, t in fit_pts]), 1)
    return float(np.exp(np.polyval(p, np.log(N))))


def _timed_libsvm_fit(X, y, *, C: float, gamma: float) -> tuple[SVC, float]:
    """LIBSVM (scikit-learn's ``SVC``) fitted on ``X``, and the seconds the fit took."""
    svc = SVC(kernel="rbf", C=C, gamma=gamma, cache_size=2000)
    t0 = time.perf_counter()
    svc.fit(X, y)
    return svc, time.perf_counter() - t0


def _libsvm_alpha(svc: SVC, N: int) -> np.ndarray:
    """The dual variables of a fitted ``SVC`` on ``N`` rows: ``|dual_coef_|`` on the support, zero elsewhere."""
    alpha = np.zeros(N)
    alpha[svc.support_] = np.abs(_dense(svc.dual_coef_)[0])
    return alpha


def _timed_dsvm_fit(X, y, *, C: float, gamma: float, n_components: int, random_state: int, block_rows: int | None,
                    warm_up: bool) -> tuple[NystroemSVC, float]:
    """NystroemSVC fitted on ``X``, and the seconds the fit took; ``warm_up`` first fits an untimed copy."""
    ds = NystroemSVC(C=C, gamma=gamma, n_components=n_components, random_state=random_state, block_rows=block_rows)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # "only N distinct rows found" (a9a repeats rows)
        if warm_up:  # the first fit sets up imports and thread pools, which no timed fit should include
            copy.deepcopy(ds).fit(X, y)
        t0 = time.perf_counter()
        ds.fit(X, y)
        return ds, time.perf_counter() - t0


def _speed_ratios(slsqp_seconds: float, capped: bool, extrapolated: float | None, lib_s: float, ds_s: float) -> dict:
    """The generic solver's time (its extrapolation where it was capped) over LIBSVM's and dsvm's, and theirs."""
    generic = slsqp_seconds if not capped else (extrapolated or slsqp_seconds)
    return {"generic_over_libsvm": generic / lib_s, "generic_over_dsvm": generic / ds_s, "libsvm_over_dsvm": lib_s / ds_s,
            "ratios_are_lower_bounds": bool(capped and extrapolated is None)}


def structure_benchmark(
    X, y, X_test, y_test, *, gamma: float, C: float = C_PAPER, sizes=(200, 800, 2000), k: int = 500,
    slsqp_cap_s: float = 300.0, random_state: int = 0, name: str = "", single_core: bool = True,
) -> dict:
    """Generic QP solver (SLSQP) vs LIBSVM vs dsvm on the first ``N`` rows of a seeded shuffle.

    Times include building what each solver needs from X (the kernel matrix for
    the generic solvers; LIBSVM and dsvm compute kernels themselves).  The dual
    objective of SLSQP's and LIBSVM's solutions is compared with the exact
    optimum from Clarabel (:func:`dsvm.reference.dual_qp`); dsvm solves the
    L2-loss Nyström problem, so only its test accuracy is comparable.
    """
    spec = make_kernel_spec("rbf", gamma)
    y = np.asarray(y)
    classes = np.unique(y)
    order = np.random.default_rng(random_state).permutation(X.shape[0])
    X_test_d = _dense(X_test)
    yt = signed_labels(y_test, classes)
    rows, fit_pts = [], []
    for N in sizes:
        idx = np.sort(order[:N])
        XN, labels = X[idx], y[idx]
        XN_d = _dense(XN)
        yN = signed_labels(labels, classes)
        t0 = time.perf_counter()
        K = kernel_matrix(XN_d, XN_d, spec)
        kernel_s = time.perf_counter() - t0
        exact = dual_qp(K, yN, C)
        d_star = exact.objective
        K_test = kernel_matrix(X_test_d, XN_d, spec)

        def acc_of(alpha, b):
            return float(np.mean(np.where(K_test @ (alpha * yN) + b > 0, 1.0, -1.0) == yt))  # noqa: B023

        extrapolated = _extrapolated_seconds(fit_pts, N)
        sl = slsqp_dual(K, yN, C, cap_s=slsqp_cap_s)
        sl_s = sl["seconds"] + kernel_s
        if not sl["capped"]:
            fit_pts.append((N, sl_s))
        svc, lib_s = _timed_libsvm_fit(XN, labels, C=C, gamma=gamma)
        alpha_lib = _libsvm_alpha(svc, N)
        ds, ds_s = _timed_dsvm_fit(XN, labels, C=C, gamma=gamma, n_components=min(k, N), random_state=random_state,
                                   block_rows=N if single_core else None, warm_up=not rows)
        row = {
            "N": int(N), "kernel_seconds": kernel_s,
            "slsqp_seconds": sl_s, "slsqp_capped": sl["capped"], "slsqp_iterations": sl["n_iter"],
            "slsqp_extrapolated_seconds": extrapolated if sl["capped"] else None,
            "slsqp_rel_gap": (d_star - _dual_objective(sl["alpha"], yN, K)) / abs(d_star),
            "slsqp_equality_violation": sl["equality_violation"],
            "slsqp_accuracy": acc_of(sl["alpha"], _bias_from(sl["alpha"], yN, K, C)),
            "clarabel_seconds": exact.solve_time + kernel_s, "clarabel_accuracy": acc_of(exact.alpha, exact.b),
            "dual_optimum": d_star,
            "libsvm_seconds": lib_s, "libsvm_rel_gap": (d_star - _dual_objective(alpha_lib, yN, K)) / abs(d_star),
            "libsvm_accuracy": float(np.mean(signed_labels(svc.predict(X_test), classes) == yt)),
            "dsvm_seconds": ds_s, "dsvm_k": int(ds.components_.shape[0]),
            "dsvm_accuracy": float(np.mean(signed_labels(ds.predict(X_test), classes) == yt)),
            **_speed_ratios(sl_s, sl["capped"], extrapolated, lib_s, ds_s),
        }
        rows.append(row)
        logger.info("structure N=%d: SLSQP %.2fs%s (gap %.1e), LIBSVM %.3fs (gap %.1e), dsvm %.3fs", N, sl_s,
                    " capped" if sl["capped"] else "", row["slsqp_rel_gap"], lib_s, row["libsvm_rel_gap"], ds_s)
    return {"dataset": name, "gamma": gamma, "C": C, "k": int(k), "slsqp_cap_s": slsqp_cap_s, "n_test": int(len(yt)),
            "rows": rows}
