"""YAML pipelines: ingest → train → evaluate → report (Markdown, JSON, PNG plots).

A pipeline file (see ``pipelines/``)::

    name: a9a
    params:                        # defaults for ${...}; override with --set key=value
      data_dir: ../shared/data
    output: reports/a9a            # report folder; ingested stores go to <output>/data
    data:
      train: {source: "${data_dir}/a9a.train.xz", format: libsvm, n_features: 123}
      test:  {source: "${data_dir}/a9a.test.xz", format: libsvm, n_features: 123}
      # or generated:  train: {generate: {n_samples: 100000, n_features: 20, random_state: 0}}
    preprocess: {scale: standard}  # optional: scale features (fitted with the model, kept in its file)
    model:
      estimator: NystroemSVC
      params: {C: 10, gamma: 0.05, n_components: 500, random_state: 0}
      # search: {grid: {C: [1, 10, 100], gamma: [0.01, 0.05]}, cv: 5}   # optional CV step
    experiments:
      accuracy_vs_k: [100, 200, 500, 1000]   # optional extra fits, one plot
    report: {plots: true}

Relative paths are taken from the current directory.  The model is saved
as ``<output>/model.npz``.

A data set without a test file can be split after ingesting (stratified by
class and seeded; chunk by chunk, never loaded, and the same split whatever
the chunking: see :func:`dsvm.io.split_dataset`)::

    data:
      train: {source: "${data_dir}/mushrooms.all.xz", format: libsvm, n_features: 112}
      split: {test_fraction: 0.2, random_state: 0}

``kind: paper`` runs the LA-SN paper's experiments instead of one fit (see
:mod:`dsvm.app._paper` and ``pipelines/paper.yaml``); its settings go under
``experiments: paper:`` and it needs no ``data`` or ``model`` section.

Pipelines are read and checked by :mod:`dsvm.app._pipeline_spec` (every key at
every level, the model parameters, the inputs) before anything is written.
"""

from __future__ import annotations

import json
import logging
import os
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from ..exceptions import PipelineError
from ..io import check_replaceable, check_target, ingest, make_classification_zarr, open_dataset, split_dataset
from ..svm import NystroemSVC, evaluate, model_file_problem, save_model
from ._paper import run_paper
from ._pipeline_spec import check_inputs, check_pipeline, model_params, search_grid
from ._report import json_safe, machine_line, nan_as_null, plot_accuracy_vs_k, plot_convergence, train_report_markdown
from ._report_files import (
    OUTPUT_MARKER,
    check_output_folder,
    claim_output_folder,
    mark_output_folder,
    report_file_problem,
    write_report_file,
)
from ._search_report import cv_table, search_and_report

logger = logging.getLogger(__name__)

__all__ = ["run_pipeline", "materialise_dataset", "DEMO_PIPELINE"]


def materialise_dataset(entry: dict[str, Any], target: Path, where: str, like=None):
    """Open, ingest or generate one dataset entry of the pipeline (a file ingested ``like`` the
    training dataset: the same LIBSVM indexing base and width)."""
    if not isinstance(entry, dict):
        raise PipelineError(f"{where}: expected a mapping with 'source', 'zarr' or 'generate'")
    if "zarr" in entry:
        return open_dataset(entry["zarr"])
    if "generate" in entry:
        opts = dict(entry["generate"])
        return make_classification_zarr(target, overwrite=True, **opts)
    if "source" in entry:
        opts = {k: v for k, v in entry.items() if k != "source"}
        return ingest(entry["source"], target, overwrite=True, like=like, **opts)
    raise PipelineError(f"{where}: give 'source' (a file to ingest), 'zarr' (a dataset) or 'generate'")


def _split_dataset(ds, data_dir: Path, opts: Any):
    """``data: split:`` — a stratified, seeded train/test split by the row hash, chunk by chunk (never loaded)."""
    if not isinstance(opts, dict) or set(opts) - {"test_fraction", "random_state"}:
        raise PipelineError(f"data.split: expected {{test_fraction: 0.2, random_state: 0}}, got {opts!r}")
    fraction = float(opts.get("test_fraction", 0.2))
    if not 0.0 < fraction < 1.0:
        raise PipelineError(f"data.split.test_fraction must be between 0 and 1, got {fraction}")
    try:
        return split_dataset(ds, data_dir / "train_split.zarr", data_dir / "test_split.zarr", test_fraction=fraction,
                             seed=int(opts.get("random_state", 0)), overwrite=True)
    except ValueError as exc:
        raise PipelineError(f"data.split: {exc}") from None


@contextmanager
def _remove_new_empty_dirs_on_failure(path: Path):
    """On failure, remove ``path`` and those of its parents this run created, if they hold nothing else.

    Only a folder that holds nothing, or nothing but the output marker this run
    wrote, is removed, so nothing that existed before the run, and nothing
    written into them, is ever deleted.  The marker goes only with its folder:
    a folder that stays (it holds the data the failed run ingested) keeps it,
    so the next run, with ``--overwrite``, may write there.
    """
    new = []  # deepest first
    for p in (path, *path.parents):
        if p.exists():
            break
        new.append(p)
    try:
        yield
    except BaseException:
        for p in new:
            _remove_if_empty(p)
        raise


def _remove_if_empty(folder: Path) -> None:
    """``rmdir`` a folder that holds nothing but (perhaps) dsvm's marker; the marker is put back if the folder
    cannot go (something was written into it meanwhile)."""
    try:
        names = set(os.listdir(folder))
    except OSError:
        return
    if names - {OUTPUT_MARKER}:
        return
    try:
        if names:
            (folder / OUTPUT_MARKER).unlink()
        os.rmdir(folder)
    except OSError:
        if names:
            try:
                mark_output_folder(folder)
            except OSError:
                logger.warning("%s: its %s marker could not be put back", folder, OUTPUT_MARKER)


def _run_outputs(spec: dict[str, Any], out: Path) -> list[tuple[Path, Any, str]]:
    """``(path, rule, what)`` of every file and dataset a run writes into ``out``: the rule is the one
    its write applies (``rule(path)`` is None for an output dsvm may replace)."""
    report = [(out / name, report_file_problem, "report file") for name in ("report.json", "report.md")]
    if spec.get("kind") == "paper":
        return report
    data, model = spec["data"], spec.get("model") or {}
    stores = [f"{role}.zarr" for role in ("train", "test") if data.get(role) and "zarr" not in data[role]]
    stores += ["train_split.zarr", "test_split.zarr"] if data.get("split") is not None else []
    files = ["cv_results.csv", "cv_results.json", "cv_results.md", "cv_heatmap.png"] if model.get("search") else []
    if (spec.get("report") or {}).get("plots", True):
        files.append("convergence.png")
        if (spec.get("experiments") or {}).get("accuracy_vs_k"):
            files.append("accuracy_vs_k.png")
    return [*report, (out / "model.npz", model_file_problem, "model"),
            *[(out / name, report_file_problem, "report file") for name in files],
            *[(out / "data" / name, None, "dataset") for name in stores]]


def _check_run_outputs(spec: dict[str, Any], out: Path) -> None:
    """Before any work: every output of the run may be written (absent, or one dsvm may replace).

    Raises
    ------
    NotDsvmOutputError
        Naming the first output that is not one dsvm wrote (a FIFO at ``report.json``, a user's file
        at ``model.npz``, a folder at ``data/train.zarr``).
    """
    for path, rule, what in _run_outputs(spec, out):
        if rule is None:
            check_target(path, overwrite=True)
        else:
            check_replaceable(path, True, rule, what)


def run_pipeline(spec: dict[str, Any]) -> dict[str, Any]:
    """Run a loaded pipeline with the current Dask scheduler.

    Everything that can be checked without reading the data is checked first
    (the keys, types and model parameters again, since ``spec`` may have been
    changed after :func:`load_pipeline`; the input files; Clarabel for the
    paper's structure benchmark; every output the run writes), so a bad
    pipeline fails before anything is written.  A run that fails later removes
    the folders it made if they are empty; one that holds its ingested data
    stays, with its marker.

    Parameters
    ----------
    spec : dict
        A pipeline as returned by :func:`load_pipeline`.

    Returns
    -------
    dict
        The report, also written as ``report.json`` and ``report.md`` into ``spec["output"]``.

    Raises
    ------
    PipelineError
        A malformed pipeline, or the paper pipeline without Clarabel.
    FileNotFoundError
        An input file or dataset that does not exist (no output folder is created).
    NotDsvmOutputError
        The output folder, or a file or dataset the run would write into it, is not dsvm's (found before
        any work).
    """
    where = f"pipeline {spec.get('name', '')}".strip()
    check_pipeline(spec, where)
    check_inputs(spec, where)
    out = check_output_folder(spec["output"], "pipeline output folder")
    _check_run_outputs(spec, out)
    with _remove_new_empty_dirs_on_failure(out / "data"):
        if spec.get("kind") == "paper":
            return run_paper(spec)
        return _run_train(spec, out)


def _run_train(spec: dict[str, Any], out: Path) -> dict[str, Any]:
    """The ``kind: train`` pipeline: ingest, fit (or search), evaluate, report."""
    claim_output_folder(out, "pipeline output folder")
    train, test, ingest_seconds = _ready_data(spec, out / "data")
    model, params, cv_rows, cv_plots = _pipeline_model(spec, train, out)
    save_model(model, out / "model.npz", overwrite=True)
    evaluation = evaluate(model, test) if test is not None else None
    stats = model.solver_stats_
    report: dict[str, Any] = {
        "name": spec["name"],
        "machine": machine_line(),
        "data": {"train": str(train.path), "test": str(test.path) if test is not None else None,
                 "n_train": train.n_samples, "n_features": train.n_features, "split": spec["data"].get("split")},
        "model": {"estimator": "NystroemSVC", "params": params, "gamma": model.gamma_,
                  "n_components": int(model.components_.shape[0]), "n_features_out": int(model.coef_.shape[1]),
                  "k_path": getattr(model, "k_path_", None), "duality_gap": nan_as_null(model.duality_gap_)},
        "timing": {"ingest_seconds": ingest_seconds, **{k: v for k, v in stats.items() if k.endswith("_seconds")}},
        "solver": {"hessian": stats["hessian"], "problems": stats["problems"]},
        "evaluation": evaluation,
        "plots": list(cv_plots),
    }
    if cv_rows is not None:
        report["cv_results"] = cv_rows
    ks = (spec.get("experiments") or {}).get("accuracy_vs_k")
    if ks and test is not None:
        report["accuracy_vs_k"] = _accuracy_vs_k(ks, model, evaluation, params, train, test)
    if (spec.get("report") or {}).get("plots", True):
        report["plots"] += _train_plots(stats, report.get("accuracy_vs_k"), out)
    write_report_file(out / "report.json", json.dumps(report, indent=2, default=json_safe))
    write_report_file(out / "report.md", train_report_markdown(report))
    logger.info("pipeline %s: report written to %s", spec["name"], out)
    return report


def _ready_data(spec: dict[str, Any], data_dir: Path) -> tuple[Any, Any, float]:
    """The training and test datasets (the test one None without ``data: test:`` or ``split:``), opened,
    ingested, generated or split into ``data_dir``, and the seconds that took."""
    data_dir.mkdir(exist_ok=True)
    t0 = time.perf_counter()
    train = materialise_dataset(spec["data"]["train"], data_dir / "train.zarr", "data.train")
    test_entry = spec["data"].get("test")
    split = spec["data"].get("split")
    test = materialise_dataset(test_entry, data_dir / "test.zarr", "data.test", like=train) if test_entry else None
    if split is not None:
        train, test = _split_dataset(train, data_dir, split)
    ingest_seconds = time.perf_counter() - t0
    logger.info("pipeline %s: data ready in %.2fs (train %d rows)", spec["name"], ingest_seconds, train.n_samples)
    return train, test, ingest_seconds


def _pipeline_model(spec: dict[str, Any], train, out: Path) -> tuple[Any, dict[str, Any], list | None, list[str]]:
    """The model of ``model:`` fitted on ``train`` (the best of its ``search:``, whose files go into ``out``), its
    parameters, the CV table (None without a search) and the names of the search's plots."""
    params = model_params(spec, f"pipeline {spec['name']}")
    search_spec = spec["model"].get("search")
    if not search_spec:
        return NystroemSVC(**params).fit(train), params, None, []
    grid = search_grid(search_spec, f"pipeline {spec['name']}")
    search, paths = search_and_report(train, param_grid=grid, out_dir=out, cv=int(search_spec.get("cv", 5)),
                                      scoring=search_spec.get("scoring", "accuracy"), prefix="cv", **params)
    cv_rows = cv_table(search)
    cv_plots = [Path(p).name for kind, p in paths.items() if kind == "heatmap"]
    logger.info("pipeline %s: best %s (CV %.4f)", spec["name"], search.best_params_, search.best_score_)
    return search.best_estimator_, {**params, **search.best_params_}, cv_rows, cv_plots


def _accuracy_vs_k(ks: list, model, evaluation: dict[str, Any], params: dict[str, Any], train, test) -> list[dict]:
    """``experiments: accuracy_vs_k:``: the test accuracy and fit time of one fit per number of landmarks."""
    rows = []
    for k in ks:
        # the model above is this point (its k, given or chosen): no second fit; a given k is compared as asked
        # for, since a pivoted Cholesky map may keep fewer landmarks (n_components_)
        fitted = model.n_components_ if model.n_components == "auto" else model.n_components
        if int(k) == fitted:
            m, accuracy = model, evaluation["accuracy"]
        else:
            m = NystroemSVC(**{**params, "n_components": int(k)}).fit(train)
            accuracy = evaluate(m, test)["accuracy"]
        rows.append({"n_components": int(k), "accuracy": accuracy, "fit_seconds": m.solver_stats_["fit_seconds"]})
        logger.info("accuracy vs k: k=%d accuracy=%.4f", k, rows[-1]["accuracy"])
    return rows


def _train_plots(stats: dict[str, Any], accuracy_vs_k: list[dict] | None, out: Path) -> list[str]:
    """The names of the plots written into ``out``: the solver's convergence and (given its rows) accuracy vs k."""
    plots = []
    if plot_convergence(stats, out / "convergence.png"):
        plots.append("convergence.png")
    if accuracy_vs_k and plot_accuracy_vs_k(accuracy_vs_k, out / "accuracy_vs_k.png"):
        plots.append("accuracy_vs_k.png")
    return plots


DEMO_PIPELINE: dict[str, Any] = {
    "name": "demo",
    "description": "Generated non-linear problem (a noisy sphere in 20 dims) on the default local cluster",
    "params": {"n_train": 200_000, "n_test": 50_000, "n_features": 20},
    "output": "reports/demo",
    "data": {
        "train": {"generate": {"n_samples": "${n_train}", "n_features": "${n_features}", "random_state": 0}},
        "test": {"generate": {"n_samples": "${n_test}", "n_features": "${n_features}", "random_state": 1}},
    },
    "model": {"estimator": "NystroemSVC", "params": {"C": 10.0, "n_components": 500, "random_state": 0}},
    "experiments": {"accuracy_vs_k": [50, 100, 200, 500]},
    "report": {"plots": True},
}
