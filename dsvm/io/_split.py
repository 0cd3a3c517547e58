"""A stratified train/test split of a dataset that never loads it: the row hash decides, chunk by chunk.

Row ``i`` goes to the test part when ``row_hash(i, seed)`` (splitmix64 of
its global index, :func:`dsvm.blocks.row_hash`) is below its class's
threshold.  The thresholds make the split exactly stratified: class ``c``
with ``n_c`` rows puts ``round(test_fraction · n_c)`` of them in the test
part, those with the smallest hashes.  They come from two passes over the
labels only:

1. per class, a histogram of the hashes' top bits;
2. the hashes of each class's boundary bucket (about ``n_c / 2^bits``
   values), sorted: the threshold is the one that leaves exactly the rows
   still wanted below it.

Then each part is written by :func:`dsvm.io.write_dataset` (a private
temporary folder renamed into place at the end) from a lazy selection of
the rows of every chunk: one stored chunk per task, ``X`` read once per
part, and chunks of the dataset's size, so a task holds a few stored chunks
(:data:`SPLIT_TASK_CHUNKS`; checked against the workers' memory first).  Since only global indices enter the hash, any chunking of the same
rows gives the same parts, in the same order (the dataset's).
"""

from __future__ import annotations

import logging
from pathlib import Path

import dask
import dask.array as da
import numpy as np
from dask.array.utils import meta_from_array
from dask.base import tokenize

from ..blocks import as_row_blocks, check_worker_memory, compute, row_hash, row_index_blocks
from ..exceptions import format_bytes
from ._dataset import Dataset
from ._layout import REQUIRED_ATTRS, SEALED_ATTRS
from ._replace import check_inputs_outside, input_inside
from ._writer import write_dataset

logger = logging.getLogger(__name__)

__all__ = ["split_dataset", "split_thresholds"]

#: histogram cells of pass 1 over all classes at most (2^22 int64 counts: 32 MiB per task)
MAX_CELLS = 2**22
#: stored chunks a task of the split holds at its peak (the chunk, its compressed bytes, the selected rows, the
#: staged part written again)
SPLIT_TASK_CHUNKS = 4
#: attributes write_dataset sets itself: never carried from the dataset to its parts
LAYOUT_ATTRS = (set(REQUIRED_ATTRS) | set(SEALED_ATTRS) | {"seal", "created_by", "created_at"}) - {"zero_based"}


def _bits(n_classes: int) -> int:
    """Top hash bits of the histogram: 16, fewer for many classes."""
    return int(min(16, max(4, np.floor(np.log2(MAX_CELLS / max(1, n_classes))))))


def _codes(y: np.ndarray, classes: np.ndarray, offset: int) -> np.ndarray:
    codes = np.searchsorted(classes, y)
    bad = (codes >= classes.size) | (classes[np.minimum(codes, classes.size - 1)] != y)
    if bad.any():
        row = offset + int(np.flatnonzero(bad)[0])
        raise ValueError(f"row {row}: label {y[bad][0]!r} is not one of the dataset's classes")
    return codes


def _histogram(y, rows, classes, seed, bits):
    """Counts of the rows of every class by the top ``bits`` bits of their hash (``rows``: their global indices)."""
    if y.shape[0] == 0:
        return np.zeros((classes.size, 1 << bits), dtype=np.int64)
    offset = int(rows[0])
    top = (row_hash(y.shape[0], seed, offset) >> np.uint64(64 - bits)).astype(np.int64)
    cells = _codes(np.asarray(y), classes, offset) * (1 << bits) + top
    return np.bincount(cells, minlength=classes.size << bits).reshape(classes.size, 1 << bits)


def _bucket_hashes(y, rows, classes, seed, bits, buckets):
    """Per class, the hashes of its rows that fall into its boundary bucket ``buckets[c]``."""
    if y.shape[0] == 0:
        return [np.zeros(0, dtype=np.uint64) for _ in range(classes.size)]
    offset = int(rows[0])
    h = row_hash(y.shape[0], seed, offset)
    codes = _codes(np.asarray(y), classes, offset)
    top = (h >> np.uint64(64 - bits)).astype(np.int64)
    return [h[(codes == c) & (top == buckets[c])] for c in range(classes.size)]


def _concat_per_class(parts):
    return [np.concatenate([p[c] for p in parts]) for c in range(len(parts[0]))]


def _test_rows(y, classes, thresholds, seed, offset) -> np.ndarray:
    """Boolean mask of the test rows among ``y`` (global rows ``offset ...``)."""
    y = np.asarray(y)
    return row_hash(y.shape[0], seed, offset) < thresholds[_codes(y, classes, offset)]


def _offsets(chunks) -> list[int]:
    return [0, *np.cumsum(chunks)[:-1].tolist()]


def split_thresholds(y, classes: np.ndarray, test_fraction: float, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Per-class hash thresholds and test counts of :func:`split_dataset` (two passes over ``y``).

    Parameters
    ----------
    y : dask.array.Array
        The labels, row-chunked.
    classes : numpy.ndarray
        The sorted distinct labels.
    test_fraction : float
    seed : int

    Returns
    -------
    thresholds : numpy.ndarray of uint64
        Row ``i`` of class ``c`` is a test row when its hash is below ``thresholds[c]``.
    test_counts : numpy.ndarray of int64
        Test rows per class: ``round(test_fraction · n_c)``.
    """
    classes = np.asarray(classes)
    bits = _bits(classes.size)
    labels = as_row_blocks(y, 0)
    rows = row_index_blocks(labels)
    # summed on the workers: one histogram reaches this process, however many chunks
    hist = labels.map_reduce(_histogram, aligned=(rows,), shared=(classes, seed, bits))
    counts = hist.sum(axis=1)
    target = np.rint(test_fraction * counts).astype(np.int64)
    cumulative = np.cumsum(hist, axis=1)
    # the bucket holding each class's first train row (sorted by hash), and the test rows before it
    buckets = np.array([int(np.searchsorted(cumulative[c], target[c], side="right")) for c in range(classes.size)])
    before = np.array([cumulative[c, b - 1] if b > 0 else 0 for c, b in enumerate(buckets)], dtype=np.int64)
    bucket = labels.map_reduce(_bucket_hashes, aligned=(rows,), shared=(classes, seed, bits, buckets),
                               combine=_concat_per_class)
    thresholds = np.zeros(classes.size, dtype=np.uint64)
    top = np.iinfo(np.uint64).max
    for c in range(classes.size):
        if buckets[c] >= (1 << bits):  # every row of the class is a test row
            thresholds[c] = top
            continue
        values = np.sort(bucket[c])
        need = int(target[c] - before[c])  # rows of the boundary bucket that go to the test part
        thresholds[c] = values[need] if need < values.size else top
    return thresholds, target


def _select(block, y, classes, thresholds, seed, test, offset):
    mask = _test_rows(y, classes, thresholds, seed, offset)
    return block[mask if test else ~mask]


def _part(array, y_blocks, offsets, counts, args, name):
    """The rows of one part, lazily: one task per stored chunk, of known size."""
    select = dask.delayed(_select, pure=True)
    meta = meta_from_array(array)
    pieces = [
        da.from_delayed(select(block, yb, *args, offset), shape=(count, *array.shape[1:]), dtype=array.dtype, meta=meta,
                        name=f"dsvm-split-{name}-{tokenize(array.name, offset, *args)}")
        for block, yb, offset, count in zip(array.to_delayed().ravel(), y_blocks, offsets, counts)
    ]
    return da.concatenate(pieces, axis=0)


def _count(y, classes, thresholds, seed, offset):
    return int(_test_rows(y, classes, thresholds, seed, offset).sum())


def split_dataset(
    ds: Dataset,
    train_target: str | Path,
    test_target: str | Path,
    *,
    test_fraction: float = 0.2,
    seed: int = 0,
    overwrite: bool = False,
    progress: bool = False,
) -> tuple[Dataset, Dataset]:
    """Split ``ds`` into a train and a test dataset, stratified and seeded, without loading it.

    Parameters
    ----------
    ds : Dataset
        A classification dataset (its ``classes`` are the strata).
    train_target, test_target : str or pathlib.Path
        Where the two parts are written (see :func:`dsvm.io.write_dataset`).
    test_fraction : float
        Share of every class that goes to the test part (rounded per class).
    seed : int
        Seed of the row hash.
    overwrite : bool
        Replace existing targets that are dsvm datasets.
    progress : bool
        Show progress bars on stderr.

    Returns
    -------
    (Dataset, Dataset)
        The train part and the test part, rows in the order of ``ds``.

    Raises
    ------
    ValueError
        ``test_fraction`` outside (0, 1), a part that would be empty, or one target that is or holds the other.
    FileExistsError
        A target that exists and may not be replaced, or that is or holds ``ds``
        (:class:`dsvm.exceptions.NotDsvmOutputError`).
    """
    if not 0.0 < test_fraction < 1.0:
        raise ValueError(f"test_fraction must be between 0 and 1, got {test_fraction}")
    if input_inside(train_target, test_target) or input_inside(test_target, train_target):
        raise ValueError(f"the train part {train_target} and the test part {test_target} need paths of their own "
                         "(one would replace or hold the other)")
    for part in (train_target, test_target):
        check_inputs_outside(part, {"the dataset split": ds.path}, "dataset")
    chunk = (ds.nnz / max(1, ds.n_chunks) * (ds.dtype.itemsize + 4) if ds.sparse
             else float(ds.chunk_rows) * ds.n_features * ds.dtype.itemsize)
    check_worker_memory(SPLIT_TASK_CHUNKS * chunk, f"{SPLIT_TASK_CHUNKS} x a stored chunk of {format_bytes(chunk)}",
                        modules=("dsvm.io",))
    classes = np.asarray(ds.classes)
    thresholds, target = split_thresholds(ds.y, classes, test_fraction, seed)
    n_test = int(target.sum())
    if n_test == 0 or n_test == ds.n_samples:
        raise ValueError(
            f"{ds.path}: a test fraction of {test_fraction} of {ds.n_samples} rows leaves the "
            f"{'test' if n_test == 0 else 'train'} part empty"
        )
    y_blocks, offsets = ds.y.to_delayed().ravel(), _offsets(ds.y.chunks[0])
    test_counts = compute(*[dask.delayed(_count)(b, classes, thresholds, seed, o) for b, o in zip(y_blocks, offsets)])
    extra = {k: v for k, v in ds.attrs.items() if k not in LAYOUT_ATTRS and k not in ("source", "source_format")}
    parts = []
    for name, target_path, test in (("train", train_target, False), ("test", test_target, True)):
        counts = [n_test_i if test else c - n_test_i for c, n_test_i in zip(ds.y.chunks[0], test_counts)]
        args = (classes, thresholds, seed, test)
        X = _part(ds.X, y_blocks, offsets, counts, args, f"X-{name}")
        y = _part(ds.y, y_blocks, offsets, counts, args, f"y-{name}")
        attrs = {**extra, "split": {"of": str(ds.path), "part": name, "test_fraction": test_fraction, "seed": seed}}
        # the parts' chunks are no larger than the dataset's: what its tasks hold fits the workers
        parts.append(write_dataset(target_path, X, y, dense=not ds.sparse, chunk_rows=ds.chunk_rows,
                                   dtype=str(ds.dtype), overwrite=overwrite, progress=progress,
                                   source=f"{ds.attrs.get('source', ds.path)} ({name} part)", attrs=attrs))
        logger.info("split %s: %s part of %d rows written to %s", ds.path, name, sum(counts), target_path)
    return parts[0], parts[1]
