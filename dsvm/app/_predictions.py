"""Writing predictions block by block (never all of them in memory at once).

The file goes through :mod:`dsvm.io._replace`: written in a private temporary
folder and moved into place when complete; an existing output is replaced
only with ``overwrite=True`` and only if it is a prediction file dsvm wrote
(:func:`prediction_problem`).
"""

from __future__ import annotations

import csv
import io
import json
import os
import stat
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import zarr

from ..io import (
    ENTRY_FILE,
    ENTRY_FOLDER,
    check_inputs_outside,
    create_exclusive,
    foreign_entry,
    local_target,
    mark_output,
    marked_output_problem,
    replacing,
    to_json_scalar,
)
from ..problems import labels_from_decision
from ..svm import model_decisions, platt_log_proba

__all__ = ["OUTPUT_SUFFIXES", "FORMAT", "prediction_problem", "write_predictions"]

OUTPUT_SUFFIXES = (".zarr", ".npy", ".csv")
FORMAT = "dsvm-predictions"
KINDS = ("decision", "labels", "values", "proba")
# what write_predictions writes into a .zarr: one zarr array, its metadata and its chunk folder
ZARR_ENTRIES = {"zarr.json": ENTRY_FILE, "c": ENTRY_FOLDER}


def _first_bytes(path: Path, n: int) -> bytes:
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    with os.fdopen(fd, "rb") as f:
        return f.read(n)


def prediction_problem(path: str | os.PathLike) -> str | None:
    """None if ``path`` is a prediction output dsvm wrote, else why it is not.

    A ``.zarr`` must carry ``format: dsvm-predictions`` in its attributes and
    hold nothing but what dsvm writes there (``zarr.json`` and its chunk folder
    ``c``: it is replaced whole, with anything a user put inside).  An
    ``.npy`` or ``.csv`` file has no room for a marker of its own (any NumPy
    file, any CSV with a ``prediction`` header could be a user's), so dsvm
    marks the ones it writes with an extended attribute
    (:func:`dsvm.io.mark_output`); a file without it is never replaced.  On a
    file system that keeps no extended attributes, an earlier prediction file
    is therefore not replaced either: remove it first.
    """
    path = Path(path)
    if path.suffix.lower() != ".zarr":
        return marked_output_problem(path, FORMAT)
    st = os.lstat(path)
    if not stat.S_ISDIR(st.st_mode):
        return "it is a symbolic link" if stat.S_ISLNK(st.st_mode) else "it is not a folder"
    try:
        meta = json.loads(_first_bytes(path / "zarr.json", 2**20))
        attrs = meta.get("attributes", {})
    except (OSError, ValueError, AttributeError):
        return "it has no readable zarr.json"
    if attrs.get("format") != FORMAT:
        return f"its zarr attributes have format={attrs.get('format')!r}, not {FORMAT!r}"
    foreign = foreign_entry(path, ZARR_ENTRIES)
    if foreign is not None:
        return f"it holds {foreign!r}, which is no part of the predictions dsvm writes"
    return None


def _csv_cells(values: np.ndarray, labels: bool) -> list:
    """Rows of text cells: labels as the dataset stores them (integral floats as integers), numbers exactly."""
    rows = values[:, None] if values.ndim == 1 else values
    if labels and rows.dtype.kind == "f":
        return [[to_json_scalar(v) for v in row] for row in rows.tolist()]
    return rows.tolist()  # str(float) is the shortest text that reads back to the same float


def _csv_header(decision: bool, proba: bool, binary: bool, classes) -> list[str]:
    """The CSV header: one name per column, classes written as in the label column (``1``, not ``1.0``)."""
    if proba or (decision and not binary):
        prefix = "proba_" if proba else "decision_"
        return [f"{prefix}{to_json_scalar(c)}" for c in classes.tolist()]
    return ["decision"] if decision else ["prediction"]


def _npy_header(f, dtype: np.dtype, shape: tuple) -> None:
    np.lib.format.write_array_header_1_0(f, {"descr": np.lib.format.dtype_to_descr(dtype), "fortran_order": False,
                                             "shape": shape})


def write_predictions(model, X, out: str | os.PathLike, *, decision: bool = False, proba: bool = False,
                      overwrite: bool = False) -> int:
    """Predict ``X`` (array, dask array or Dataset) block-wise and write to ``out``.

    Labels (a regression model: values), or with ``decision=True`` decision
    values, or with ``proba=True`` the class probabilities of a model fitted
    with ``probability=True`` (one column per class, in ``classes_`` order).
    The format follows the suffix: ``.zarr`` (a 1-d array, or 2-d for
    multiclass decision values and for probabilities; its ``classes``
    attribute names the columns), ``.npy`` or ``.csv`` (one row per input
    row, written with the :mod:`csv` module: labels as stored, quoted where
    needed, numbers in full precision; the header names the columns:
    ``prediction``, ``decision``, ``decision_<class>`` or ``proba_<class>``).

    Returns
    -------
    Number of rows written.

    Raises
    ------
    FileExistsError
        ``out`` exists and ``overwrite`` is False, or it is not a prediction file dsvm wrote, or it is (or
        holds) the dataset ``X``.
    dsvm.DiskFullError
        The disk filled up; an old ``out`` is unchanged.
    """
    out = local_target(out)  # a URL is refused here, before Path() would fold its "//"
    suffix = _checked_suffix(model, X, out, decision, proba)
    dec = model_decisions(model, X)
    classes = getattr(model, "classes_", None)  # None for a regression model: the prediction is the value
    if classes is not None and classes.dtype.kind == "O":
        # one fixed width for every block: the first block's labels may all be short ones
        classes = classes.astype(str)
    binary = model.coef_.shape[0] == 1 and not proba
    labels = not decision and not proba and classes is not None
    convert = _converter(model, classes, proba=proba, labels=labels, binary=binary)
    blocks = (convert(block) for block in dec.iter_blocks())
    n = dec.n_rows
    with replacing(out, overwrite=overwrite, ours=prediction_problem, what="prediction file") as staged:
        if suffix == ".zarr":
            kind = "decision" if decision else "proba" if proba else ("labels" if classes is not None else "values")
            _write_zarr(staged.path, blocks, n, kind, classes)
        elif suffix == ".npy":
            width = () if binary or labels else (len(classes) if proba else model.coef_.shape[0],)
            _write_npy(staged.path, blocks, n, empty=(classes.dtype if labels else np.dtype(np.float64), width))
        else:
            _write_csv(staged.path, blocks, _csv_header(decision, proba, binary, classes), labels)
        if suffix != ".zarr":
            mark_output(staged.path, FORMAT)
    return n


def _checked_suffix(model, X, out: Path, decision: bool, proba: bool) -> str:
    """The suffix of ``out``, once the predictions asked for are ones ``model`` can write there."""
    check_inputs_outside(out, {"the data": getattr(X, "path", None)}, "prediction file")
    suffix = out.suffix.lower()
    if suffix not in OUTPUT_SUFFIXES:
        raise ValueError(f"--out {out}: unknown output type; use one of {', '.join(OUTPUT_SUFFIXES)}")
    if decision and proba:
        raise ValueError("write either decision values or probabilities, not both")
    classes = getattr(model, "classes_", None)
    if proba and (classes is None or not hasattr(model, "probA_")):
        raise ValueError("probabilities need a classifier fitted with probability=True (CLI: --probability)")
    return suffix


def _converter(model, classes, *, proba: bool, labels: bool, binary: bool):
    """The function from a block of decision values to the block written: probabilities, labels, or the decision
    values (one column for a binary model)."""
    def convert(d: np.ndarray) -> np.ndarray:
        if proba:
            return np.exp(platt_log_proba(d, model.probA_, model.probB_))
        if not labels:
            return d[:, 0] if binary else d
        return labels_from_decision(d, classes)

    return convert


def _write_zarr(path: Path, blocks: Iterator[np.ndarray], n: int, kind: str, classes) -> None:
    """A zarr array of ``n`` rows, one chunk per block, its attributes naming the format, the kind of values
    and (2-d) the class of each column."""
    arr = None
    start = 0
    for values in blocks:
        if arr is None:
            shape = (n,) + values.shape[1:]
            arr = zarr.create_array(str(path), shape=shape, dtype=values.dtype,
                                    chunks=(max(1, len(values)),) + values.shape[1:])
            arr.attrs.update({"format": FORMAT, "kind": kind, "n_rows": n})
            if values.ndim == 2 and classes is not None:
                arr.attrs["classes"] = [to_json_scalar(c) for c in classes.tolist()]
        arr[start : start + len(values)] = values
        start += len(values)


def _write_npy(path: Path, blocks: Iterator[np.ndarray], n: int, empty: tuple[np.dtype, tuple]) -> None:
    """An ``.npy`` file of ``n`` rows, its header from the first block (``empty``: the dtype and row shape of a
    file without rows)."""
    with create_exclusive(path) as f:
        header = False
        for block in blocks:
            values = np.ascontiguousarray(block)
            if not header:
                _npy_header(f, values.dtype, (n,) + values.shape[1:])
                header = True
            f.write(values.tobytes())
        if not header:  # no rows
            _npy_header(f, empty[0], (0,) + empty[1])
        f.flush()
        os.fsync(f.fileno())


def _write_csv(path: Path, blocks: Iterator[np.ndarray], header: list[str], labels: bool) -> None:
    """A CSV file: the ``header``, then one row per input row."""
    with create_exclusive(path) as raw, io.TextIOWrapper(raw, encoding="utf-8", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(header)
        for values in blocks:
            writer.writerows(_csv_cells(values, labels))
        f.flush()
        os.fsync(raw.fileno())
