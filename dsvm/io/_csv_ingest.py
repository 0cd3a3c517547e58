"""CSV / TSV files into staging parts: the header, the label column, the delimiter, string labels.

* ``header``: ``"auto"`` takes the first line for column names only when it
  cannot be data (every field a name, see :mod:`dsvm.io._csv_blocks`);
  ``True`` / ``False`` say so.
* ``label_column``: an index (negative from the end) or, with a header, a
  column name; ``None`` is column 0, as LIBSVM-style CSV files have it, or,
  for a file read like a model or dataset with feature names, the one header
  column not among them; ``False``: the file has no label column (data to
  predict on: the labels are placeholders and the dataset is ``unlabelled``).
* ``delimiter``: one character (``","`` by default, tab for ``.tsv``).
* labels may be numbers or any text: the rule of :mod:`dsvm.io._labels`
  decides how the dataset stores them.

The file is parsed in blocks by :func:`dsvm.io._parse_stage.parse_stage`; a
block reports its field count, its first line and what its labels are.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ..exceptions import InputFileError
from ._csv_blocks import looks_like_header, parse_csv_block, split_header, strip_bom
from ._labels import block_labels, lone_text_label, with_class_names
from ._line_reader import open_binary, read_range
from ._parse_stage import line_offsets, parse_stage, raise_first_error
from ._sources import RowSource, StagedSource, save_part

__all__ = ["ingest_csv", "check_delimiter", "default_delimiter", "csv_width"]


def check_delimiter(delimiter: str) -> str:
    """A field separator dsvm's CSV reader can split on: one character, not a quote, comment or line end."""
    if delimiter in ("\\t", "tab", "TAB"):
        return "\t"
    if not isinstance(delimiter, str) or len(delimiter) != 1 or delimiter in '"#\r\n':
        raise ValueError(f"delimiter must be one character other than a quote, '#' or a line end, got {delimiter!r}")
    return delimiter


def default_delimiter(path: str) -> str:
    """Tab for ``.tsv`` files (also compressed: ``x.tsv.gz``), else a comma."""
    return "\t" if ".tsv" in Path(path).suffixes else ","


def _csv_block(raw: bytes, prefix: str, options: dict, at_start: bool = False) -> dict[str, Any]:
    """Parse one CSV block into a staging part (``at_start``: the block begins the file, which may
    start with a byte order mark); errors are returned, not raised."""
    n_lines = raw.count(b"\n") + (0 if raw.endswith(b"\n") or not raw else 1)
    if at_start:
        raw = strip_bom(raw)
    try:
        X, y, first_line = parse_csv_block(raw, options["delimiter"], options.get("n_columns"),
                                           options["label_column"], options.get("names"))
    except ValueError as exc:
        return {"error": (getattr(exc, "line", 1), str(exc)), "n_bytes": len(raw)}
    part = labels = None
    if X.shape[0]:
        with np.errstate(over="ignore", invalid="ignore"):
            X = X.astype(options["dtype"])
        part = save_part(prefix, X, y)
        labels = block_labels(y)
    return {
        "error": None,
        "part": part,
        "labels": labels,
        "n_lines": n_lines,
        "n_columns": X.shape[1] + (options["label_column"] is not None) if X.shape[0] else None,
        "first_line": first_line,
        "n_bytes": len(raw),
    }


def _csv_range(path: str, start: int, end: int, prefix: str, options: dict) -> dict[str, Any]:
    return _csv_block(read_range(path, start, end), prefix, options, start == 0)


def _data_lines(path: str, count: int) -> list[tuple[bytes, int]]:
    """The first ``count`` lines holding data (not blank, not only a comment), with their 1-based numbers."""
    found: list[tuple[bytes, int]] = []
    with open_binary(path) as f:
        for number, line in enumerate(f, start=1):
            if strip_bom(line).split(b"#", 1)[0].strip():
                found.append((line, number))
                if len(found) == count:
                    break
    return found


def csv_width(path: str | os.PathLike, delimiter: str | None = None) -> int:
    """The number of fields of the first line of a CSV file that holds data (a header counts too); 0 if none."""
    delimiter = check_delimiter(delimiter) if delimiter is not None else default_delimiter(str(path))
    rows = _data_lines(str(path), 1)
    return len(split_header(rows[0][0], delimiter)) if rows else 0


def _check_first_row(name: str, rows: list[tuple[bytes, int]], header: bool, options: dict) -> None:
    """Parse the first row of data as every block will be parsed, so that a wrong label column or
    delimiter is reported at once, not after the whole file (every block would fail alike)."""
    if len(rows) <= int(bool(header)):
        return
    line, number = rows[int(bool(header))]
    try:
        parse_csv_block(strip_bom(line), options["delimiter"], options.get("n_columns"), options["label_column"],
                        options.get("names"))
    except ValueError as exc:
        raise InputFileError(f"{name}:{number}: {exc}") from None


def _with_header_hint(exc: InputFileError, name: str, first_number: int, guessed: bool, header) -> InputFileError:
    """An error in the first line of a file whose header was guessed absent: it may be a header after all."""
    if guessed and not header and str(exc).startswith(f"{name}:{first_number}:"):
        return InputFileError(f"{exc}; if that line is a header, pass header=True (CLI: --header)")
    return exc


def _label_index(name: str, label_column, names: list[str] | None) -> int | None:
    """``label_column`` (None, an index, a header name, or False: no label column) as an index into the fields."""
    if label_column is None:
        return 0
    if label_column is False:
        return None
    if isinstance(label_column, str):
        if not names:
            raise InputFileError(f"{name}: label_column={label_column!r} names a column, but the file has no header "
                                 "line (give the column's index, or header=True if its first line holds names)")
        if label_column not in names:
            raise InputFileError(f"{name}: no column named {label_column!r} in the header {names}")
        return names.index(label_column)
    if isinstance(label_column, (bool, np.bool_)) or not isinstance(label_column, (int, np.integer)):
        raise ValueError(f"label_column must be a column index or name, or False, got {label_column!r}")
    if names and not -len(names) <= label_column < len(names):
        raise InputFileError(f"{name}: label column {label_column} does not exist ({len(names)} columns in the header)")
    return int(label_column)


def label_by_names(name: str, names: list[str], features: list[str]):
    """The label column of a file whose header holds a model's (or dataset's) ``features``: the one other
    column; None when the header is not that (the default, column 0, then applies).

    Raises :class:`InputFileError` when the header is exactly the features: the file has no label column.
    """
    if names == list(features):
        raise InputFileError(f"{name}: its columns are the {len(names)} features of the reference and no label "
                             "column; pass label_column=False to read it without labels (to predict on it)")
    others = [n for n in names if n not in set(features)]
    return others[0] if len(others) == 1 and len(names) == len(features) + 1 else None


@dataclass
class _Columns:
    """How a CSV file is read: delimiter, header names, the label's index (None: no label column)."""

    delimiter: str
    header: bool
    guessed: bool  # the header was guessed (header="auto")
    names: list[str] | None
    label: int | None
    rows: list[tuple[bytes, int]]  # the first two lines holding data, with their numbers

    @property
    def first(self) -> tuple[bytes, int]:
        return self.rows[0] if self.rows else (b"", 0)


def _columns(path: str, name: str, label_column, header, delimiter, features) -> _Columns:
    delimiter = check_delimiter(delimiter) if delimiter is not None else default_delimiter(path)
    rows = _data_lines(path, 2)
    first, number = rows[0] if rows else (b"", 0)
    guessed = header == "auto"
    if guessed:
        header = looks_like_header(first, delimiter)
    names = split_header(first, delimiter) if header else None
    if label_column is None and names and features is not None:
        label_column = label_by_names(name, names, features)
    label = _label_index(name, label_column, names)
    n_first = len(split_header(first, delimiter))
    if first and label is not None and not -n_first <= label < n_first:
        raise InputFileError(f"{name}:{number}: label column {label} does not exist ({n_first} fields)")
    return _Columns(delimiter, bool(header), guessed, names, label, rows)


def _parse(path: str, name: str, work: Path, cols: _Columns, options: dict, block_bytes, progress
           ) -> tuple[list[dict[str, Any]], int]:
    """Parse the file into staging parts: the blocks' results and the number of fields of every line."""
    first_number = cols.first[1]
    try:
        _check_first_row(name, cols.rows, cols.header, options)
        start = 0
        if cols.header:
            with open_binary(path) as f:  # byte length of everything up to the header line
                for line in f:
                    start += len(line)
                    if line.split(b"#", 1)[0].strip():
                        break
        results = parse_stage(path, work / "staging", _csv_block, _csv_range, options, block_bytes, progress, start)
        raise_first_error(name, results)
    except InputFileError as exc:
        raise _with_header_hint(exc, name, first_number, cols.guessed, cols.header) from None
    widths = {r["n_columns"] for r in results if r.get("n_columns")}
    if len(widths) > 1:
        want = next(r["n_columns"] for r in results if r.get("n_columns"))
        for off, res in zip(line_offsets(results), results):
            if res.get("n_columns") and res["n_columns"] != want:
                raise InputFileError(
                    f"{name}:{off + res['first_line']}: expected {want} fields, found {res['n_columns']}"
                )
    return results, (widths.pop() if widths else 0)


def ingest_csv(path: str, work: Path, *, label_column, header, delimiter, dtype, block_bytes, progress,
               n_features, features: list[str] | None = None) -> tuple[RowSource, dict[str, Any]]:
    """Parse a CSV file into staging parts under ``work``: the rows to write and the dataset attributes they add.

    ``label_column=False``: the file has no label column; the labels are placeholders (0) and the
    attributes say ``unlabelled``.  ``features``: the feature names of the model or dataset the file
    is read like; with a header and no ``label_column``, the label is the one other column (:func:`label_by_names`).
    """
    name = Path(path).name
    cols = _columns(path, name, label_column, header, delimiter, features)
    options: dict[str, Any] = {"delimiter": cols.delimiter, "label_column": cols.label, "dtype": dtype.str,
                               "names": cols.names}
    if cols.names:
        options["n_columns"] = len(cols.names)
    results, width = _parse(path, name, work, cols, options, block_bytes, progress)
    parts = [r["part"] for r in results if r["part"] is not None]
    if cols.label is None:
        p = width
    elif width == 1:
        raise InputFileError(f"{name}: every line holds one field only: labels without features (is the "
                             f"delimiter {cols.delimiter!r} right? CLI: --delimiter)")
    else:
        p = max(width - 1, 0)
    if n_features is not None and n_features != p:
        raise InputFileError(f"{name}: n_features={n_features} given but the file has {p} feature columns")
    if cols.label is None:
        extra: dict[str, Any] = {"unlabelled": True}
        if cols.names:
            extra["feature_names"] = list(cols.names)
        return StagedSource(parts, n_features=p, y_dtype=np.float64), extra
    return _labelled(name, cols, results, parts, p, width)


def _labelled(name: str, cols: _Columns, results, parts, p: int, width: int) -> tuple[RowSource, dict[str, Any]]:
    """The rows with their labels (numbers, or class names), and the label column's attributes."""
    label = cols.label % width if width else cols.label
    first, first_number = cols.first
    summaries = [r["labels"] for r in results if r.get("labels") is not None]
    lone = lone_text_label(summaries) if cols.guessed and not cols.header else None
    if lone is not None and split_header(first, cols.delimiter)[label:label + 1] == [lone]:
        raise InputFileError(
            f"{name}:{first_number}: the label {lone!r} of this line is the only label that is not a number: if the "
            "line is a header, pass header=True (CLI: --header); if it is data, pass header=False (CLI: --no-header)")
    names = cols.names
    column = f"{name}: label column {label}" + (f" ({names[label]!r})" if names else "")
    try:
        source, extra = with_class_names(StagedSource(parts, n_features=p, y_dtype=np.float64), summaries, column)
    except ValueError as exc:
        raise InputFileError(str(exc)) from None
    extra["label_column"] = label
    if names:
        extra["feature_names"] = [n for k, n in enumerate(names) if k != label]
    return source, extra
