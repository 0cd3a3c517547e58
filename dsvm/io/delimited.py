"""Blocks of delimited text (CSV / TSV) with one label column.

Numbers only: every field of every non-blank line must be a finite decimal
number (``1``, ``-0.5``, ``2.5e-3``; no missing values, no NaN or infinity,
no hexadecimal), optionally in double quotes (``"1.5"``, as the ``csv``
module reads it); all lines have the same number of fields, ``#`` starts a
comment, and a UTF-8 byte order mark at the start of the file is skipped.

A first line is taken for a header only when it cannot be data: when every
field is a name (not empty, not a number, not a missing-value marker such as
``NA``).  A first line mixing numbers with anything else is data, and its
bad field is an error naming the line, so a data row is never dropped as a
header.

A block is parsed with ``numpy.loadtxt``; when that fails,
:func:`locate_csv_error` finds and describes the first bad line.
"""

from __future__ import annotations

import csv
import io
import re

import numpy as np

__all__ = ["parse_csv_block", "locate_csv_error", "split_header", "looks_like_header", "strip_bom", "BOM"]

BOM = b"\xef\xbb\xbf"
QUOTE = '"'
# what numpy.loadtxt converts: ASCII decimal notation, inf / infinity / nan
_NUMBER = re.compile(rb"[+-]?(?:(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?|inf|infinity|nan)", re.IGNORECASE)
# fields that stand for a missing number rather than a column name
_MISSING = {b"na", b"n/a", b"nan", b"null", b"none", b"?", b"-", b".", b"nil", b"missing"}


def strip_bom(raw: bytes) -> bytes:
    return raw[len(BOM):] if raw.startswith(BOM) else raw


def _fields(line: bytes, delimiter: str) -> list[bytes]:
    """The fields of one line as the ``csv`` module splits them (quotes removed), stripped."""
    body = line.split(b"#", 1)[0].strip()
    if not body:
        return []
    text = body.decode("utf-8", "replace")
    row = next(csv.reader([text], delimiter=delimiter, quotechar=QUOTE), [])
    return [f.strip().encode("utf-8") for f in row]


def is_number(field: bytes) -> bool:
    """True if ``field`` (stripped, unquoted) is a decimal number as the parser reads it."""
    return _NUMBER.fullmatch(field) is not None


def _could_be_a_number(field: bytes) -> bool:
    """Numbers, numbers in other notations (``0x10``) and missing-value markers: not column names."""
    if not field or is_number(field) or field.lower() in _MISSING:
        return True
    try:
        int(field, 0)
        return True
    except ValueError:
        pass
    try:
        float(field)  # 1_000, other scripts' digits
        return True
    except ValueError:
        return False


def looks_like_header(line: bytes, delimiter: str) -> bool:
    """True if ``line`` cannot be data: every field is a name (see the module docstring)."""
    fields = _fields(strip_bom(line), delimiter)
    return bool(fields) and not any(_could_be_a_number(f) for f in fields)


def split_header(line: bytes, delimiter: str) -> list[str]:
    return [f.decode("utf-8", "replace").strip("'") for f in _fields(strip_bom(line), delimiter)]


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
        arr = np.loadtxt(io.StringIO(text), delimiter=delimiter, dtype=np.float64, ndmin=2, comments="#",
                         quotechar=QUOTE)
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
    for lineno, line in enumerate(raw.split(b"\n"), start=1):
        fields = _fields(line, delimiter)
        if not fields:
            continue
        shown = line.rstrip(b"\r").decode("utf-8", "replace")[:120]
        if n_columns is None:
            n_columns = len(fields)
        if len(fields) != n_columns:
            return lineno, f"expected {n_columns} fields, found {len(fields)} in line {shown!r}"
        for col, field in enumerate(fields, start=1):
            text = field.decode("utf-8", "replace")
            if not is_number(field):
                what = "an empty field" if not field else f"cannot parse {text!r}"
                return lineno, f"{what} (field {col}) in line {shown!r}; every field must be a decimal number"
            if not np.isfinite(float(field)):
                return lineno, f"{text!r} (field {col}) is not a finite number in line {shown!r}"
    return 1, "cannot parse this block"
