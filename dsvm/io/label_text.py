"""Labels as texts, the class names of a dataset with string labels (imports nothing of :mod:`dsvm.io`).

Numbers are written as their shortest text (``1.0`` and ``+1`` are ``"1"``,
``2.5`` is ``"2.5"``), so that a number and the same number read from text
name one class; :mod:`dsvm.io.labels` says when labels become class names.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

__all__ = ["number_text", "is_number_text", "label_texts"]


def number_text(value: float) -> str:
    """The shortest text of a number: integral values without a decimal point."""
    f = float(value)
    if f.is_integer() and abs(f) < 2**53:
        return str(int(f))
    return repr(f)


def _missing(value: Any) -> bool:
    if value is None:
        return True
    if isinstance(value, float) and math.isnan(value):
        return True
    return type(value).__name__ in ("NAType", "NaTType")  # pandas' missing-value markers


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
                if not math.isfinite(float(value)):
                    raise ValueError(f"{where}: the label of row {i} is not finite ({value!r})")
                out.append(number_text(value))
            else:
                out.append(str(value))
        texts = np.array(out, dtype=str) if out else np.zeros(0, str)
    empty = np.char.str_len(texts) == 0 if texts.size else np.zeros(0, bool)
    if empty.any():
        raise ValueError(f"{where}: the label of row {int(np.flatnonzero(empty)[0])} is empty")
    return texts


def is_number_text(text: str) -> bool:
    """True if ``text`` reads as a finite number (Python's ``float``)."""
    try:
        return math.isfinite(float(text))
    except ValueError:
        return False
