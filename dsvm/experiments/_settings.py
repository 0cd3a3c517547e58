"""The settings of the paper's experiments: defaults, the QUICK limits, and a pipeline's overrides."""

from __future__ import annotations

import copy
from dataclasses import replace
from typing import Any

from ..options import LANDMARK_METHODS
from ._datasets import C_PAPER, PAPER_DATASETS, PaperDataset

__all__ = ["DEFAULTS", "QUICK", "paper_config", "dataset_settings"]


DEFAULTS: dict[str, Any] = {
    "datasets": list(PAPER_DATASETS),
    "parts": ["table3", "table4", "sensitivity", "structure"],
    "C": C_PAPER,
    "repeats": 10,
    "quick": False,
    "data_dir": "../shared/data",
    "blas_threads": 1,
    "single_core": True,
    "liblinear_budget_s": 120.0,
    "accuracy_tolerance": 0.002,
    "dask_fit": True,
    "dataset_options": {},  # per data set: gamma, k, k_grid
    "sensitivity": {"C": [0.1, 1.0, 10.0, 100.0], "folds": 3, "test_fraction": 0.2, "random_state": 0},
    "structure": {"dataset": "a9a", "sizes": [200, 800, 2000], "k": 500, "slsqp_cap_s": 180.0, "max_test": 5000},
    "split": {"test_fraction": 0.2, "random_state": 0},
}
QUICK: dict[str, Any] = {
    "max_train": 1500, "max_test": 1500, "k_max": 100, "k_grid": [25, 50, 100], "C": [1.0, 10.0], "folds": 2,
    "sizes": [100, 200], "slsqp_cap_s": 20.0, "liblinear_budget_s": 20.0,
}


def paper_config(spec: dict[str, Any]) -> dict[str, Any]:
    """Merge the pipeline's ``experiments: paper:`` section over :data:`DEFAULTS` and check it."""
    section = dict(((spec.get("experiments") or {}).get("paper")) or {})
    cfg = copy.deepcopy(DEFAULTS)
    for key, value in section.items():
        if key not in cfg:
            raise ValueError(f"experiments.paper: unknown key {key!r}; allowed: {sorted(cfg)}")
        if isinstance(cfg[key], dict) and isinstance(value, dict) and key != "dataset_options":
            cfg[key].update(value)
        else:
            cfg[key] = value
    # `--set datasets=a9a,w8a` or `--set parts=table3` arrive as one string
    for key in ("datasets", "parts"):
        if isinstance(cfg[key], str):
            cfg[key] = [d.strip() for d in cfg[key].split(",") if d.strip()]
    unknown = [d for d in cfg["datasets"] if d not in PAPER_DATASETS]
    if unknown:
        raise ValueError(f"experiments.paper.datasets: unknown {unknown}; known: {list(PAPER_DATASETS)}")
    bad = [p for p in cfg["parts"] if p not in DEFAULTS["parts"]]
    if bad:
        raise ValueError(f"experiments.paper.parts: unknown {bad}; choose from {DEFAULTS['parts']}")
    cfg["repeats"] = int(cfg["repeats"])
    if cfg["repeats"] < 1:
        raise ValueError("experiments.paper.repeats must be at least 1")
    cfg["quick"] = bool(cfg["quick"])
    return cfg


def dataset_settings(cfg: dict, name: str) -> PaperDataset:
    """A data set's settings under a paper configuration: its ``dataset_options`` applied, QUICK's limits."""
    ds = PAPER_DATASETS[name]
    opts = dict((cfg.get("dataset_options") or {}).get(name) or {})
    allowed = {"gamma", "k", "k_grid", "table4_k", "table4_landmarks"}
    unknown = set(opts) - allowed
    if unknown:
        raise ValueError(f"experiments.paper.dataset_options.{name}: unknown {sorted(unknown)}; "
                         f"allowed {', '.join(sorted(allowed))}")
    if "gamma" in opts:
        ds = replace(ds, gamma=float(opts["gamma"]), gamma_note="set in the pipeline")
    if "k" in opts:
        ds = replace(ds, k=int(opts["k"]))
    if "k_grid" in opts:
        ds = replace(ds, k_grid=tuple(int(k) for k in opts["k_grid"]))
    if "table4_k" in opts:
        ds = replace(ds, table4_k=None if opts["table4_k"] is None else int(opts["table4_k"]))
    if "table4_landmarks" in opts:
        if opts["table4_landmarks"] not in LANDMARK_METHODS:
            raise ValueError(f"experiments.paper.dataset_options.{name}.table4_landmarks: "
                             f"{opts['table4_landmarks']!r}; choose one of {', '.join(LANDMARK_METHODS)}")
        ds = replace(ds, table4_landmarks=str(opts["table4_landmarks"]))
    if cfg["quick"]:
        ds = replace(ds, k=min(ds.k, QUICK["k_max"]), k_grid=tuple(QUICK["k_grid"]),
                     table4_k=None if ds.table4_k is None else min(ds.table4_k, QUICK["k_max"]))
    return ds
