"""``ingest``: turn a file or arrays into a dataset (see :mod:`dsvm.io._layout`).

Text formats go through two stages inside the temporary directory of the
ingest (:mod:`dsvm.io._dataset_target`):

1. *parse* — the file is cut into blocks of complete lines; each block is
   parsed (vectorised, :mod:`dsvm.io._libsvm` / :mod:`dsvm.io._csv_blocks`) and saved as a
   staging part.  An uncompressed file is split into byte ranges read and
   parsed by Dask tasks (threads, or the workers of the current
   ``distributed.Client``, which must see the file); a gzip / xz / bzip2 file
   is decompressed as a stream here and its blocks parsed on a few local
   threads.  Memory stays at a few blocks (``block_bytes``: by default a
   quarter of the file per core, between 1 MiB and 16 MiB).  Each block
   becomes a staging part on disk (``.npy`` CSR or dense arrays).
2. *write* — :func:`dsvm.io._writer.write_source` cuts the parts into row
   chunks and writes them, in parallel.

Only after both stages succeed is the dataset renamed to the target.

The parse stage itself is :mod:`dsvm.io._parse_stage`; CSV's options (header,
label column, delimiter) live in :mod:`dsvm.io._csv_ingest`; tables (pandas
and Dask DataFrames, Parquet) are staged by :mod:`dsvm.io._frames`, one task
per partition or row group; labels that are not numbers are stored as class
names (:mod:`dsvm.io._labels`).
"""

from __future__ import annotations

import logging
import os
import time
from pathlib import Path
from typing import Any

import numpy as np

from ..exceptions import InputFileError, disk_full_names
from ..user_files import check_user_path
from ._csv_ingest import ingest_csv
from ._dataset import open_dataset
from ._dataset_target import atomic_target, check_target
from ._frames import (
    PARQUET_SUFFIXES,
    is_dask_frame,
    is_pandas_frame,
    pandas_arrays,
    stage_dask_frame,
    stage_parquet,
    table_columns,
)
from ._labels import block_labels, check_numeric_labels, is_numeric_labels, warn_if_continuous, with_class_names
from ._libsvm import MAX_FEATURE_INDEX, LineError, line_at, parse_libsvm_block
from ._line_reader import detect_format, read_range
from ._parse_stage import line_offsets, parse_stage, raise_first_error
from ._replace import check_inputs_outside, local_target
from ._sources import NpySource, RowSource, StagedSource, save_csr_part
from ._writer import check_dtype, stored_bytes_bound, write_dataset, write_source

logger = logging.getLogger(__name__)

__all__ = ["ingest", "MAX_N_FEATURES"]

FORMATS = ("libsvm", "csv", "npy", "parquet")
#: the widest dataset: one more than the largest feature index a LIBSVM file may use (2**31 - 1)
MAX_N_FEATURES = MAX_FEATURE_INDEX + 1


def _check_n_features(n_features) -> int | None:
    """``n_features`` as an int (None stays None), bounded as the feature indices are.

    Raises
    ------
    ValueError
        Not an integer (``bool`` is not one), or outside 1 .. :data:`MAX_N_FEATURES`.
    """
    if n_features is None:
        return None
    if isinstance(n_features, (bool, np.bool_)) or not isinstance(n_features, (int, np.integer)) \
            or not 1 <= n_features <= MAX_N_FEATURES:
        raise ValueError(f"n_features must be an integer from 1 to {MAX_N_FEATURES} (2**31 - 1), got {n_features!r}")
    return int(n_features)
# tabular sources, whose label column may look continuous (a hint that it is the wrong column)
TABULAR = ("csv", "parquet", "frame", "dask-frame")


# Block tasks (run in worker threads / processes) -------------------------------
def _libsvm_block(raw: bytes, prefix: str, options: dict, at_start: bool = False) -> dict[str, Any]:
    """Parse one LIBSVM block into a staging part; errors are returned, not raised.

    ``at_start``: the block begins the file (unused: LIBSVM files have no byte order mark).
    """
    try:
        block = parse_libsvm_block(raw, **options)
    except LineError as exc:
        return {"error": (exc.line, exc.message), "n_bytes": len(raw)}
    indices = block.indices
    if block.max_index < 2**31 - 1:
        indices = indices.astype(np.int32)
    part = save_csr_part(prefix, block.data, indices, block.indptr, block.y) if block.n_rows else None
    max_text = line_at(raw, block.max_index_pos) if block.max_index_pos >= 0 else b""
    return {
        "error": None,
        "part": part,
        "n_lines": block.n_lines + (0 if raw.endswith(b"\n") or not raw else 1),
        "min_index": block.min_index,
        "max_index": block.max_index,
        "max_line": block.max_index_line,
        "max_text": max_text,
        "n_bytes": len(raw),
    }


def _libsvm_range(path: str, start: int, end: int, prefix: str, options: dict) -> dict[str, Any]:
    return _libsvm_block(read_range(path, start, end), prefix, options, start == 0)


# Formats -----------------------------------------------------------------------------
def _ingest_libsvm(path, work, *, n_features, zero_based, base_from, dtype, block_bytes, progress):
    """``base_from``: where an explicit ``zero_based`` came from (recorded as ``zero_based_from``)."""
    name = Path(path).name
    options = {"dtype": dtype.str, "zero_based": zero_based, "n_features": n_features}
    results = parse_stage(path, work / "staging", _libsvm_block, _libsvm_range, options, block_bytes, progress)
    raise_first_error(name, results)
    offsets = line_offsets(results)
    with_features = [r for r in results if r.get("max_index", -1) >= 0]
    if zero_based == "auto":
        zero_based = bool(with_features) and min(r["min_index"] for r in with_features) == 0
        base_from = "index 0" if zero_based else "no index 0"
        if not zero_based:
            logger.info("%s: no feature index 0, indices read as one-based (if the file is zero-based, pass "
                        "zero_based=True, or like= the training dataset or model)", name)
    max_index, line, text = -1, 0, b""
    for off, res in zip(offsets, results):
        if res.get("max_index", -1) > max_index:
            max_index, line, text = res["max_index"], off + res["max_line"], res["max_text"]
    needed = max_index + 1 if zero_based else max(max_index, 0)
    if n_features is None:
        n_features = needed
    elif needed > n_features:
        base = "zero" if zero_based else "one"
        shown = text.rstrip(b"\r").decode("utf-8", "replace")[:120]
        raise InputFileError(
            f"{name}:{line}: feature index {max_index} is out of range for n_features={n_features} "
            f"({base}-based indices) in line {shown!r}"
        )
    parts = [r["part"] for r in results if r["part"] is not None]
    source = StagedSource(parts, n_features=n_features, y_dtype=np.float64, index_shift=0 if zero_based else 1)
    return source, {"zero_based": bool(zero_based), "zero_based_from": base_from}


def _npy_source(source, y) -> tuple[RowSource, str, dict[str, Any]]:
    """The rows of an ``.npy`` X with its labels (a second ``.npy`` or an array), and their label attributes."""
    if isinstance(source, (tuple, list)):
        if len(source) != 2:
            raise ValueError("an .npy source is (X_path, y_path), or X_path with y=...")
        x_path, y = source
    else:
        x_path = source
    if y is None:
        raise ValueError(f"{x_path}: labels are missing; pass y=<path to .npy> or an array")
    rows = NpySource(str(x_path), y)
    labels = np.load(rows.y_path, mmap_mode="r") if rows.y_path else rows.y
    where = rows.y_path or "y"
    try:
        if is_numeric_labels(labels):
            check_numeric_labels(labels, where)
            return rows, str(x_path), {}
        source_rows, extra = with_class_names(rows, [block_labels(labels, where)], where)
    except ValueError as exc:
        raise InputFileError(str(exc)) from None
    return source_rows, str(x_path), extra


def _reference_format(like) -> tuple[str, bool | None, int]:
    """``(name, zero_based or None, n_features)`` of a Dataset or a fitted model passed as ``like``."""
    if hasattr(like, "attrs") and hasattr(like, "n_features"):  # a Dataset
        zero_based = like.attrs.get("zero_based")
        return str(getattr(like, "path", "the reference dataset")), (
            zero_based if isinstance(zero_based, bool) else None), int(like.n_features)
    if hasattr(like, "n_features_in_"):  # a fitted estimator
        zero_based = getattr(like, "zero_based_", None)
        return f"the {type(like).__name__} model", zero_based if isinstance(zero_based, bool) else None, int(
            like.n_features_in_)
    raise TypeError(f"like must be a Dataset or a fitted dsvm model, got {type(like).__name__}")


def _reference_names(like) -> list[str] | None:
    """The feature names of a Dataset or a fitted model passed as ``like`` (None without, or without ``like``)."""
    names = getattr(like, "feature_names", None) if hasattr(like, "attrs") else getattr(like, "feature_names_in_", None)
    return None if names is None else [str(n) for n in names]


def _is_path(x) -> bool:
    return isinstance(x, (str, os.PathLike))


def _input_paths(source, y, like) -> dict[str, Any]:
    """The files and folders an ingest reads, by role (anything that is not a path is skipped by the check)."""
    pair = isinstance(source, (tuple, list)) and len(source) == 2
    return {"the source": source[0] if pair else source, "the labels": source[1] if pair else y,
            "the reference dataset": getattr(like, "path", None) if hasattr(like, "attrs") else None}


def _resolve_format(source, format, y) -> str:
    if is_pandas_frame(source) or (isinstance(source, (tuple, list)) and source and is_pandas_frame(source[0])):
        return "frame"
    if is_dask_frame(source) or (isinstance(source, (tuple, list)) and source and is_dask_frame(source[0])):
        return "dask-frame"
    if format is not None:
        fmt = str(format).lower()
        if fmt == "svmlight":
            fmt = "libsvm"
        if fmt not in FORMATS + ("array",):
            raise ValueError(f"unknown format {format!r}; use one of {FORMATS}")
        return fmt
    if isinstance(source, (tuple, list)):
        if len(source) == 2 and all(_is_path(s) for s in source):
            return "npy"
        return "array"
    if _is_path(source):
        # a FIFO or a device is refused here, before anything opens it (see dsvm.user_files)
        check_user_path(source, "data file", InputFileError, expect="either")
        if Path(source).suffix.lower() in PARQUET_SUFFIXES or os.path.isdir(source):
            return "parquet"
        return detect_format(source)
    return "array"


def _frame_and_labels(source, y):
    """A table source as ``(frame, y or None)``: ``ingest(df, ...)``, ``ingest(df, y=s)`` or ``ingest((df, s))``."""
    if isinstance(source, (tuple, list)):
        if len(source) != 2 or y is not None:
            raise ValueError("a DataFrame source is ingest(df, target, label_column=...), ingest(df, target, y=labels) "
                             "or ingest((df, labels), target)")
        return source[0], source[1]
    return source, y


def _ingest_pandas(source, y, target, label_column, n_features, overwrite, progress, common):
    """A pandas DataFrame: in memory already, written as arrays with its column names."""
    frame, y = _frame_and_labels(source, y)
    cols = table_columns(frame.columns, label_column, y is not None, "the DataFrame")
    X, labels = pandas_arrays(frame, cols, "the DataFrame", y)
    if n_features is not None and X.shape[1] != n_features:
        raise ValueError(f"n_features={n_features} given but the DataFrame has {X.shape[1]} feature columns")
    return write_dataset(target, X, labels, overwrite=overwrite, progress=progress, source="<DataFrame>",
                         attrs={**cols.attrs(), "source_format": "frame"}, **common)


def _stage_table(fmt, source, y, work, label_column, dtype, progress) -> tuple[RowSource, str, dict[str, Any]]:
    """A Dask DataFrame or a Parquet file staged under ``work``: rows, source name, attributes."""
    if fmt == "parquet":
        if not _is_path(source):
            raise TypeError(f"format 'parquet' needs a file or folder path, got {type(source).__name__}")
        if y is not None:
            raise ValueError(f"{source}: a Parquet file carries its labels: pass label_column, not y")
        rows, extra = stage_parquet(str(source), label_column, work / "staging", dtype, progress)
        return rows, str(source), extra
    frame, labels = _frame_and_labels(source, y)
    cols = table_columns(list(frame.columns), label_column, labels is not None, "the DataFrame")
    rows, extra = stage_dask_frame(frame, labels, cols, work / "staging", dtype, progress)
    return rows, "<dask DataFrame>", {**extra, **cols.attrs()}


def ingest(
    source,
    target: str | os.PathLike,
    format: str | None = None,
    *,
    y=None,
    n_features: int | None = None,
    zero_based: bool | str = "auto",
    dense: bool | None = None,
    chunk_rows: int | None = None,
    chunk_bytes: int | None = None,
    dtype="float32",
    label_column: int | str | None = None,
    header: bool | str = "auto",
    delimiter: str | None = None,
    block_bytes: int | None = None,
    overwrite: bool = False,
    progress: bool = False,
    like=None,
):
    """Write a data file or arrays as a chunked zarr dataset and open it.

    Parameters
    ----------
    source : path, DataFrame, (X, y) or (X_path, y_path)
        A LIBSVM / svmlight file, a CSV file, a Parquet file or a folder of
        them (``pip install 'dsvm[parquet]'``), an ``.npy`` file of X (labels
        via ``y=``), a pair of ``.npy`` paths, a pair ``(X, y)`` of numpy /
        scipy.sparse / Dask arrays, or a pandas or Dask DataFrame (a Dask
        DataFrame is staged partition by partition on the workers, never
        collected here).  Text files may be gzip, xz or bzip2 compressed
        (recognised by their content).  Labels that are all numbers are
        stored as numbers; as soon as one is not (``"setosa"``), every label
        is a class name, its text (``1``, ``1.0`` and ``+1`` are one class
        ``"1"``).
    target : path
        Directory of the new dataset (a zarr v3 group, see the user guide's
        out-of-core page): a local (or mounted) path.  A URL target is
        refused (``ValueError``): object stores have no atomic rename, so a
        failed write could not leave an old dataset intact.
        :func:`open_dataset` reads URLs.
    format : {"libsvm", "csv", "npy", "parquet"}, optional
        Default: from the file name (``.libsvm``/``.svm``/``.svmlight``,
        ``.csv``/``.tsv``, ``.npy``, ``.parquet``/``.parq``/``.pq``, a folder
        is Parquet; compression suffixes ignored), else from the content.
    y : path or array, optional
        Labels of an ``.npy`` X, or of a DataFrame (a Series; a Dask Series
        with the same partitions for a Dask DataFrame).
    n_features : int, optional
        LIBSVM: number of features (a test file may not use the last one);
        default the largest index found.  An index beyond it is an error.
    zero_based : {"auto", True, False}
        LIBSVM indices: ``"auto"`` (as scikit-learn) treats the file as
        0-based if index 0 occurs, else as 1-based (a guess for a 0-based
        file that never uses feature 0: give the base, or ``like``, for test
        files).  Recorded in the dataset (``zero_based``, with
        ``zero_based_from`` saying how it was decided) and, by a fit, in the
        model, which refuses test data read with the other base.
    dense : bool, optional
        Storage layout.  Default: dense rows stay dense; sparse rows are
        stored dense when their density is at least
        ``dsvm.io.dense-density`` (Dask config, default 0.25), else as CSR.
    chunk_rows, chunk_bytes : int, optional
        Rows per chunk, or target bytes per chunk (default 64 MiB).
    dtype : {"float32", "float64"}
        dtype of the stored values.
    label_column : int, str, False or None
        CSV, Parquet and DataFrames: the label column, by position (negative
        from the end) or by name (a CSV needs a header for names).  Default:
        column 0 for CSV (LIBSVM's convention), or, for a CSV with a header
        read ``like`` a model or dataset with feature names, the one column
        not among them; a Parquet file or DataFrame must name it (or a
        DataFrame's labels come as ``y``).  ``False``: a CSV without a label
        column (data to predict on): every column is a feature, the labels
        are placeholders, and the dataset is marked ``unlabelled`` (fit and
        evaluate refuse it).  A float label
        column with many distinct non-integer values draws a warning: it looks
        continuous, like a regression target or the wrong column.
    header : {"auto", True, False}
        CSV: whether the first line holds column names (``"auto"``: only when
        no field of it could be data).  The names become ``feature_names``.
    delimiter : str, optional
        CSV field separator, one character (default ``","``, tab for
        ``.tsv``; ``"\\t"`` and ``"tab"`` also mean tab).
    block_bytes : int, optional
        Bytes of text parsed per task (default: the file split into about
        four blocks per core, each between 1 MiB and 16 MiB).
    overwrite : bool
        Replace an existing ``target``; otherwise ``FileExistsError``.
    progress : bool
        Show progress bars on stderr.
    like : Dataset or fitted model, optional
        The training dataset, or the model, this data must match (a test
        set): a LIBSVM file is read with its indexing base (unless
        ``zero_based`` is given, which must then agree) and its number of
        features (unless ``n_features`` is given, which must agree); other
        sources must have its number of features.

    Returns
    -------
    Dataset

    Raises
    ------
    InputFileError
        For a file that cannot be read as data: a malformed line, naming the
        file, the 1-based line number and the offending text
        (``a9a.train:1234: cannot parse '3:abc' in line '+1 3:abc 5:1'``), an
        index beyond ``n_features``, a truncated or corrupted compressed
        file, an ``.npy`` array that does not hold real numbers.
    ValueError
        For contradictory options (``zero_based`` or ``n_features`` against
        ``like``).
    DiskFullError
        If the disk fills while writing; names ``target``, and nothing is
        left behind.
    FileExistsError
        If ``target`` exists and ``overwrite`` is False, or it is not a
        dataset dsvm wrote, or it is (or holds) the source, the labels or
        ``like`` (:class:`dsvm.exceptions.NotDsvmOutputError`, before any work).

    Notes
    -----
    LIBSVM lines are ``label [qid:N] index:value ... [# comment]``; feature
    indices must be strictly increasing within a line (as LIBSVM and
    scikit-learn require), explicit zeros are kept, and labels and values must
    be finite.

    The dataset is written under a hidden temporary name next to ``target``
    and renamed at the end; a failed or interrupted ingest leaves no dataset
    and removes its temporary files.  Text input is staged once on disk in
    that temporary directory (about the size of the stored dataset).

    Examples
    --------
    >>> import os, tempfile
    >>> from dsvm import ingest
    >>> folder = tempfile.mkdtemp()
    >>> with open(os.path.join(folder, "train.libsvm"), "w") as f:
    ...     _ = f.write("+1 1:0.5 3:1\\n-1 2:1.5\\n+1 1:1 2:0.25 3:2\\n")
    >>> ds = ingest(os.path.join(folder, "train.libsvm"), os.path.join(folder, "train.zarr"))
    >>> ds.n_samples, ds.n_features, ds.classes
    (3, 3, array([-1.,  1.]))
    >>> ds.X.compute()
    array([[0.5 , 0.  , 1.  ],
           [0.  , 1.5 , 0.  ],
           [1.  , 0.25, 2.  ]], dtype=float32)
    """

    started = time.perf_counter()
    n_features, zero_based, base_from = _indexing_options(n_features, zero_based, like)
    dtype = check_dtype(dtype)
    fmt = _resolve_format(source, format, y)
    _check_source_options(fmt, source, y, label_column)
    check_inputs_outside(local_target(target), _input_paths(source, y, like), "dataset")
    target = check_target(target, overwrite)
    common = {"dense": dense, "chunk_rows": chunk_rows, "chunk_bytes": chunk_bytes, "dtype": dtype}

    if fmt == "frame":
        ds = _ingest_pandas(source, y, target, label_column, n_features, overwrite, progress, common)
        _warn_if_continuous(ds)
        return ds
    if fmt == "array":
        return _ingest_arrays(source, y, target, n_features, overwrite, progress, common)

    if block_bytes is not None and block_bytes < 1:
        raise ValueError(f"block_bytes must be positive, got {block_bytes!r}")
    with atomic_target(target, overwrite) as work, disk_full_names(target, work, "the dataset") as space:
        rows, src_name, extra = _stage_rows(
            fmt, source, y, work, n_features=n_features, zero_based=zero_based, base_from=base_from, dtype=dtype,
            label_column=label_column, header=header, delimiter=delimiter, block_bytes=block_bytes,
            progress=progress, like=like,
        )
        _check_rows(rows, n_features, src_name)
        attrs = {"source": Path(src_name).name, "source_format": fmt, **extra}
        space.bytes = stored_bytes_bound(rows, dtype)
        write_source(rows, str(work / "store"), attrs=attrs, progress=progress, **common)
    ds = open_dataset(target)
    logger.info(
        "ingested %s (%s): %d rows x %d features in %.2f s",
        src_name, fmt, ds.n_samples, ds.n_features, time.perf_counter() - started,
    )
    if fmt in TABULAR:
        _warn_if_continuous(ds)
    return ds


def _indexing_options(n_features, zero_based, like) -> tuple[int | None, bool | str, str]:
    """``(n_features, zero_based, base_from)`` checked, and taken from ``like`` where not given.

    ``base_from`` says where an explicit base came from: ``"option"`` or ``"reference"`` (``like``).

    Raises
    ------
    ValueError
        A bad ``n_features`` or ``zero_based``, or one that contradicts ``like``.
    """
    n_features = _check_n_features(n_features)
    if zero_based not in ("auto", True, False):
        raise ValueError(f"zero_based must be 'auto', True or False, got {zero_based!r}")
    base_from = "option"
    if like is None:
        return n_features, zero_based, base_from
    ref_name, ref_zero_based, ref_width = _reference_format(like)
    if ref_zero_based is not None:
        if zero_based == "auto":
            zero_based, base_from = ref_zero_based, "reference"
        elif zero_based != ref_zero_based:
            raise ValueError(f"zero_based={zero_based} contradicts {ref_name}, whose LIBSVM indices are "
                             f"{'zero' if ref_zero_based else 'one'}-based")
    if n_features is None:
        n_features = ref_width
    elif n_features != ref_width:
        raise ValueError(f"n_features={n_features} contradicts {ref_name}, which has {ref_width} features")
    return n_features, zero_based, base_from


def _check_source_options(fmt: str, source, y, label_column) -> None:
    """Refuse ``label_column=False`` for a source other than CSV, and ``y`` for a LIBSVM or CSV file."""
    if label_column is False and fmt != "csv":
        raise ValueError(f"label_column=False (no label column) is for CSV files; {source} is read as {fmt}")
    if y is not None and fmt in ("libsvm", "csv"):
        raise ValueError(f"{source}: y (--labels) is for .npy sources; a {fmt} file carries its own labels")


def _ingest_arrays(source, y, target, n_features, overwrite, progress, common):
    """In-memory arrays, ``(X, y)`` or ``X`` with ``y=``: written by :func:`dsvm.io._writer.write_dataset`."""
    if not isinstance(source, (tuple, list)) or len(source) != 2:
        if y is None:
            raise ValueError("in-memory input is ingest((X, y), target) or ingest(X, target, y=y)")
        source = (source, y)
    X, labels = source
    if n_features is not None and X.shape[1] != n_features:
        raise ValueError(f"n_features={n_features} given but X has {X.shape[1]} columns")
    return write_dataset(target, X, labels, overwrite=overwrite, progress=progress, **common)


def _stage_rows(fmt, source, y, work, *, n_features, zero_based, base_from, dtype, label_column, header, delimiter,
                block_bytes, progress, like) -> tuple[RowSource, str, dict[str, Any]]:
    """The rows of a file or a Dask DataFrame, staged under ``work`` (an ``.npy`` X is read in place).

    Returns the rows, the name of the source and the attributes the format adds to the dataset.
    """
    if fmt == "npy":
        return _npy_source(source, y)
    if fmt in ("parquet", "dask-frame"):
        return _stage_table(fmt, source, y, work, label_column, dtype, progress)
    if not _is_path(source):
        raise TypeError(f"format {fmt!r} needs a file path, got {type(source).__name__}")
    path = str(check_user_path(source, "data file", InputFileError))
    if fmt == "libsvm":
        rows, extra = _ingest_libsvm(
            path, work, n_features=n_features, zero_based=zero_based, base_from=base_from, dtype=dtype,
            block_bytes=block_bytes, progress=progress,
        )
    else:
        rows, extra = ingest_csv(
            path, work, label_column=label_column, header=header, delimiter=delimiter, dtype=dtype,
            block_bytes=block_bytes, progress=progress, n_features=n_features, features=_reference_names(like),
        )
    return rows, path, extra


def _check_rows(rows: RowSource, n_features: int | None, src_name: str) -> None:
    """Refuse staged rows that are none, or not ``n_features`` wide when it is given."""
    if n_features is not None and rows.n_features != n_features:
        raise ValueError(f"n_features={n_features} given but {Path(src_name).name} has {rows.n_features} "
                         "feature columns")
    if rows.n_rows == 0:
        raise InputFileError(f"{src_name}: the file holds no rows of data (there are no rows to write)")


def _warn_if_continuous(ds) -> None:
    column = ds.attrs.get("label_column")
    where = f"{ds.attrs.get('source')}: " + (f"label column {column!r}" if column is not None else "the labels")
    warn_if_continuous(ds.classes, where, stacklevel=4)
