"""The ``kind: paper`` pipeline: every experiment of the LA-SN paper (:mod:`dsvm.experiments`), one report
folder (``report.md``, ``report.json``, PNG plots)."""

from __future__ import annotations

import json
import logging
import os
import time
from typing import Any

from threadpoolctl import threadpool_limits

from ..blocks import describe_scheduler
from ..experiments import (
    QUICK,
    PaperDataset,
    Split,
    claims,
    dataset_settings,
    lasn_fits,
    libsvm_fit,
    load_split,
    paper_config,
    sensitivity,
    structure_benchmark,
    subsample,
    table3,
    table4,
)
from ..io import open_dataset
from ..svm import NystroemSVC, evaluate
from ._paper_report import paper_markdown, write_plots
from ._report import json_safe, machine_info
from ._report_files import claim_output_folder, write_report_file

logger = logging.getLogger(__name__)

__all__ = ["run_paper", "dask_fit"]


def dask_fit(split: Split, ds: PaperDataset, C: float) -> dict | None:
    """LA-SN (seed 0) fitted from the zarr dataset on the active Dask scheduler, for comparison.

    Only for data sets whose training rows are the whole ingested file (not
    for a split or a quick-mode subsample, which live in memory only).
    """
    train = open_dataset(split.info["zarr"])
    if "split" in split.info or train.n_samples != split.info["n_train"]:
        return None
    k, landmarks = ds.table4_settings
    model = NystroemSVC(C=C, gamma=ds.gamma, n_components=k, landmarks=landmarks, random_state=0)
    t0 = time.perf_counter()
    model.fit(train)
    seconds = time.perf_counter() - t0
    acc = evaluate(model, split.X_test, split.y_test)["accuracy"]
    return {"fit_seconds": seconds, "accuracy": acc, "scheduler": describe_scheduler(),
            "feature_store": model.solver_stats_["feature_store"]}


def run_paper(spec: dict[str, Any]) -> dict[str, Any]:
    """Run the ``kind: paper`` pipeline: every experiment, one report folder; returns the report dict."""
    cfg = paper_config(spec)
    out = claim_output_folder(spec["output"], "pipeline output folder")
    work = out / "data"
    quick = cfg["quick"]
    t_start = time.perf_counter()
    report: dict[str, Any] = {
        "name": spec.get("name", "paper"), "kind": "paper", "machine": machine_info(),
        "started": time.strftime("%Y-%m-%d %H:%M:%S"),
        "config": {k: v for k, v in cfg.items()}, "datasets": {}, "table3": [], "table4": [], "sensitivity": [],
        "structure": None, "plots": [],
    }
    budget = QUICK["liblinear_budget_s"] if quick else float(cfg["liblinear_budget_s"])
    limits = {"max_train": QUICK["max_train"], "max_test": QUICK["max_test"]} if quick else {}
    st = cfg["structure"]
    sname = st["dataset"] if (st["dataset"] in cfg["datasets"] or not quick) else cfg["datasets"][0]
    structure_split = None
    with threadpool_limits(limits=int(cfg["blas_threads"]), user_api="blas"):
        for name in cfg["datasets"]:
            ds = dataset_settings(cfg, name)
            split = load_split(ds, cfg["data_dir"], work, **cfg["split"], **limits)
            report["datasets"][name] = _dataset_info(cfg, ds, split)
            logger.info("paper: %s (%d train / %d test rows, gamma=%g, k=%d)", name, split.info["n_train"],
                        split.info["n_test"], ds.gamma, ds.k)
            if name == sname:
                structure_split = split
            for part, row in _dataset_rows(cfg, name, ds, split, budget).items():
                report[part].append(row)
            del split
        if "structure" in cfg["parts"]:
            ds = dataset_settings(cfg, sname)
            split = structure_split or load_split(ds, cfg["data_dir"], work, **cfg["split"], **limits)
            report["structure"] = _structure(cfg, sname, ds, split)
    report["total_seconds"] = time.perf_counter() - t_start
    report["machine"]["load_average_end"] = [round(x, 2) for x in os.getloadavg()] if hasattr(os, "getloadavg") else None
    report["claims"] = claims(report)
    report["timing"] = {"fit_seconds": report["total_seconds"], "total_seconds": report["total_seconds"]}
    report["evaluation"] = None
    if (spec.get("report") or {}).get("plots", True):
        report["plots"] = write_plots(report, out)
    write_report_file(out / "report.json", json.dumps(report, indent=2, default=json_safe))
    write_report_file(out / "report.md", paper_markdown(report))
    logger.info("paper: report written to %s (%.0fs)", out, report["total_seconds"])
    return report


def _dataset_info(cfg: dict[str, Any], ds: PaperDataset, split: Split) -> dict[str, Any]:
    """The report's entry for one data set: its split and the settings its experiments use."""
    k4, landmarks4 = ds.table4_settings
    return {**split.info, "gamma": ds.gamma, "k": ds.k, "k_grid": list(ds.k_grid), "table4_k": k4,
            "table4_landmarks": landmarks4, "gamma_note": ds.gamma_note, "C": cfg["C"]}


def _dataset_rows(cfg: dict[str, Any], name: str, ds: PaperDataset, split: Split, budget: float) -> dict[str, Any]:
    """The rows of Table 4, Table 3 and the sensitivity study for one data set, keyed by the report's list
    (only the parts ``cfg`` runs); ``budget``: LIBLINEAR's seconds in Table 3."""
    parts, one = cfg["parts"], bool(cfg["single_core"])
    k4, landmarks4 = ds.table4_settings
    rows: dict[str, Any] = {}
    fits = None
    if {"table3", "table4"} & set(parts):
        # warm-up (imports, thread pools), not timed
        Xw, yw = subsample(split.X_train, split.y_train, 200, 0)
        lasn_fits(Split(name, Xw, yw, Xw, yw, {}), gamma=ds.gamma, k=min(ds.k, 50), C=cfg["C"], repeats=1,
                  single_core=one, landmarks=landmarks4)
    if "table4" in parts:
        fits = lasn_fits(split, gamma=ds.gamma, k=k4, C=cfg["C"], repeats=cfg["repeats"], single_core=one,
                         landmarks=landmarks4)
        lib = libsvm_fit(split, gamma=ds.gamma, C=cfg["C"])
        dfit = dask_fit(split, ds, cfg["C"]) if cfg["dask_fit"] else None
        rows["table4"] = table4(name, fits, lib, accuracy_tolerance=cfg["accuracy_tolerance"], dask_fit=dfit)
    if "table3" in parts:
        if fits is None or (k4, landmarks4) != (ds.k, "uniform"):
            # Table 3 times the linear solvers on uniform landmarks at its own k
            fits = lasn_fits(split, gamma=ds.gamma, k=ds.k, C=cfg["C"], repeats=cfg["repeats"], single_core=one)
        rows["table3"] = table3(split, fits, C=cfg["C"], budget_s=budget, single_core=one)
    del fits
    if "sensitivity" in parts:
        rows["sensitivity"] = _sensitivity(cfg, name, ds, split)
    return rows


def _sensitivity(cfg: dict[str, Any], name: str, ds: PaperDataset, split: Split) -> dict[str, Any]:
    """The sensitivity study of one data set: CV accuracy over its grid of k and the grid of C."""
    s, quick = cfg["sensitivity"], cfg["quick"]
    return sensitivity(split.X_train, split.y_train, gamma=ds.gamma, ks=ds.k_grid, Cs=QUICK["C"] if quick else s["C"],
                       folds=QUICK["folds"] if quick else int(s["folds"]), test_fraction=float(s["test_fraction"]),
                       random_state=int(s["random_state"]), name=name, single_core=bool(cfg["single_core"]))


def _structure(cfg: dict[str, Any], name: str, ds: PaperDataset, split: Split) -> dict[str, Any]:
    """The structure benchmark on one data set's split (its test rows subsampled to ``structure: max_test``)."""
    st, quick = cfg["structure"], cfg["quick"]
    Xte, yte = subsample(split.X_test, split.y_test, int(st["max_test"]), 0)
    return structure_benchmark(
        split.X_train, split.y_train, Xte, yte, gamma=ds.gamma, C=cfg["C"],
        sizes=QUICK["sizes"] if quick else [int(n) for n in st["sizes"]], k=int(st["k"]),
        slsqp_cap_s=QUICK["slsqp_cap_s"] if quick else float(st["slsqp_cap_s"]), name=name,
        single_core=bool(cfg["single_core"]))
