"""The paper report's Markdown and plots."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from ..experiments import SOLVERS
from ._plot_axes import score_limits
from ._report_files import pyplot, save_figure

__all__ = ["paper_markdown", "write_plots", "sensitivity_figure"]


def _pm(s: dict, scale: float = 1.0, digits: int = 3) -> str:
    return f"{scale * s['mean']:.{digits}f} ± {scale * s['std']:.{digits}f}"


def _secs(x: float) -> str:
    return f"{x:.3f}" if x < 10 else f"{x:.1f}"


def paper_markdown(report: dict) -> str:
    """The Markdown of the paper report."""
    m, cfg = report["machine"], report["config"]
    L = [f"# dsvm paper report: {report['name']}", ""]
    L += [f"- machine: {m['cpu']}, {m['cores']} cores, {m['memory']} RAM, {m['os']}; Python {m['python']}, "
          f"numpy {m['numpy']}, scipy {m['scipy']}, scikit-learn {m['scikit-learn']}, dsvm {m['dsvm']}",
          f"- load average (1/5/15 min) at start {m['load_average_start']}, at end {m.get('load_average_end')} "
          "(a shared machine: other jobs ran concurrently)",
          f"- started {report['started']}, took {report['total_seconds'] / 60:.1f} min; repeats = {cfg['repeats']}"
          f"{'; QUICK mode (subsets, small k)' if cfg['quick'] else ''}; C = {cfg['C']:g}; "
          f"BLAS threads = {cfg['blas_threads']}; dsvm "
          f"{'in one row block, i.e. on one thread' if cfg['single_core'] else 'in parallel row blocks'} "
          "(LIBSVM and LIBLINEAR are single-threaded)",
          "- everything runs in this process on in-memory numpy / scipy.sparse arrays (what the paper measures); "
          "the data are ingested with `dsvm.io` and loaded with `Dataset.load()`", ""]
    L += ["## Data sets and settings", "",
          "| data set | train rows | test rows | features | γ | k | Table 4's k (landmarks) | γ chosen by | test set |",
          "|---|---:|---:|---:|---:|---:|---|---|---|"]
    for name, d in report["datasets"].items():
        test = (f"{100 * d['split']['test_fraction']:.0f} % stratified split, seed {d['split']['random_state']}"
                if "split" in d else "test file")
        k4 = _table4_landmarks_cell(d)
        L.append(f"| {name} | {d['n_train']:,} | {d['n_test']:,} | {d['n_features']} | {d['gamma']:g} | {d['k']} | "
                 f"{k4} | {d['gamma_note']} | {test} |")
    L += ["", "k: uniform landmarks of Table 3, and of Table 4 where the next column says \"same\"; the "
          "sensitivity study has its own grid of k.", ""]
    if report["table3"]:
        L += _md_table3(report)
    if report["table4"]:
        L += _md_table4(report)
    if report["sensitivity"]:
        L += _md_sensitivity(report)
    if report["structure"]:
        L += _md_structure(report["structure"])
    L += _md_claims(report)
    for plot in report.get("plots", []):
        L.append(f"![{plot}]({plot})")
    return "\n".join(L) + "\n"


def _md_table3(report) -> list[str]:
    L = ["## Table 3 analogue: t_linear on the same features (C = {:g})".format(report["config"]["C"]), "",
         "t_linear = seconds of the linear solve only, on the Nyström features of one landmark set per repetition "
         "(the same matrix for every solver); mean ± std over the repetitions. LA-SN at its default tol = 1e-4 "
         "(tighter, 1e-5, 1e-6, …, where that misses Φ* by more than 1e-4), solved as NystroemSVC solves: "
         "on 40,000 rows or more from the solution of a row subsample (the subsample's Newton solve first, then the full one from its solution); "
         "every other solver at the loosest tolerance of 1e-1, 1e-2, … whose solution is within 1e-4 (relative) "
         "of Φ*, the optimum of dsvm's objective ½‖w‖² + C Σ max(0, 1 − y(f·w + b))² (bias not regularised) from "
         "a tight float64 Newton solve. ratio = mean t_solver / mean t_LA-SN.", ""]
    L += ["| data set | n | k | LA-SN t (s) | LA-DCD t (s) | LA-TRON t (s) | dsvm-TRON t (s) | DCD / SN | TRON / SN |"
          " dsvm-TRON / SN |", "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for t in report["table3"]:
        s = t["summary"]

        def cell(sv):
            if sv not in s:  # noqa: B023
                return "—"
            mark = "" if s[sv]["reached_all"] else " (not reached)"  # noqa: B023
            return f"{_secs(s[sv]['seconds']['mean'])} ± {_secs(s[sv]['seconds']['std'])}{mark}"  # noqa: B023

        def ratio(sv):
            return f"{s[sv]['ratio_to_sn']:.1f}×" if sv in s else "—"  # noqa: B023

        L.append(f"| {t['dataset']} | {t['n_train']:,} | {t['k']} | {cell('LA-SN')} | {cell('LA-DCD')} | "
                 f"{cell('LA-TRON')} | {cell('dsvm-TRON')} | {ratio('LA-DCD')} | {ratio('LA-TRON')} | "
                 f"{ratio('dsvm-TRON')} |")
    L += ["", "Objective reached and test accuracy (mean over repetitions; gap = (Φ − Φ*) / Φ*, the largest over "
          "the repetitions; tol = the tolerance(s) used):", "",
          "| data set | Φ* (mean) | solver | gap (max) | tol | accuracy (%) |", "|---|---:|---|---:|---|---:|"]
    for t in report["table3"]:
        phi = np.mean([r["phi_star"] for r in t["runs"]])
        for sv, s in t["summary"].items():
            tols = ", ".join(f"{x:g}" for x in s["tols"])
            L.append(f"| {t['dataset']} | {phi:.6g} | {sv} | {s['rel_gap_max']:.1e} | {tols} | "
                     f"{_pm(s['accuracy'], 100, 2)} |")
    L.append("")
    return L


def _table4_landmarks_cell(d: dict) -> str:
    k4, lm4 = d.get("table4_k", d.get("k")), d.get("table4_landmarks", "uniform")
    return "same" if (k4, lm4) == (d.get("k"), "uniform") else f"{k4} ({lm4})"


def _md_table4(report) -> list[str]:
    L = ["## Table 4 analogue: LA-SN vs LIBSVM (C = {:g})".format(report["config"]["C"]), "",
         f"LA-SN = `NystroemSVC(...).fit` end to end (landmarks + features + Newton), "
         f"{report['config']['repeats']} landmark seeds, mean ± std; LIBSVM = scikit-learn "
         "`SVC(kernel='rbf', cache_size=2000)`, fitted once. Accuracy on the test set. k = LA-SN's landmarks: "
         "uniform, as in Table 3, unless the column names another method (a data set whose accuracy needs more "
         "or better placed landmarks than Table 3's k gets them here: `dataset_options` `table4_k`, "
         "`table4_landmarks`).", "",
         "| data set | k | LA-SN fit (s) | LA-SN accuracy (%) | LIBSVM fit (s) | LIBSVM accuracy (%) | #SV | speed-up |"
         " Δ accuracy (pp) | LA-SN on Dask (s / %) |", "|---|---|---:|---:|---:|---:|---:|---:|---:|---|"]
    for t in report["table4"]:
        d = t.get("dask_fit")
        dcell = f"{d['fit_seconds']:.2f} / {100 * d['accuracy']:.2f} ({d['scheduler']})" if d else "—"
        k = t.get("k", report["datasets"].get(t["dataset"], {}).get("k", "?"))
        lm = t.get("landmarks", "uniform")
        kcell = f"{k}" if lm == "uniform" else f"{k} ({lm})"
        L.append(f"| {t['dataset']} | {kcell} | {_pm(t['lasn_fit_seconds'])} | {_pm(t['lasn_accuracy'], 100, 2)} | "
                 f"{_secs(t['libsvm']['fit_seconds'])} | {100 * t['libsvm']['accuracy']:.2f} | {t['libsvm']['n_support']:,} "
                 f"| {t['speedup']:.1f}× | {100 * t['accuracy_difference']:+.2f} | {dcell} |")
    L.append("")
    return L


def _md_sensitivity(report) -> list[str]:
    L = ["## Sensitivity to k and C", ""]
    s0 = report["sensitivity"][0]
    L += [f"{100 * (1 - s0['test_fraction']):.0f} % / {100 * s0['test_fraction']:.0f} % stratified split of the "
          f"training set (seed {s0['random_state']}); {s0['folds']}-fold CV accuracy on the larger part and accuracy "
          "on the held-out part, in %. Best cell by CV in bold.", ""]
    for s in report["sensitivity"]:
        L += [f"**{s['dataset']}** ({s['n_80']:,} / {s['n_20']:,} rows): CV accuracy · held-out accuracy", "",
              "| k \\ C | " + " | ".join(f"{c:g}" for c in s["C"]) + " |", "|---:|" + "---:|" * len(s["C"])]
        b = s["best_by_cv"]
        for i, k in enumerate(s["k"]):
            cells = []
            for j, c in enumerate(s["C"]):
                txt = f"{100 * s['cv_accuracy'][i][j]:.2f} · {100 * s['test_accuracy'][i][j]:.2f}"
                cells.append(f"**{txt}**" if (k == b["k"] and c == b["C"]) else txt)
            L.append(f"| {k} | " + " | ".join(cells) + " |")
        L.append("")
    return L


def _md_structure(st) -> list[str]:
    L = [f"## What structure is worth: generic QP solver vs LIBSVM vs dsvm ({st['dataset']}, γ = {st['gamma']:g}, "
         f"C = {st['C']:g})", "",
         "N rows of a seeded shuffle of the training set. SLSQP (SciPy, generic) and Clarabel (generic interior point, "
         "the exact oracle) solve the hinge-loss dual QP on the precomputed kernel matrix (its time included); LIBSVM "
         "(SMO) solves the same QP; dsvm solves the L2-loss Nyström problem (k = min(N, {}) landmarks, fewer where "
         "rows repeat), so its objective is not comparable and its test accuracy is shown instead. "
         "gap = (D* − D) / |D*| of the dual objective. SLSQP is "
         "stopped after {:g} s; ratios with a capped SLSQP use the power law fitted to the uncapped sizes "
         "(marked ~).".format(st["k"], st["slsqp_cap_s"]), "",
         "| N | SLSQP (s) | SLSQP gap | Clarabel (s) | LIBSVM (s) | LIBSVM gap | dsvm (s) | SLSQP / LIBSVM | "
         "SLSQP / dsvm | LIBSVM / dsvm | accuracy SLSQP / exact / LIBSVM / dsvm (%) |",
         "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|"]
    for r in st["rows"]:
        sl = _secs(r["slsqp_seconds"])
        if r["slsqp_capped"]:
            sl = f"≥ {sl} (capped" + (f"; ~{_secs(r['slsqp_extrapolated_seconds'])} extrapolated)"
                                       if r["slsqp_extrapolated_seconds"] else ")")
        approx = "~" if r["slsqp_capped"] else ""
        L.append(f"| {r['N']:,} | {sl} | {r['slsqp_rel_gap']:.1e} | {_secs(r['clarabel_seconds'])} | "
                 f"{_secs(r['libsvm_seconds'])} | {r['libsvm_rel_gap']:.1e} | {_secs(r['dsvm_seconds'])} | "
                 f"{approx}{r['generic_over_libsvm']:.0f}× | {approx}{r['generic_over_dsvm']:.0f}× | "
                 f"{r['libsvm_over_dsvm']:.1f}× | {100 * r['slsqp_accuracy']:.2f} / {100 * r['clarabel_accuracy']:.2f} / "
                 f"{100 * r['libsvm_accuracy']:.2f} / {100 * r['dsvm_accuracy']:.2f} |")
    L.append("")
    return L


def _md_claims(report) -> list[str]:
    c = report.get("claims") or {}
    L = ["## The paper's claims, checked", ""]
    n = c.get("newton_10x_vs_liblinear")
    if n:
        L.append(f"- **Semismooth Newton ≥ 10× faster than both LIBLINEAR solvers at equal objective on every data "
                 f"set: {'holds' if n['holds_on_all'] else 'does NOT hold on all'}.** Ratios (mean t / mean t_LA-SN; "
                 "median-based in brackets):")
        for e in n["per_dataset"]:
            parts = []
            for sv in ("LA-DCD", "LA-TRON"):
                if sv in e:
                    parts.append(f"{sv} {e[sv]['ratio']:.1f}× [{e[sv]['ratio_median']:.1f}×]"
                                 + ("" if e[sv]["reached"] else " (did not reach Φ*: lower bound)"))
            L.append(f"  - {e['dataset']}: {', '.join(parts)} → {'✓' if e['holds'] else '✗'}")
    t = c.get("lasn_faster_than_libsvm")
    if t:
        verdict = "holds" if t["holds_on_all"] else (
            f"holds within {100 * t['accuracy_tolerance']:.1f} pp accuracy" if t["holds_on_all_within_tolerance"]
            else "does NOT hold on all")
        L.append(f"- **LA-SN faster than LIBSVM at equal or better accuracy on all data sets: {verdict}.**")
        for e in t["per_dataset"]:
            ok = e["faster"] and e["equal_or_better"]
            near = e["faster"] and e["within_tolerance"]
            L.append(f"  - {e['dataset']}: {e['speedup']:.1f}× {'faster' if e['faster'] else 'SLOWER'}, accuracy "
                     f"{100 * e['accuracy_difference']:+.2f} pp → "
                     f"{'✓' if ok else ('≈ (within tolerance)' if near else '✗')}")
    L.append("")
    return L


# --------------------------------------------------------------------------- plots
def sensitivity_figure(plt, sensitivity: list[dict]):
    """CV and held-out accuracy over k x C, one row of heat maps per data set.

    Each map's colour scale spans at least
    :data:`~dsvm.app._plot_axes.MIN_ACCURACY_SPAN` points around its values, so
    a spread of a few tenths of a point is not drawn from one end of the
    colour map to the other.
    """
    n = len(sensitivity)
    fig, axes = plt.subplots(n, 2, figsize=(8, 2.8 * n), squeeze=False)
    for row, s in zip(axes, sensitivity):
        for ax, key, title in ((row[0], "cv_accuracy", "CV"), (row[1], "test_accuracy", "held-out")):
            A = 100 * np.asarray(s[key], dtype=np.float64)
            vmin, vmax = score_limits(A)
            im = ax.imshow(A, cmap="viridis", aspect="auto", origin="lower", vmin=vmin, vmax=vmax)
            for i in range(A.shape[0]):
                for j in range(A.shape[1]):
                    ax.text(j, i, f"{A[i, j]:.1f}", ha="center", va="center", fontsize=8,
                            color="black" if A[i, j] > (vmin + vmax) / 2 else "white")
            ax.set(xticks=range(len(s["C"])), xticklabels=[f"{c:g}" for c in s["C"]], yticks=range(len(s["k"])),
                   yticklabels=s["k"], xlabel="C", ylabel="k", title=f"{s['dataset']}: {title} accuracy (%)")
            fig.colorbar(im, ax=ax)
    return fig


def write_plots(report: dict, out: Path) -> list[str]:
    """PNG plots of every table; returns the file names written (none without matplotlib)."""
    plt = pyplot("the plots")
    if plt is None:
        return []
    names = []
    if report["table3"]:
        fig, ax = plt.subplots(figsize=(8, 4))
        ds = [t["dataset"] for t in report["table3"]]
        width = 0.2
        for i, sv in enumerate(SOLVERS):
            means = [t["summary"].get(sv, {}).get("seconds", {}).get("mean", np.nan) for t in report["table3"]]
            stds = [t["summary"].get(sv, {}).get("seconds", {}).get("std", 0.0) for t in report["table3"]]
            ax.bar(np.arange(len(ds)) + (i - 1.5) * width, means, width, yerr=stds, label=sv)
        ax.set(xticks=np.arange(len(ds)), xticklabels=ds, yscale="log", ylabel="t_linear (s)",
               title="Linear solve on the same features, equal objective")
        ax.legend()
        save_figure(fig, out / "table3_t_linear.png", dpi=110)
        names.append("table3_t_linear.png")
    if report["table4"]:
        fig, axes = plt.subplots(1, 2, figsize=(9, 3.8))
        ds = [t["dataset"] for t in report["table4"]]
        x = np.arange(len(ds))
        axes[0].bar(x - 0.2, [t["lasn_fit_seconds"]["mean"] for t in report["table4"]], 0.4,
                    yerr=[t["lasn_fit_seconds"]["std"] for t in report["table4"]], label="LA-SN")
        axes[0].bar(x + 0.2, [t["libsvm"]["fit_seconds"] for t in report["table4"]], 0.4, label="LIBSVM")
        axes[0].set(xticks=x, xticklabels=ds, yscale="log", ylabel="training time (s)", title="training time")
        axes[1].bar(x - 0.2, [100 * t["lasn_accuracy"]["mean"] for t in report["table4"]], 0.4,
                    yerr=[100 * t["lasn_accuracy"]["std"] for t in report["table4"]], label="LA-SN")
        axes[1].bar(x + 0.2, [100 * t["libsvm"]["accuracy"] for t in report["table4"]], 0.4, label="LIBSVM")
        lo = min(min(100 * t["lasn_accuracy"]["min"], 100 * t["libsvm"]["accuracy"]) for t in report["table4"])
        axes[1].set(xticks=x, xticklabels=ds, ylim=(max(0, lo - 3), 100.5), ylabel="test accuracy (%)",
                    title="test accuracy")
        axes[1].legend(loc="lower right")
        save_figure(fig, out / "table4_lasn_vs_libsvm.png", dpi=110)
        names.append("table4_lasn_vs_libsvm.png")
    if report["sensitivity"]:
        save_figure(sensitivity_figure(plt, report["sensitivity"]), out / "sensitivity.png", dpi=100)
        names.append("sensitivity.png")
    st = report.get("structure")
    if st and st["rows"]:
        fig, ax = plt.subplots(figsize=(5.5, 4))
        N = [r["N"] for r in st["rows"]]
        done = [r for r in st["rows"] if not r["slsqp_capped"]]
        ax.loglog([r["N"] for r in done], [r["slsqp_seconds"] for r in done], "o-", color="C0", label="SLSQP (generic)")
        capped = [r for r in st["rows"] if r["slsqp_capped"]]
        if capped:
            ax.loglog([r["N"] for r in capped], [r["slsqp_seconds"] for r in capped], "^", color="C0",
                      label="SLSQP stopped at the cap (lower bound)")
            ext = [r for r in capped if r["slsqp_extrapolated_seconds"]]
            ax.loglog([r["N"] for r in ext], [r["slsqp_extrapolated_seconds"] for r in ext], "o", mfc="none",
                      color="C0", label="SLSQP extrapolated")
        ax.loglog(N, [r["clarabel_seconds"] for r in st["rows"]], "v-", color="C1", label="Clarabel (generic IP)")
        ax.loglog(N, [r["libsvm_seconds"] for r in st["rows"]], "s-", color="C2", label="LIBSVM (SMO)")
        ax.loglog(N, [r["dsvm_seconds"] for r in st["rows"]], "d-", color="C3", label="dsvm (LA-SN)")
        ax.set(xlabel="training rows N", ylabel="seconds", title=f"what structure is worth ({st['dataset']})")
        ax.legend(fontsize=8)
        save_figure(fig, out / "structure.png", dpi=110)
        names.append("structure.png")
    return names
