"""Synthetic binary problems of any size, written chunk by chunk.

Two problems: the sphere (:func:`make_classification_zarr`), which a few
hundred landmarks learn, and the bumps (:func:`make_bumps_zarr`), whose
accuracy keeps rising with the number of landmarks.

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

:func:`make_bumps_zarr` draws ``X`` the same way and labels each row by the
sign of a random sum of ``n_bumps`` Gaussian bumps,

    f(x) = Σ_j a_j exp(−‖x − c_j‖² / (2 width² n_features)),   y = sign(f(x) − f_med),

with centres ``c_j`` standard normal and weights ``a_j`` standard normal
(drawn from the stream ``SeedSequence(random_state, spawn_key=(2**32,))``,
as are the :data:`BUMPS_MEDIAN_ROWS` inputs whose median of ``f`` is ``f_med``,
so the classes are balanced), then flips a fraction ``noise`` of the labels.  With thousands of bumps
narrower than the spread of the data, the boundary has detail at every
scale, so a kernel model gains accuracy with every doubling of its
landmarks, up to many thousands.
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

__all__ = ["make_classification_zarr", "make_bumps_zarr", "check_synthetic_options", "SphereSource", "BumpsSource"]

GENERATION_BLOCK = 65536
GENERATOR = "sphere-v1"
BUMPS_GENERATOR = "bumps-v1"
#: rows of the reference sample whose median of f splits the bumps problem's classes
BUMPS_MEDIAN_ROWS = 20_000
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

    def inputs(self, start: int, stop: int) -> tuple[np.ndarray, np.ndarray]:
        """``(X, flip)`` of rows ``start:stop``: the inputs and which labels the noise flips."""
        pieces = []
        r = start
        while r < stop:
            g, a = divmod(r, GENERATION_BLOCK)
            b = min(GENERATION_BLOCK, a + (stop - r))
            pieces.append(self._uniforms(g, a, b))
            r += b - a
        u = np.concatenate(pieces) if pieces else np.zeros((0, self.n_features + 1))
        X = ndtri(u[:, : self.n_features] + 2.0**-54)  # u in (0, 1): finite normals
        return X, u[:, self.n_features] < self.noise

    def read(self, start: int, stop: int):
        X, flip = self.inputs(start, stop)
        radius2 = np.einsum("ij,ij->i", X[:, : self.n_informative], X[:, : self.n_informative])
        y = np.where(radius2 > self.threshold, 1, -1).astype(np.int64)
        y[flip] = -y[flip]
        return X, y


class BumpsSource(SphereSource):
    """Rows of the bumps problem (see the module docstring): the sphere's inputs, labelled by a sum of bumps."""

    def __init__(self, n_samples: int, n_features: int, n_bumps: int, width: float, noise: float, random_state: int):
        super().__init__(n_samples, n_features, n_features, noise, random_state)
        self.n_bumps, self.width = int(n_bumps), float(width)
        rng = np.random.Generator(np.random.PCG64(np.random.SeedSequence(self.random_state, spawn_key=(2**32,))))
        self.centres = rng.standard_normal((self.n_bumps, self.n_features))
        self.weights = rng.standard_normal(self.n_bumps)
        self.scale = 1.0 / (2.0 * self.width**2 * self.n_features)
        # the median of f over inputs of another stream: the classes come out balanced
        self.offset = float(np.median(self._f(rng.standard_normal((BUMPS_MEDIAN_ROWS, self.n_features)))))

    def _f(self, X: np.ndarray) -> np.ndarray:
        f = np.zeros(X.shape[0])
        for a in range(0, X.shape[0], 4096):  # bounded temporaries: 4096 x n_bumps
            part = X[a : a + 4096]
            d2 = (np.einsum("ij,ij->i", part, part)[:, None] - 2.0 * part @ self.centres.T
                  + np.einsum("ij,ij->i", self.centres, self.centres)[None, :])
            f[a : a + 4096] = np.exp(-self.scale * np.maximum(d2, 0.0)) @ self.weights
        return f

    def read(self, start: int, stop: int):
        X, flip = self.inputs(start, stop)
        y = np.where(self._f(X) > self.offset, 1, -1).astype(np.int64)
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
    attrs = {"generator": GENERATOR, "random_state": int(random_state), "n_informative": int(n_informative),
             "noise": float(noise)}
    return _write_synthetic(path, source, attrs, dtype, chunk_rows, chunk_bytes, overwrite, progress)


def _write_synthetic(path, source: SphereSource, attrs: dict, dtype, chunk_rows, chunk_bytes, overwrite: bool,
                     progress: bool):
    """Write a synthetic source as a dataset at ``path`` (refused at once when it cannot fit) and open it."""
    _check_free_space(path, source, dtype)
    attrs = {"source": "synthetic", "source_format": "synthetic", **attrs}
    with atomic_target(path, overwrite) as work, disk_full_names(path, work, "the dataset") as space:
        space.bytes = stored_bytes_bound(source, dtype)
        write_source(
            source, str(work / "store"), dense=True, chunk_rows=chunk_rows, chunk_bytes=chunk_bytes,
            dtype=dtype, attrs=attrs, progress=progress,
        )
    return open_dataset(path)


def make_bumps_zarr(
    path: str | Path,
    n_samples: int,
    n_features: int = 20,
    *,
    n_bumps: int = 2000,
    width: float = 0.3,
    noise: float = 0.05,
    chunk_rows: int | None = None,
    chunk_bytes: int | None = None,
    random_state: int | None = 0,
    dtype="float32",
    overwrite: bool = False,
    progress: bool = False,
):
    """Write the bumps problem, whose test accuracy keeps rising with the number of landmarks, and open it.

    The inputs are those of :func:`make_classification_zarr` (standard normal,
    the same rows for the same seed); the label is the sign of a random sum of
    ``n_bumps`` Gaussian bumps (module docstring).  A benchmark for large ``k``:
    a few hundred landmarks learn the sphere, not this.

    Parameters
    ----------
    path : str or pathlib.Path
        Directory of the new dataset.
    n_samples : int
        Rows (any number: generated and written chunk by chunk, in parallel).
    n_features : int
        Columns, all of which the label depends on (10 to 30 keep it learnable and hard).
    n_bumps : int
        Bumps in the sum (thousands: detail at every scale).
    width : float
        A bump's width relative to the spread of the data (its squared length scale is
        ``width² n_features``; smaller: harder).
    noise, chunk_rows, chunk_bytes, random_state, dtype, overwrite, progress
        As for :func:`make_classification_zarr`.

    Returns
    -------
    Dataset
        Labels are -1 / +1 (int64).

    Examples
    --------
    >>> import os, tempfile
    >>> from dsvm import make_bumps_zarr
    >>> ds = make_bumps_zarr(os.path.join(tempfile.mkdtemp(), "bumps.zarr"), n_samples=3000, random_state=0)
    >>> ds.X.shape, ds.classes
    ((3000, 20), array([-1,  1]))
    """
    check_synthetic_options(n_samples, n_features, n_informative=1, noise=noise, chunk_rows=chunk_rows,
                            chunk_bytes=chunk_bytes, random_state=random_state, dtype=dtype, progress=progress)
    if not _whole(n_bumps) or n_bumps < 1:
        raise ValueError(f"n_bumps must be a positive integer, got {n_bumps!r}")
    if isinstance(width, bool) or not isinstance(width, numbers.Real) or not 0.0 < width < float("inf"):
        raise ValueError(f"width must be a positive number, got {width!r}")
    dtype = check_dtype(dtype)
    if random_state is None:
        random_state = int(np.random.SeedSequence().entropy % 2**32)
    source = BumpsSource(int(n_samples), int(n_features), int(n_bumps), float(width), float(noise), int(random_state))
    attrs = {"generator": BUMPS_GENERATOR, "random_state": int(random_state), "n_bumps": int(n_bumps),
             "width": float(width), "noise": float(noise)}
    return _write_synthetic(path, source, attrs, dtype, chunk_rows, chunk_bytes, overwrite, progress)
