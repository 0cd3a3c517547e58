"""Tables into datasets: pandas and Dask DataFrames, Parquet files (optional ``pyarrow``).

A table names its columns: the label is one of them (``label_column``, a
name, or a position like a CSV column index), or comes separately as ``y``
(a Series, Dask Series or array); every other column is a feature and must
hold numbers (bool, integer, float; a missing value is an error naming the
column and the row).  The column names are kept as the dataset's
``feature_names`` when they are all strings (as scikit-learn keeps
``feature_names_in_``).  Labels follow :mod:`dsvm.io._labels`.

Nothing is collected on the client: a Dask DataFrame is staged partition by
partition, a Parquet file row group by row group, each by one task (on the
workers of the current ``distributed.Client``, which must see the ingest's
folder, as for text files); a task returns only its staging part's name and
what its labels are.  A pandas DataFrame is already in memory and is written
as arrays.
"""

from __future__ import annotations

import os
from collections import Counter
from pathlib import Path
from typing import Any

import dask
import numpy as np

from ..exceptions import InputFileError
from ..user_files import check_user_path
from ._labels import block_labels, storable_labels, with_class_names
from ._progress import ProgressBar, compute_tasks
from ._sources import RowSource, StagedSource, save_part

__all__ = ["is_pandas_frame", "is_dask_frame", "TableColumns", "table_columns", "pandas_arrays",
           "check_numeric_columns", "stage_dask_frame", "stage_parquet", "parquet_files", "PARQUET_SUFFIXES"]

PARQUET_SUFFIXES = (".parquet", ".parq", ".pq")


def is_pandas_frame(x) -> bool:
    """True for a ``pandas.DataFrame`` (without importing pandas)."""
    return type(x).__name__ == "DataFrame" and type(x).__module__.startswith("pandas")


def is_dask_frame(x) -> bool:
    """True for a ``dask.dataframe.DataFrame``."""
    return type(x).__module__.startswith("dask") and hasattr(x, "npartitions") and hasattr(x, "columns") \
        and hasattr(x, "to_delayed")


class TableColumns:
    """Which column of a table is the label and which are the features.

    ``label`` is None when the labels come separately.  ``feature_names`` is
    the dataset attribute: the feature columns' names when they are all
    strings, else None.
    """

    def __init__(self, columns: list, label_column, has_y: bool, where: str):
        columns = list(columns)
        repeated = [(c, n) for c, n in Counter(columns).items() if n > 1]
        if repeated:
            name, n = repeated[0]
            raise ValueError(f"{where}: {n} columns are named {name!r}; dsvm needs distinct column names (rename "
                             "or drop the copies)")
        if has_y:
            if label_column is not None:
                raise ValueError(f"{where}: give the labels either as y or as label_column, not both")
            self.label = None
        elif label_column is None:
            raise ValueError(f"{where}: name the label column (label_column='name' or a position; CLI "
                             f"--label-column), or pass the labels as y; the columns are {columns[:20]}")
        elif isinstance(label_column, (int, np.integer)) and not isinstance(label_column, (bool, np.bool_)):
            if not -len(columns) <= label_column < len(columns):
                raise ValueError(f"{where}: label column {label_column} does not exist ({len(columns)} columns)")
            self.label = columns[label_column]
        elif label_column in columns:
            self.label = label_column
        else:
            raise ValueError(f"{where}: no column named {label_column!r}; the columns are {columns[:20]}")
        self.features = [c for c in columns if self.label is None or c != self.label]
        if not self.features:
            raise ValueError(f"{where}: no feature columns besides the label")
        self.feature_names = ([str(c) for c in self.features] if all(isinstance(c, str) for c in self.features)
                              else None)

    def attrs(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        if self.feature_names is not None:
            out["feature_names"] = self.feature_names
        if self.label is not None:
            out["label_column"] = str(self.label)
        return out


def table_columns(columns, label_column, has_y: bool, where: str) -> TableColumns:
    """The label and feature columns of a table (see :class:`TableColumns`)."""
    return TableColumns(columns, label_column, has_y, where)


def _check_numeric_dtypes(dtypes: dict, where: str) -> None:
    """Refuse feature columns that do not hold numbers, before reading any row."""
    import pandas as pd

    bad = [(name, dtype) for name, dtype in dtypes.items()
           if not (pd.api.types.is_numeric_dtype(dtype) or pd.api.types.is_bool_dtype(dtype))]
    if bad:
        name, dtype = bad[0]
        raise ValueError(f"{where}: column {name!r} holds {dtype} values; dsvm's features are numbers "
                         f"(bool, integer, float): encode it first (e.g. one-hot) or drop it")


def check_numeric_columns(frame, where: str = "X") -> None:
    """Refuse a pandas DataFrame with a column that does not hold numbers, naming the column, before any value
    is converted (numpy's own error names a value, not its column); other input passes unchecked."""
    if is_pandas_frame(frame):
        _check_numeric_dtypes(dict(frame.dtypes.items()), where)


def _first_missing(values: np.ndarray) -> tuple[int, int] | None:
    """(row, column) of the first NaN or infinity of a 2-d float array, or None."""
    bad = ~np.isfinite(values)
    if not bad.any():
        return None
    row = int(np.flatnonzero(bad.any(axis=1))[0])
    return row, int(np.flatnonzero(bad[row])[0])


def pandas_arrays(frame, cols: TableColumns, where: str, y=None) -> tuple[np.ndarray, np.ndarray]:
    """``(X, y)`` of a pandas DataFrame (a whole frame, or one partition): float64 features, the labels."""
    _check_numeric_dtypes({c: frame[c].dtype for c in cols.features}, where)
    X = frame[cols.features].to_numpy(dtype=np.float64, na_value=np.nan)
    missing = _first_missing(X)
    if missing is not None:
        row, col = missing
        raise ValueError(f"{where}: column {cols.features[col]!r} has a missing or infinite value in the row with "
                         f"index {frame.index[row]!r}")
    labels = _label_values(frame[cols.label] if cols.label is not None else y, where)
    if labels.shape != (X.shape[0],):
        raise ValueError(f"{where}: {X.shape[0]} rows of features but labels of shape {labels.shape}")
    return X, labels


def _label_values(labels, where: str) -> np.ndarray:
    """A label Series (or array) as numpy: numbers stay numbers (pandas' nullable ones too), the rest objects."""
    import pandas as pd

    if labels is None:
        raise ValueError(f"{where}: no labels")
    if not isinstance(labels, pd.Series):
        return np.asarray(labels)
    dtype = labels.dtype
    if isinstance(dtype, np.dtype) and dtype.kind in "biuf":
        return labels.to_numpy()
    if pd.api.types.is_bool_dtype(dtype) or pd.api.types.is_numeric_dtype(dtype):  # nullable Int64, Float64, ...
        if labels.isna().any():
            raise ValueError(f"{where}: the label of the row with index {labels.index[labels.isna()][0]!r} is missing")
        kind = "int64" if pd.api.types.is_integer_dtype(dtype) or pd.api.types.is_bool_dtype(dtype) else "float64"
        return labels.to_numpy(dtype=kind)
    return labels.to_numpy(dtype=object)


def _stage_frame_partition(frame, y, prefix: str, cols: TableColumns, dtype: str, where: str) -> dict[str, Any]:
    X, labels = pandas_arrays(frame, cols, where, y)
    with np.errstate(over="ignore", invalid="ignore"):
        X = X.astype(dtype)
    if not np.isfinite(X).all():
        raise ValueError(f"{where}: a value is too large for {np.dtype(dtype).name}")
    if not X.shape[0]:
        return {"part": None, "labels": None}
    labels = storable_labels(labels, where)
    return {"part": save_part(prefix, X, labels), "labels": block_labels(labels, where)}


def _staged(results: list[dict[str, Any]], n_features: int, column: str) -> tuple[RowSource, dict[str, Any]]:
    parts = [r["part"] for r in results if r["part"] is not None]
    summaries = [r["labels"] for r in results if r["labels"] is not None]
    integral = all(s["numeric"] and s["values"] is not None and s["values"].dtype.kind in "biu" for s in summaries)
    y_dtype = np.int64 if integral else np.float64
    return with_class_names(StagedSource(parts, n_features=n_features, y_dtype=y_dtype), summaries, column)


def stage_dask_frame(frame, y, cols: TableColumns, staging: Path, dtype, progress: bool = False
                     ) -> tuple[RowSource, dict[str, Any]]:
    """Stage a Dask DataFrame partition by partition (one task each, nothing collected here).

    ``y``: a Dask Series with the same partitions, or None (the label is a column).
    """
    _check_numeric_dtypes({c: frame.dtypes[c] for c in cols.features}, "the DataFrame")
    x_parts = frame.to_delayed()
    y_parts = [None] * len(x_parts)
    if y is not None:
        if not (hasattr(y, "npartitions") and y.npartitions == frame.npartitions):
            raise ValueError("y must be a Dask Series with the DataFrame's partitions (e.g. a column of the same "
                             "frame); or pass label_column")
        y_parts = y.to_delayed()
    staging.mkdir(parents=True, exist_ok=True)
    tasks = [dask.delayed(_stage_frame_partition, pure=False)(
        xp, yp, str(staging / f"part-{k:06d}"), cols, np.dtype(dtype).str, f"partition {k} of the DataFrame")
        for k, (xp, yp) in enumerate(zip(x_parts, y_parts))]
    results = compute_tasks(tasks, bar=ProgressBar(len(tasks), "stage", unit="partitions", enabled=progress))
    return _staged(results, len(cols.features), f"the label column {cols.label!r}" if cols.label else "y")


# Parquet ------------------------------------------------------------------------------
def _pyarrow():
    try:
        import pyarrow.parquet as pq
    except ImportError:
        raise ImportError("reading Parquet needs pyarrow: pip install 'dsvm[parquet]'") from None
    return pq


def parquet_files(path: str) -> list[str]:
    """A Parquet file, or the ``.parquet`` files of a folder (sorted by name); each a regular file
    (:mod:`dsvm.user_files`: a FIFO or a device is refused, not read)."""
    check_user_path(path, "Parquet file", InputFileError, expect="either")
    if os.path.isdir(path):
        files = sorted(str(p) for p in Path(path).iterdir() if p.suffix.lower() in PARQUET_SUFFIXES and not p.is_dir())
        if not files:
            raise FileNotFoundError(f"{path}: a folder without .parquet files")
        for f in files:
            check_user_path(f, "Parquet file", InputFileError)
        return files
    return [path]


def _arrow_labels(column) -> np.ndarray:
    import pyarrow as pa

    numeric = pa.types.is_integer(column.type) or pa.types.is_floating(column.type) or pa.types.is_boolean(column.type)
    if numeric and column.null_count == 0:
        return column.to_numpy()
    return np.array(column.to_pylist(), dtype=object)


def _stage_row_group(path: str, group: int, prefix: str, cols: TableColumns, dtype: str) -> dict[str, Any]:
    """One row group of a Parquet file as a staging part."""
    pq = _pyarrow()
    where = f"{Path(path).name}: row group {group}"
    table = pq.ParquetFile(path).read_row_group(group, columns=[*cols.features, cols.label])
    X = np.empty((table.num_rows, len(cols.features)), dtype=np.float64)
    for j, name in enumerate(cols.features):
        column = table.column(name)
        if column.null_count:
            row = int(np.flatnonzero(column.is_null().to_numpy(zero_copy_only=False))[0])
            raise ValueError(f"{where}, row {row}: column {name!r} is missing (null)")
        X[:, j] = column.to_numpy()
    missing = _first_missing(X)
    if missing is not None:
        raise ValueError(f"{where}, row {missing[0]}: column {cols.features[missing[1]]!r} is NaN or infinite")
    labels = _arrow_labels(table.column(cols.label))
    with np.errstate(over="ignore", invalid="ignore"):
        X = X.astype(dtype)
    if not X.shape[0]:
        return {"part": None, "labels": None}
    labels = storable_labels(labels, where)
    return {"part": save_part(prefix, X, labels), "labels": block_labels(labels, where)}


def stage_parquet(path: str, label_column, staging: Path, dtype, progress: bool = False
                  ) -> tuple[RowSource, dict[str, Any]]:
    """Stage a Parquet file (or a folder of them) row group by row group, one task each."""
    import pyarrow as pa

    pq = _pyarrow()
    files = parquet_files(path)
    schema = pq.ParquetFile(files[0]).schema_arrow
    cols = table_columns(schema.names, label_column, False, Path(path).name)
    for name in cols.features:
        kind = schema.field(name).type
        if not (pa.types.is_integer(kind) or pa.types.is_floating(kind) or pa.types.is_boolean(kind)):
            raise ValueError(f"{Path(path).name}: column {name!r} holds {kind} values; dsvm's features are numbers "
                             "(bool, integer, float): encode it first (e.g. one-hot) or drop it")
    groups = []
    for f in files:
        meta = pq.ParquetFile(f)
        if meta.schema_arrow.names != schema.names:
            raise ValueError(f"{Path(f).name}: its columns {meta.schema_arrow.names[:20]} differ from "
                             f"{Path(files[0]).name}'s {schema.names[:20]}")
        groups += [(f, g) for g in range(meta.num_row_groups)]
    staging.mkdir(parents=True, exist_ok=True)
    tasks = [dask.delayed(_stage_row_group, pure=False)(f, g, str(staging / f"part-{k:06d}"), cols,
                                                        np.dtype(dtype).str)
             for k, (f, g) in enumerate(groups)]
    results = compute_tasks(tasks, bar=ProgressBar(len(tasks), "stage", unit="row groups", enabled=progress))
    source, extra = _staged(results, len(cols.features), f"{Path(path).name}: label column {cols.label!r}")
    return source, {**extra, **cols.attrs()}
