"""Labels as a dataset stores them: numbers as numbers, anything else as class names.

The rule, in one place for every source (CSV, Parquet, DataFrames, arrays):

* labels that are all numbers (int, float, bool) are stored as numbers, as
  before (``y_dtype`` int64 or float64);
* as soon as one label is not a number (``"setosa"``), every label is a
  *class name*: its text, numbers written as their shortest text (``1``,
  ``1.0`` and ``+1`` are the same class ``"1"``, ``2.5`` is ``"2.5"``).  The
  dataset stores ``y`` as the code ``i`` of ``class_names[i]`` (the sorted
  distinct texts, in the attribute ``class_names``) and readers decode it
  back, so a model trained on it has the texts as ``classes_``.

A source reports, per block, what its labels are (:func:`block_labels`);
:func:`merge_block_labels` decides the dataset's kind and class names, and
:class:`EncodedLabels` turns the labels into codes while the rows are written.
"""

from __future__ import annotations

import logging
import warnings
from collections.abc import Sequence
from typing import Any

import numpy as np

from ._label_text import check_numeric_labels, is_number_text, label_texts, number_text
from ._sources import RowSource

logger = logging.getLogger(__name__)

__all__ = ["MAX_CLASS_NAMES", "label_texts", "check_numeric_labels", "is_numeric_labels", "storable_labels",
           "block_labels", "merge_block_labels", "EncodedLabels", "encode_label_array", "with_class_names", "lone_text_label", "warn_if_continuous"]

# a classifier's labels are a few classes; more distinct texts than this is a wrong label column
MAX_CLASS_NAMES = 10_000
# float labels with this many distinct non-integer values look like a regression target
CONTINUOUS_MIN_VALUES = 10


def is_numeric_labels(y) -> bool:
    """True if the labels are numbers (a numeric dtype)."""
    return np.asarray(y).dtype.kind in "biuf"


def storable_labels(y, where: str = "y") -> np.ndarray:
    """Labels as a staging part saves them: numbers as they are, anything else as texts (no object arrays).

    ``ValueError`` naming ``where`` and the row for a label the rules of
    :mod:`dsvm.io._label_text` refuse (missing, or an unsigned integer beyond int64).
    """
    arr = np.asarray(y)
    return check_numeric_labels(arr, where) if arr.dtype.kind in "biuf" else label_texts(arr, where)


def block_labels(y, where: str = "y") -> dict[str, Any]:
    """What one block's labels are: ``{"numeric": bool, "values": sorted distinct values or None, "counts"}``.

    ``counts`` gives the rows of each value for a block of texts (None for numbers).

    ``values`` (numbers, or texts when the block holds non-numbers) is None
    when there are more than :data:`MAX_CLASS_NAMES`: such a block can only
    be part of a numeric (regression) dataset.
    """
    arr = np.asarray(y)
    numeric = arr.dtype.kind in "biuf"
    if numeric:
        values, counts = np.unique(arr), None
    else:
        values, counts = np.unique(label_texts(arr, where), return_counts=True)
    if values.size > MAX_CLASS_NAMES:
        values = counts = None
    return {"numeric": numeric, "values": values, "counts": counts}


def merge_block_labels(summaries: Sequence[dict[str, Any]], column: str = "the label column") -> np.ndarray | None:
    """The dataset's class names from its blocks' :func:`block_labels`, or None if all labels are numbers.

    Raises ``ValueError`` when non-number labels come with more than
    :data:`MAX_CLASS_NAMES` distinct values (the wrong column, most likely).
    """
    if all(s["numeric"] for s in summaries):
        return None
    too_many = ValueError(
        f"{column} holds labels that are not numbers and more than {MAX_CLASS_NAMES} distinct values; a classifier's "
        "labels are a few classes: is the label column right (label_column=..., CLI --label-column)?")
    texts: set[str] = set()
    for s in summaries:
        if s["values"] is None:
            raise too_many
        texts.update((label_texts(s["values"]) if s["numeric"] else s["values"]).tolist())
        if len(texts) > MAX_CLASS_NAMES:
            raise too_many
    return np.array(sorted(texts), dtype=str)


def lone_text_label(summaries: Sequence[dict[str, Any]]) -> str | None:
    """The one label that is not a number, when it occurs in a single row and every other label is a number.

    That row is most likely a header line read as data (``y,1,2``).
    """
    texts: dict[str, int] = {}
    for s in summaries:
        if s["numeric"]:
            continue
        if s["values"] is None:
            return None
        for text, count in zip(s["values"].tolist(), s["counts"].tolist()):
            if not is_number_text(text):
                texts[text] = texts.get(text, 0) + count
    if len(texts) == 1 and next(iter(texts.values())) == 1:
        return next(iter(texts))
    return None


def encode_label_array(y, names: np.ndarray, where: str = "y") -> np.ndarray:
    """The int64 codes of labels against the sorted class ``names``."""
    texts = label_texts(y, where)
    codes = np.searchsorted(names, texts)
    codes = np.clip(codes, 0, max(len(names) - 1, 0))
    bad = names[codes] != texts if texts.size else np.zeros(0, bool)
    if bad.any():
        raise ValueError(f"{where}: label {texts[bad][0]!r} is not among the class names found")
    return codes.astype(np.int64)


class EncodedLabels(RowSource):
    """``source`` with its labels replaced by their codes in ``names`` (see the module docstring)."""

    def __init__(self, source: RowSource, names: np.ndarray):
        self.source = source
        self.names = np.asarray(names, dtype=str)
        for attr in ("n_rows", "n_features", "sparse", "nnz", "local"):
            setattr(self, attr, getattr(source, attr))
        self.y_dtype = np.dtype(np.int64)

    def read(self, start, stop):
        X, y = self.source.read(start, stop)
        return X, encode_label_array(y, self.names, f"rows {start}-{stop - 1}")

    def chunk_nnz(self, bounds):
        return self.source.chunk_nnz(bounds)


def with_class_names(source: RowSource, summaries: Sequence[dict[str, Any]],
                     column: str = "the label column") -> tuple[RowSource, dict[str, Any]]:
    """``source`` as it is written, and the attributes that go with its labels.

    Numeric labels: ``source`` unchanged, no attribute.  Otherwise the source
    writing codes (:class:`EncodedLabels`) and ``{"class_names": [...]}``.
    """
    names = merge_block_labels(summaries, column)
    if names is None:
        return source, {}
    return EncodedLabels(source, names), {"class_names": names.tolist()}


def warn_if_continuous(classes: np.ndarray, column: str, stacklevel: int = 3) -> None:
    """Warn when float labels look like a regression target: many distinct non-integer values.

    A classifier refuses such labels at fit; the usual cause is the wrong
    label column (a CSV saved by pandas has the label last, dsvm reads column
    0 unless told).
    """
    classes = np.asarray(classes)
    if classes.dtype.kind != "f":
        return
    fractional = classes[np.mod(classes, 1) != 0]
    if fractional.size < CONTINUOUS_MIN_VALUES:
        return
    shown = ", ".join(number_text(v) for v in fractional[:3].tolist())
    message = (f"{column} holds {classes.size} distinct labels, {fractional.size} of them not integers "
               f"(e.g. {shown}): they look continuous. That suits NystroemSVR (regression); a classifier "
               "refuses them. If the labels are in another column, pass label_column=NAME|INDEX "
               "(CLI: --label-column)")
    warnings.warn(message, UserWarning, stacklevel=stacklevel)
