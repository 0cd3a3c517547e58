"""Labels as texts, the class names of a dataset with string labels (imports nothing of :mod:`dsvm.io`).

Numbers are written as their shortest text (``1.0`` and ``+1`` are ``"1"``,
``2.5`` is ``"2.5"``; integers exactly, however large), so that a number and
the same number read from text name one class; :mod:`dsvm.io._labels` says
when labels become class names.

The rules every label source follows (CSV, LIBSVM, ``.npy``, arrays, tables,
the ``y`` of a fit), in one place:

* a label is *missing* when it is None, NaN, pandas' NA, an empty text or a
  missing-value marker (:data:`MISSING_LABELS`, as pandas reads a CSV:
  ``nan``, ``NA``, ``null``, ``N/A``, in any case); a text holding control
  characters is refused too (it would break the lines of a prediction file);
* a label written as an integer in a text file is read as a float64, which
  holds every integer only up to :data:`MAX_EXACT_INTEGER` (2**53): a larger
  one is refused (``2**53 + 1`` would silently become ``2**53``, merging two
  classes);
* integer labels are stored as int64: unsigned ones beyond ``2**63 - 1`` are
  refused, not wrapped to negative numbers.
"""

from __future__ import annotations

import math
import re
from typing import Any

import numpy as np

__all__ = ["number_text", "is_number_text", "label_texts", "is_missing_text", "label_text_problem", "integer_text_problem",
           "check_numeric_labels", "MISSING_LABELS", "MAX_EXACT_INTEGER", "INEXACT_HINT"]

#: label texts read as a missing label rather than a class name (what pandas reads as missing), compared stripped
#: and in lower case
MISSING_LABELS = frozenset({"na", "n/a", "nan", "null"})
#: every integer up to this magnitude is a float64 exactly; 2**53 + 1 is not
MAX_EXACT_INTEGER = 2**53
#: what a label beyond 2**53 would do, and what to do instead
INEXACT_HINT = "; labels next to it would merge into one class: number the classes with smaller integers"
_INT64_MAX = np.iinfo(np.int64).max
# a decimal number written as an integer: digits, optionally with a point and zeros only (no exponent)
_INTEGER_TEXT = re.compile(r"\s*[+-]?(\d+)(?:\.0*)?\s*")


def number_text(value: float) -> str:
    """The shortest text of a number: integers exactly, integral floats up to 2**53 without a decimal point."""
    if isinstance(value, (int, np.integer)) and not isinstance(value, (bool, np.bool_)):
        return str(int(value))
    f = float(value)
    if f.is_integer() and abs(f) <= MAX_EXACT_INTEGER:
        return str(int(f))
    return repr(f)


def _missing(value: Any) -> bool:
    if value is None:
        return True
    if isinstance(value, float) and math.isnan(value):
        return True
    return type(value).__name__ in ("NAType", "NaTType")  # pandas' missing-value markers


def is_missing_text(text: str) -> bool:
    """True if a label text stands for a missing label: empty, or a marker of :data:`MISSING_LABELS`."""
    return not text.strip() or text.strip().lower() in MISSING_LABELS


def label_text_problem(text: str) -> str | None:
    """What makes a label text no class name (``"is empty"``, ``"is missing (...)"``, ...), or None.

    The rule of the CSV reader, applied to every source of text labels.
    """
    if is_missing_text(text):
        return f"is missing ({text!r})" if text.strip() else "is empty"
    if not text.isprintable():
        return f"({text!r}) holds control characters"
    return None


def integer_text_problem(text: str) -> str | None:
    """Why a label written as an integer cannot be read as a number exactly (beyond 2**53), or None.

    A caller names where, then adds :data:`INEXACT_HINT`.
    """
    match = _INTEGER_TEXT.fullmatch(text)
    if match is None or int(match.group(1)) <= MAX_EXACT_INTEGER:
        return None
    return f"label {text.strip()!r} is an integer beyond 2**53, which a float64 does not hold exactly"


def check_numeric_labels(y: np.ndarray, where: str = "y") -> np.ndarray:
    """Numeric labels as a dataset can store them: ``ValueError`` naming the first row that is NaN or infinite,
    or an unsigned integer beyond ``2**63 - 1`` (dsvm stores integer labels as int64); ``y`` itself otherwise."""
    arr = np.asarray(y)
    if arr.dtype.kind == "f" and arr.size and not np.isfinite(arr).all():
        row = int(np.flatnonzero(~np.isfinite(arr))[0])
        raise ValueError(f"{where}: the label of row {row} is missing or not finite ({arr[row]!r})")
    if arr.dtype.kind == "u" and arr.dtype.itemsize == 8 and arr.size and int(arr.max()) > _INT64_MAX:
        row = int(np.argmax(arr > np.uint64(_INT64_MAX)))
        raise ValueError(f"{where}: the label of row {row} ({int(arr[row])}) is beyond 2**63 - 1, the largest "
                         "integer label dsvm stores (int64): number the classes with smaller integers")
    return arr


def _check_texts(texts: np.ndarray, where: str) -> None:
    """The first row whose text is no class name (:func:`label_text_problem`), as a ``ValueError``."""
    values, first = np.unique(texts, return_index=True)
    bad = [(int(row), problem) for value, row in zip(values.tolist(), first.tolist())
           if (problem := label_text_problem(value)) is not None]
    if bad:
        row, problem = min(bad)
        raise ValueError(f"{where}: the label of row {row} {problem}")


def label_texts(y, where: str = "y") -> np.ndarray:
    """Labels as class-name texts (a ``str`` array); ``ValueError`` naming the row of a missing label."""
    arr = np.asarray(y)
    if arr.ndim != 1:
        raise ValueError(f"{where}: labels must be 1-dimensional, got shape {arr.shape}")
    if arr.dtype.kind in "biuf":
        if arr.dtype.kind == "f" and not np.isfinite(arr).all():
            raise ValueError(f"{where}: the label of row {int(np.flatnonzero(~np.isfinite(arr))[0])} is missing "
                             "or not finite")
        return np.array([number_text(v) for v in arr.tolist()], dtype=str) if arr.size else np.zeros(0, str)
    if arr.dtype.kind == "U":
        texts = arr
    else:
        out = []
        for i, value in enumerate(arr.tolist()):
            if _missing(value):
                raise ValueError(f"{where}: the label of row {i} is missing ({value!r})")
            if isinstance(value, (bool, int, float, np.number)):
                if isinstance(value, (float, np.floating)) and not math.isfinite(value):
                    raise ValueError(f"{where}: the label of row {i} is not finite ({value!r})")
                out.append(number_text(value))
            else:
                out.append(str(value))
        texts = np.array(out, dtype=str) if out else np.zeros(0, str)
    if texts.size:
        _check_texts(texts, where)
    return texts


def is_number_text(text: str) -> bool:
    """True if ``text`` reads as a finite number (Python's ``float``)."""
    try:
        return math.isfinite(float(text))
    except ValueError:
        return False
