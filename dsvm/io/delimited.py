"""Blocks of delimited text (CSV / TSV) with one label column.

Numbers only: every field of every non-blank line must parse as a finite
float (no quotes, no missing values, no NaN or infinity), all lines have the
same number of fields, and ``#`` starts a comment.  A block is parsed with
``numpy.loadtxt``; when that fails, :func:`locate_csv_error` finds and
describes the first bad line.
"""

from __future__ import annotations

import io

import numpy as np

__all__ = ["parse_csv_block", "locate_csv_error", "split_header", "looks_like_header"]


def _fields(line: bytes, delimiter: bytes) -> list[bytes]:
    body = line.split(b"#", 1)[0].strip()
    if not body:
        return []
    return [f.strip() for f in body.split(delimiter)]


def looks_like_header(line: bytes, delimiter: str) -> bool:
    """True if some field of ``line`` is not a number."""
    for field in _fields(line, delimiter.encode()):
        try:
            float(field)
        except ValueError:
            return True
    return False


def split_header(line: bytes, delimiter: str) -> list[str]:
    return [f.decode("utf-8", "replace").strip().strip('"').strip("'") for f in _fields(line, delimiter.encode())]


def parse_csv_block(raw: bytes, delimiter: str, n_columns: int | None = None) -> tuple[np.ndarray, int]:
    """All rows of ``raw`` as a 2-D float64 array, and the 1-based line of its first row.

    Raises ``ValueError`` with ``.line`` (1-based in the block) for a bad line.
    """
    text = raw.decode("utf-8", "replace").replace("\r", "")
    first = 0
    for k, line in enumerate(text.split("\n"), start=1):
        if line.split("#", 1)[0].strip():
            first = k
            break
    if not first:
        return np.zeros((0, n_columns or 0)), 0
    try:
        arr = np.loadtxt(io.StringIO(text), delimiter=delimiter, dtype=np.float64, ndmin=2, comments="#")
    except ValueError:
        line, message = locate_csv_error(raw, delimiter, n_columns)
        err = ValueError(message)
        err.line = line  # type: ignore[attr-defined]
        raise err from None
    # NaN and infinity parse as floats, but a dataset must hold finite values (as LIBSVM files must)
    if (n_columns is not None and arr.shape[1] != n_columns) or not np.isfinite(arr).all():
        line, message = locate_csv_error(raw, delimiter, n_columns)
        err = ValueError(message)
        err.line = line  # type: ignore[attr-defined]
        raise err
    return arr, first


def locate_csv_error(raw: bytes, delimiter: str, n_columns: int | None = None) -> tuple[int, str]:
    """1-based line and message of the first bad line of ``raw``."""
    delim = delimiter.encode()
    for lineno, line in enumerate(raw.split(b"\n"), start=1):
        fields = _fields(line, delim)
        if not fields:
            continue
        shown = line.rstrip(b"\r").decode("utf-8", "replace")[:120]
        if n_columns is None:
            n_columns = len(fields)
        if len(fields) != n_columns:
            return lineno, f"expected {n_columns} fields, found {len(fields)} in line {shown!r}"
        for col, field in enumerate(fields, start=1):
            text = field.decode("utf-8", "replace")
            try:
                value = float(field)
            except ValueError:
                return lineno, f"cannot parse {text!r} (field {col}) in line {shown!r}"
            if not np.isfinite(value):
                return lineno, f"{text!r} (field {col}) is not a finite number in line {shown!r}"
    return 1, "cannot parse this block"
