"""The ``dsvm`` command.

::

    dsvm demo                                  # the main job on generated data, local cluster
    dsvm ingest a9a.train a9a.zarr
    dsvm train a9a.zarr --model a9a.model -C 10 --gamma 0.05 -k 500 [--cluster cluster/slurm.yaml]
    dsvm train a9a.train --cv 5 -C 10 --gamma 0.05  # N-fold CV score, as svm-train -v
    dsvm evaluate a9a.model a9a.test [--json]  # a zarr dataset or a raw file, read like the model
    dsvm predict a9a.model new.zarr --out pred.zarr [--proba | --decision]   # or .csv / .npy
    dsvm export a9a.model a9a.onnx             # ONNX, through skl2onnx
    dsvm run pipelines/a9a.yaml [--cluster ...] [--set data_dir=...]
    dsvm info a9a.model | a9a.zarr
    dsvm clean [DIR ...] [--dry-run]           # what killed runs left: scratch stores, temporaries

User errors end with one line on stderr and exit status 1 (2 for a bad
command line); only bugs print a traceback.
"""

from __future__ import annotations

import argparse
import errno
import json
import logging
import os
import select
import sys
import tempfile
import warnings
from pathlib import Path
from typing import Any

from ..exceptions import ClusterSpecError, ModelFileError, NoWorkersError, PipelineError, UserError
from ..options import DTYPES, FEATURE_STORES, HESSIANS, KERNELS, LANDMARK_METHODS, SCALINGS, SOLVERS
from ..progress import progress_shown, set_progress
from ..signals import sigterm_cleanup
from ..version import __version__

logger = logging.getLogger("dsvm.cli")

EXIT_USER_ERROR = 1
TASKS = ("classification", "regression")
INPUT_FORMATS = ("libsvm", "csv", "npy")


def _add_cluster_args(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("where to run (default: a local Dask cluster sized to this machine)")
    g.add_argument("--cluster", metavar="SPEC.yaml", help="cluster spec file (see cluster/README.md)")
    g.add_argument("--scheduler-address", metavar="ADDR",
                   help="attach to a running scheduler, e.g. tcp://127.0.0.1:8786 (fails after "
                        "dsvm.connect-timeout, 10 s, if it does not answer)")
    g.add_argument("--scheduler-file", metavar="FILE", help="attach to the scheduler described by a scheduler file")
    g.add_argument("--workers", type=int, metavar="N", help="worker processes of the default local cluster (at most 4 "
                   "per CPU core of this machine)")
    g.add_argument("--threads-per-worker", type=int, metavar="N", help="threads per worker of the default local cluster")
    g.add_argument("--memory-limit", metavar="SIZE", help="memory limit per worker of the default local cluster, e.g. 2GiB")


def _add_tabular_args(g) -> None:
    """How a CSV or Parquet file is read (ingest, and raw DATA files of train / evaluate / predict)."""
    g.add_argument("--header", nargs="?", const="true", choices=["auto", "true", "false"], default="auto",
                   help="CSV: the first line holds column names (--header alone: true; default auto: only if it "
                        "cannot be data)")
    g.add_argument("--no-header", dest="header", action="store_const", const="false",
                   help="CSV: the first line is data (same as --header false)")
    g.add_argument("--label-column", metavar="NAME|INDEX", default=None,
                   help="CSV / Parquet: the label column, by header name or by index (0 first, -1 last); default "
                        "0 for CSV (evaluate / predict: the one header column not among the model's feature "
                        "names), required for Parquet")
    g.add_argument("--delimiter", metavar="CHAR", default=None,
                   help="CSV field separator, one character ('\\t' or 'tab' for tab); default ',' (tab for .tsv)")


def _add_raw_input_args(p: argparse.ArgumentParser, unlabelled: bool = False) -> None:
    """How train / evaluate / predict read a DATA that is a file rather than a zarr dataset (``unlabelled``:
    predict, which also reads a CSV without a label column)."""
    g = p.add_argument_group("raw DATA files (LIBSVM, CSV or .npy, .gz/.xz/.bz2 or not; ingested into a "
                             "temporary dataset)")
    g.add_argument("--format", choices=list(INPUT_FORMATS), default=None,
                   help="format of a raw DATA file (default: from the file name, else from its first line)")
    g.add_argument("--labels", metavar="NPY", default=None,
                   help="labels of a raw .npy DATA file: a 1-d .npy file (predict does not need them)")
    _add_tabular_args(g)
    if unlabelled:
        g.add_argument("--no-label", action="store_true",
                       help="CSV: the file has no label column, every column is a feature (default: so when it has "
                            "exactly the model's number of columns)")


def _model_args(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("model")
    g.add_argument("--task", choices=list(TASKS), default="classification",
                   help="classification (NystroemSVC; several classes one-vs-rest) or regression (NystroemSVR, "
                        "epsilon-insensitive L2-loss SVR); default classification")
    g.add_argument("-C", type=float, default=1.0, help="cost of the squared hinge (or epsilon) loss (default 1)")
    g.add_argument("--epsilon", type=float, default=None,
                   help="regression: half-width of the insensitive tube (default 0)")
    g.add_argument("--gamma", default="scale", help="kernel gamma: a number, 'scale' or 'auto' (default scale)")
    g.add_argument("-k", "--n-components", default=500,
                   help="number of landmarks, or 'auto': grown on held-out rows until doubling it gains too little "
                        "(default 500)")
    g.add_argument("--time-budget", type=float, default=None, metavar="SECONDS",
                   help="stop the fit's Newton iterations (and, with -k auto, its search for k) so that it ends "
                        "within about this many seconds")
    g.add_argument("--k-tol", type=float, default=0.002, metavar="GAIN",
                   help="-k auto: the held-out accuracy (R² for regression) a doubling of k must gain for the "
                        "search to go on (default 0.002)")
    g.add_argument("--kernel", default="rbf", choices=list(KERNELS), help="kernel function (default rbf)")
    g.add_argument("--degree", type=int, default=3, help="degree of the poly kernel (default 3)")
    g.add_argument("--coef0", type=float, default=0.0, help="constant term of the poly and sigmoid kernels (default 0)")
    g.add_argument("--landmarks", default="uniform", choices=list(LANDMARK_METHODS),
                   help="uniform rows, k-means centres ('kmeans'), greedy pivoted-Cholesky rows ('pivoted'), or rows "
                        "active under a smaller model ('active') (default uniform)")
    g.add_argument("--solver", default="newton", choices=list(SOLVERS),
                   help="newton: semismooth Newton (LA-SN, default); tron: LIBLINEAR's trust-region Newton; "
                        "dcd: LIBLINEAR's dual coordinate descent (features gathered in memory); pegasos: "
                        "mini-batch Pegasos for the hinge loss. Regression: newton or tron")
    g.add_argument("--hessian", default="auto", choices=list(HESSIANS),
                   help="Newton system: gram (a (k+1)-square matrix), cg (conjugate gradient), or auto by a "
                        "cost model (default auto)")
    g.add_argument("--tol", type=float, default=1e-4,
                   help="stop when the gradient norm has fallen by this factor (default 1e-4)")
    g.add_argument("--max-iter", type=int, default=100,
                   help="most Newton / TRON iterations or LIBLINEAR epochs (default 100)")
    g.add_argument("--class-weight", action="append", metavar="CLASS:W", default=None,
                   help="multiply C by W for the rows of class CLASS (repeatable: --class-weight 1:5 "
                        "--class-weight=-1:1; a label starting with '-' needs the '='), or 'balanced': "
                        "rows / (classes x rows of the class)")
    g.add_argument("--probability", action="store_true",
                   help="also fit Platt sigmoids (5 internal folds), so that dsvm predict --proba can write "
                        "class probabilities")
    g.add_argument("--dtype", default="float32", choices=list(DTYPES),
                   help="precision of the feature matrix (default float32; sums are float64)")
    g.add_argument("--feature-store", default="auto", choices=list(FEATURE_STORES),
                   help="where the features live during the fit: cluster memory, a scratch disk store, "
                        "implicit (never formed: kernel blocks computed every pass, no scratch disk), "
                        "recomputed every pass, or auto by size and cost (default auto)")
    g.add_argument("--random-state", type=int, default=0,
                   help="seed of the landmarks and the cross-validation folds (default 0)")
    g.add_argument("--scale", choices=list(SCALINGS), default=None,
                   help="scale every feature first, statistics fitted in one pass and kept in the model "
                        "(standard: mean 0 and variance 1, not centred for sparse data; minmax: into [0, 1]; "
                        "maxabs: into [-1, 1], keeps sparse data sparse)")


def _common_options(defaults: bool) -> argparse.ArgumentParser:
    """--log-level / --quiet, accepted before and after the command name."""
    p = argparse.ArgumentParser(add_help=False)
    kw = {} if defaults else {"default": argparse.SUPPRESS}
    p.add_argument("--log-level", choices=["DEBUG", "INFO", "WARNING", "ERROR"], help="log level (default INFO)",
                   **({"default": "INFO"} if defaults else kw))
    p.add_argument("-q", "--quiet", action="store_true", help="only warnings and errors",
                   **({"default": False} if defaults else kw))
    p.add_argument("--no-progress", action="store_true",
                   help="no progress bars or progress lines (on by default; a bar on a terminal, a line per 10 %% "
                        "of a long pass in a log)", **({"default": False} if defaults else kw))
    return p


def build_parser() -> argparse.ArgumentParser:
    """The command line: the commands and their options (imports nothing heavy, for a fast ``--help``)."""
    parser = argparse.ArgumentParser(
        prog="dsvm", description="Large-scale kernel SVMs on Dask (LA-SN).", parents=[_common_options(True)]
    )
    parser.add_argument("--version", action="version", version=f"dsvm {__version__}", help="print the version and exit")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND",
                                help="one of the commands below; dsvm COMMAND --help shows its options")
    sub.required = True
    common = _common_options(False)
    _add_parser = sub.add_parser

    def add_parser(name, **kw):
        return _add_parser(name, parents=[common], **kw)

    sub.add_parser = add_parser

    _add_demo(sub)
    _add_ingest(sub)
    _add_train(sub)
    _add_model_commands(sub)
    _add_other_commands(sub)
    return parser


def _add_demo(sub) -> None:
    """The demo command."""
    p = sub.add_parser("demo", help="train and evaluate on generated data on the default local cluster")
    p.add_argument("--n-train", type=int, default=200_000, help="generated training rows (default 200000)")
    p.add_argument("--n-test", type=int, default=50_000, help="generated test rows (default 50000)")
    p.add_argument("--output", default="reports/demo", help="report folder (default reports/demo)")
    p.add_argument("--overwrite", action="store_true", help="replace the files of an earlier demo in the folder")
    _add_cluster_args(p)


def _add_ingest(sub) -> None:
    """The ingest command."""
    p = sub.add_parser("ingest", help="convert LIBSVM / CSV / Parquet / .npy data into a zarr dataset")
    p.add_argument("source", help="input file (.gz/.xz/.bz2 are read transparently), or a folder of Parquet files")
    p.add_argument("target", help="zarr dataset to create (a local or mounted path)")
    p.add_argument("--format", choices=["libsvm", "csv", "npy", "parquet"], default=None,
                   help="default: from the file name, else from its content")
    p.add_argument("--labels", metavar="NPY", default=None, help="labels of an .npy source: a 1-d .npy file")
    p.add_argument("--n-features", type=int, default=None,
                   help="number of features (a LIBSVM test file may not use the last ones; default: the largest "
                        "index found)")
    p.add_argument("--zero-based", choices=["auto", "true", "false"], default="auto",
                   help="LIBSVM indices start at 0 (default auto: if index 0 occurs; give it, or --like, for test files)")
    p.add_argument("--like", metavar="DATASET|MODEL",
                   help="a test set: read it like this training dataset or model (LIBSVM indexing base, "
                        "number of features)")
    _add_tabular_args(p)
    dense = p.add_mutually_exclusive_group()
    dense.add_argument("--dense", dest="dense", action="store_true", default=None,
                       help="store X dense (default: dense if at least 25%% of the values are non-zero)")
    dense.add_argument("--sparse", dest="dense", action="store_false", help="store X sparse (CSR row chunks)")
    p.add_argument("--chunk-rows", type=int, default=None, help="rows per stored chunk (default: about 64 MiB)")
    p.add_argument("--overwrite", action="store_true", help="replace an existing dataset dsvm wrote")


def _add_train(sub) -> None:
    """The train command."""
    p = sub.add_parser("train", help="fit a model on a dataset and save it; or cross-validate it (--cv N)")
    p.add_argument("data", metavar="DATA",
                   help="zarr dataset, or a LIBSVM / CSV / .npy file ingested into a temporary dataset")
    p.add_argument("--model", metavar="FILE.npz",
                   help="model file to write (.npz); required except with --cv alone")
    p.add_argument("--overwrite", action="store_true",
                   help="replace an existing model file (and an earlier --search report)")
    _model_args(p)
    p.add_argument("--checkpoint", metavar="PATH", help="write the Newton state after each iteration and resume from it "
                   "(kept until the model is saved)")
    g = p.add_argument_group("cross-validation and model selection (warm-started; fold models share the "
                             "landmarks of all rows)")
    g.add_argument("--search", nargs="+", metavar="NAME=V1,V2", help="grid, e.g. C=1,10,100 gamma=0.01,0.05 k=500,1000; "
                   "the best model is saved")
    g.add_argument("--cv", type=int, default=None, metavar="N",
                   help="folds (default 5 with --search). Without --search: print the N-fold cross-validation "
                        "score, mean and standard deviation over the folds, as svm-train -v; the model is also "
                        "fitted on all rows and saved only if --model is given")
    g.add_argument("--scoring", default="accuracy", help="accuracy, balanced_accuracy, f1, ... (default accuracy)")
    g.add_argument("--cv-report", metavar="DIR", help="where the --search table and heat map go (default: next to "
                   "the model)")
    _add_raw_input_args(p)
    _add_cluster_args(p)


def _add_model_commands(sub) -> None:
    """The commands that read a model file: evaluate, predict, export."""
    p = sub.add_parser("evaluate", help="accuracy and per-class precision/recall of a model on a dataset "
                       "(regression: R², RMSE, MAE)")
    p.add_argument("model", metavar="MODEL", help="model file (.npz) written by dsvm train")
    p.add_argument("data", metavar="DATA", help="zarr dataset, or a raw file as for train, read with the model's "
                   "number of features and LIBSVM indexing base")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    _add_raw_input_args(p)
    _add_cluster_args(p)

    p = sub.add_parser("predict", help="write predictions for a dataset")
    p.add_argument("model", metavar="MODEL", help="model file (.npz) written by dsvm train")
    p.add_argument("data", metavar="DATA", help="zarr dataset, or a raw file as for train, read with the model's "
                   "number of features and LIBSVM indexing base")
    p.add_argument("--out", required=True, help="output file: .zarr, .npy or .csv")
    what = p.add_mutually_exclusive_group()
    what.add_argument("--decision", action="store_true", help="write decision values instead of labels")
    what.add_argument("--proba", action="store_true",
                      help="write class probabilities, one column per class (CSV header proba_<class>); needs a "
                           "model trained with --probability")
    p.add_argument("--overwrite", action="store_true", help="replace an existing prediction file dsvm wrote")
    _add_raw_input_args(p, unlabelled=True)
    _add_cluster_args(p)

    p = sub.add_parser("export", help="write a model as an ONNX file (needs pip install 'dsvm[onnx]')",
                       description="Converts the model's scaler and Nystroem map to ONNX with skl2onnx and adds "
                       "its linear part. The graph's input is X (n x n_features); a classifier's outputs are label, "
                       "decision (the decision values) and, for a model trained with --probability, probabilities; "
                       "a regressor's is variable (the predicted values).")
    p.add_argument("model", help="model file (.npz) written by dsvm train")
    p.add_argument("out", help="ONNX file to write (.onnx)")
    p.add_argument("--dtype", choices=list(DTYPES), default="float32",
                   help="element type of the input and of the computation (default float32)")
    p.add_argument("--overwrite", action="store_true", help="replace an existing ONNX file dsvm wrote")


def _add_other_commands(sub) -> None:
    """The run, info and clean commands."""
    p = sub.add_parser("run", help="run a YAML pipeline: ingest → train → evaluate → report")
    p.add_argument("pipeline", help="pipeline file (YAML; see pipelines/)")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="override a pipeline parameter")
    p.add_argument("--overwrite", action="store_true",
                   help="replace the files of an earlier run in the output folder")
    _add_cluster_args(p)

    p = sub.add_parser("info", help="describe a model file or a dataset")
    p.add_argument("path", help="model file (.npz) or zarr dataset")

    p = sub.add_parser(
        "clean", help="list and remove what killed dsvm runs left behind (scratch stores, temporary folders)",
        description="A run removes its temporary folders when it ends, also on an error, Ctrl-C or SIGTERM; "
        "kill -9 leaves them. This lists dsvm's temporary folders under the folders given (recursively; default: "
        "the scratch directory and the system temporary folder, not recursively): scratch feature stores "
        "(dsvm-features-PID-*), temporary datasets of 'dsvm train/evaluate/predict FILE' (dsvm-train-PID-*, "
        "dsvm-input-PID-*) and the staging folders of outputs being written (.NAME.*.dsvm-tmp), each holding a "
        ".dsvm-owner.json naming its process and host. It removes a folder only when its name has one of those "
        "forms and its marker names a process of this host that is gone; it keeps anything of a running "
        "process, of another host, or without a marker, and never removes a file.")
    p.add_argument("dirs", nargs="*", metavar="DIR", help="folders to search")
    p.add_argument("--dry-run", action="store_true", help="list only, remove nothing")


def _setup_logging(args) -> None:
    import dask.config

    from .cluster import NOISY_LOGGERS, quiet_noisy_loggers

    level = logging.WARNING if args.quiet else getattr(logging, args.log_level)
    logging.basicConfig(level=level, format="%(asctime)s %(levelname)s %(name)s: %(message)s", datefmt="%H:%M:%S", force=True)
    for handler in logging.getLogger().handlers:  # the chosen level holds whatever level a dsvm logger has
        handler.setLevel(level)
    # distributed configures its loggers from dask.config when it is imported
    quiet = logging.getLevelName(max(level, logging.WARNING)).lower()
    dask.config.set({"logging": {name: quiet for name in NOISY_LOGGERS}})
    import distributed  # noqa: F401  (its import sets its loggers' levels; override them after)

    quiet_noisy_loggers(level)
    # progress lines are INFO records: shown with the log at INFO or below, and as bars on a terminal
    set_progress(level <= logging.INFO and not args.no_progress)
    warnings.showwarning = _warning_line


def _warning_line(message, category, filename, lineno, file=None, line=None) -> None:
    """The command's ``warnings.showwarning``: a warning is one log line, its category and its text (Python's
    own is two lines, the file and the source line of the code that warned, which say nothing to a user)."""
    logger.warning("%s: %s", category.__name__, " ".join(str(message).split()))


def _check_cluster_args(args) -> None:
    """Fail on a bad --cluster / --scheduler-file / local cluster size before any data is touched."""
    from .cluster import load_cluster_spec, local_cluster_options  # the command's heavy parts load when it runs

    given = [getattr(args, a, None) is not None for a in ("cluster", "scheduler_address", "scheduler_file")]
    if sum(given) > 1:
        raise UserError("give at most one of --cluster, --scheduler-address and --scheduler-file")
    local_cluster_options(args)
    if getattr(args, "cluster", None):
        load_cluster_spec(args.cluster)
    if getattr(args, "scheduler_file", None) and not Path(args.scheduler_file).exists():
        raise UserError(f"scheduler file {args.scheduler_file} not found")


def _reference(path: str):
    """The dataset or model named by ``--like``."""
    from .. import io
    from ..svm import load_model

    p = Path(path)
    if not p.exists():
        raise UserError(f"--like {path}: no such dataset or model file")
    return io.open_dataset(p) if p.is_dir() else load_model(p)


def cmd_train(args) -> int:
    from ._model_commands import train_command

    return train_command(args)


def cmd_evaluate(args) -> int:
    from ._model_commands import evaluate_command

    return evaluate_command(args)


def cmd_predict(args) -> int:
    from ._model_commands import predict_command

    return predict_command(args)


def cmd_ingest(args) -> int:
    import numpy as np

    from .. import io
    from ._model_commands import tabular_options

    choice = {"auto": "auto", "true": True, "false": False}
    kwargs: dict[str, Any] = dict(format=args.format, y=args.labels, n_features=args.n_features,
                                  zero_based=choice[args.zero_based], **tabular_options(args),
                                  dense=args.dense, chunk_rows=args.chunk_rows, overwrite=args.overwrite,
                                  progress=progress_shown(),
                                  like=_reference(args.like) if args.like else None)
    ds = io.ingest(args.source, args.target, **kwargs)
    logger.info("%s: %d rows x %d features (%s), classes %s", args.target, ds.n_samples, ds.n_features,
                "sparse" if ds.sparse else "dense", np.asarray(ds.classes)[:10].tolist())
    return 0


def cmd_export(args) -> int:
    from ..svm import export_onnx, load_model, onnx_file_problem
    from ._model_commands import check_writable_target

    check_writable_target(args.out, "out", args.overwrite, onnx_file_problem, "model file in ONNX format")
    model = load_model(args.model)
    try:
        path = export_onnx(model, args.out, overwrite=args.overwrite, dtype=args.dtype)
    except ImportError as exc:
        raise UserError(str(exc)) from None
    logger.info("wrote %s (%s, %d features, %s)", path, type(model).__name__, model.n_features_in_, args.dtype)
    return 0


def cmd_run(args, spec=None) -> int:
    from ._pipeline import run_pipeline
    from ._pipeline_spec import load_pipeline
    from ._report_files import check_output_folder
    from .cluster import connect_from_args

    spec = load_pipeline(spec if spec is not None else args.pipeline, args.set)
    check_output_folder(spec["output"], "pipeline output folder", overwrite=args.overwrite)
    with connect_from_args(args):
        report = run_pipeline(spec)
    ev = report.get("evaluation")
    what = "total" if spec.get("kind") == "paper" else "fit"
    summary = f"{report['name']}: {what} {report['timing']['fit_seconds']:.2f}s"
    if ev:
        summary += f", test accuracy {100 * ev['accuracy']:.2f} % on {ev['n_test']} rows"
    print(summary)
    print(f"report: {Path(spec['output']) / 'report.md'}")
    return 0


def cmd_demo(args) -> int:
    from ._pipeline import DEMO_PIPELINE

    args.set = [f"n_train={args.n_train}", f"n_test={args.n_test}"]
    spec = dict(DEMO_PIPELINE, output=args.output)
    return cmd_run(args, spec)


def cmd_info(args) -> int:
    p = Path(args.path)
    if not p.exists():
        raise UserError(f"{args.path}: no such file or dataset")
    if p.is_dir():
        from .. import io

        ds = io.open_dataset(p)
        info = {"kind": "dataset", "path": str(p), "n_samples": ds.n_samples, "n_features": ds.n_features,
                "sparse": ds.sparse, "classes": [c.item() if hasattr(c, "item") else c for c in ds.classes],
                "chunks": len(ds.X.chunks[0]),
                "attrs": {k: v for k, v in ds.attrs.items() if k != "checksums"}}  # one per chunk: too long
    else:
        from ..svm import load_model
        from ._report import nan_as_null

        m = load_model(p)
        info = {"kind": "model", "path": str(p), "estimator": type(m).__name__, "kernel": m.feature_map_.spec.to_dict(),
                "C": m.C, "n_components": int(m.components_.shape[0]), "n_features_out": int(m.coef_.shape[1]),
                "n_features_in": m.n_features_in_,
                "classes": [c.item() if hasattr(c, "item") else c for c in getattr(m, "classes_", [])],
                "scale": getattr(m.scaling_, "kind", None),
                "feature_names": None if getattr(m, "feature_names_in_", None) is None else list(m.feature_names_in_),
                "n_iter": m.n_iter_, "objective": m.objective_ if isinstance(m.objective_, float) else list(m.objective_),
                "duality_gap": nan_as_null(m.duality_gap_), "k_path": getattr(m, "k_path_", None),
                "fit_seconds": m.solver_stats_.get("fit_seconds")}
    print(json.dumps(info, indent=2, default=str))
    return 0


def cmd_clean(args) -> int:
    from .. import blocks, config

    if args.dirs:
        missing = [d for d in args.dirs if not Path(d).is_dir()]
        if missing:
            raise UserError(f"{missing[0]}: no such folder")
        roots, recursive = args.dirs, True
    else:
        roots, recursive = list(dict.fromkeys([config.scratch_base(), tempfile.gettempdir()])), False
    n_removed = n_stale = 0
    for root in roots:
        for item in blocks.find_leftovers(root, recursive=recursive):
            if item.stale and not args.dry_run:
                try:
                    if not blocks.remove_leftover(item):
                        raise OSError("it could not be emptied; it keeps its owner marker")
                except (OSError, ValueError) as exc:
                    print(f"failed   {item.path}  ({item.kind}: {exc})")
                    continue
                n_removed += 1
                action = "removed"
            else:
                action = "stale" if item.stale else "kept"
                n_stale += item.stale
            print(f"{action:<8} {item.path}  ({item.kind}: {item.reason})")
    if args.dry_run:
        logger.info("%d stale item(s) would be removed (--dry-run: nothing removed)", n_stale)
    else:
        logger.info("%d item(s) removed", n_removed)
    return 0


COMMANDS = {
    "demo": cmd_demo, "ingest": cmd_ingest, "train": cmd_train, "evaluate": cmd_evaluate,
    "predict": cmd_predict, "run": cmd_run, "info": cmd_info, "clean": cmd_clean, "export": cmd_export,
}


# OS errors a user causes (a path, a full disk, a read-only file system); any other OSError is a bug
USER_ERRNOS = {errno.ENOSPC, errno.EDQUOT, errno.EROFS, errno.EISDIR, errno.ENOTDIR, errno.ENAMETOOLONG,
               errno.ELOOP, errno.EFBIG, errno.EEXIST, errno.ENOENT, errno.EACCES, errno.EPERM, errno.ENOTEMPTY,
               errno.EXDEV}
USER_OS_ERRORS = (FileNotFoundError, FileExistsError, PermissionError, IsADirectoryError, NotADirectoryError)
STOPPED_OPERATION = {"train": "the fit cannot continue (with --checkpoint a rerun resumes where it stopped)",
                     "predict": "the prediction cannot continue", "evaluate": "the evaluation cannot continue",
                     "run": "the pipeline cannot continue", "demo": "the demo cannot continue"}


def _is_user_os_error(exc: OSError) -> bool:
    return isinstance(exc, USER_OS_ERRORS) or exc.errno in USER_ERRNOS or type(exc).__module__.startswith("dsvm")


def _one_line(exc: BaseException, command: str) -> str:
    """The error as one line, naming the path (OS errors) or the operation that stopped (no workers)."""
    if isinstance(exc, OSError) and type(exc).__module__ == "builtins" and exc.strerror:
        where = f"{exc.filename}: " if exc.filename is not None else ""
        text = f"{where}{exc.strerror}"
    else:
        text = str(exc)
    if isinstance(exc, NoWorkersError) and command in STOPPED_OPERATION:
        text = f"{text}; {STOPPED_OPERATION[command]}"
    return " ".join(text.split()) or type(exc).__name__


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``dsvm`` command; returns the exit status."""
    parser = build_parser()
    args = parser.parse_args(argv)
    shown_before, show_warning = set_progress(False), warnings.showwarning
    _setup_logging(args)
    try:
        # SIGTERM cleans up (temporary folders, scratch stores) as an error does, and ends the command within
        # dsvm.signals.SIGTERM_GRACE_SECONDS even if its way out stalls
        with sigterm_cleanup(deadline=True):
            _check_cluster_args(args)
            status = COMMANDS[args.command](args)
            sys.stdout.flush()  # here, not at exit: a reader gone by now is handled below
            return status
    except BrokenPipeError:
        if not _stdout_reader_gone():  # some other pipe or socket: a real failure
            raise
        # the reader of the output went away (`dsvm info x | head`): stop without a traceback; status 1,
        # as Python does, since the command did not finish writing
        _quiet_stdout()
        return 1
    except (UserError, ClusterSpecError, ModelFileError, PipelineError, FileNotFoundError, FileExistsError,
            ValueError, PermissionError, MemoryError, NoWorkersError, OSError) as exc:
        if isinstance(exc, OSError) and not _is_user_os_error(exc):
            raise
        print(f"dsvm {args.command}: error: {_one_line(exc, args.command)}", file=sys.stderr)
        return EXIT_USER_ERROR
    except KeyboardInterrupt:
        print(f"dsvm {args.command}: interrupted", file=sys.stderr)
        return 130
    finally:
        # main() called in-process leaves progress and the display of warnings as it found them
        set_progress(shown_before)
        warnings.showwarning = show_warning


def _stdout_reader_gone() -> bool:
    """Whether standard output is a pipe whose reading end was closed (the write end then polls as an error)."""
    try:
        poller = select.poll()
        poller.register(sys.stdout.fileno(), select.POLLOUT)
        return any(events & select.POLLERR for _, events in poller.poll(0))
    except (OSError, ValueError, AttributeError):  # no real file descriptor, or no poll() on this platform
        return False


def _quiet_stdout() -> None:
    """Point standard output at the null device: what is left in its buffer would otherwise fail again,
    with a traceback, when the interpreter flushes it at exit."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError):  # no real file descriptor behind stdout (a test's capture): nothing to quiet
        pass


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
