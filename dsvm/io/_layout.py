"""The on-disk layout of a dsvm dataset: a zarr v3 group.

::
    name.zarr/                    zarr v3 group; attributes below
    ├── y                         (n_samples,) labels, chunks (chunk_rows,)
    └── X                         dense:  (n_samples, n_features) array,
                                          chunks (chunk_rows, n_features)
        or, sparse (CSR, one part per row chunk):
        X/                        group, attribute layout = "csr-row-chunks"
        ├── indptr                (n_chunks, chunk_rows + 1) int64, chunks (1, chunk_rows + 1)
        ├── indices               (n_chunks, max_chunk_nnz) int32 (int64 if n_features >= 2**31),
        │                         chunks (1, max_chunk_nnz)
        ├── data                  (n_chunks, max_chunk_nnz) values, chunks (1, max_chunk_nnz)
        └── chunk_nnz             (n_chunks,) int64

Rows are cut into ``n_chunks = ceil(n_samples / chunk_rows)`` row chunks;
chunk ``i`` holds rows ``[i * chunk_rows, min((i + 1) * chunk_rows, n_samples))``
and is one zarr chunk of ``y`` and of ``X`` (dense), or one zarr chunk of each of
``X/indptr``, ``X/indices`` and ``X/data`` (sparse).  For a sparse chunk with
``m`` rows and ``k = chunk_nnz[i]`` stored values, ``indptr[i, :m + 1]`` is its
CSR row pointer (starting at 0; the rest of the row repeats ``k``), and
``indices[i, :k]`` (0-based column indices, increasing within a row) and
``data[i, :k]`` its entries; the tail of those rows is padding.  Reading a row
chunk is therefore a few whole-chunk reads, and writers of different chunks
never touch the same file.

Group attributes (JSON):

=================  ==========================================================
format             ``"dsvm-dataset"``
format_version     ``3`` for a dataset with string labels (``class_names``:
                   an older reader must not take the codes in ``y`` for the
                   labels; its seal also covers ``class_names`` and
                   ``feature_names``), else ``2``, which older dsvm versions
                   read too (``1``: without ``checksums`` and ``seal``, still read)
n_samples          number of rows
n_features         number of columns
nnz                stored entries of X (``n_samples * n_features`` if dense)
sparse             ``true`` for the CSR layout
chunk_rows         rows per chunk (the last chunk may be shorter)
n_chunks           number of row chunks
dtype              dtype of X values (``"float32"`` or ``"float64"``)
index_dtype        dtype of ``X/indices`` (sparse only)
y_dtype            ``"float64"`` or ``"int64"``
classes            sorted list of the distinct labels in y
class_counts       number of rows of each class, same order
class_names        only for string labels: the sorted distinct label texts;
                   ``y`` then stores the code ``i`` of ``class_names[i]``
                   and ``classes`` is ``[0, 1, ..., len(class_names) - 1]``
                   (readers decode ``y`` back to the texts)
feature_names      optional: the column names of X (CSV header, Parquet or
                   DataFrame columns), one string per feature
unlabelled         optional: ``true`` for data read without a label column
                   (a CSV to predict on); ``y`` then holds placeholders (0)
source             where the data came from (file name, ``"<array>"``, ...)
source_format      ``"libsvm"``, ``"csv"``, ``"npy"``, ``"array"`` or ``"synthetic"``
zero_based         LIBSVM only: whether the file's indices were 0-based
zero_based_from    LIBSVM only: how that was decided: ``"option"`` (given),
                   ``"reference"`` (taken from the training dataset or model,
                   ``ingest(like=...)``), ``"index 0"`` (detected: the file
                   uses index 0) or ``"no index 0"`` (detected: it does not,
                   so one-based was assumed)
checksums          ``{"X": [...], "y": [...]}``: per row chunk, the CRC-32C of
                   the chunk index (int64, little-endian) followed by the
                   chunk's content as read (dense: the rows of X; sparse: its
                   ``indptr[:m+1]``, ``indices[:nnz]``, ``data[:nnz]``; y: the
                   labels)
seal               CRC-32C of the attributes that describe the stored arrays
                   (:data:`SEALED_ATTRS`, canonical JSON)
uuid               random id of this write (names the Dask arrays)
created_by         ``"dsvm <version>"``
created_at         UTC time of the write, ISO 8601
=================  ==========================================================

Chunks are compressed with Blosc (zstd level 1, byte shuffle) followed by a CRC-32C
checksum, so a truncated or overwritten chunk file fails to decode, and the
fill values (NaN for values and float labels, -1 for indices and row pointers,
the smallest int64 for integer labels) make a missing chunk file visible: the
reader checks every chunk it reads and names the rows of a bad one.

That per-file checksum covers a chunk's bytes, not where the chunk sits: the
``checksums`` attribute binds each row chunk's content to its index, so a
chunk file moved or swapped with another one, or a dataset replaced while a
reader still uses it, fails the check when the chunk is read (the reader
keeps the checksums it found when it opened the dataset).  The ``seal``
makes a hand edit of the attributes that describe the arrays (``n_features``,
``classes``, ...) visible when the dataset is opened.  Version-1 datasets have
neither; they are read without these two checks.
"""

from __future__ import annotations

import datetime
import json
import math
import uuid
from collections.abc import Mapping
from importlib.metadata import PackageNotFoundError, version
from typing import Any

import google_crc32c
import numpy as np
import zarr
from zarr.codecs import BloscCodec, Crc32cCodec

from ..exceptions import InvalidDatasetError
from ._replace import ENTRY_FILE, ENTRY_FOLDER

FORMAT_NAME = "dsvm-dataset"
FORMAT_VERSION = 3  # the newest version this dsvm reads and writes
SPARSE_LAYOUT = "csr-row-chunks"
INT_LABEL_FILL = np.iinfo(np.int64).min

# every entry of a dataset's folder, as the diagram above draws it (for dsvm.io.foreign_entry): each array folder
# holds its zarr.json and its chunk folder c (not walked); X is a dense array or the sparse group
_ARRAY_ENTRIES = {"zarr.json": ENTRY_FILE, "c": ENTRY_FOLDER}
_SPARSE_X_ENTRIES = {"zarr.json": ENTRY_FILE, **{name: _ARRAY_ENTRIES for name in ("indptr", "indices", "data",
                                                                                    "chunk_nnz")}}
DATASET_ENTRIES = {"zarr.json": ENTRY_FILE, "y": _ARRAY_ENTRIES, "X": [_ARRAY_ENTRIES, _SPARSE_X_ENTRIES]}

REQUIRED_ATTRS: dict[str, type | tuple[type, ...]] = {
    "format": str,
    "format_version": int,
    "n_samples": int,
    "n_features": int,
    "nnz": int,
    "sparse": bool,
    "chunk_rows": int,
    "n_chunks": int,
    "dtype": str,
    "y_dtype": str,
    "classes": list,
}


# what the seal covers: everything that says how to read the arrays or what they hold
SEALED_ATTRS = (
    "format", "format_version", "uuid", "n_samples", "n_features", "nnz", "sparse", "chunk_rows", "n_chunks",
    "dtype", "index_dtype", "y_dtype", "classes", "class_counts", "zero_based", "checksums",
)
# sealed from format version 3 on (a version-2 seal was computed without them)
SEALED_FROM_V3 = ("class_names", "feature_names")


def chunk_checksum(index: int, *parts: np.ndarray) -> int:
    """CRC-32C of the chunk index (int64, little-endian) followed by the bytes of ``parts``.

    Covering the index binds the content to its position: the same bytes at
    another chunk index give another checksum.
    """
    crc = google_crc32c.value(np.int64(index).astype("<i8").tobytes())
    for part in parts:
        arr = np.ascontiguousarray(part)
        arr = arr.astype(arr.dtype.newbyteorder("<"), copy=False)
        crc = google_crc32c.extend(crc, arr.reshape(-1).view(np.uint8))
    return int(crc)


def format_version_for(attrs: Mapping[str, Any]) -> int:
    """The format version a dataset with these attributes is written as: 3 only where version 2 would be
    misread (string labels stored as codes), so that other datasets stay readable by older versions."""
    return FORMAT_VERSION if "class_names" in attrs else 2


def sealed_attrs(format_version: Any) -> tuple[str, ...]:
    """The attributes the seal of a dataset of ``format_version`` covers."""
    newer = isinstance(format_version, int) and format_version >= 3
    return SEALED_ATTRS + (SEALED_FROM_V3 if newer else ())


def seal_of(attrs: Mapping[str, Any]) -> int:
    """CRC-32C of the canonical JSON of the sealed attributes (:func:`sealed_attrs`) in ``attrs``."""
    keys = sealed_attrs(attrs.get("format_version"))
    doc = json.dumps({k: attrs.get(k) for k in keys}, sort_keys=True, separators=(",", ":"))
    return int(google_crc32c.value(doc.encode("utf-8")))


def codecs() -> list:
    """Compressor chain of every array: Blosc(zstd level 1, byte shuffle) then a CRC-32C checksum."""

    return [BloscCodec(cname="zstd", clevel=1, shuffle="shuffle"), Crc32cCodec()]


def n_chunks_for(n_samples: int, chunk_rows: int) -> int:
    return max(1, math.ceil(n_samples / chunk_rows)) if n_samples else 0


def chunk_bounds(n_samples: int, chunk_rows: int) -> np.ndarray:
    """Row offsets ``[0, chunk_rows, 2 chunk_rows, ..., n_samples]`` of the row chunks."""
    n_chunks = n_chunks_for(n_samples, chunk_rows)
    bounds = np.minimum(np.arange(n_chunks + 1, dtype=np.int64) * chunk_rows, n_samples)
    return bounds


def label_fill(y_dtype: np.dtype) -> Any:
    return np.nan if np.dtype(y_dtype).kind == "f" else INT_LABEL_FILL


def _create(group, name: str, shape, chunks, dtype, fill_value):
    return group.create_array(
        name,
        shape=tuple(int(s) for s in shape),
        chunks=tuple(max(1, int(c)) for c in chunks),
        dtype=dtype,
        compressors=codecs(),
        fill_value=fill_value,
        config={"write_empty_chunks": True},
    )


def create_layout(
    root: str,
    *,
    n_samples: int,
    n_features: int,
    chunk_rows: int,
    sparse: bool,
    dtype: np.dtype,
    y_dtype: np.dtype,
    chunk_nnz: np.ndarray | None = None,
    index_dtype: np.dtype | None = None,
) -> None:
    """Create the empty arrays of a dataset in a new zarr group at ``root``."""

    group = zarr.open_group(root, mode="w")
    _create(group, "y", (n_samples,), (chunk_rows,), y_dtype, label_fill(y_dtype))
    if not sparse:
        _create(group, "X", (n_samples, n_features), (chunk_rows, max(n_features, 1)), dtype, np.nan)
        return
    assert chunk_nnz is not None and index_dtype is not None
    n_chunks = len(chunk_nnz)
    width = max(1, int(chunk_nnz.max()) if n_chunks else 1)
    xg = group.create_group("X", attributes={"layout": SPARSE_LAYOUT})
    _create(xg, "indptr", (n_chunks, chunk_rows + 1), (1, chunk_rows + 1), np.int64, -1)
    _create(xg, "indices", (n_chunks, width), (1, width), index_dtype, -1)
    _create(xg, "data", (n_chunks, width), (1, width), dtype, np.nan)
    counts = _create(xg, "chunk_nnz", (n_chunks,), (max(n_chunks, 1),), np.int64, -1)
    if n_chunks:
        counts[:] = np.asarray(chunk_nnz, dtype=np.int64)


def write_attrs(root: str, attrs: Mapping[str, Any]) -> None:
    group = zarr.open_group(root, mode="r+")
    group.attrs.update(dict(attrs))


def base_attrs(**fields: Any) -> dict[str, Any]:
    """Attributes common to every dataset, plus ``fields``."""

    try:
        created_by = f"dsvm {version('dsvm')}"
    except PackageNotFoundError:  # pragma: no cover - running from a source tree
        created_by = "dsvm"
    attrs: dict[str, Any] = {
        "format": FORMAT_NAME,
        "format_version": FORMAT_VERSION,
        "uuid": uuid.uuid4().hex,
        "created_by": created_by,
        "created_at": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
    }
    attrs.update(fields)
    return attrs


def to_json_scalar(value: Any) -> Any:
    """A numpy scalar as the matching JSON-able Python number."""
    if isinstance(value, (np.floating, float)):
        f = float(value)
        return int(f) if f.is_integer() and abs(f) < 2**53 else f
    if isinstance(value, (np.integer, int)):
        return int(value)
    return value


def check_attrs(path: str, attrs: Mapping[str, Any]) -> None:
    """Raise :class:`InvalidDatasetError` unless ``attrs`` describe a dataset we can read."""
    if attrs.get("format") != FORMAT_NAME:
        raise InvalidDatasetError(
            f"{path} is a zarr group but not a dsvm dataset (attribute 'format' is "
            f"{attrs.get('format')!r}, expected {FORMAT_NAME!r}); create one with dsvm.io.ingest()"
        )
    for key, kind in REQUIRED_ATTRS.items():
        if key not in attrs:
            raise InvalidDatasetError(f"{path}: dataset attribute {key!r} is missing")
        value = attrs[key]
        if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
            raise InvalidDatasetError(f"{path}: dataset attribute {key!r} has an invalid value {value!r}")
    if attrs["format_version"] > FORMAT_VERSION:
        raise InvalidDatasetError(
            f"{path} has dataset format version {attrs['format_version']}; this dsvm reads "
            f"version {FORMAT_VERSION} and older, upgrade dsvm"
        )
    n, p, rows = attrs["n_samples"], attrs["n_features"], attrs["chunk_rows"]
    if n < 0 or p < 0 or rows < 1:
        raise InvalidDatasetError(f"{path}: inconsistent sizes n_samples={n}, n_features={p}, chunk_rows={rows}")
    if attrs["n_chunks"] != n_chunks_for(n, rows):
        raise InvalidDatasetError(
            f"{path}: n_chunks={attrs['n_chunks']} does not match n_samples={n} and chunk_rows={rows}"
        )
    if attrs["dtype"] not in ("float32", "float64") or attrs["y_dtype"] not in ("float64", "int64"):
        raise InvalidDatasetError(f"{path}: unsupported dtype {attrs['dtype']!r} / y_dtype {attrs['y_dtype']!r}")
    _check_classes(path, attrs)
    _check_names(path, attrs)
    if attrs["format_version"] >= 2:
        _check_checksums(path, attrs)


def _check_classes(path: str, attrs: Mapping[str, Any]) -> None:
    """``classes`` sorted and distinct numbers, one positive count each, the counts adding up to ``n_samples``."""
    classes = attrs["classes"]
    if not all(isinstance(c, (int, float)) and not isinstance(c, bool) for c in classes) or any(
        b <= a for a, b in zip(classes, classes[1:])
    ):
        raise InvalidDatasetError(f"{path}: dataset attribute 'classes' must be sorted distinct numbers, got {classes[:10]}")
    counts = attrs.get("class_counts")
    if counts is None:
        if attrs["format_version"] >= 2:
            raise InvalidDatasetError(f"{path}: dataset attribute 'class_counts' is missing")
        return
    if not isinstance(counts, list) or len(counts) != len(classes):
        raise InvalidDatasetError(
            f"{path}: dataset attribute 'classes' lists {len(classes)} labels but 'class_counts' has "
            f"{len(counts) if isinstance(counts, list) else counts!r} counts; the attributes were edited or damaged"
        )
    if not all(isinstance(c, int) and not isinstance(c, bool) and c > 0 for c in counts):
        raise InvalidDatasetError(f"{path}: dataset attribute 'class_counts' must hold positive integers, got {counts[:10]}")
    if sum(counts) != attrs["n_samples"]:
        raise InvalidDatasetError(
            f"{path}: the class counts add up to {sum(counts)} rows but n_samples is {attrs['n_samples']}; "
            "the attributes were edited or damaged"
        )


def _check_names(path: str, attrs: Mapping[str, Any]) -> None:
    """``class_names``: sorted distinct strings, one per code in ``classes``; ``feature_names``: one string per column."""
    names = attrs.get("class_names")
    if names is not None and attrs["format_version"] < 3:
        raise InvalidDatasetError(f"{path}: dataset attribute 'class_names' in a version-{attrs['format_version']} "
                                  "dataset (the attributes were edited or damaged)")
    if names is not None:
        n_classes = len(attrs["classes"])
        if (not isinstance(names, list) or not all(isinstance(c, str) for c in names)
                or any(b <= a for a, b in zip(names, names[1:]))):
            raise InvalidDatasetError(f"{path}: dataset attribute 'class_names' must be sorted distinct strings")
        if attrs["y_dtype"] != "int64" or attrs["classes"] != list(range(n_classes)) or len(names) != n_classes:
            raise InvalidDatasetError(
                f"{path}: dataset attribute 'class_names' lists {len(names)} labels but y holds codes "
                f"{attrs['classes'][:10]} of dtype {attrs['y_dtype']}; the attributes were edited or damaged")
    features = attrs.get("feature_names")
    if features is not None and (not isinstance(features, list) or len(features) != attrs["n_features"]
                                 or not all(isinstance(f, str) for f in features)):
        raise InvalidDatasetError(f"{path}: dataset attribute 'feature_names' must hold one string per feature "
                                  f"({attrs['n_features']})")


def _check_checksums(path: str, attrs: Mapping[str, Any]) -> None:
    sums = attrs.get("checksums")
    n_chunks = attrs["n_chunks"]
    ok = isinstance(sums, dict) and set(sums) == {"X", "y"} and all(
        isinstance(v, list) and len(v) == n_chunks and all(isinstance(c, int) and 0 <= c < 2**32 for c in v)
        for v in sums.values()
    )
    if not ok:
        raise InvalidDatasetError(f"{path}: dataset attribute 'checksums' is missing or malformed (the store is damaged)")
    if not isinstance(attrs.get("seal"), int):
        raise InvalidDatasetError(f"{path}: dataset attribute 'seal' is missing (the store is damaged)")


def check_seal(path: str, attrs: Mapping[str, Any]) -> None:
    """Raise :class:`InvalidDatasetError` if the sealed attributes changed since the dataset was written."""
    if attrs["format_version"] < 2 or seal_of(attrs) == attrs["seal"]:
        return
    raise InvalidDatasetError(
        f"{path}: the dataset's attributes were changed after it was written (they no longer match their seal; "
        f"the sealed ones are {', '.join(k for k in sealed_attrs(attrs['format_version']) if k in attrs)}); "
        "write the dataset again with "
        "dsvm.io.ingest() instead of editing them"
    )
