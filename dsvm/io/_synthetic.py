"""Synthetic binary problems of any size, written chunk by chunk.

:func:`make_classification_zarr` draws rows independently: ``X`` is standard
normal in ``n_features`` dimensions and the label says whether the point lies
outside the sphere through the median of the first ``n_informative``
coordinates,

    y = +1  if  x_1² + ... + x_k² > median(χ²_k)  else  -1,

then a fraction ``noise`` of the labels is flipped.  The classes are balanced
and symmetric about the origin, so every linear classifier is near chance,
while an RBF kernel learns the sphere.

Rows are generated in fixed *generation blocks* of 65,536 rows; block ``g``
uses the PCG64 stream ``SeedSequence(random_state, spawn_key=(g,))`` and row
``j`` of it the ``n_features + 1`` uniforms after skipping ``j * (n_features +
1)`` (PCG64 jumps ahead in constant time).  The data therefore depend on
``random_state`` only — never on ``chunk_rows`` or on how many workers wrote
it — and any row range can be produced on its own.
"""

from __future__ import annotations

import errno
import logging
import numbers
import shutil
from pathlib import Path

import numpy as np
from scipy.special import ndtri
from scipy.stats import chi2

from ..exceptions import DiskFullError, disk_full_names, format_bytes
from ._dataset import open_dataset
from ._dataset_target import atomic_target
from ._sources import RowSource
from ._writer import check_dtype, stored_bytes_bound, write_source

logger = logging.getLogger(__name__)

__all__ = ["make_classification_zarr", "check_synthetic_options", "SphereSource"]

GENERATION_BLOCK = 65536
GENERATOR = "sphere-v1"
#: the least part of its uncompressed size a generated dataset takes on disk: the sign and the mantissa of a
#: standard normal are random bits (24 of a float32's 32, 53 of a float64's 64), which no codec stores in fewer
MIN_STORED_FRACTION = 0.75


class SphereSource(RowSource):
    """Rows of the synthetic problem, generated on demand (see the module docstring)."""

    sparse = False
    local = False
    y_dtype = np.dtype(np.int64)

    def __init__(self, n_samples: int, n_features: int, n_informative: int, noise: float, random_state: int):
        self.n_rows = int(n_samples)
        self.n_features = int(n_features)
        self.n_informative = int(n_informative)
        self.noise = float(noise)
        self.random_state = int(random_state)
        self.nnz = None
        self.threshold = float(chi2.median(self.n_informative))

    def _uniforms(self, g: int, a: int, b: int) -> np.ndarray:
        width = self.n_features + 1
        seq = np.random.SeedSequence(self.random_state, spawn_key=(g,))
        bitgen = np.random.PCG64(seq)
        bitgen.advance(a * width)
        return np.random.Generator(bitgen).random((b - a, width))

    def read(self, start: int, stop: int):
        pieces = []
        r = start
        while r < stop:
            g, a = divmod(r, GENERATION_BLOCK)
            b = min(GENERATION_BLOCK, a + (stop - r))
            pieces.append(self._uniforms(g, a, b))
            r += b - a
        u = np.concatenate(pieces) if pieces else np.zeros((0, self.n_features + 1))
        X = ndtri(u[:, : self.n_features] + 2.0**-54)  # u in (0, 1): finite normals
        radius2 = np.einsum("ij,ij->i", X[:, : self.n_informative], X[:, : self.n_informative])
        y = np.where(radius2 > self.threshold, 1, -1).astype(np.int64)
        flip = u[:, self.n_features] < self.noise
        y[flip] = -y[flip]
        return X, y


def _whole(value) -> bool:
    """A whole number: an integer (``bool`` is not one) or a float with no fraction (``n_samples=1e6``)."""
    return (not isinstance(value, (bool, np.bool_)) and isinstance(value, numbers.Real) and bool(np.isfinite(value))
            and value == int(value))


def check_synthetic_options(n_samples, n_features=20, *, n_informative=5, noise=0.05, chunk_rows=None,
                            chunk_bytes=None, random_state=0, dtype="float32", progress=False) -> None:
    """Check the arguments of :func:`make_classification_zarr` (their types too) without writing anything.

    Raises
    ------
    ValueError
        Naming the first argument that is wrong and its value.
    """
    if not _whole(n_samples) or n_samples < 1:
        raise ValueError(f"n_samples must be a positive integer, got {n_samples!r}")
    if not _whole(n_features) or n_features < 1:
        raise ValueError(f"n_features must be a positive integer, got {n_features!r}")
    if not _whole(n_informative) or not 1 <= n_informative <= n_features:
        raise ValueError(f"n_informative must be between 1 and n_features={n_features}, got {n_informative!r}")
    if isinstance(noise, bool) or not isinstance(noise, numbers.Real) or not 0.0 <= noise <= 0.5:
        raise ValueError(f"noise must be between 0 and 0.5, got {noise!r}")
    if random_state is not None and (not _whole(random_state) or random_state < 0):
        raise ValueError(f"random_state must be a non-negative integer or None, got {random_state!r}")
    for name, value in (("chunk_rows", chunk_rows), ("chunk_bytes", chunk_bytes)):
        if value is not None and (not _whole(value) or value < 1):
            raise ValueError(f"{name} must be a positive integer or None, got {value!r}")
    try:
        check_dtype(dtype)
    except TypeError:  # numpy's "data type 'abc' not understood"
        raise ValueError(f"dtype must be float32 or float64, got {dtype!r}") from None
    if not isinstance(progress, (bool, np.bool_)):
        raise ValueError(f"progress must be True or False, got {progress!r}")


def _check_free_space(path: str | Path, source: SphereSource, dtype) -> None:
    """Refuse at once a dataset that cannot fit in the free space of ``path``'s file system.

    The rows take at least :data:`MIN_STORED_FRACTION` of their uncompressed
    size, whatever the codec; only a dataset larger than the free space even
    then is refused (one that might fit is written, and a disk that fills is
    reported by the writer, with nothing left behind).

    Raises
    ------
    DiskFullError
        Naming the target, the space the rows need and the space that is free.
    """
    folder = Path(path).absolute()
    while not folder.exists() and folder != folder.parent:
        folder = folder.parent
    try:
        free = shutil.disk_usage(folder).free
    except OSError:  # not a place whose space can be asked: the writer reports a full disk
        return
    raw = float(source.n_rows) * source.n_features * np.dtype(dtype).itemsize
    if MIN_STORED_FRACTION * raw > free:
        raise DiskFullError(errno.ENOSPC, f"{path}: {source.n_rows} rows x {source.n_features} features of "
                            f"{np.dtype(dtype).name} need at least {format_bytes(MIN_STORED_FRACTION * raw)} on disk "
                            f"({format_bytes(raw)} uncompressed) and the file system of {folder} has {format_bytes(free)} free; "
                            "generate "
                            "fewer rows or features, or choose another place; nothing was written")


def make_classification_zarr(
    path: str | Path,
    n_samples: int,
    n_features: int = 20,
    *,
    n_informative: int = 5,
    noise: float = 0.05,
    chunk_rows: int | None = None,
    chunk_bytes: int | None = None,
    random_state: int | None = 0,
    dtype="float32",
    overwrite: bool = False,
    progress: bool = False,
):
    """Write a synthetic non-linear binary problem as a dataset and open it.

    Parameters
    ----------
    path : str or pathlib.Path
        Directory of the new dataset.
    n_samples : int
        Rows (any number: generated and written chunk by chunk, in parallel).
    n_features : int
        Columns; the first ``n_informative`` decide the label, the rest are noise.
    n_informative : int
        Dimension of the sphere (at most ``n_features``).
    noise : float
        Fraction of labels flipped at random (0 for a noiseless boundary).
    chunk_rows, chunk_bytes : int, optional
        Chunking of the store; does not change the data.
    random_state : int or None
        Seed; ``None`` draws one (recorded in the attributes).
    dtype : {"float32", "float64"}
    overwrite : bool
        Replace an existing dataset at ``path``.
    progress : bool
        Show a progress bar on stderr.

    Returns
    -------
    Dataset
        Labels are -1 / +1 (int64), about half of each.

    Examples
    --------
    >>> import os, tempfile
    >>> from dsvm import NystroemSVC, make_classification_zarr
    >>> path = os.path.join(tempfile.mkdtemp(), "synthetic.zarr")
    >>> ds = make_classification_zarr(path, n_samples=2000, n_features=5, random_state=0)
    >>> ds.X.shape, ds.classes
    ((2000, 5), array([-1,  1]))
    >>> clf = NystroemSVC(n_components=50, random_state=0).fit(ds)
    >>> bool(clf.score(ds.X, ds.y) > 0.8)
    True
    """

    check_synthetic_options(n_samples, n_features, n_informative=n_informative, noise=noise, chunk_rows=chunk_rows,
                            chunk_bytes=chunk_bytes, random_state=random_state, dtype=dtype, progress=progress)
    dtype = check_dtype(dtype)
    if random_state is None:
        random_state = int(np.random.SeedSequence().entropy % 2**32)
    source = SphereSource(int(n_samples), int(n_features), int(n_informative), float(noise), int(random_state))
    _check_free_space(path, source, dtype)
    attrs = {
        "source": "synthetic",
        "source_format": "synthetic",
        "generator": GENERATOR,
        "random_state": int(random_state),
        "n_informative": int(n_informative),
        "noise": float(noise),
    }
    with atomic_target(path, overwrite) as work, disk_full_names(path, work, "the dataset") as space:
        space.bytes = stored_bytes_bound(source, dtype)
        write_source(
            source, str(work / "store"), dense=True, chunk_rows=chunk_rows, chunk_bytes=chunk_bytes,
            dtype=dtype, attrs=attrs, progress=progress,
        )
    return open_dataset(path)
