"""The ``dsvm train``, ``evaluate`` and ``predict`` commands (the parser is :mod:`dsvm.app.cli`).

What they share: DATA may be a zarr dataset or a raw LIBSVM / CSV / ``.npy``
file, which is ingested into a marked temporary folder for the command's
duration (:func:`input_dataset`; for ``evaluate`` and ``predict`` read like
the model: its number of features and its LIBSVM indexing base); every
output is checked before the work starts and replaced only with
``--overwrite`` and only if dsvm wrote it.  ``train --cv N`` without
``--search`` prints the N-fold cross-validation score like ``svm-train -v``.
"""

from __future__ import annotations

import contextlib
import copy
import json
import logging
import math
import os
import time
from collections.abc import Iterator
from pathlib import Path

from ..exceptions import InputFileError, NotDsvmOutputError, UserError
from ..progress import progress_shown
from ..user_files import check_user_path
from .cluster import connect_from_args

logger = logging.getLogger("dsvm.cli")

__all__ = ["train_command", "evaluate_command", "predict_command", "input_dataset", "parse_class_weight",
           "class_weight_for", "check_writable_target"]

PLACEHOLDER_LABELS = "no-labels.npy"


# --------------------------------------------------------------------------- DATA
def check_data_path(args) -> Path:
    """``args.data`` as a path, if it is a dataset folder or a regular file: checked before a cluster starts
    (a FIFO would block the first read for ever)."""
    path = Path(args.data)
    if not path.exists():
        raise UserError(f"{args.data}: no such file or dataset")
    return check_user_path(path, "DATA file or dataset", UserError, expect="either")


def show_progress_of(args) -> bool:
    """Whether the command shows the progress of its passes: as the command line set it up (not with
    --quiet, --no-progress or a log level above INFO; see ``dsvm.app.cli``)."""
    return progress_shown()


@contextlib.contextmanager
def input_dataset(args, kind: str, *, like=None, like_name: str = "", labels_needed: bool = True,
                  progress: bool = True) -> Iterator:
    """The Dataset named by ``args.data``: a zarr dataset opened, or a raw file ingested into a
    temporary folder that is removed on exit.

    ``kind`` names that folder (``dsvm-KIND-PID-*``, found by ``dsvm clean`` if
    a killed run leaves it); an error of the command that names the temporary dataset names ``args.data``
    instead.  ``like``: a fitted model the data must match (its number of features and
    LIBSVM indexing base are used to read a raw file).  ``labels_needed=False``
    (predict): a raw ``.npy`` file without ``--labels`` gets placeholder labels,
    never shown.
    """
    from .. import io
    from ..blocks import temporary_folder

    path = check_data_path(args)
    if path.is_dir():
        given = [f"--{name.replace('_', '-')}" for name in ("format", "labels", "label_column", "delimiter")
                 if getattr(args, name, None) is not None]
        given += ["--no-label"] if getattr(args, "no_label", False) else []
        if given:
            raise UserError(f"{given[0]} is for raw DATA files; {args.data} is a zarr dataset")
        yield io.open_dataset(path)
        return
    with temporary_folder(None, kind) as tmp:
        fmt = args.format or io.detect_format(path)
        labels = args.labels
        if fmt == "npy" and labels is None and not labels_needed:
            labels = _placeholder_labels(path, Path(tmp) / PLACEHOLDER_LABELS)
        logger.info("%s is a raw %s file: ingesting it into a temporary dataset", args.data, fmt)
        options = tabular_options(args)
        if getattr(args, "no_label", False) and fmt != "csv":
            raise UserError(f"--no-label is for CSV files; {args.data} is read as {fmt}")
        if fmt == "csv" and like is not None:
            options["label_column"] = _label_column_like(args, like, options, labels_needed)
        try:
            ds = io.ingest(path, Path(tmp) / "data.zarr", format=fmt, y=labels, like=like, progress=progress,
                           **options)
        except InputFileError as exc:
            if like is None:
                raise
            base = getattr(like, "zero_based_", None)
            indices = "" if base is None else f", {'zero' if base else 'one'}-based LIBSVM indices"
            raise UserError(f"{exc}; {args.data} is read as input to {like_name} "
                            f"({like.n_features_in_} features{indices})") from None
        try:
            yield ds
        except Exception as exc:
            renamed = _naming_the_file(exc, ds.path, args.data)
            if renamed is None:
                raise
            raise renamed.with_traceback(exc.__traceback__) from None


def _naming_the_file(exc: Exception, temporary: str, data: str) -> Exception | None:
    """A copy of ``exc`` naming the user's DATA file where its message names the temporary dataset the file was
    read into (``the feature names of /tmp/dsvm-input-.../data.zarr differ``: a folder that is gone when the
    user reads it); None when the message does not name it (or the error cannot be copied)."""
    if not (exc.args and isinstance(exc.args[0], str) and str(temporary) in exc.args[0]):
        return None
    try:
        renamed = copy.copy(exc)
    except Exception:  # an error type that cannot be rebuilt from its arguments: left as it is
        return None
    renamed.args = (exc.args[0].replace(str(temporary), str(data)), *exc.args[1:])
    return renamed


def tabular_options(args) -> dict:
    """``header``, ``label_column`` (``False`` for ``--no-label``) and ``delimiter`` of :func:`dsvm.ingest` from
    the command line."""
    label = getattr(args, "label_column", None)
    if label is not None and label.lstrip("-").isdigit():
        label = int(label)
    if getattr(args, "no_label", False):
        if label is not None:
            raise UserError("give --label-column or --no-label, not both")
        label = False
    header = {"auto": "auto", "true": True, "false": False}[getattr(args, "header", "auto")]
    return {"header": header, "label_column": label, "delimiter": getattr(args, "delimiter", None)}


def _label_column_like(args, model, options: dict, labels_needed: bool):
    """The label column of a CSV read as input to ``model`` when none was given: no label column when the
    file has exactly the model's number of columns (predict; evaluate needs labels), else the default (the one
    header column not among the model's feature names, or column 0)."""
    from ..io import csv_width

    if options["label_column"] is not None:
        return options["label_column"]
    width = csv_width(args.data, options["delimiter"])
    if width != model.n_features_in_:
        return None
    if labels_needed:
        raise UserError(f"{args.data} has {width} columns, as many as the model's features, so no label column: "
                        "evaluate needs labels (dsvm predict scores data without labels)")
    logger.info("%s has %d columns, the model's features: read without a label column", args.data, width)
    return False


def _placeholder_labels(x_path: Path, target: Path) -> Path:
    """A file of zero labels, one per row of the ``.npy`` file ``x_path`` (written sparse, never in memory)."""
    import numpy as np

    rows = np.load(x_path, mmap_mode="r").shape[0]
    np.lib.format.open_memmap(target, mode="w+", dtype=np.int8, shape=(rows,)).flush()
    return target


# --------------------------------------------------------------------------- options
def gamma_option(text: str):
    """``--gamma``: a number, ``scale`` or ``auto``."""
    if text in ("scale", "auto"):
        return text
    try:
        return float(text)
    except ValueError:
        raise UserError(f"--gamma must be a number, 'scale' or 'auto', got {text!r}") from None


def k_option(text):
    """``-k``: a positive number of landmarks, or ``auto`` (chosen by the fit)."""
    if text == "auto" or isinstance(text, int):
        return text
    try:
        return int(text)
    except ValueError:
        raise UserError(f"-k must be a positive integer or 'auto', got {text!r}") from None


def parse_class_weight(values: list[str] | None):
    """``--class-weight`` values: None, ``"balanced"``, or ``[(class text, weight), ...]``."""
    if not values:
        return None
    if "balanced" in values:
        if len(values) > 1:
            raise UserError("--class-weight balanced cannot be combined with CLASS:W weights")
        return "balanced"
    pairs: list[tuple[str, float]] = []
    for value in values:
        label, sep, text = value.rpartition(":")
        if not sep or not label:
            raise UserError(f"--class-weight {value}: expected CLASS:W (e.g. 1:5) or 'balanced'")
        try:
            weight = float(text)
        except ValueError:
            raise UserError(f"--class-weight {value}: the weight {text!r} is not a number") from None
        if not (math.isfinite(weight) and weight >= 0):
            raise UserError(f"--class-weight {value}: the weight must be finite and non-negative")
        if label in (p[0] for p in pairs):
            raise UserError(f"--class-weight names class {label!r} twice")
        pairs.append((label, weight))
    return pairs


def _matching_class(text: str, classes: list):
    for c in classes:
        if isinstance(c, str):
            if c == text:
                return c
            continue
        try:
            if float(text) == c:
                return c
        except ValueError:
            return None
    return None


def class_weight_for(pairs: list[tuple[str, float]], classes, data: str) -> dict:
    """The ``class_weight`` dict of ``--class-weight CLASS:W`` pairs, keyed by the dataset's own labels
    (``1`` names the label ``1.0`` of a LIBSVM file; text labels match exactly)."""
    labels = [c.item() if hasattr(c, "item") else c for c in classes]
    weights = {}
    for text, weight in pairs:
        label = _matching_class(text, labels)
        if label is None:
            shown = ", ".join(str(c) for c in labels[:20]) + (", ..." if len(labels) > 20 else "")
            raise UserError(f"--class-weight {text}:{weight:g}: {data} has no class {text!r} (classes: {shown})")
        weights[label] = weight
    return weights


def check_writable_target(path: str, option: str, overwrite: bool, ours, what: str) -> None:
    """Fail before the work, not after it, when an output file could not be written.

    The folder must exist and be writable, and an existing file must be a
    ``what`` dsvm wrote and ``--overwrite`` given (the rule of :mod:`dsvm.io._replace`).
    """
    from ..io import check_replaceable

    try:
        target = check_replaceable(path, overwrite, ours, what)
    except NotDsvmOutputError as exc:
        raise UserError(f"{option}: {exc}".replace("overwrite=True (on the command line: --overwrite)",
                                                   "--overwrite")) from None
    folder = target.parent
    if not folder.is_dir():
        raise UserError(f"{option} {path}: folder {folder} does not exist")
    if not os.access(folder, os.W_OK | os.X_OK):
        raise UserError(f"{option} {path}: folder {folder} is not writable")


def _check_train_options(args, regression: bool, cv_only: bool) -> None:
    """Combinations of train options that cannot work, named before any data is read."""
    if regression:
        wrong = [name for name, given in (("--probability", args.probability),
                                          ("--class-weight", args.class_weight),
                                          ("--search", args.search), ("--cv", args.cv is not None)) if given]
        if wrong:
            raise UserError(f"{wrong[0]} is for classification; it does not apply to --task regression")
        if args.solver not in ("newton", "tron"):
            raise UserError(f"--solver {args.solver} is not available for --task regression; use newton or tron")
    elif args.epsilon is not None:
        raise UserError("--epsilon is for --task regression")
    if args.cv is not None and args.cv < 2:
        raise UserError(f"--cv {args.cv}: cross-validation needs at least 2 folds")
    if args.cv_report and not args.search:
        raise UserError("--cv-report is where the --search report goes; give --search too")
    if args.model is None and not cv_only:
        raise UserError("--model FILE.npz is required (only --cv N without --search runs without one)")
    if args.checkpoint and args.model is None:
        raise UserError("--checkpoint keeps a fit until its model is saved: give --model too")
    if args.checkpoint and _same_file(args.checkpoint, args.model):
        raise UserError(f"--checkpoint {args.checkpoint} is the --model file ({args.model}); the checkpoint is kept "
                        "until the model is saved, so it needs a path of its own")


def _same_file(a: str, b: str) -> bool:
    """Whether two paths name one file: the same path once links and ``..`` are resolved, or (both existing)
    the same file by another name (a hard link)."""
    if os.path.realpath(a) == os.path.realpath(b):
        return True
    try:
        return os.path.samefile(a, b)
    except OSError:  # either is missing: not one file
        return False


def _check_search_values(model, grid: dict[str, list], items: list[str]) -> None:
    """Every ``--search`` value checked as the fit checks its parameter (``-C nan`` is refused before the work,
    so is ``--search C=1,nan``), and landmark methods the search cannot share."""
    from sklearn.base import clone

    from ..model_selection import check_search_landmarks
    from ..svm import check_params
    from ._search_report import ALIASES

    given = {ALIASES.get(name, name): name for name in (item.partition("=")[0].strip() for item in items)}
    for key, values in grid.items():
        for value in values:
            try:
                check_params(clone(model).set_params(**{key: value}))
                if key == "landmarks":
                    check_search_landmarks([value])
            except (TypeError, ValueError) as exc:
                raise UserError(f"--search {given.get(key, key)}: {exc}") from None


def _estimator(args, regression: bool, class_weight):
    from ..svm import NystroemSVC, NystroemSVR, check_params

    params = dict(
        C=args.C, gamma=gamma_option(args.gamma), n_components=k_option(args.n_components), kernel=args.kernel,
        degree=args.degree, coef0=args.coef0, landmarks=args.landmarks, solver=args.solver, hessian=args.hessian,
        tol=args.tol, max_iter=args.max_iter, dtype=args.dtype, feature_store=args.feature_store,
        random_state=args.random_state, scale=args.scale, time_budget=args.time_budget,
        k_tol=args.k_tol,
    )
    if regression:
        model = NystroemSVR(epsilon=0.0 if args.epsilon is None else args.epsilon, **params)
    else:
        model = NystroemSVC(class_weight="balanced" if class_weight == "balanced" else None,
                            probability=args.probability, **params)
    if args.checkpoint:
        model.set_params(checkpoint=args.checkpoint)
    check_params(model)
    return model


# --------------------------------------------------------------------------- train
def cv_report_dir(args) -> str:
    """Where ``train --search`` writes its CV table and heat map."""
    return args.cv_report or str(Path(args.model).with_suffix("")) + "_cv"


def cross_validate(model, ds, folds: int, scoring: str, refit: bool):
    """Print the ``folds``-fold CV score of ``model``'s parameters (mean ± std over the folds); return the
    model fitted on all rows (``refit``, warm-started from the fold models) or None."""
    from ..model_selection import NystroemSVCCV

    params = model.get_params()
    search = NystroemSVCCV({"C": [params.pop("C")]}, cv=folds, scoring=scoring, refit=refit, **params)
    search.fit(ds)
    best = search.best_index_  # the only point, or with n_components="auto" its best k
    mean, std = search.cv_results_["mean_test_score"][best], search.cv_results_["std_test_score"][best]
    splits = [search.cv_results_[f"split{i}_test_score"][best] for i in range(search.n_splits_)]
    if params.get("n_components") == "auto":
        logger.info("cross-validation: k=%s chosen", search.best_params_["n_components"])
    logger.info("cross-validation %s per fold: %s", scoring, ", ".join(f"{s:.4f}" for s in splits))
    print(f"cross-validation {scoring}: {100 * mean:.2f} % ± {100 * std:.2f} ({search.n_splits_} folds, "
          "mean ± standard deviation)")
    return search.best_estimator_ if refit else None


def train_command(args) -> int:
    """``dsvm train``: fit (or cross-validate, or search) and save the model."""
    from ..svm import SCORINGS, kept_until_saved

    regression = args.task == "regression"
    cv_only = args.cv is not None and not args.search
    _check_train_options(args, regression, cv_only)
    class_weight = parse_class_weight(args.class_weight)
    model = _estimator(args, regression, class_weight)
    grid = _search_grid(args, model)
    if (grid is not None or cv_only) and args.scoring not in SCORINGS:
        raise UserError(f"--scoring {args.scoring!r} is not supported; choose one of {', '.join(SCORINGS)}")
    _check_train_paths(args, searching=grid is not None)
    keep = kept_until_saved() if args.checkpoint else contextlib.nullcontext()
    with connect_from_args(args), keep, input_dataset(args, "train", progress=show_progress_of(args)) as ds:
        if isinstance(class_weight, list):
            model.set_params(class_weight=class_weight_for(class_weight, ds.classes, args.data))
        model = _fit_or_search(args, model, ds, grid, cv_only)
    if model is not None:
        _save_trained(args, model)
    return 0


def _search_grid(args, model) -> dict[str, list] | None:
    """The ``--search`` grid, every value checked against ``model``; None without ``--search``."""
    from ._search_report import parse_search_args

    if not args.search:
        return None
    try:
        grid = parse_search_args(args.search)
    except ValueError as exc:
        raise UserError(f"--search: {exc}") from None
    _check_search_values(model, grid, args.search)
    return grid


def _check_train_paths(args, searching: bool) -> None:
    """DATA, the model file, the checkpoint and (``searching``) the report folder, checked before a cluster
    starts."""
    from ..svm import check_checkpoint_path, model_file_problem
    from ._report_files import check_output_folder

    check_data_path(args)
    if args.model is not None:
        check_writable_target(args.model, "--model", args.overwrite, model_file_problem, "model")
    if args.checkpoint:
        check_checkpoint_path(args.checkpoint)
    if searching:
        check_output_folder(cv_report_dir(args), "report folder", overwrite=args.overwrite)


def _fit_or_search(args, model, ds, grid: dict[str, list] | None, cv_only: bool):
    """``model`` fitted on ``ds``, cross-validated (``cv_only``: refitted only for a ``--model``, else None) or
    the best of the ``grid`` search."""
    from ._search_report import search_and_report

    t0 = time.perf_counter()
    if cv_only:
        model = cross_validate(model, ds, args.cv, args.scoring, refit=args.model is not None)
    elif grid is None:
        model.fit(ds)
    else:
        search, paths = search_and_report(ds, param_grid=grid, out_dir=cv_report_dir(args), cv=args.cv or 5,
                                          scoring=args.scoring, **model.get_params())
        model = search.best_estimator_
        logger.info("search: best %s (mean CV %s %.4f); table %s", search.best_params_, args.scoring,
                    search.best_score_, paths.get("markdown"))
    if model is not None:
        path = getattr(model, "k_path_", None)
        chosen = "" if not path else f" (chosen by -k auto of {', '.join(str(p['k']) for p in path)})"
        logger.info("trained in %.2fs: %d landmarks%s, %d Newton iteration(s), relative duality gap %s",
                    time.perf_counter() - t0, model.components_.shape[0], chosen, model.n_iter_,
                    _gaps_text(getattr(model, "duality_gap_", math.nan)))
    return model


def _gaps_text(gap) -> str:
    """``duality_gap_`` (a number or one per class) for a log line."""
    gaps = gap.tolist() if hasattr(gap, "tolist") else gap
    return " ".join(f"{g:.2e}" for g in (gaps if isinstance(gaps, list) else [gaps]))


def _save_trained(args, model) -> None:
    """Save the fitted model to ``--model``, then remove the checkpoint; a failed save keeps the checkpoint and
    says how to save it without refitting."""
    from ..svm import remove_checkpoint, save_model

    try:
        save_model(model, args.model, overwrite=args.overwrite)
    except (OSError, ValueError) as exc:
        if not args.checkpoint:
            raise
        msg = " ".join(str(exc).split())
        raise UserError(f"{msg}; the finished fit is kept in checkpoint {args.checkpoint}: rerun the same command "
                        "(with a writable --model) to save it without refitting") from None
    logger.info("model written to %s", args.model)
    if args.checkpoint:
        remove_checkpoint(args.checkpoint)


# --------------------------------------------------------------------------- evaluate, predict
def evaluate_command(args) -> int:
    """``dsvm evaluate``: a classifier's accuracy and per-class scores, a regression model's R², RMSE, MAE."""
    from ..svm import evaluate, load_model

    model = load_model(args.model)
    check_data_path(args)
    with connect_from_args(args), input_dataset(args, "input", like=model, like_name=f"the model {args.model}",
                                                progress=show_progress_of(args)) as ds:
        result = evaluate(model, ds)
    result.update(fit_seconds=model.solver_stats_.get("fit_seconds"), k=int(model.components_.shape[0]), C=model.C,
                  gamma=model.gamma_, kernel=model.kernel, model=str(args.model), data=str(args.data))
    if args.json:
        print(json.dumps(result))
    elif "r2" in result:
        print(f"R² {result['r2']:.4f}, RMSE {result['rmse']:.6g}, MAE {result['mae']:.6g} on {result['n_test']} rows, "
              f"predict {result['predict_seconds']:.2f} s")
    else:
        print(f"accuracy {100 * result['accuracy']:.2f} % on {result['n_test']} rows "
              f"(balanced {100 * result['balanced_accuracy']:.2f} %), predict {result['predict_seconds']:.2f} s")
        print(f"{'class':>12} {'precision':>10} {'recall':>10} {'f1':>10} {'support':>9}")
        for c in result["per_class"]:
            print(f"{str(c['label']):>12} {c['precision']:>10.4f} {c['recall']:>10.4f} {c['f1']:>10.4f} {c['support']:>9d}")
    return 0


def _check_proba_model(model, path: str) -> None:
    if not hasattr(model, "classes_"):
        raise UserError(f"--proba: {path} is a regression model ({type(model).__name__}); it has no class "
                        "probabilities")
    if not hasattr(model, "probA_"):
        raise UserError(f"--proba: {path} has no Platt sigmoids; train it with --probability")


def _refuse_output_over_inputs(args) -> None:
    """``--out`` must not be, nor (a ``.zarr`` folder) hold, one of the command's own inputs (the model, the
    data, the labels): replacing it would remove them."""
    from ..io import input_inside

    for flag, source in (("MODEL", args.model), ("DATA", args.data), ("--labels", getattr(args, "labels", None))):
        if source is None or not input_inside(args.out, source):
            continue
        if os.path.realpath(args.out) == os.path.realpath(source) or os.path.isfile(args.out):
            raise UserError(f"--out {args.out} is the command's own input ({flag} {source}); write the predictions "
                            "to another file")
        raise UserError(f"--out {args.out} holds the command's own input ({flag} {source}), which replacing it "
                        "would remove; write the predictions elsewhere")


def predict_command(args) -> int:
    """``dsvm predict``: labels (or values, decision values, class probabilities) block by block into a file."""
    from ..svm import load_model
    from ._predictions import OUTPUT_SUFFIXES, prediction_problem, write_predictions

    if Path(args.out).suffix.lower() not in OUTPUT_SUFFIXES:
        raise UserError(f"--out {args.out}: unknown output type; use one of {', '.join(OUTPUT_SUFFIXES)}")
    _refuse_output_over_inputs(args)
    check_writable_target(args.out, "--out", args.overwrite, prediction_problem, "prediction file")
    model = load_model(args.model)
    if args.proba:
        _check_proba_model(model, args.model)
    check_data_path(args)
    with connect_from_args(args), input_dataset(args, "input", like=model, like_name=f"the model {args.model}",
                                                labels_needed=False, progress=show_progress_of(args)) as ds:
        n = write_predictions(model, ds, args.out, decision=args.decision, proba=args.proba,
                              overwrite=args.overwrite)
    logger.info("wrote %d predictions to %s", n, args.out)
    return 0
