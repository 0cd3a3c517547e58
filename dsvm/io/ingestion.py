"""``ingest``: turn a file or arrays into a dataset (see :mod:`dsvm.io.layout`).

Text formats go through two stages inside the temporary directory of the
ingest (:mod:`dsvm.io.atomic`):

1. *parse* — the file is cut into blocks of complete lines; each block is
   parsed (vectorised, :mod:`dsvm.io.libsvm` / :mod:`dsvm.io.delimited`) and saved as a
   staging part.  An uncompressed file is split into byte ranges read and
   parsed by Dask tasks (threads, or the workers of the current
   ``distributed.Client``, which must see the file); a gzip / xz / bzip2 file
   is decompressed as a stream here and its blocks parsed on a few local
   threads.  Memory stays at a few blocks (``block_bytes``: by default a
   quarter of the file per core, between 1 MiB and 16 MiB).  Each block
   becomes a staging part on disk (``.npy`` CSR or dense arrays).
2. *write* — :func:`dsvm.io.writer.write_source` cuts the parts into row
   chunks and writes them, in parallel.

Only after both stages succeed is the dataset renamed to the target.
"""

from __future__ import annotations

import logging
import os
import time
from collections import deque
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import dask
import numpy as np

from ..blocks import claim_folder
from ..exceptions import InputFileError, disk_full_names
from .atomic import atomic_target, check_target
from .dataset import open_dataset
from .delimited import looks_like_header, parse_csv_block, split_header, strip_bom
from .libsvm import LineError, line_at, parse_libsvm_block
from .progress import ProgressBar, compute_tasks
from .sources import NpySource, RowSource, StagedSource, save_csr_part, save_part
from .text import (
    DEFAULT_BLOCK_BYTES,
    byte_ranges,
    compression,
    detect_format,
    open_binary,
    read_range,
    stream_blocks,
)
from .writer import check_dtype, stored_bytes_bound, write_dataset, write_source

logger = logging.getLogger(__name__)

__all__ = ["ingest"]

FORMATS = ("libsvm", "csv", "npy")


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


def _csv_block(raw: bytes, prefix: str, options: dict, at_start: bool = False) -> dict[str, Any]:
    """Parse one CSV block into a staging part (``at_start``: the block begins the file, which may
    start with a byte order mark); errors are returned, not raised."""
    n_lines = raw.count(b"\n") + (0 if raw.endswith(b"\n") or not raw else 1)
    if at_start:
        raw = strip_bom(raw)
    try:
        arr, first_line = parse_csv_block(raw, options["delimiter"], options.get("n_columns"))
    except ValueError as exc:
        return {"error": (getattr(exc, "line", 1), str(exc)), "n_bytes": len(raw)}
    part = None
    if arr.shape[0]:
        col = options["label_column"]
        if col is not None and not -arr.shape[1] <= col < arr.shape[1]:
            return {"error": (first_line, f"label column {col} does not exist ({arr.shape[1]} fields)"),
                    "n_bytes": len(raw)}
        y = arr[:, col]
        X = np.delete(arr, col, axis=1)
        with np.errstate(over="ignore", invalid="ignore"):
            X = X.astype(options["dtype"])
        part = save_part(prefix, X, y)
    return {
        "error": None,
        "part": part,
        "n_lines": n_lines,
        "n_columns": arr.shape[1] if arr.shape[0] else None,
        "first_line": first_line,
        "n_bytes": len(raw),
    }


def _csv_range(path: str, start: int, end: int, prefix: str, options: dict) -> dict[str, Any]:
    return _csv_block(read_range(path, start, end), prefix, options, start == 0)


# Running the parse stage ----------------------------------------------------------
def _block_bytes(path: str, block_bytes: int | None) -> int:
    """Default: enough blocks to keep every core busy, between 1 MiB and 16 MiB."""
    if block_bytes is not None:
        return int(block_bytes)
    size = os.path.getsize(path)
    if compression(path) is not None:
        size *= 5  # typical ratio for LIBSVM text
    return int(min(DEFAULT_BLOCK_BYTES, max(2**20, size // (4 * (os.cpu_count() or 1)))))


def _parse_stage(
    path: str,
    staging: Path,
    block_task,
    range_task,
    options: dict,
    block_bytes: int | None,
    progress: bool,
    start: int = 0,
) -> list[dict[str, Any]]:
    """Run the block parser over the file from byte ``start`` on; one result per block, in order.

    The first result stands for the skipped ``start`` bytes (its ``n_lines``
    keeps line numbers right).
    """
    staging.mkdir(parents=True, exist_ok=True)
    block_bytes = _block_bytes(path, block_bytes)
    name = Path(path).name
    size = os.path.getsize(path)
    bar = ProgressBar(size, label=f"parse {name}", unit="B", enabled=progress)
    try:
        if compression(path) is None:
            with open(path, "rb") as f:
                skipped = {"error": None, "part": None, "n_lines": f.read(start).count(b"\n"), "n_bytes": start}
            ranges = byte_ranges(size, block_bytes, start)

            tasks = [
                dask.delayed(range_task, pure=False)(path, a, b, str(staging / f"part-{k:06d}"), options)
                for k, (a, b) in enumerate(ranges)
            ]
            bar.update(start)
            return [skipped] + compute_tasks(tasks, weights=[b - a for a, b in ranges], bar=bar)
        results: list[dict[str, Any]] = []
        workers = max(1, min(os.cpu_count() or 1, 8))
        done = 0
        with open_binary(path) as stream, ThreadPoolExecutor(workers, thread_name_prefix="dsvm-parse") as pool:
            head = stream.read(start) if start else b""
            results.append({"error": None, "part": None, "n_lines": head.count(b"\n"), "n_bytes": len(head)})
            pending: deque = deque()
            for k, block in enumerate(stream_blocks(stream, block_bytes)):
                pending.append(pool.submit(block_task, block, str(staging / f"part-{k:06d}"), options,
                                           k == 0 and not start))
                while len(pending) > workers:
                    results.append(pending.popleft().result())
                pos = stream.compressed_position()
                bar.update(pos - done)
                done = pos
            while pending:
                results.append(pending.popleft().result())
        bar.update(size - done)
        return results
    finally:
        bar.close()


def _raise_first_error(name: str, results: list[dict[str, Any]]) -> None:
    offset = 0
    for res in results:
        if res["error"] is not None:
            line, message = res["error"]
            raise InputFileError(f"{name}:{offset + line}: {message}")
        offset += res["n_lines"]


def _line_offsets(results: list[dict[str, Any]]) -> list[int]:
    offsets, total = [], 0
    for res in results:
        offsets.append(total)
        total += res.get("n_lines", 0)
    return offsets


# Formats -----------------------------------------------------------------------------
def _ingest_libsvm(path, work, *, n_features, zero_based, base_from, dtype, block_bytes, progress):
    """``base_from``: where an explicit ``zero_based`` came from (recorded as ``zero_based_from``)."""
    name = Path(path).name
    options = {"dtype": dtype.str, "zero_based": zero_based, "n_features": n_features}
    results = _parse_stage(path, work / "staging", _libsvm_block, _libsvm_range, options, block_bytes, progress)
    _raise_first_error(name, results)
    offsets = _line_offsets(results)
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


def _first_line(path: str) -> tuple[bytes, int]:
    """The first line holding data (not blank, not only a comment) and its 1-based number."""
    with open_binary(path) as f:
        for number, line in enumerate(f, start=1):
            if strip_bom(line).split(b"#", 1)[0].strip():
                return line, number
    return b"", 0


def _ingest_csv(path, work, *, label_column, header, delimiter, dtype, block_bytes, progress, n_features):
    name = Path(path).name
    first, first_number = _first_line(path)
    guessed = header == "auto"
    if guessed:
        header = looks_like_header(first, delimiter)
    names = split_header(first, delimiter) if header else None
    if isinstance(label_column, str):
        if not names or label_column not in names:
            raise InputFileError(f"{name}: no column named {label_column!r} in the header {names}")
        label_column = names.index(label_column)
    options: dict[str, Any] = {"delimiter": delimiter, "label_column": label_column, "dtype": dtype.str}
    if names:
        options["n_columns"] = len(names)
    start = 0
    if header:
        with open_binary(path) as f:  # byte length of everything up to the header line
            for line in f:
                start += len(line)
                if line.split(b"#", 1)[0].strip():
                    break
    results = _parse_stage(path, work / "staging", _csv_block, _csv_range, options, block_bytes, progress, start)
    offsets = _line_offsets(results)
    try:
        _raise_first_error(name, results)
    except InputFileError as exc:
        if guessed and not header and str(exc).startswith(f"{name}:{first_number}:"):
            raise InputFileError(f"{exc}; if that line is a header, pass header=True (CLI: --header true)") from None
        raise
    widths = {r["n_columns"] for r in results if r.get("n_columns")}
    if len(widths) > 1:
        want = next(r["n_columns"] for r in results if r.get("n_columns"))
        for off, res in zip(offsets, results):
            if res.get("n_columns") and res["n_columns"] != want:
                raise InputFileError(
                    f"{name}:{off + res['first_line']}: expected {want} fields, found {res['n_columns']}"
                )
    parts = [r["part"] for r in results if r["part"] is not None]
    p = (widths.pop() - 1) if widths else 0
    if n_features is not None and n_features != p:
        raise InputFileError(f"{name}: n_features={n_features} given but the file has {p} feature columns")
    source = StagedSource(parts, n_features=p, y_dtype=np.float64)
    extra: dict[str, Any] = {"label_column": label_column}
    if names:
        extra["feature_names"] = [n for k, n in enumerate(names) if k != label_column % len(names)]
    return source, extra


def _npy_source(source, y) -> tuple[NpySource, str]:
    if isinstance(source, (tuple, list)):
        if len(source) != 2:
            raise ValueError("an .npy source is (X_path, y_path), or X_path with y=...")
        x_path, y = source
    else:
        x_path = source
    if y is None:
        raise ValueError(f"{x_path}: labels are missing; pass y=<path to .npy> or an array")
    return NpySource(str(x_path), y), str(x_path)


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


def _is_path(x) -> bool:
    return isinstance(x, (str, os.PathLike))


def _resolve_format(source, format, y) -> str:
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
        return detect_format(source)
    return "array"


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
    label_column: int | str = 0,
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
    source : path, (X, y) or (X_path, y_path)
        A LIBSVM / svmlight file, a CSV file, an ``.npy`` file of X (labels
        via ``y=``), a pair of ``.npy`` paths, or a pair ``(X, y)`` of numpy /
        scipy.sparse / Dask arrays.  Text files may be gzip, xz or bzip2
        compressed (recognised by their content).
    target : path
        Directory of the new dataset (a zarr v3 group, see :mod:`dsvm.io.layout`).
    format : {"libsvm", "csv", "npy"}, optional
        Default: from the file name (``.libsvm``/``.svm``/``.svmlight``,
        ``.csv``/``.tsv``, ``.npy``, compression suffixes ignored), else from
        the first line.
    y : path or array, optional
        Labels of an ``.npy`` X.
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
        Storage layout; default by density (see :mod:`dsvm.io.writer`).
    chunk_rows, chunk_bytes : int, optional
        Rows per chunk, or target bytes per chunk (default 64 MiB).
    dtype : {"float32", "float64"}
        dtype of the stored values.
    label_column : int or str
        CSV: column of the label (index, negative from the end, or header name).
    header : {"auto", True, False}
        CSV: whether the first line holds column names (``"auto"``: if it is
        not all numbers).
    delimiter : str, optional
        CSV field separator (default ``","``, ``"\\t"`` for ``.tsv``).
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
        If ``target`` exists and ``overwrite`` is False.

    Notes
    -----
    LIBSVM lines are ``label [qid:N] index:value ... [# comment]``; feature
    indices must be strictly increasing within a line (as LIBSVM and
    scikit-learn require), explicit zeros are kept, and labels and values must
    be finite (see :mod:`dsvm.io.libsvm`).

    The dataset is written under a hidden temporary name next to ``target``
    and renamed at the end; a failed or interrupted ingest leaves no dataset
    and removes its temporary files.  Text input is staged once on disk in
    that temporary directory (about the size of the stored dataset).
    """

    started = time.perf_counter()
    if zero_based not in ("auto", True, False):
        raise ValueError(f"zero_based must be 'auto', True or False, got {zero_based!r}")
    base_from = "option"
    if like is not None:
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
    dtype = check_dtype(dtype)
    fmt = _resolve_format(source, format, y)
    if y is not None and fmt in ("libsvm", "csv"):
        raise ValueError(f"{source}: y (--labels) is for .npy sources; a {fmt} file carries its own labels")
    check_target(target, overwrite)
    common = {"dense": dense, "chunk_rows": chunk_rows, "chunk_bytes": chunk_bytes, "dtype": dtype}

    if fmt == "array":
        if not isinstance(source, (tuple, list)) or len(source) != 2:
            if y is None:
                raise ValueError("in-memory input is ingest((X, y), target) or ingest(X, target, y=y)")
            source = (source, y)
        X, labels = source
        if n_features is not None and X.shape[1] != n_features:
            raise ValueError(f"n_features={n_features} given but X has {X.shape[1]} columns")
        return write_dataset(target, X, labels, overwrite=overwrite, progress=progress, **common)

    if block_bytes is not None and block_bytes < 1:
        raise ValueError(f"block_bytes must be positive, got {block_bytes!r}")
    with atomic_target(target, overwrite) as work, disk_full_names(target, work, "the dataset") as space:
        claim_folder(work, "ingest")  # a killed ingest leaves it marked, for dsvm clean
        rows: RowSource
        if fmt == "npy":
            rows, src_name = _npy_source(source, y)
            if n_features is not None and rows.n_features != n_features:
                raise ValueError(f"n_features={n_features} given but X has {rows.n_features} columns")
            extra: dict[str, Any] = {}
        else:
            if not _is_path(source):
                raise TypeError(f"format {fmt!r} needs a file path, got {type(source).__name__}")
            path = str(source)
            if not os.path.isfile(path):
                raise FileNotFoundError(f"{path} does not exist")
            src_name = path
            if fmt == "libsvm":
                rows, extra = _ingest_libsvm(
                    path, work, n_features=n_features, zero_based=zero_based, base_from=base_from, dtype=dtype,
                    block_bytes=block_bytes, progress=progress,
                )
            else:
                if delimiter is None:
                    delimiter = "\t" if ".tsv" in Path(path).suffixes else ","
                rows, extra = _ingest_csv(
                    path, work, label_column=label_column, header=header, delimiter=delimiter, dtype=dtype,
                    block_bytes=block_bytes, progress=progress, n_features=n_features,
                )
        if rows.n_rows == 0:
            raise InputFileError(f"{src_name}: the file holds no rows of data (there are no rows to write)")
        attrs = {"source": Path(src_name).name, "source_format": fmt, **extra}
        space.bytes = stored_bytes_bound(rows, dtype)
        write_source(rows, str(work / "store"), attrs=attrs, progress=progress, **common)
    ds = open_dataset(target)
    logger.info(
        "ingested %s (%s): %d rows x %d features in %.2f s",
        src_name, fmt, ds.n_samples, ds.n_features, time.perf_counter() - started,
    )
    return ds
