"""Out-of-core data layer: ingest files and arrays into chunked zarr datasets.

::

    ds = dsvm.io.ingest("a9a.train", "a9a.zarr", format="libsvm")   # parallel, atomic
    ds = dsvm.io.open_dataset("a9a.zarr")   # ds.X, ds.y: lazy row-chunked Dask arrays
    train, test = dsvm.io.split_dataset(ds, "train.zarr", "test.zarr", test_fraction=0.2)   # never loads ds
    dsvm.io.make_classification_zarr("big.zarr", n_samples=10**8, n_features=20)

The layout on disk is described in :mod:`dsvm.io._layout`; the storage and
chunking rules in :mod:`dsvm.io._writer`; the LIBSVM dialect accepted in
:mod:`dsvm.io._libsvm`.  Two rules every file dsvm writes follows live here
too: the safe-replace routine (:mod:`dsvm.io._replace`: private temporaries,
only dsvm's own outputs replaced) and the ``.npz`` + JSON archive format of
model and checkpoint files (:mod:`dsvm.io._archive`: no pickle, bounded reads).
"""

from ._archive import SUPPORTED_VERSION, MemberRules, meta_array, npz_problem, read_npz, write_npz
from ._csv_ingest import csv_width
from ._dataset import Dataset, open_dataset
from ._dataset_target import check_target
from ._frames import check_numeric_columns
from ._ingestion import MAX_N_FEATURES, ingest
from ._label_text import label_texts
from ._layout import to_json_scalar
from ._line_reader import detect_format
from ._replace import (
    ENTRY_FILE,
    ENTRY_FOLDER,
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
from ._split import split_dataset
from ._synthetic import check_synthetic_options, make_bumps_zarr, make_classification_zarr
from ._writer import write_dataset

__all__ = [
    "Dataset", "open_dataset", "ingest", "write_dataset", "split_dataset", "make_classification_zarr", "make_bumps_zarr",
    "detect_format", "check_synthetic_options", "MAX_N_FEATURES", "csv_width", "check_numeric_columns",
    "label_texts", "to_json_scalar", "check_target", "replacing", "write_file", "check_replaceable",
    "create_exclusive", "regular_file_problem", "local_target", "mark_output", "marked_output_problem",
    "ENTRY_FILE", "ENTRY_FOLDER", "foreign_entry", "input_inside", "check_inputs_outside", "write_npz",
    "read_npz", "npz_problem", "meta_array", "MemberRules", "SUPPORTED_VERSION",
]
