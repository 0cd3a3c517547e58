"""CSV / TSV files into staging parts: the header, the label column, the delimiter, string labels.

* ``header``: ``"auto"`` takes the first line for column names only when it
  cannot be data (every field a name, see :mod:`dsvm.io.delimited`);
  ``True`` / ``False`` say so.
* ``label_column``: an index (negative from the end) or, with a header, a
  column name; ``None`` is column 0, as LIBSVM-style CSV files have it.
* ``delimiter``: one character (``","`` by default, tab for ``.tsv``).
* labels may be numbers or any text: the rule of :mod:`dsvm.io.labels`
  decides how the dataset stores them.

The file is parsed in blocks by :func:`dsvm.io.parse_stage.parse_stage`; a
block reports its field count, its first line and what its labels are.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from ..exceptions import InputFileError
from .delimited import looks_like_header, parse_csv_block, split_header, strip_bom
from .labels import block_labels, lone_text_label, with_class_names
from .parse_stage import line_offsets, parse_stage, raise_first_error
from .sources import RowSource, StagedSource, save_part
from .text import open_binary, read_range

__all__ = ["ingest_csv", "check_delimiter", "default_delimiter"]


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
        "n_columns": X.shape[1] + 1 if X.shape[0] else None,
        "first_line": first_line,
        "n_bytes": len(raw),
    }


def _csv_range(path: str, start: int, end: int, prefix: str, options: dict) -> dict[str, Any]:
    return _csv_block(read_range(path, start, end), prefix, options, start == 0)


def _first_line(path: str) -> tuple[bytes, int]:
    """The first line holding data (not blank, not only a comment) and its 1-based number."""
    with open_binary(path) as f:
        for number, line in enumerate(f, start=1):
            if strip_bom(line).split(b"#", 1)[0].strip():
                return line, number
    return b"", 0


def _label_index(name: str, label_column, names: list[str] | None) -> int:
    """``label_column`` (None, an index, or a header name) as an index into the fields."""
    if label_column is None:
        return 0
    if isinstance(label_column, str):
        if not names:
            raise InputFileError(f"{name}: label_column={label_column!r} names a column, but the file has no header "
                                 "line (give the column's index, or header=True if its first line holds names)")
        if label_column not in names:
            raise InputFileError(f"{name}: no column named {label_column!r} in the header {names}")
        return names.index(label_column)
    if isinstance(label_column, (bool, np.bool_)) or not isinstance(label_column, (int, np.integer)):
        raise ValueError(f"label_column must be a column index or name, got {label_column!r}")
    if names and not -len(names) <= label_column < len(names):
        raise InputFileError(f"{name}: label column {label_column} does not exist ({len(names)} columns in the header)")
    return int(label_column)


def ingest_csv(path: str, work: Path, *, label_column, header, delimiter, dtype, block_bytes, progress,
               n_features) -> tuple[RowSource, dict[str, Any]]:
    """Parse a CSV file into staging parts under ``work``: the rows to write and the dataset attributes they add."""
    name = Path(path).name
    delimiter = check_delimiter(delimiter) if delimiter is not None else default_delimiter(path)
    first, first_number = _first_line(path)
    guessed = header == "auto"
    if guessed:
        header = looks_like_header(first, delimiter)
    names = split_header(first, delimiter) if header else None
    label = _label_index(name, label_column, names)
    n_first = len(split_header(first, delimiter))
    if first and not -n_first <= label < n_first:
        raise InputFileError(f"{name}:{first_number}: label column {label} does not exist ({n_first} fields)")
    options: dict[str, Any] = {"delimiter": delimiter, "label_column": label, "dtype": dtype.str, "names": names}
    if names:
        options["n_columns"] = len(names)
    start = 0
    if header:
        with open_binary(path) as f:  # byte length of everything up to the header line
            for line in f:
                start += len(line)
                if line.split(b"#", 1)[0].strip():
                    break
    results = parse_stage(path, work / "staging", _csv_block, _csv_range, options, block_bytes, progress, start)
    offsets = line_offsets(results)
    try:
        raise_first_error(name, results)
    except InputFileError as exc:
        if guessed and not header and str(exc).startswith(f"{name}:{first_number}:"):
            raise InputFileError(f"{exc}; if that line is a header, pass header=True (CLI: --header)") from None
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
    width = widths.pop() if widths else 0
    if width == 1:
        raise InputFileError(f"{name}: every line holds one field only: labels without features (is the "
                             f"delimiter {delimiter!r} right? CLI: --delimiter)")
    p = max(width - 1, 0)
    if n_features is not None and n_features != p:
        raise InputFileError(f"{name}: n_features={n_features} given but the file has {p} feature columns")
    label = label % width if width else label
    summaries = [r["labels"] for r in results if r.get("labels") is not None]
    lone = lone_text_label(summaries) if guessed and not header else None
    if lone is not None and split_header(first, delimiter)[label:label + 1] == [lone]:
        raise InputFileError(
            f"{name}:{first_number}: the label {lone!r} of this line is the only label that is not a number: if the "
            "line is a header, pass header=True (CLI: --header); if it is data, pass header=False (CLI: --no-header)")
    column = f"{name}: label column {label}" + (f" ({names[label]!r})" if names else "")
    try:
        source, extra = with_class_names(StagedSource(parts, n_features=p, y_dtype=np.float64), summaries, column)
    except ValueError as exc:
        raise InputFileError(str(exc)) from None
    extra["label_column"] = label
    if names:
        extra["feature_names"] = [n for k, n in enumerate(names) if k != label]
    return source, extra
