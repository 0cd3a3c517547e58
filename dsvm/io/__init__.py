"""Out-of-core data layer: ingest files and arrays into chunked zarr datasets.

::

    ds = dsvm.io.ingest("a9a.train", "a9a.zarr", format="libsvm")   # parallel, atomic
    ds = dsvm.io.open_dataset("a9a.zarr")   # ds.X, ds.y: lazy row-chunked Dask arrays
    train, test = dsvm.io.split_dataset(ds, "train.zarr", "test.zarr", test_fraction=0.2)   # never loads ds
    dsvm.io.make_classification_zarr("big.zarr", n_samples=10**8, n_features=20)

The layout on disk is described in :mod:`dsvm.io.layout`; the storage and
chunking rules in :mod:`dsvm.io.writer`; the LIBSVM dialect accepted in
:mod:`dsvm.io.libsvm`.  Two rules every file dsvm writes follows live here
too: the safe-replace routine (:mod:`dsvm.io.replace`: private temporaries,
only dsvm's own outputs replaced) and the ``.npz`` + JSON archive format of
model and checkpoint files (:mod:`dsvm.io.archive`: no pickle, bounded reads).
"""

from ..exceptions import DiskFullError, InputFileError, InvalidDatasetError, ModelFileError, NotDsvmOutputError
from .archive import SUPPORTED_VERSION, MemberRules, meta_array, npz_problem, read_meta, read_npz, write_npz
from .atomic import atomic_target, check_target, dataset_problem
from .csv_ingest import csv_width
from .dataset import Dataset, open_dataset
from .frames import check_numeric_columns
from .ingestion import MAX_N_FEATURES, ingest
from .label_text import label_texts
from .layout import FORMAT_NAME, FORMAT_VERSION, to_json_scalar
from .replace import (
    ENTRY_FILE,
    ENTRY_FOLDER,
    TMP_SUFFIX,
    Staged,
    check_inputs_outside,
    check_replaceable,
    create_exclusive,
    foreign_entry,
    input_inside,
    local_target,
    mark_output,
    marked_output_problem,
    regular_file_problem,
    replacing,
    write_file,
)
from .split import split_dataset
from .synthetic import check_synthetic_options, make_classification_zarr
from .text import detect_format
from .writer import write_dataset

__all__ = [
    "Dataset", "open_dataset", "ingest", "write_dataset", "split_dataset", "make_classification_zarr",
    "check_synthetic_options", "MAX_N_FEATURES", "detect_format",
    "check_numeric_columns", "csv_width", "label_texts",
    "InvalidDatasetError", "InputFileError", "DiskFullError", "ModelFileError", "NotDsvmOutputError",
    "FORMAT_NAME", "FORMAT_VERSION", "to_json_scalar",
    "atomic_target", "check_target", "dataset_problem",
    "replacing", "write_file", "check_replaceable", "create_exclusive", "regular_file_problem", "local_target", "Staged", "TMP_SUFFIX",
    "mark_output", "marked_output_problem", "ENTRY_FILE", "ENTRY_FOLDER", "foreign_entry",
    "input_inside", "check_inputs_outside",
    "write_npz", "read_npz", "read_meta", "npz_problem", "meta_array", "MemberRules", "SUPPORTED_VERSION",
]
