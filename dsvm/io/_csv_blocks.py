"""Blocks of delimited text (CSV / TSV) with one label column.

Every feature field of every non-blank line must be a finite decimal number
(``1``, ``-0.5``, ``2.5e-3``; no missing values, no NaN or infinity, no
hexadecimal), optionally in double quotes (``"1.5"``, as the ``csv`` module
reads it); the label field is a number or any non-empty text (a class name,
see :mod:`dsvm.io._labels`), not a missing-value marker, and a label written as
an integer is at most 2**53 in magnitude (:mod:`dsvm.io._label_text`).  All
lines have the same number of fields, ``#`` starts a comment, and a UTF-8 byte
order mark at the start of the file is skipped.

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
import warnings

import numpy as np

from ._label_text import (
    INEXACT_HINT,
    MAX_EXACT_INTEGER,
    integer_text_problem,
    is_missing_text,
    label_text_problem,
    label_texts,
)

__all__ = ["parse_csv_block", "locate_csv_error", "locate_first_row", "canonical_label_texts", "split_header",
           "looks_like_header", "strip_bom", "is_number", "BOM"]

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
    text = body.decode("utf-8", "replace").replace("\r", "")  # as the block parser reads it
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


def _label_index(label_column: int, n_fields: int) -> int:
    """The label column as a non-negative index; ``ValueError`` if the line has no such field."""
    if not -n_fields <= label_column < n_fields:
        raise ValueError(f"label column {label_column} does not exist ({n_fields} fields)")
    return label_column % n_fields


def _bad_block(raw: bytes, delimiter: str, n_columns: int | None, label_column: int | None,
               names: list[str] | None) -> ValueError:
    line, message = locate_csv_error(raw, delimiter, n_columns, label_column, names)
    err = ValueError(message)
    err.line = line  # type: ignore[attr-defined]
    return err


def parse_csv_block(raw: bytes, delimiter: str, n_columns: int | None = None, label_column: int | None = 0,
                    names: list[str] | None = None) -> tuple[np.ndarray, np.ndarray, int]:
    """The rows of ``raw``: features ``(n, n_fields - 1)`` float64, labels, and the 1-based line of the first row.

    Labels are float64 when every label of the block is a number, else a
    ``str`` array (numbers in it written as :func:`dsvm.io._labels.label_texts`
    writes them).  Every other field must be a decimal number.  With
    ``label_column=None`` the block has no label column: every field is a
    feature, and the labels are zeros (placeholders).  ``names`` (the
    header) only improves messages.  Raises ``ValueError`` with ``.line``
    (1-based in the block) for a bad line.
    """
    text = raw.decode("utf-8", "replace").replace("\r", "")
    first = 0
    for k, line in enumerate(text.split("\n"), start=1):
        if line.split("#", 1)[0].strip():
            first = k
            break
    width = (n_columns or 0) if label_column is None else max((n_columns or 1) - 1, 0)
    if not first:
        return np.zeros((0, width)), np.zeros(0), 0
    try:
        arr = np.loadtxt(io.StringIO(text), delimiter=delimiter, dtype=np.float64, ndmin=2, comments="#",
                         quotechar=QUOTE)
    except ValueError:
        if label_column is None:  # no label column: every field must be a number
            raise _bad_block(raw, delimiter, n_columns, None, names) from None
        return _parse_with_text_labels(raw, text, delimiter, n_columns, label_column, names, first)
    # NaN and infinity parse as floats, but a dataset must hold finite values (as LIBSVM files must)
    if (n_columns is not None and arr.shape[1] != n_columns) or not np.isfinite(arr).all():
        raise _bad_block(raw, delimiter, n_columns, label_column, names)
    if label_column is None:
        return arr, np.zeros(arr.shape[0]), first
    col = _located(raw, delimiter, label_column, arr.shape[1])
    if (np.abs(arr[:, col]) >= MAX_EXACT_INTEGER).any():  # some label may be an integer a float64 cannot hold
        inexact = _inexact_label(raw, delimiter, label_column)
        if inexact is not None:
            err = ValueError(inexact[1])
            err.line = inexact[0]  # type: ignore[attr-defined]
            raise err
    return np.delete(arr, col, axis=1), arr[:, col], first


def _inexact_label(raw: bytes, delimiter: str, label_column: int) -> tuple[int, str] | None:
    """1-based line and message of the first label written as an integer beyond 2**53, or None."""
    for lineno, line in enumerate(raw.split(b"\n"), start=1):
        fields = _fields(line, delimiter)
        if fields:
            col = _label_index(label_column, len(fields))
            problem = integer_text_problem(fields[col].decode("utf-8", "replace"))
            if problem is not None:
                return lineno, f"{problem} (field {col + 1}) in line {_shown(line)!r}{INEXACT_HINT}"
    return None


def _shown(line: bytes) -> str:
    return line.rstrip(b"\r").decode("utf-8", "replace")[:120]


def _located(raw: bytes, delimiter: str, label_column: int, n_fields: int) -> int:
    try:
        return _label_index(label_column, n_fields)
    except ValueError as exc:
        exc.line = locate_first_row(raw, delimiter)  # type: ignore[attr-defined]
        raise


def locate_first_row(raw: bytes, delimiter: str) -> int:
    """1-based line of the first line of ``raw`` holding data."""
    for lineno, line in enumerate(raw.split(b"\n"), start=1):
        if _fields(line, delimiter):
            return lineno
    return 1


def _parse_with_text_labels(raw, text, delimiter, n_columns, label_column, names, first):
    """Some field is not a number: read every field as text; only the label column may hold non-numbers,
    and then only text (valid UTF-8, no control characters)."""
    try:
        raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        err = ValueError(f"bytes that are not UTF-8 text at byte {exc.start} of this line")
        err.line = raw[: exc.start].count(b"\n") + 1  # type: ignore[attr-defined]
        raise err from None
    width = _unquoted_width(text, delimiter)
    try:
        with warnings.catch_warnings():  # numpy reads text in batches and notes blank lines it skips
            warnings.filterwarnings("ignore", message="Input line", category=UserWarning)
            if width is not None and (n_columns is None or width == n_columns):
                # every line has `width` fields and no quotes: numpy's number parser reads the features, as it
                # reads a block of numbers, and only the label column is read as text
                col = _located(raw, delimiter, label_column, width)
                X = np.loadtxt(io.StringIO(text), delimiter=delimiter, dtype=np.float64, ndmin=2, comments="#",
                               usecols=[k for k in range(width) if k != col])
                labels = np.loadtxt(io.StringIO(text), delimiter=delimiter, dtype=str, ndmin=1, comments="#",
                                    usecols=[col])
            else:
                X, labels = _text_cells(text, delimiter, n_columns, raw, label_column)
    except ValueError as exc:
        if hasattr(exc, "line"):  # the label column does not exist: that message, at the first row
            raise
        raise _bad_block(raw, delimiter, n_columns, label_column, names) from None
    if not np.isfinite(X).all():
        raise _bad_block(raw, delimiter, n_columns, label_column, names)
    labels = np.char.strip(labels)
    try:
        return X, canonical_label_texts(labels), first
    except ValueError as exc:
        raise _bad_block(raw, delimiter, n_columns, label_column, names) from exc


def _unquoted_width(text: str, delimiter: str) -> int | None:
    """The number of fields of every data line when the text has no quotes and all lines agree, else None."""
    if QUOTE in text:
        return None
    widths = {body.count(delimiter) + 1 for line in text.split("\n") if (body := line.split("#", 1)[0]).strip()}
    return widths.pop() if len(widths) == 1 else None


def _text_cells(text: str, delimiter: str, n_columns: int | None, raw: bytes, label_column: int):
    """Features and labels of a block read field by field as text (quoted fields, or lines of other widths)."""
    cells = np.loadtxt(io.StringIO(text), delimiter=delimiter, dtype=str, ndmin=2, comments="#", quotechar=QUOTE)
    if n_columns is not None and cells.shape[1] != n_columns:
        raise ValueError("field count")
    col = _located(raw, delimiter, label_column, cells.shape[1])
    fields = np.char.strip(np.delete(cells, col, axis=1))
    if fields.size and (np.char.find(fields, "_") >= 0).any():  # Python's float() reads 1_000, a CSV does not
        raise ValueError("not a decimal number")
    return fields.astype(np.float64), cells[:, col]


def canonical_label_texts(labels: np.ndarray) -> np.ndarray:
    """Label texts of a CSV column, those that are decimal numbers written as numbers are (``+1.0`` → ``1``)."""
    values, inverse = np.unique(labels, return_inverse=True)
    out = []
    for v in values.tolist():
        if label_text_problem(v) is not None:
            raise ValueError("missing or unprintable label")
        number = is_number(v.encode("utf-8"))
        if number and integer_text_problem(v) is not None:
            raise ValueError("an integer label beyond 2**53")
        out.append(label_texts(np.array([float(v)]))[0] if number else v)
    return np.array(out, dtype=str)[inverse] if out else labels


def _label_problem(field: bytes, col: int, shown: str) -> str | None:
    """What is wrong with a label field (any non-empty printable text, finite and exact if a number), or None."""
    text = field.decode("utf-8", "replace")
    if is_missing_text(text):
        return f"a missing label {text!r} (field {col + 1}) in line {shown!r}"
    if not text.isprintable():
        return f"label {text!r} (field {col + 1}) holds control characters in line {shown!r}"
    if is_number(field) and not np.isfinite(float(field)):
        return f"label {text!r} (field {col + 1}) is not a finite number in line {shown!r}"
    if is_number(field) and (problem := integer_text_problem(text)) is not None:
        return f"{problem} (field {col + 1}) in line {shown!r}{INEXACT_HINT}"
    return None


def _feature_problem(field: bytes, col: int, shown: str, names: list[str] | None, label: int | None) -> str | None:
    """What is wrong with a feature field (a finite decimal number), or None."""
    text = field.decode("utf-8", "replace")
    if not is_number(field):
        what = "an empty field" if not field else f"cannot parse {text!r}"
        return f"{what} (field {col + 1}){_named(names, col)} in line {shown!r}; " + _hint(names, col, label)
    if not np.isfinite(float(field)):
        return f"{text!r} (field {col + 1}) is not a finite number in line {shown!r}"
    return None


def locate_csv_error(raw: bytes, delimiter: str, n_columns: int | None = None, label_column: int | None = None,
                     names: list[str] | None = None) -> tuple[int, str]:
    """1-based line and message of the first bad line of ``raw``.

    Every field must be a finite decimal number, except the one in
    ``label_column`` (when given), which may be any non-empty text.
    """
    for lineno, line in enumerate(raw.split(b"\n"), start=1):
        fields = _fields(line, delimiter)
        if not fields:
            continue
        shown = _shown(line)
        if n_columns is None:
            n_columns = len(fields)
        if len(fields) != n_columns:
            return lineno, f"expected {n_columns} fields, found {len(fields)} in line {shown!r}"
        label = None if label_column is None else _label_index(label_column, len(fields))
        for col, field in enumerate(fields):
            problem = (_label_problem(field, col, shown) if col == label
                       else _feature_problem(field, col, shown, names, label))
            if problem is not None:
                return lineno, problem
    return 1, "cannot parse this block"


def _named(names: list[str] | None, col: int) -> str:
    return f" in column {names[col]!r}" if names and col < len(names) else ""


def _hint(names: list[str] | None, col: int, label: int | None) -> str:
    """What a non-number in a feature column means: the label is elsewhere, or the data needs encoding."""
    if label is None:
        return "every field must be a decimal number"
    which = repr(names[col]) if names and col < len(names) else str(col)
    label_name = f" {names[label]!r}" if names and label < len(names) else ""
    return (f"only the label column{label_name} (field {label + 1}) may hold text, the others decimal numbers; "
            f"if this column holds the labels, pass label_column={which} (CLI: --label-column {which.strip(chr(39))})")
