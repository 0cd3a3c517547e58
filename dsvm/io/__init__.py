"""Out-of-core data layer: ingest files and arrays into chunked zarr datasets.

::

    ds = dsvm.io.ingest("a9a.train", "a9a.zarr", format="libsvm")   # parallel, atomic
    ds = dsvm.io.open_dataset("a9a.zarr")   # ds.X, ds.y: lazy row-chunked Dask arrays
    dsvm.io.make_classification_zarr("big.zarr", n_samples=10**8, n_features=20)

The layout on disk is described in :mod:`dsvm.io.layout`; the storage and
chunking rules in :mod:`dsvm.io.writer`; the LIBSVM dialect accepted in
:mod:`dsvm.io.libsvm`.
"""

from .dataset import Dataset, open_dataset
from .errors import DiskFullError, InputFileError
from .ingestion import ingest
from .layout import FORMAT_NAME, FORMAT_VERSION, InvalidDatasetError
from .synthetic import make_classification_zarr
from .writer import write_dataset

__all__ = [
    "Dataset",
    "open_dataset",
    "ingest",
    "write_dataset",
    "make_classification_zarr",
    "InvalidDatasetError",
    "InputFileError",
    "DiskFullError",
    "FORMAT_NAME",
    "FORMAT_VERSION",
]
